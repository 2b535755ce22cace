//! What a long-lived client's driver publishes for the handles that share it: the latest
//! metadata and when it came, the session's counters, and the last refresh's attempts.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::vec::Vec;

use super::{Answer, Session};
use crate::client_stats::ClientStats;
use crate::metadata::Metadata;
use crate::report::AttemptReport;

/// What the driver of a long-lived client (the task or thread that owns its [`Session`])
/// publishes, so the client's handles answer `cached`, `stats` and `last_refresh` — and
/// `metadata` while the cache is fresh — without a round trip to the driver. `T` is when the
/// metadata came, on the host's clock.
#[derive(Debug)]
pub struct Published<T> {
    cache: Mutex<Option<(Arc<Metadata>, T)>>,
    stats: Mutex<ClientStats>,
    last_refresh: Mutex<Vec<AttemptReport>>,
}

impl<T> Default for Published<T> {
    fn default() -> Self {
        Published { cache: Mutex::new(None), stats: Mutex::default(), last_refresh: Mutex::default() }
    }
}

impl<T: Clone> Published<T> {
    /// Publishes the session's counters. A driver calls it before it answers callers, so
    /// what a caller reads next is current.
    pub fn stats_of(&self, session: &Session) {
        *lock(&self.stats) = session.stats();
    }

    /// Publishes what a refresh that ended leaves: its attempts, and the metadata of its
    /// `answer` (received at `at`) when it has some.
    pub fn refreshed(&self, session: &Session, answer: &Answer, at: T) {
        *lock(&self.last_refresh) = session.reports();
        if let Ok(metadata) = answer {
            *lock(&self.cache) = Some((metadata.clone(), at));
        }
    }

    /// The cached metadata if `fresh` accepts when it came.
    pub fn fresh(&self, fresh: impl FnOnce(&T) -> bool) -> Option<Arc<Metadata>> {
        lock(&self.cache).as_ref().filter(|(_, at)| fresh(at)).map(|(m, _)| m.clone())
    }

    /// The cached metadata, however old.
    pub fn cached(&self) -> Option<Arc<Metadata>> {
        lock(&self.cache).as_ref().map(|(m, _)| m.clone())
    }

    /// The counters last published.
    pub fn stats(&self) -> ClientStats {
        lock(&self.stats).clone()
    }

    /// Every attempt of the refresh that ended last, in start order (empty before the first).
    pub fn last_refresh(&self) -> Vec<AttemptReport> {
        lock(&self.last_refresh).clone()
    }
}

/// A poisoned lock still holds a whole value (every write above is one assignment).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
