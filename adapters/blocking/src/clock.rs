//! Maps `std::time` onto the core's [`Instant`]: microseconds since the refresh (or client)
//! started. The core never reads a clock, so this is the only place time comes from.

use std::time::Duration;

use stagger::Instant;

/// A time origin.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    origin: std::time::Instant,
}

impl Clock {
    /// A clock whose zero is now.
    pub(crate) fn start() -> Self {
        Clock { origin: std::time::Instant::now() }
    }

    /// Now, as the core counts time (whole microseconds, rounded down, so a timer the core
    /// set for `at` has really passed when the poll wakes us for it).
    pub(crate) fn now(&self) -> Instant {
        Instant::from_micros(u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX))
    }

    /// The core's `at` as a `std` instant to sleep until; `None` (sleep until I/O) for no
    /// timer or one too far away to represent.
    pub(crate) fn deadline(&self, at: Option<Instant>) -> Option<std::time::Instant> {
        at.and_then(|at| self.origin.checked_add(Duration::from_micros(at.as_micros())))
    }
}
