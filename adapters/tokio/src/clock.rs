//! Maps tokio time onto the core's [`Instant`]: microseconds since the refresh (or client)
//! started. The core never reads a clock, so this is the only place time comes from.

use std::future::pending;
use std::time::Duration;

use stagger::Instant;

/// A time origin; copies share it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    origin: tokio::time::Instant,
}

impl Clock {
    /// A clock whose zero is now.
    pub(crate) fn start() -> Self {
        Clock { origin: tokio::time::Instant::now() }
    }

    /// Now, as the core counts time (whole microseconds, rounded down, so a timer the
    /// core set for `at` has really passed when tokio wakes us for it).
    pub(crate) fn now(&self) -> Instant {
        Instant::from_micros(u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX))
    }

    /// Sleeps until the core's `at`; forever for `None` or a time tokio cannot represent.
    pub(crate) async fn sleep_until(&self, at: Option<Instant>) {
        match at.and_then(|at| self.origin.checked_add(Duration::from_micros(at.as_micros()))) {
            Some(deadline) => tokio::time::sleep_until(deadline).await,
            None => pending().await,
        }
    }
}
