//! What each [`Input`] does to the refresh, once `handle_input` has checked that it names an
//! attempt in flight that existed before the call.

use crate::metadata::Metadata;
use crate::time::Instant;

use super::attempts::Auth;
use super::contract::{AttemptId, AttemptState, CancelReason, Command, Input, InputOutcome, TimerKind};
use super::Refresh;

impl Refresh {
    /// Applies `input` to the live attempt `n` it names.
    pub(super) fn apply(&mut self, now: Instant, n: u32, input: Input) -> InputOutcome {
        if let Some(outcome) = self.check_phase(n, &input) {
            return outcome;
        }
        let fresh = match input {
            Input::Connected { tls, .. } => self.on_connected(now, n, tls),
            Input::FirstFrame { .. } => self.on_answered(now, n),
            Input::Authenticating { .. } => self.on_authentication(n, Auth::NotYet, Auth::Checking),
            Input::Authenticated { .. } => match self.attempts.slot(n).auth {
                Auth::NotYet => return InputOutcome::Unexpected,
                _ => self.on_authentication(n, Auth::Checking, Auth::Accepted),
            },
            Input::Response { attempt, metadata } => {
                self.on_response(now, n, attempt, metadata);
                true
            }
            Input::Failed { error, .. } => {
                self.fail(now, n, error, None);
                true
            }
            Input::Resolved { addresses, .. } => return self.on_resolved(now, n, addresses),
        };
        if fresh {
            InputOutcome::Applied
        } else {
            InputOutcome::Repeated
        }
    }

    /// The transport is up: older attempts still connecting long after are outrun
    /// (`fanout.tuning.cancel_outrun`), and an adaptive stagger now counts from the
    /// handshake (at the TLS pace when `tls`), so the leader's armed tick moves.
    fn on_connected(&mut self, now: Instant, n: u32, tls: bool) -> bool {
        let info = self.attempts.info_mut(n);
        if info.connected_at.is_some() {
            return false;
        }
        info.connected_at = Some(now);
        info.tls = tls;
        self.cancel_outrun(now, n);
        if let Some(leader) = self.ticks.leader.filter(|&l| l == n) {
            if self.timers.get(TimerKind::Stagger).is_some() {
                self.timers.set(TimerKind::Stagger, Some(self.stagger_deadline(leader)));
            }
        }
        true
    }

    /// The broker is alive and reading: the rest of a spread tick is not needed, silent
    /// attempts beside it are cancelled (`fanout.tuning.cancel_silent_on_answer`), and a
    /// late answer stretches the waits that follow.
    fn on_answered(&mut self, now: Instant, n: u32) -> bool {
        if !self.attempts.mark_answered(n, now) {
            return false;
        }
        self.note_first_answer(now, n);
        self.timers.stop(TimerKind::Spread);
        if self.config.fanout.tuning.cancel_silent_on_answer {
            self.cancel_silent(now);
        }
        self.arm_stagger();
        true
    }

    /// The broker's credential check moved on (`from` → `to`): while any broker is checking,
    /// the armed tick waits at least the ceiling (`Refresh::stagger_basis`), so it moves.
    fn on_authentication(&mut self, n: u32, from: Auth, to: Auth) -> bool {
        if !self.attempts.move_auth(n, from, to) {
            return false;
        }
        self.arm_stagger();
        true
    }

    /// Metadata: it wins unless it cannot (no brokers, a top-level error), and then it is a
    /// failure like any other.
    fn on_response(&mut self, now: Instant, n: u32, attempt: AttemptId, metadata: Metadata) {
        if let Some(error) = metadata.rejection() {
            self.fail(now, n, error, Some(CancelReason::Rejected));
            return;
        }
        self.end_attempt(now, n, AttemptState::Won);
        self.cancel_all(now, CancelReason::Lost);
        let broker = self.candidates[self.attempts.slot(n).candidate as usize];
        self.commands.push_back(Command::Done { attempt, broker, metadata });
        self.finish();
    }
}
