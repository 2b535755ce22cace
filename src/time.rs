//! Virtual time for the sans-IO core.
//!
//! The core never reads a clock: callers pass `now` in. An [`Instant`] is a count of
//! microseconds since an origin the caller picks (process start, `performance.now()`'s origin,
//! or zero in the simulator). Durations are plain [`core::time::Duration`].

use core::time::Duration;
use serde::{Deserialize, Serialize};

/// A point in time, in microseconds since a caller-chosen origin.
///
/// Why not `std::time::Instant`: the core must run in `no_std`, in WebAssembly and in a
/// virtual-time simulator, so time is data, not a system call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Instant(u64);

impl Instant {
    /// The origin (time zero) — handy for simulations and tests.
    pub const ZERO: Instant = Instant(0);
    /// A time later than any real one; used for "never".
    pub const FAR_FUTURE: Instant = Instant(u64::MAX);

    /// Builds an instant `micros` microseconds after the origin.
    pub const fn from_micros(micros: u64) -> Self {
        Instant(micros)
    }

    /// Builds an instant `millis` milliseconds after the origin (saturating).
    pub const fn from_millis(millis: u64) -> Self {
        Instant(millis.saturating_mul(1000))
    }

    /// Microseconds since the origin.
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// Time elapsed from `earlier` to `self`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }

    /// `self + d`, saturating at [`Instant::FAR_FUTURE`] instead of overflowing.
    pub fn saturating_add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(duration_micros(d)))
    }
}

/// A duration in whole microseconds, saturating at `u64::MAX`.
///
/// Public because code outside the core that keeps time in microseconds (the simulator, its
/// reports) must round exactly as the core does, or its timelines drift from the trace.
pub fn duration_micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Scales `d` by `factor` (non-negative, finite), saturating; used for jitter and growth.
///
/// Public for the same reason as [`duration_micros`]: a simulator that draws random delays
/// from [`Rng`](crate::Rng) scales them with the core's own rounding, so its runs are
/// deterministic across the crate boundary.
pub fn scale_duration(d: Duration, factor: f64) -> Duration {
    let micros = duration_micros(d) as f64 * factor;
    if micros.is_nan() || micros <= 0.0 {
        Duration::ZERO
    } else if micros >= u64::MAX as f64 {
        Duration::from_micros(u64::MAX)
    } else {
        Duration::from_micros(micros as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_overflowing() {
        let t = Instant::from_micros(u64::MAX - 1);
        assert_eq!(t.saturating_add(Duration::from_secs(1)), Instant::FAR_FUTURE);
        assert_eq!(Instant::ZERO.saturating_since(t), Duration::ZERO);
        assert_eq!(Instant::from_millis(3).saturating_since(Instant::from_millis(1)), Duration::from_millis(2));
    }

    #[test]
    fn scale_handles_edges() {
        assert_eq!(scale_duration(Duration::from_millis(10), 0.5), Duration::from_millis(5));
        assert_eq!(scale_duration(Duration::from_millis(10), f64::NAN), Duration::ZERO);
        assert_eq!(scale_duration(Duration::MAX, 2.0), Duration::from_micros(u64::MAX));
    }
}
