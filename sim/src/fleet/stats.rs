//! Summaries of a fleet run: percentiles, CDF points, peak load, and the targets.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

use super::{FleetScenario, ScenarioResult};

/// Time-to-metadata percentiles in milliseconds (nearest rank).
///
/// Why `Option`: a refresh that gave up never got metadata; it counts as infinitely slow, so
/// a percentile that lands on one is `None` ("did not get metadata") rather than a number
/// that would flatter the policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Median.
    pub p50_ms: Option<f64>,
    /// 99th percentile.
    pub p99_ms: Option<f64>,
    /// 99.9th percentile.
    pub p999_ms: Option<f64>,
    /// Slowest.
    pub max_ms: Option<f64>,
}

impl Percentiles {
    /// Percentiles of `sorted` (microseconds, ascending, `u64::MAX` for a failure).
    pub fn of_sorted(sorted: &[u64]) -> Self {
        Percentiles {
            p50_ms: rank(sorted, 0.5),
            p99_ms: rank(sorted, 0.99),
            p999_ms: rank(sorted, 0.999),
            max_ms: rank(sorted, 1.0),
        }
    }
}

/// Nearest-rank quantile `q` of `sorted`, in ms; `None` if empty or a failure.
fn rank(sorted: &[u64], q: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let exact = q * n as f64;
    let floor = exact as usize;
    let r = (floor + usize::from((floor as f64) < exact)).clamp(1, n);
    let v = sorted[r - 1];
    (v != u64::MAX).then(|| round3(v as f64 / 1000.0))
}

/// Rounds a non-negative value to three decimals (keeps the JSON short and stable).
pub(crate) fn round3(x: f64) -> f64 {
    ((x * 1000.0 + 0.5) as u64) as f64 / 1000.0
}

/// `10^(1/20)`: twenty CDF points per decade of time.
const STEP: f64 = 1.122_018_454_301_963_3;

/// The CDF of `sorted` (µs) sampled at log-spaced times from 0.1 ms to 100 s:
/// `(time in ms, fraction of refreshes done by then)`.
pub(crate) fn cdf_points(sorted: &[u64]) -> Vec<(f64, f64)> {
    let n = sorted.len().max(1) as f64;
    let mut out = Vec::with_capacity(121);
    let mut x = 100.0f64;
    for _ in 0..=120 {
        let done = sorted.partition_point(|&t| (t as f64) <= x);
        let fraction = ((done as f64 / n) * 100_000.0 + 0.5) as u64 as f64 / 100_000.0;
        out.push((round3(x / 1000.0), fraction));
        x *= STEP;
    }
    out
}

/// The most entries of `sorted` (µs) within any half-open window `[t, t + window)`.
pub(crate) fn peak_in_window(sorted: &[u32], window: u32) -> u32 {
    let mut best = 0;
    let mut start = 0;
    for (end, &t) in sorted.iter().enumerate() {
        while t - sorted[start] >= window {
            start += 1;
        }
        best = best.max(end + 1 - start);
    }
    best as u32
}

/// The most work (µs) of one broker's `work` (start, length; sorted here) that starts within
/// any `window` µs.
pub(crate) fn busiest_window(work: &mut [(u32, u32)], window: u32) -> u64 {
    work.sort_unstable();
    let (mut best, mut sum, mut first) = (0u64, 0u64, 0);
    for (i, &(start, len)) in work.iter().enumerate() {
        sum += u64::from(len);
        while first < i && start - work[first].0 >= window {
            sum -= u64::from(work[first].1);
            first += 1;
        }
        best = best.max(sum);
    }
    best
}

/// One of the targets, checked against a run.
///
/// Why recorded with the numbers: the report must say honestly which targets are met and,
/// for one that is not, by how much.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// What is promised, in words.
    pub name: String,
    /// The scenario it is about.
    pub scenario: FleetScenario,
    /// The measured value (`None`: the strategy did not get metadata at that percentile).
    pub value: Option<f64>,
    /// The bound it is compared with.
    pub limit: Option<f64>,
    /// What `value` and `limit` count: `ratio`, `attempts_per_refresh`, `per_refresh`, `ms`
    /// or `requests`.
    pub unit: String,
    /// Whether the target holds.
    pub met: bool,
    /// The numbers behind it, in words.
    pub detail: String,
}

