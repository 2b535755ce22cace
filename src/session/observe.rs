//! The session's live view and reports: [`Event`]s queued as the policy applies inputs and
//! emits commands (only with [`SessionConfig::observe`](super::SessionConfig::observe)), and
//! the [`AttemptReport`]s of the refresh that finished last.

use alloc::string::ToString;
use alloc::vec::Vec;
use core::time::Duration;

use super::Session;
use crate::refresh::{AttemptId, CancelReason, Input, Refresh};
use crate::report::{AttemptOutcome, AttemptReport, Event, EventKind, RefreshOutcome};

impl Session {
    /// The next live event, in the order things happened; `None` when there is none (or
    /// the session does not observe). Drain it with the actions.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Every attempt of the refresh that finished last, in start order: the policy's record
    /// of each with what the session saw of it.
    pub fn reports(&self) -> Vec<AttemptReport> {
        let Some(refresh) = self.cluster.last_refresh() else { return Vec::new() };
        let book = self.cluster.book();
        let notes = self.notes.finished();
        refresh
            .attempts()
            .map(|(attempt, info)| {
                let note = notes.iter().find(|n| n.attempt == attempt);
                AttemptReport::new(attempt, info, note, book.address(info.broker), refresh.started_at())
            })
            .collect()
    }

    /// The refresh that finished last, if it succeeded: its metadata, winner and every
    /// attempt's report (what a one-shot `refresh` returns).
    pub fn outcome(&self) -> Option<RefreshOutcome> {
        let refresh = self.cluster.last_refresh()?;
        let attempts = self.reports();
        let won = attempts.iter().find(|a| a.outcome == AttemptOutcome::Won)?;
        Some(RefreshOutcome {
            metadata: self.cluster.metadata()?.clone(),
            winner: won.broker.clone(),
            metadata_version: won.metadata_version,
            elapsed: won.ended.unwrap_or_else(|| self.now.saturating_since(refresh.started_at())),
            trace: self.last_trace().cloned(),
            attempts,
        })
    }

    /// The trace of the refresh that finished last (with
    /// [`SessionConfig::recorder`](super::SessionConfig::recorder)).
    pub fn last_trace(&self) -> Option<&crate::Trace> {
        self.cluster.last_trace()
    }

    /// The refresh `attempt` belongs to: the running one or the one that finished last.
    fn refresh_of(&self, attempt: AttemptId) -> Option<&Refresh> {
        let epoch = attempt.epoch();
        let current = self.cluster.current().filter(|r| r.epoch() == epoch);
        current.or_else(|| self.cluster.last_refresh().filter(|r| r.epoch() == epoch))
    }

    /// Queues `kind`, about an attempt of the refresh of `epoch`, timed from its start.
    fn observe(&mut self, epoch: u32, kind: EventKind) {
        let current = self.cluster.current().filter(|r| r.epoch() == epoch);
        let refresh = current.or_else(|| self.cluster.last_refresh().filter(|r| r.epoch() == epoch));
        let elapsed = refresh.map_or(Duration::ZERO, |r| self.now.saturating_since(r.started_at()));
        self.events.push_back(Event { elapsed, kind });
    }

    /// The broker `attempt` went to, as text.
    fn broker_of(&self, attempt: AttemptId) -> alloc::string::String {
        let broker = self.refresh_of(attempt).and_then(|r| r.attempt(attempt)).map(|a| a.broker);
        broker.map(|b| self.cluster.book().address(b).to_string()).unwrap_or_default()
    }

    /// The policy started `attempt`.
    pub(super) fn observe_started(&mut self, attempt: AttemptId) {
        if self.config.observe {
            let broker = self.broker_of(attempt);
            self.observe(attempt.epoch(), EventKind::Started { attempt, broker });
        }
    }

    /// The policy applied the input `observed` was taken from.
    pub(super) fn observe_applied(&mut self, observed: Option<Observed>) {
        let Some(observed) = observed else { return };
        let attempt = match &observed {
            Observed::Connected(a) | Observed::Answered(a) | Observed::Failed(a, _) | Observed::Resolved(a, _) => *a,
        };
        let broker = self.broker_of(attempt);
        let kind = match observed {
            Observed::Connected(_) => EventKind::Connected { attempt, broker },
            Observed::Answered(_) => EventKind::Answered { attempt, broker },
            Observed::Failed(_, error) => EventKind::Failed { attempt, broker, error },
            Observed::Resolved(_, addresses) => EventKind::Resolved { attempt, broker, addresses },
        };
        self.observe(attempt.epoch(), kind);
    }

    /// The policy cancelled `attempt` for `reason`: a failure (timed out, rejected) with the
    /// error the notes hold, or a cancellation.
    pub(super) fn observe_cancelled(&mut self, attempt: AttemptId, reason: CancelReason) {
        if !self.config.observe {
            return;
        }
        let broker = self.broker_of(attempt);
        let error = reason.is_failure().then(|| self.notes.error_of(attempt)).flatten();
        let kind = match error {
            Some(error) => EventKind::Failed { attempt, broker, error },
            None => EventKind::Cancelled { attempt, broker, reason },
        };
        self.observe(attempt.epoch(), kind);
    }

    /// `attempt` won.
    pub(super) fn observe_won(&mut self, attempt: AttemptId) {
        if self.config.observe {
            let broker = self.broker_of(attempt);
            self.observe(attempt.epoch(), EventKind::Won { attempt, broker });
        }
    }

    /// The refresh of `epoch` gave up for `reason`.
    pub(super) fn observe_gave_up(&mut self, epoch: u32, reason: crate::error::GiveUpReason) {
        if self.config.observe {
            self.observe(epoch, EventKind::GaveUp { reason });
        }
    }

    /// A timer of the running refresh is due at the session's time: say which, before the
    /// policy acts on it.
    pub(super) fn observe_timer(&mut self) {
        if !self.config.observe {
            return;
        }
        let Some(r) = self.cluster.current() else { return };
        if let Some((_, timer)) = r.next_timer().filter(|(at, _)| *at <= self.now) {
            let epoch = r.epoch();
            self.observe(epoch, EventKind::Timer { timer });
        }
    }
}

/// What an input says in the live view once the policy applies it.
pub(super) enum Observed {
    Connected(AttemptId),
    Answered(AttemptId),
    Failed(AttemptId, crate::error::AttemptError),
    Resolved(AttemptId, Vec<core::net::SocketAddr>),
}

impl Observed {
    /// What `input`, about to be fed, will say (`None` when the session does not
    /// `observe`, or the input says nothing there: an answer is judged by the policy's own
    /// commands, won or failed as rejected). Taken before feeding, as the input moves.
    pub(super) fn of(observe: bool, input: &Input) -> Option<Observed> {
        if !observe {
            return None;
        }
        Some(match input {
            Input::Connected { attempt, .. } => Observed::Connected(*attempt),
            Input::FirstFrame { attempt } => Observed::Answered(*attempt),
            Input::Failed { attempt, error } => Observed::Failed(*attempt, error.clone()),
            Input::Resolved { attempt, addresses } => Observed::Resolved(*attempt, addresses.clone()),
            Input::Authenticating { .. } | Input::Authenticated { .. } | Input::Response { .. } => return None,
        })
    }
}
