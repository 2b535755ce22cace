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

/// The geometric mean, least and greatest of `ratios` (all positive), `None` when empty: how
/// one strategy compares with another over several pairs of runs, where a ratio and its
/// inverse must weigh the same.
pub fn geometric_mean_range(ratios: &[f64]) -> Option<(f64, f64, f64)> {
    let (log_mean, _) = log_mean_and_variance(ratios)?;
    let least = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let greatest = ratios.iter().copied().fold(0.0, f64::max);
    Some((log_mean.exp(), least, greatest))
}

/// The mean of `ratios`' logarithms and their sample variance (0 for a single ratio), `None`
/// when empty: the geometric mean's logarithm, and how far apart the pairs it sums up lie.
pub fn log_mean_and_variance(ratios: &[f64]) -> Option<(f64, f64)> {
    if ratios.is_empty() {
        return None;
    }
    let n = ratios.len() as f64;
    let mean = ratios.iter().map(|x| x.ln()).sum::<f64>() / n;
    let variance =
        if ratios.len() > 1 { ratios.iter().map(|x| (x.ln() - mean).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    Some((mean, variance))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ratio_and_its_inverse_average_to_one() {
        let (mean, least, greatest) = geometric_mean_range(&[2.0, 0.5, 1.0]).unwrap();
        assert!((mean - 1.0).abs() < 1e-12, "{mean}");
        assert_eq!((least, greatest), (0.5, 2.0));
        assert_eq!(geometric_mean_range(&[]), None);
    }

    #[test]
    fn nearest_rank_quantiles() {
        let v: Vec<Duration> = (1..=10).map(Duration::from_millis).collect();
        assert_eq!(quantile(&v, 0.5), Duration::from_millis(5));
        assert_eq!(quantile(&v, 0.99), Duration::from_millis(10));
        assert_eq!(quantile(&[], 0.5), Duration::ZERO);
        assert_eq!(spread(&v), "5.00 ms | 10.0 ms | 10.0 ms");
    }
}
