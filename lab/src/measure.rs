//! Small number helpers shared by the real-socket programs (`realsockets`,
//! `realsockets_kafka`, `librdkafka_reference`), so their tables agree.

use std::time::Duration;

/// Milliseconds, for printing.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The lower median: an element of the data (never an average of two), so a table's median
/// is a run that really happened.
pub fn median<T: Copy + Ord>(values: &[T]) -> T {
    let mut v = values.to_vec();
    v.sort();
    v[(v.len() - 1) / 2]
}
