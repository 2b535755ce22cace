//! Command-line values the measurement programs share, parsed one way so that `fleet` and
//! `storm_seeds` accept the same spellings and report the same mistakes.

use std::time::Duration;

/// A duration given in (fractional) milliseconds, as `--rtt-ms 0.5`: within 1 µs..=10 s,
/// the range the fleet model's network and broker times make sense in.
pub fn millis(text: &str, flag: &str) -> Result<Duration, String> {
    let ms: f64 = text.parse().map_err(|e| format!("{flag}: {e}"))?;
    if !(0.001..=10_000.0).contains(&ms) {
        return Err(format!("{flag}: {ms} is outside 0.001..=10000"));
    }
    Ok(Duration::from_micros((ms * 1000.0) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millis_reads_fractions_and_refuses_what_is_out_of_range() {
        assert_eq!(millis("0.5", "--rtt-ms"), Ok(Duration::from_micros(500)));
        assert_eq!(millis("2", "--service-ms"), Ok(Duration::from_millis(2)));
        assert_eq!(millis("0", "--rtt-ms"), Err("--rtt-ms: 0 is outside 0.001..=10000".to_string()));
        assert_eq!(millis("NaN", "--rtt-ms"), Err("--rtt-ms: NaN is outside 0.001..=10000".to_string()));
        assert!(millis("fast", "--rtt-ms").unwrap_err().starts_with("--rtt-ms: "));
    }
}
