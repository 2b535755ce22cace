//! What the session saw of each attempt beyond the policy's record of it: the error its
//! connection or broker produced, why the policy cancelled it, and the Metadata version its
//! exchange used — the per-attempt reports a host shows.

use alloc::vec::Vec;
use core::net::SocketAddr;

use super::contract::AttemptNote;
use crate::error::AttemptError;
use crate::refresh::{AttemptId, CancelReason, Input, Refresh};

/// The notes of the running refresh and of the one that finished last.
#[derive(Debug, Default)]
pub(super) struct Notes {
    running: Vec<AttemptNote>,
    finished: Vec<AttemptNote>,
    /// Why an answer fed last cannot win, until the policy says whether it rejected it.
    rejection: Option<(AttemptId, AttemptError)>,
}

/// What an input will note, once the policy applied it.
pub(super) struct Pending {
    attempt: AttemptId,
    error: Option<AttemptError>,
    rejection: Option<AttemptError>,
    version: Option<i16>,
    addresses: Option<Vec<SocketAddr>>,
}

impl Notes {
    /// The policy started `attempt`: the first of a new refresh forgets the previous one's.
    pub(super) fn started(&mut self, attempt: AttemptId) {
        if self.running.first().is_some_and(|n| n.attempt.epoch() != attempt.epoch()) {
            self.running.clear();
        }
        let note = AttemptNote { attempt, error: None, cancelled: None, metadata_version: None, addresses: None };
        self.running.push(note);
    }

    /// What `input` (of an exchange that used Metadata `version`) says, to note if applied.
    pub(super) fn of(input: &Input, version: Option<i16>) -> Option<Pending> {
        let pending = |attempt: &AttemptId| Pending {
            attempt: *attempt,
            error: None,
            rejection: None,
            version: None,
            addresses: None,
        };
        match input {
            Input::Failed { attempt, error } => Some(Pending { error: Some(error.clone()), ..pending(attempt) }),
            Input::Response { attempt, metadata } => {
                Some(Pending { rejection: metadata.rejection(), version, ..pending(attempt) })
            }
            Input::Resolved { attempt, addresses } => {
                Some(Pending { addresses: Some(addresses.clone()), ..pending(attempt) })
            }
            Input::Connected { .. }
            | Input::FirstFrame { .. }
            | Input::Authenticating { .. }
            | Input::Authenticated { .. } => None,
        }
    }

    /// Notes what the policy applied.
    pub(super) fn applied(&mut self, pending: Option<Pending>) {
        let Some(Pending { attempt, error, rejection, version, addresses }) = pending else { return };
        if error.is_none() {
            self.rejection = rejection.map(|r| (attempt, r));
        }
        if let Some(note) = self.find(attempt) {
            note.error = error.or(note.error.take());
            note.metadata_version = version.or(note.metadata_version);
            note.addresses = addresses.or(note.addresses.take());
        }
    }

    /// The policy cancelled `attempt` of `refresh` for `reason`.
    pub(super) fn cancelled(&mut self, attempt: AttemptId, reason: CancelReason, refresh: Option<&Refresh>) {
        let rejection = self.rejection.take().filter(|(a, _)| *a == attempt).map(|(_, e)| e);
        let connected = refresh.and_then(|r| r.attempt(attempt)).is_some_and(|i| i.connected_at.is_some());
        let resolves = refresh.is_some_and(|r| r.resolves(attempt));
        if let Some(note) = self.find(attempt) {
            note.cancelled = Some(reason);
            note.error = match reason {
                CancelReason::Rejected => rejection,
                CancelReason::TimedOut => Some(AttemptError::timed_out(resolves, connected)),
                _ => note.error.take(),
            };
        }
    }

    /// The running refresh ended: its notes become the finished ones.
    pub(super) fn finish(&mut self) {
        self.finished = core::mem::take(&mut self.running);
        self.rejection = None;
    }

    /// The notes of the refresh that finished last, in start order.
    pub(super) fn finished(&self) -> &[AttemptNote] {
        &self.finished
    }

    /// The error noted for `attempt`, in the running refresh or the one that finished last.
    pub(super) fn error_of(&self, attempt: AttemptId) -> Option<AttemptError> {
        let mut all = self.running.iter().chain(self.finished.iter());
        all.find(|n| n.attempt == attempt).and_then(|n| n.error.clone())
    }

    fn find(&mut self, attempt: AttemptId) -> Option<&mut AttemptNote> {
        self.running.iter_mut().find(|n| n.attempt == attempt)
    }
}
