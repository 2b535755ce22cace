//! Mirrors the core's view of every attempt into [`AttemptReport`]s and [`Event`]s.
//!
//! The core decides; the ledger only listens. It learns from the commands the core emits
//! and from the inputs the driver fed it, each with the [`InputOutcome`] the core returned
//! for it: an input the core did not apply (say, about an attempt a timer due at the same
//! call had already ended) leaves no trace here either.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::time::Duration;

use stagger::{AttemptError, AttemptId, CancelReason, ErrorKind, InputOutcome, Instant, TimerKind};

use crate::report::{AttemptOutcome, AttemptReport, Event, EventKind};

/// Where the ledger sends events.
pub(crate) type Observer<'a> = &'a mut dyn FnMut(&Event);

/// What the driver told the core about one attempt.
#[derive(Debug)]
pub(crate) enum Reported {
    Connected,
    /// The broker's first answer on the attempt (`Input::FirstFrame`).
    Answered,
    Failed(AttemptError),
    /// A lookup's answer (`Input::Resolved`).
    Resolved(Vec<SocketAddr>),
    /// A metadata answer; `rejection` is why it cannot win, if it cannot.
    Response {
        rejection: Option<AttemptError>,
    },
}

/// A command of the core, reduced to what the ledger needs.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Act<'a> {
    Start {
        attempt: AttemptId,
        address: &'a str,
    },
    /// The core started an attempt that resolves the name `address` (`Command::Resolve`).
    Resolve {
        attempt: AttemptId,
        address: &'a str,
    },
    Cancel {
        attempt: AttemptId,
        reason: CancelReason,
    },
    Won {
        attempt: AttemptId,
    },
}

impl Act<'_> {
    /// The attempt the command is about.
    pub(crate) fn attempt(&self) -> AttemptId {
        match self {
            Act::Start { attempt, .. }
            | Act::Resolve { attempt, .. }
            | Act::Cancel { attempt, .. }
            | Act::Won { attempt } => *attempt,
        }
    }
}

/// Reports and events of one refresh.
#[derive(Debug)]
pub(crate) struct Ledger {
    origin: Instant,
    reports: Vec<AttemptReport>,
    index: HashMap<AttemptId, usize>,
    /// Attempts that resolve a name (their timeout is a lookup's).
    resolving: HashSet<AttemptId>,
    rejection: Option<(AttemptId, AttemptError)>,
}

impl Ledger {
    /// A ledger for a refresh that started at `origin`.
    pub(crate) fn new(origin: Instant) -> Self {
        Ledger { origin, reports: Vec::new(), index: HashMap::new(), resolving: HashSet::new(), rejection: None }
    }

    /// `at` as an offset from the start of the refresh.
    pub(crate) fn offset(&self, at: Instant) -> Duration {
        at.saturating_since(self.origin)
    }

    /// Records an input fed at `now` that the core answered with `outcome`. Call before
    /// [`Ledger::apply`]ing the acts of the same call, so events come in causal order.
    pub(crate) fn settle_input(
        &mut self,
        now: Instant,
        attempt: AttemptId,
        reported: Reported,
        outcome: InputOutcome,
        observer: Observer<'_>,
    ) {
        if !outcome.is_applied() {
            return;
        }
        match reported {
            Reported::Response { rejection } => {
                // A response is judged by the core's own commands (Done or Cancel{Rejected}).
                if let Some(error) = rejection {
                    self.rejection = Some((attempt, error));
                }
            }
            Reported::Connected => {
                let elapsed = self.offset(now);
                if let Some(r) = self.in_flight(attempt) {
                    if r.connected.is_none() {
                        r.connected = Some(elapsed);
                        let broker = r.broker.clone();
                        observer(&Event { elapsed, kind: EventKind::Connected { attempt, broker } });
                    }
                }
            }
            Reported::Answered => {
                let elapsed = self.offset(now);
                if let Some(r) = self.in_flight(attempt) {
                    if r.answered.is_none() {
                        r.answered = Some(elapsed);
                        // As in the core: an answer proves the transport is up.
                        r.connected.get_or_insert(elapsed);
                        let broker = r.broker.clone();
                        observer(&Event { elapsed, kind: EventKind::Answered { attempt, broker } });
                    }
                }
            }
            Reported::Resolved(addresses) => {
                let elapsed = self.offset(now);
                if let Some(r) = self.in_flight(attempt) {
                    r.ended = Some(elapsed);
                    r.outcome = AttemptOutcome::Resolved(addresses.clone());
                    let broker = r.broker.clone();
                    observer(&Event { elapsed, kind: EventKind::Resolved { attempt, broker, addresses } });
                }
            }
            Reported::Failed(error) => {
                let elapsed = self.offset(now);
                if let Some(r) = self.in_flight(attempt) {
                    r.ended = Some(elapsed);
                    r.outcome = AttemptOutcome::Failed(error.clone());
                    let broker = r.broker.clone();
                    observer(&Event { elapsed, kind: EventKind::Failed { attempt, broker, error } });
                }
            }
        }
    }

