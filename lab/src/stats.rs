//! Percentiles and counts over one cell's samples.

use std::time::Duration;

/// The nearest-rank `q`-quantile of `values` (`q` in `[0, 1]`), or zero when empty.
pub fn quantile(values: &[Duration], q: f64) -> Duration {
    if values.is_empty() {
        return Duration::ZERO;
    }
    let mut sorted = values.to_vec();
    sorted.sort();
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Milliseconds with three significant figures, as the tables print them.
pub fn ms(d: Duration) -> String {
    let v = d.as_secs_f64() * 1e3;
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else if v >= 10.0 {
        format!("{v:.1} ms")
    } else {
        format!("{v:.2} ms")
    }
}

/// `p50 | p99 | max` of `values`, three table cells.
pub fn spread(values: &[Duration]) -> String {
    let [p50, p99, max] = [0.5, 0.99, 1.0].map(|q| ms(quantile(values, q)));
    format!("{p50} | {p99} | {max}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_quantiles() {
        let v: Vec<Duration> = (1..=10).map(Duration::from_millis).collect();
        assert_eq!(quantile(&v, 0.5), Duration::from_millis(5));
        assert_eq!(quantile(&v, 0.99), Duration::from_millis(10));
        assert_eq!(quantile(&[], 0.5), Duration::ZERO);
        assert_eq!(spread(&v), "5.00 ms | 10.0 ms | 10.0 ms");
    }
}
