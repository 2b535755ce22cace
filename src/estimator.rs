//! The response-time window: a fixed-size window of recently observed response times, for
//! the adaptive stagger.
//!
//! The cold stagger (40 ms) is a guess for a cluster we know nothing about. A long-lived
//! client knows better after one refresh: [`Estimator`] keeps the last [`Estimator::WINDOW`] response
//! times (attempt start → metadata) and hands a high quantile of them, the recent response
//! time, to the next refresh,
//! so "no answer yet" means "slower than this cluster almost ever is" rather than "slower
//! than a constant". The window is a ring buffer in a fixed array: no allocation, ever.

use core::time::Duration;
use serde::{Deserialize, Serialize};

/// How many recent observations the response-time window keeps ([`Estimator::WINDOW`]).
const WINDOW: usize = 64;

/// A response-time window: recent response times and their high quantile. A
/// [`crate::Cluster`] keeps two: the
/// winners' response times, and the handshake times of fresh connections (which stand in for
/// a kept connection's handshake in the adaptive stagger).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Estimator {
    /// Observations in microseconds (saturating at `u32::MAX` ≈ 71 min).
    #[serde(with = "window_serde")]
    samples: [u32; WINDOW],
    /// How many slots hold data (≤ WINDOW).
    len: u16,
    /// Next slot to overwrite.
    next: u16,
}

impl Default for Estimator {
    fn default() -> Self {
        Estimator { samples: [0; WINDOW], len: 0, next: 0 }
    }
}

impl Estimator {
    /// How many recent observations the window holds: enough for a stable high quantile,
    /// few enough to follow a cluster that slows down within minutes.
    pub const WINDOW: usize = WINDOW;

    /// An empty window.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one observed response time, evicting the oldest once the window is full.
    pub fn observe(&mut self, response_time: Duration) {
        let micros = u32::try_from(response_time.as_micros()).unwrap_or(u32::MAX);
        self.samples[self.next as usize] = micros;
        self.next = ((self.next as usize + 1) % WINDOW) as u16;
        self.len = (self.len + 1).min(WINDOW as u16);
    }

    /// Number of observations held.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether nothing has been observed yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `q`-quantile (nearest rank, `q` clamped to `[0, 1]`) of the window, or `None`
    /// when empty. O(WINDOW) on a stack copy; called once per refresh, not per input.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let n = self.len();
        if n == 0 {
            return None;
        }
        let q = if q.is_nan() { 1.0 } else { q.clamp(0.0, 1.0) };
        let mut copy = [0u32; WINDOW];
        copy[..n].copy_from_slice(&self.samples[..n]);
        // Nearest-rank: the smallest value with at least q·n observations at or below it.
        let exact = q * n as f64;
        let floor = exact as usize;
        let rank = (floor + usize::from((floor as f64) < exact)).clamp(1, n);
        // An insertion sort of at most WINDOW samples, once per refresh: a selection
        // algorithm would cost every wasm build of the core several KiB for nothing.
        let copy = &mut copy[..n];
        for i in 1..n {
            let mut j = i;
            while j > 0 && copy[j - 1] > copy[j] {
                copy.swap(j - 1, j);
                j -= 1;
            }
        }
        Some(Duration::from_micros(copy[rank - 1] as u64))
    }
}

mod window_serde {
    //! Serde for the fixed array (serde's derive stops at 32 elements).
    use super::WINDOW;
    use alloc::vec::Vec;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(samples: &[u32; WINDOW], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(samples.iter())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u32; WINDOW], D::Error> {
        let v: Vec<u32> = Vec::deserialize(d)?;
        let mut out = [0u32; WINDOW];
        for (slot, x) in out.iter_mut().zip(v) {
            *slot = x;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_window_has_no_quantile() {
        assert_eq!(Estimator::new().quantile(0.99), None);
    }

    #[test]
    fn quantiles_follow_nearest_rank() {
        let mut e = Estimator::new();
        for ms in 1..=10 {
            e.observe(Duration::from_millis(ms));
        }
        assert_eq!(e.quantile(0.5), Some(Duration::from_millis(5)));
        assert_eq!(e.quantile(0.99), Some(Duration::from_millis(10)));
        assert_eq!(e.quantile(0.0), Some(Duration::from_millis(1)));
        assert_eq!(e.quantile(f64::NAN), Some(Duration::from_millis(10)));
    }

    #[test]
    fn window_is_bounded_and_forgets_the_oldest() {
        let mut e = Estimator::new();
        e.observe(Duration::from_secs(100));
        for _ in 0..WINDOW {
            e.observe(Duration::from_millis(3));
        }
        assert_eq!(e.len(), WINDOW);
        assert_eq!(e.quantile(1.0), Some(Duration::from_millis(3)), "the 100 s outlier was evicted");
    }

    #[test]
    fn huge_observations_saturate() {
        let mut e = Estimator::new();
        e.observe(Duration::MAX);
        assert_eq!(e.quantile(1.0), Some(Duration::from_micros(u32::MAX as u64)));
    }
}