/// Checks the targets for the strategy named `strategy` against the
/// `staggered-500ms` and `sequential` results of the same run.
///
/// * p99 time to metadata at least 100× better than `sequential`'s in each hung scenario;
/// * new connections and ApiVersions per refresh at most 1.01× `sequential`'s when healthy
///   and 1.05× in the failover storm;
/// * attempts per refresh ≤ 1.05 when healthy;
/// * p99 lower than the fixed 500 ms stagger's in each hung scenario;
/// * peak broker load, p50 and p99 no higher than `sequential`'s in the failover storm;
/// * in the cold start, the busiest broker's peak no higher than `sequential`'s (clients
///   that shuffle their seeds, as Sarama's and librdkafka's do).
pub fn check_targets(results: &[ScenarioResult], strategy: &str) -> Vec<Target> {
    let find = |s: FleetScenario, name: &str| results.iter().find(|r| r.scenario == s && r.strategy == name);
    let mut out = Vec::new();
    for s in [FleetScenario::OneHung, FleetScenario::ThirdHung] {
        if let (Some(a), Some(q)) = (find(s, strategy), find(s, "sequential")) {
            let (ap, qp) = (a.time_to_metadata.p99_ms, q.time_to_metadata.p99_ms);
            // A sequential client that never got metadata is infinitely slow.
            let ratio = match (ap, qp) {
                (Some(a), Some(q)) if a > 0.0 => Some(q / a),
                (Some(_), None) => Some(f64::INFINITY),
                _ => None,
            };
            out.push(Target {
                name: "p99 time to metadata at least 100x better than sequential's".to_string(),
                scenario: s,
                value: ratio.map(|r| if r.is_finite() { round3(r) } else { r }),
                limit: Some(100.0),
                unit: "ratio".to_string(),
                met: ratio.is_some_and(|r| r >= 100.0),
                detail: alloc::format!("{strategy} p99 {} vs sequential p99 {}", fmt_ms(ap), fmt_ms(qp)),
            });
        }
    }
    // What the cluster pays beside Metadata: new connections and ApiVersions requests per
    // refresh, against sequential's (1.01x healthy, 1.05x in the storm).
    for (s, bound) in [(FleetScenario::Healthy, 1.01), (FleetScenario::FailoverStorm, 1.05)] {
        if let (Some(a), Some(q)) = (find(s, strategy), find(s, "sequential")) {
            for (what, mine, theirs) in
                [("new connections", a.connections, q.connections), ("ApiVersions", a.api_versions, q.api_versions)]
            {
                let per = |x: u64, r: &ScenarioResult| x as f64 / r.refreshes.max(1) as f64;
                let (m, t) = (per(mine, a), per(theirs, q));
                out.push(Target {
                    name: alloc::format!("{what} per refresh at most {bound}x sequential's"),
                    scenario: s,
                    value: Some(round4(m)),
                    limit: Some(round4(t * bound)),
                    unit: "per_refresh".to_string(),
                    met: m <= t * bound + 1e-9,
                    detail: alloc::format!("{strategy} {m:.4} vs sequential {t:.4} per refresh"),
                });
            }
        }
    }
    if let Some(a) = find(FleetScenario::Healthy, strategy) {
        out.push(Target {
            name: "attempts per refresh at most 1.05 when healthy".to_string(),
            scenario: FleetScenario::Healthy,
            value: Some(round4(a.attempts_per_refresh)),
            limit: Some(1.05),
            unit: "attempts_per_refresh".to_string(),
            met: a.attempts_per_refresh <= 1.05,
            detail: alloc::format!("{} attempts for {} refreshes", a.attempts, a.refreshes),
        });
    }
    for s in [FleetScenario::OneHung, FleetScenario::ThirdHung] {
        if let (Some(a), Some(f)) = (find(s, strategy), find(s, "staggered-500ms")) {
            let (ap, fp) = (a.time_to_metadata.p99_ms, f.time_to_metadata.p99_ms);
            let met = match (ap, fp) {
                (Some(a), Some(f)) => a < f,
                (Some(_), None) => true,
                _ => false,
            };
            out.push(Target {
                name: "p99 lower than the fixed 500 ms stagger's".to_string(),
                scenario: s,
                value: ap,
                limit: fp,
                unit: "ms".to_string(),
                met,
                detail: alloc::format!("{strategy} p99 {} vs staggered-500ms p99 {}", fmt_ms(ap), fmt_ms(fp)),
            });
        }
    }
    if let (Some(a), Some(q)) =
        (find(FleetScenario::FailoverStorm, strategy), find(FleetScenario::FailoverStorm, "sequential"))
    {
        out.push(Target {
            name: "peak broker load no higher than sequential's in the failover storm".to_string(),
            scenario: FleetScenario::FailoverStorm,
            value: Some(a.peak_requests as f64),
            limit: Some(q.peak_requests as f64),
            unit: "requests".to_string(),
            met: a.peak_requests <= q.peak_requests,
            detail: alloc::format!(
                "{strategy} peak {} requests per window on one broker vs sequential {} ({:.2}x)",
                a.peak_requests,
                q.peak_requests,
                a.peak_requests as f64 / q.peak_requests.max(1) as f64
            ),
        });
        for (what, a, q) in [
            ("p50", a.time_to_metadata.p50_ms, q.time_to_metadata.p50_ms),
            ("p99", a.time_to_metadata.p99_ms, q.time_to_metadata.p99_ms),
        ] {
            out.push(Target {
                name: alloc::format!("{what} time to metadata no higher than sequential's in the failover storm"),
                scenario: FleetScenario::FailoverStorm,
                value: a,
                limit: q,
                unit: "ms".to_string(),
                met: matches!((a, q), (Some(a), Some(q)) if a <= q),
                detail: alloc::format!("{strategy} {what} {} vs sequential {what} {}", fmt_ms(a), fmt_ms(q)),
            });
        }
    }
    if let (Some(a), Some(q)) = (find(FleetScenario::ColdStart, strategy), find(FleetScenario::ColdStart, "sequential"))
    {
        out.push(Target {
            name: "cold start: busiest broker's peak no higher than seed-shuffling sequential clients'".to_string(),
            scenario: FleetScenario::ColdStart,
            value: Some(a.peak_requests as f64),
            limit: Some(q.peak_requests as f64),
            unit: "requests".to_string(),
            met: a.peak_requests <= q.peak_requests,
            detail: alloc::format!(
                "{strategy} peak {} requests per window on one broker vs sequential {} ({:.2}x)",
                a.peak_requests,
                q.peak_requests,
                a.peak_requests as f64 / q.peak_requests.max(1) as f64
            ),
        });
    }
    out
}