    /// Records a command of the core, carried out at `now`.
    pub(crate) fn apply(&mut self, now: Instant, act: Act<'_>, observer: Observer<'_>) {
        let elapsed = self.offset(now);
        match act {
            Act::Resolve { attempt, address } => {
                self.resolving.insert(attempt);
                self.apply(now, Act::Start { attempt, address }, observer);
            }
            Act::Start { attempt, address } => {
                self.index.insert(attempt, self.reports.len());
                self.reports.push(AttemptReport {
                    attempt,
                    broker: address.to_owned(),
                    started: elapsed,
                    connected: None,
                    answered: None,
                    ended: None,
                    outcome: AttemptOutcome::InFlight,
                });
                observer(&Event { elapsed, kind: EventKind::Started { attempt, broker: address.to_owned() } });
            }
            Act::Won { attempt } => {
                if let Some(r) = self.in_flight(attempt) {
                    r.ended = Some(elapsed);
                    r.outcome = AttemptOutcome::Won;
                    let broker = r.broker.clone();
                    observer(&Event { elapsed, kind: EventKind::Won { attempt, broker } });
                }
            }
            Act::Cancel { attempt, reason } => {
                let rejection = match self.rejection.take() {
                    Some((a, e)) if a == attempt => Some(e),
                    other => {
                        self.rejection = other;
                        None
                    }
                };
                let resolving = self.resolving.contains(&attempt);
                let Some(r) = self.in_flight(attempt) else { return };
                r.ended = Some(elapsed);
                // As in the core: a timed-out or rejected attempt *failed* (and its
                // connection is closed); lost, superseded, overtaken, deadline and fatal
                // ones were *cancelled*.
                let failure = match reason {
                    CancelReason::TimedOut => Some(AttemptError::timed_out(resolving, r.connected.is_some())),
                    CancelReason::Rejected => Some(
                        rejection.unwrap_or_else(|| AttemptError::with_detail(ErrorKind::Protocol, "answer rejected")),
                    ),
                    // Every other reason cancels (`CancelReason::is_failure`).
                    _ => None,
                };
                let broker = r.broker.clone();
                let kind = match failure {
                    Some(error) => {
                        r.outcome = AttemptOutcome::Failed(error.clone());
                        EventKind::Failed { attempt, broker, error }
                    }
                    None => {
                        r.outcome = AttemptOutcome::Cancelled(reason);
                        EventKind::Cancelled { attempt, broker, reason }
                    }
                };
                observer(&Event { elapsed, kind });
            }
        }
    }

    /// Records that the core's `timer` fired at `now`.
    pub(crate) fn timer(&mut self, now: Instant, timer: TimerKind, observer: Observer<'_>) {
        observer(&Event { elapsed: self.offset(now), kind: EventKind::Timer { timer } });
    }

    /// Every attempt so far, in start order.
    pub(crate) fn reports(&self) -> &[AttemptReport] {
        &self.reports
    }

    /// Takes the reports, leaving the ledger empty.
    pub(crate) fn into_reports(self) -> Vec<AttemptReport> {
        self.reports
    }

    fn in_flight(&mut self, attempt: AttemptId) -> Option<&mut AttemptReport> {
        let &i = self.index.get(&attempt)?;
        let r = &mut self.reports[i];
        (r.outcome == AttemptOutcome::InFlight).then_some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u64) -> AttemptId {
        AttemptId(n)
    }

    #[test]
    fn an_input_the_core_did_not_apply_leaves_no_trace() {
        let mut events = Vec::new();
        let mut obs = |e: &Event| events.push(e.kind.clone());
        let mut ledger = Ledger::new(Instant::ZERO);
        ledger.apply(Instant::ZERO, Act::Start { attempt: id(0), address: "a:1" }, &mut obs);
        let t = Instant::from_millis(5);
        let acts = [Act::Cancel { attempt: id(0), reason: CancelReason::TimedOut }];
        let refused = AttemptError::new(ErrorKind::Refused);
        ledger.settle_input(t, id(0), Reported::Failed(refused), InputOutcome::AttemptEnded, &mut obs);
        for act in acts {
            ledger.apply(t, act, &mut obs);
        }
        let r = &ledger.reports()[0];
        assert_eq!(r.outcome, AttemptOutcome::Failed(AttemptError::new(ErrorKind::ConnectTimeout)));
        assert_eq!(r.ended, Some(Duration::from_millis(5)));
        assert_eq!(events.len(), 2, "{events:?}");
    }

    #[test]
    fn rejected_answers_fail_with_the_rejection() {
        let mut obs = |_: &Event| {};
        let mut ledger = Ledger::new(Instant::ZERO);
        ledger.apply(Instant::ZERO, Act::Start { attempt: id(0), address: "a:1" }, &mut obs);
        let rejection = AttemptError::new(ErrorKind::NoBrokers);
        let acts = [Act::Cancel { attempt: id(0), reason: CancelReason::Rejected }];
        ledger.settle_input(
            Instant::ZERO,
            id(0),
            Reported::Response { rejection: Some(rejection.clone()) },
            InputOutcome::Applied,
            &mut obs,
        );
        for act in acts {
            ledger.apply(Instant::ZERO, act, &mut obs);
        }
        assert_eq!(ledger.reports()[0].outcome, AttemptOutcome::Failed(rejection));
    }
}
