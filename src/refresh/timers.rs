//! Every timer of a refresh in one table indexed by [`TimerKind`] (quinn-proto's
//! `TimerTable`): arming, disarming and "what is due next" are one array, not five fields.

use crate::time::Instant;

use super::contract::TimerKind;
use super::{Phase, Refresh};

/// When each timer is due, if armed; slot `k` is [`TimerKind::ALL`]`[k]`.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct TimerTable {
    at: [Option<Instant>; TimerKind::ALL.len()],
}

fn slot(kind: TimerKind) -> usize {
    kind as usize
}

impl TimerTable {
    /// Arms `kind` at `at`, or disarms it (`None`).
    pub(super) fn set(&mut self, kind: TimerKind, at: Option<Instant>) {
        self.at[slot(kind)] = at;
    }

    /// Disarms `kind`.
    pub(super) fn stop(&mut self, kind: TimerKind) {
        self.set(kind, None);
    }

    /// When `kind` is due, if armed.
    pub(super) fn get(&self, kind: TimerKind) -> Option<Instant> {
        self.at[slot(kind)]
    }

    /// Whether `kind` is armed and due by `now`.
    pub(super) fn is_due(&self, kind: TimerKind, now: Instant) -> bool {
        self.get(kind).is_some_and(|at| at <= now)
    }

    /// Disarms every timer (the refresh is over).
    pub(super) fn clear(&mut self) {
        self.at = [None; TimerKind::ALL.len()];
    }

    /// The earliest armed timer; ties go to the kind first in [`TimerKind::ALL`].
    pub(super) fn next(&self) -> Option<(Instant, TimerKind)> {
        let mut best: Option<(Instant, TimerKind)> = None;
        for kind in TimerKind::ALL {
            if let Some(at) = self.get(kind) {
                if best.is_none_or(|(b, _)| at < b) {
                    best = Some((at, kind));
                }
            }
        }
        best
    }
}

/// Firing the timers that are due: the dispatch from a timer to the module that handles it.
impl Refresh {
    /// Time never goes backwards inside a refresh: an earlier `now` is read as the latest.
    pub(super) fn clamp(&mut self, now: Instant) -> Instant {
        if now > self.now {
            self.now = now;
        }
        self.now
    }

    /// Fires every timer due at `now`, in the table's priority order.
    pub(super) fn fire_due(&mut self, now: Instant) {
        // Each round either finishes the refresh or consumes a timer; the bound is a
        // belt-and-braces guard against a logic error turning into a hang.
        let mut budget = 4 * (self.candidates.len() + self.attempts.in_flight() as usize) + 64;
        while self.phase != Phase::Finished && budget > 0 {
            budget -= 1;
            // An adapter that wakes up after the deadline must not see timers that were due
            // before it start new attempts: the deadline wins over everything overdue.
            if self.timers.is_due(TimerKind::Deadline, now) {
                self.on_deadline(now);
                return;
            }
            let Some((at, kind)) = self.timers.next() else { return };
            if at > now {
                return;
            }
            match kind {
                TimerKind::Deadline => self.on_deadline(now),
                TimerKind::AttemptTimeout => self.on_attempt_timeout(now),
                // A stagger tick due as well starts a new tick, which drops the partners
                // still to come of the spread one.
                TimerKind::Spread if self.timers.is_due(TimerKind::Stagger, now) => self.on_stagger(now),
                TimerKind::Spread => self.on_spread(now),
                TimerKind::Stagger => self.on_stagger(now),
                TimerKind::Backoff => self.on_backoff(now),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::time::Duration;

    fn at(ms: u64) -> Instant {
        Instant::ZERO.saturating_add(Duration::from_millis(ms))
    }

    #[test]
    fn the_earliest_timer_is_next_and_ties_go_by_priority() {
        let mut t = TimerTable::default();
        assert_eq!(t.next(), None);
        t.set(TimerKind::Backoff, Some(at(5)));
        t.set(TimerKind::Spread, Some(at(5)));
        assert_eq!(t.next(), Some((at(5), TimerKind::Spread)));
        t.set(TimerKind::Stagger, Some(at(5)));
        assert_eq!(t.next(), Some((at(5), TimerKind::Stagger)));
        t.set(TimerKind::Deadline, Some(at(5)));
        assert_eq!(t.next(), Some((at(5), TimerKind::Deadline)));
        t.set(TimerKind::Backoff, Some(at(4)));
        assert_eq!(t.next(), Some((at(4), TimerKind::Backoff)));
        assert!(t.is_due(TimerKind::Backoff, at(4)) && !t.is_due(TimerKind::Backoff, at(3)));
        t.stop(TimerKind::Backoff);
        assert!(!t.is_due(TimerKind::Backoff, at(9)));
        t.clear();
        assert_eq!(t.next(), None);
    }
}