fn round4(x: f64) -> f64 {
    ((x * 10_000.0 + 0.5) as u64) as f64 / 10_000.0
}

/// `12.3 ms`, `4.56 s`, or `gave up` for `None`.
pub(crate) fn fmt_ms(ms: Option<f64>) -> String {
    match ms {
        None => "gave up".to_string(),
        Some(ms) if ms >= 1000.0 => alloc::format!("{:.2} s", ms / 1000.0),
        Some(ms) if ms >= 100.0 => alloc::format!("{:.0} ms", ms),
        Some(ms) if ms >= 10.0 => alloc::format!("{:.1} ms", ms),
        Some(ms) => alloc::format!("{:.2} ms", ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_and_failures() {
        let v: Vec<u64> = (1..=1000).map(|i| i * 1000).collect();
        let p = Percentiles::of_sorted(&v);
        assert_eq!(p.p50_ms, Some(500.0));
        assert_eq!(p.p99_ms, Some(990.0));
        assert_eq!(p.p999_ms, Some(999.0));
        let mut w = v.clone();
        w[999] = u64::MAX;
        assert_eq!(Percentiles::of_sorted(&w).max_ms, None);
        assert_eq!(Percentiles::of_sorted(&[]).p50_ms, None);
    }

    #[test]
    fn peak_counts_a_sliding_window() {
        assert_eq!(peak_in_window(&[], 100), 0);
        assert_eq!(peak_in_window(&[0, 50, 99, 100, 150, 199, 200], 100), 3);
        assert_eq!(peak_in_window(&[0, 10, 20, 99, 100, 300], 100), 4);
        assert_eq!(peak_in_window(&[5, 5, 5], 1), 3);
    }

    #[test]
    fn the_busiest_window_sums_the_work_starting_in_it() {
        assert_eq!(busiest_window(&mut [], 100), 0);
        // Unsorted as the queues hand them in; 30 + 40 start within 100 µs of each other.
        assert_eq!(busiest_window(&mut [(150, 40), (0, 10), (60, 30), (300, 50)], 100), 70);
        // One long piece outweighs many short ones.
        assert_eq!(busiest_window(&mut [(0, 1), (1, 1), (2, 1), (500, 90)], 100), 90);
        // A zero window holds one piece at a time.
        assert_eq!(busiest_window(&mut [(7, 5), (7, 6), (8, 100)], 0), 100);
    }

    #[test]
    fn cdf_is_monotone_and_ends_at_one() {
        let v: Vec<u64> = (1..=100).map(|i| i * 997).collect();
        let c = cdf_points(&v);
        assert!(c.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(c.last().unwrap().1, 1.0);
        assert!((c.last().unwrap().0 - 100_000.0).abs() < 1.0, "{:?}", c.last());
    }
}
