//! Every timer of a refresh in one table indexed by [`TimerKind`] (quinn-proto's
//! `TimerTable`): arming, disarming and "what is due next" are one array, not five fields.

use crate::time::Instant;

use super::contract::TimerKind;

/// The order in which timers due at the same instant fire: the deadline beats everything,
/// an attempt's timeout beats the tick that would hedge it, and a stagger tick beats the rest
/// of a spread tick (it supersedes the partners still to come).
const PRIORITY: [TimerKind; 5] =
    [TimerKind::Deadline, TimerKind::AttemptTimeout, TimerKind::Stagger, TimerKind::Spread, TimerKind::Backoff];

/// When each timer is due, if armed.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct TimerTable {
    at: [Option<Instant>; 5],
}

fn slot(kind: TimerKind) -> usize {
    match kind {
        TimerKind::Stagger => 0,
        TimerKind::Spread => 1,
        TimerKind::AttemptTimeout => 2,
        TimerKind::Backoff => 3,
        TimerKind::Deadline => 4,
    }
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
        self.at = [None; 5];
    }

    /// The earliest armed timer; ties go to the kind first in [`PRIORITY`].
    pub(super) fn next(&self) -> Option<(Instant, TimerKind)> {
        let mut best: Option<(Instant, TimerKind)> = None;
        for kind in PRIORITY {
            if let Some(at) = self.get(kind) {
                if best.is_none_or(|(b, _)| at < b) {
                    best = Some((at, kind));
                }
            }
        }
        best
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
