//! Passes, retries and the deadline: which broker a pass tries next, what a failure starts,
//! the backoff between passes, and how the refresh gives up.

use core::time::Duration;

use crate::config::Backoff;
use crate::error::{AttemptError, ErrorKind, GiveUpReason, RefreshError};
use crate::rng::Rng;
use crate::time::{scale_duration, Instant};

use super::contract::{AttemptState, CancelReason, Command, TimerKind};
use super::PerCandidate;
use super::{Phase, Refresh};

/// One pass over the candidates: where it stands and which brokers it owes a second try.
#[derive(Clone, Debug)]
pub(super) struct Pass {
    /// Which pass, from 0.
    pub(super) number: u32,
    /// Next candidate position to try.
    cursor: usize,
    /// Candidate positions whose attempts this pass were cancelled as overtaken by a broker
    /// that has not won yet. Should every answering attempt then fail, they are retried.
    pub(super) overtaken: PerCandidate<u32>,
    /// Candidate positions to try before the cursor moves on (a stack: the earliest
    /// overtaken on top), filled from `overtaken` when the broker that overtook them failed.
    retry_next: PerCandidate<u32>,
    /// Per candidate position: 1 + the pass in which it was last retried that way (0:
    /// never). A candidate is retried at most once per pass, so a pass starts at most two
    /// attempts per broker and the attempt table sized for that never grows.
    retried_in: PerCandidate<u32>,
    /// Candidate positions a name just resolved to, to try before anything else (a stack:
    /// the first address on top); see `resolve`.
    resolved_next: PerCandidate<u32>,
    /// How this pass's attempts have ended so far, as far as [`Refresh::end_pass`] cares.
    pub(super) endings: Endings,
}

/// How a pass's attempts ended: whether every one the TLS layer refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Endings {
    /// No attempt of this pass has ended yet.
    None,
    /// Every attempt that ended failed with [`crate::ErrorKind::Tls`]: a certificate one end
    /// refused, a TLS alert, bytes that are not TLS. Another pass would meet the same
    /// certificates and settings, and cost every broker a handshake to learn it again.
    TlsOnly,
    /// Some attempt ended otherwise (another failure, a cancel): a pass may go differently.
    Mixed,
}

impl Endings {
    /// An attempt of the pass ended; `tls`: with a TLS-layer failure.
    pub(super) fn note(&mut self, tls: bool) {
        *self = match (*self, tls) {
            (Endings::None | Endings::TlsOnly, true) => Endings::TlsOnly,
            _ => Endings::Mixed,
        };
    }
}

impl Pass {
    /// The first pass over `candidates` brokers.
    pub(super) fn new(candidates: usize) -> Self {
        Pass {
            number: 0,
            cursor: 0,
            overtaken: PerCandidate::with_capacity(candidates),
            retry_next: PerCandidate::with_capacity(candidates),
            retried_in: smallvec::smallvec![0; candidates],
            resolved_next: PerCandidate::new(),
            endings: Endings::None,
        }
    }

    /// Makes room for `extra` candidate positions resolution may add.
    pub(super) fn reserve(&mut self, extra: usize) {
        if extra > 0 {
            self.retried_in.reserve(extra);
            self.resolved_next.reserve(extra);
            self.overtaken.reserve(extra);
            self.retry_next.reserve(extra);
        }
    }

    /// A candidate position was added (a resolved address).
    pub(super) fn grow(&mut self) {
        self.retried_in.push(0);
    }

    /// Puts `positions` (a name's addresses, in order) before every other candidate.
    pub(super) fn queue_next(&mut self, positions: &[u32]) {
        self.resolved_next.extend(positions.iter().rev().copied());
    }

    /// Whether this pass has a broker left to try: one to retry, or one not yet tried.
    pub(super) fn has_candidate(&self, candidates: usize) -> bool {
        !self.resolved_next.is_empty() || !self.retry_next.is_empty() || self.cursor < candidates
    }

    /// The candidate position to try next: a broker owed a retry, else the next untried.
    /// Only call it when [`Pass::has_candidate`] says there is one.
    pub(super) fn next_candidate(&mut self) -> usize {
        if let Some(position) = self.resolved_next.pop() {
            return position as usize;
        }
        match self.retry_next.pop() {
            Some(position) => position as usize,
            None => {
                self.cursor += 1;
                self.cursor - 1
            }
        }
    }

    /// Every broker that answered failed after all: the silent attempts its answer cancelled
    /// lost to nothing, so their brokers are the next to try, the earliest first, each at
    /// most once per pass.
    fn requeue_overtaken(&mut self) {
        let stamp = self.number + 1;
        while let Some(position) = self.overtaken.pop() {
            if let Some(retried) = self.retried_in.get_mut(position as usize) {
                if *retried != stamp {
                    *retried = stamp;
                    self.retry_next.push(position);
                }
            }
        }
    }

    fn restart(&mut self) {
        self.cursor = 0;
        self.overtaken.clear();
        self.retry_next.clear();
        self.resolved_next.clear();
        self.endings = Endings::None;
    }
}

/// The backoff before pass `pass + 1`: exponential from `retry.initial` by
/// `retry.multiplier`, capped at `retry.cap`, with full jitter — uniform in `[0, d]`, one
/// draw from `rng` (AWS architecture blog, "Exponential Backoff And Jitter").
pub(super) fn backoff_delay(retry: &Backoff, pass: u32, rng: &mut Rng) -> Duration {
    let mut d = retry.initial;
    for _ in 0..pass {
        d = scale_duration(d, retry.multiplier).min(retry.cap);
    }
    scale_duration(d.min(retry.cap), rng.unit())
}

impl Refresh {
    /// Opens the current pass: the first `fanout.initial` brokers at once.
    pub(super) fn begin_pass(&mut self, now: Instant) {
        self.phase = Phase::Racing;
        self.stats.passes += 1;
        self.pass.restart();
        self.timers.stop(TimerKind::Spread);
        self.ticks.size = self.config.fanout.initial as f64;
        let initial = self.config.fanout.initial;
        for i in 0..initial {
            if !self.launch(now, i == 0) {
                break;
            }
        }
        self.arm_stagger();
    }

    /// Every broker of the pass failed: back off before the next, or give up.
    /// The pass is over with no winner: back off before the next one, or give up when the
    /// retries are spent or when the TLS layer refused every broker of the pass
    /// ([`Endings::TlsOnly`]).
    pub(super) fn end_pass(&mut self, now: Instant) {
        self.timers.stop(TimerKind::Stagger);
        self.timers.stop(TimerKind::Spread);
        if self.pass.number >= self.config.retry.retries || self.pass.endings == Endings::TlsOnly {
            self.give_up(GiveUpReason::AllFailed { passes: self.pass.number + 1 });
            return;
        }
        let d = backoff_delay(&self.config.retry, self.pass.number, &mut self.rng);
        self.phase = Phase::BackingOff;
        self.timers.set(TimerKind::Backoff, Some(now.saturating_add(d)));
    }

    pub(super) fn on_backoff(&mut self, now: Instant) {
        self.timers.stop(TimerKind::Backoff);
        self.pass.number += 1;
        self.begin_pass(now);
    }

    pub(super) fn on_deadline(&mut self, now: Instant) {
        while let Some(n) = self.attempts.oldest() {
            self.cancel(now, n, CancelReason::Deadline, Some("overall deadline exceeded"));
        }
        self.give_up(GiveUpReason::DeadlineExceeded);
    }

    /// Fails every attempt whose timeout has come, but in a gentle refresh
    /// ([`Refresh::is_gentle`]) keeps waiting on one whose connection is up,
    /// for up to as many more attempt timeouts as the refresh has retries.
    ///
    /// Why: in a failover a connected broker that has not answered is far more likely queued
    /// or throttling new connections (KIP-612: the kernel accepted, the broker has not read)
    /// than stopped. Closing the connection and dialling the same broker in the next pass
    /// starts again at the back of its queue, and a throttling broker counts the redial
    /// against its rate; patience spends the same time without either. Other brokers are
    /// still added by the stagger meanwhile, and the deadline still ends the refresh.
    pub(super) fn on_attempt_timeout(&mut self, now: Instant) {
        while let Some(n) = self.attempts.oldest() {
            let slot = self.attempts.slot(n);
            if slot.timeout_at > now {
                break;
            }
            let patient = self.gentle && slot.info.connected_at.is_some() && slot.outlived < self.config.retry.retries;
            if patient {
                self.attempts.outlive(n, now.saturating_add(self.config.attempt_timeout));
                continue;
            }
            let error = self.timeout_error(n);
            self.fail(now, n, error, Some(CancelReason::TimedOut));
            if self.phase == Phase::Finished {
                return;
            }
        }
        self.timers.set(TimerKind::AttemptTimeout, self.attempts.next_timeout());
    }

    /// Attempt `n` failed with `error` (and the core cancels it for `cancel`, if given): a
    /// fatal error ends the refresh; otherwise the failure may start the next broker, and
    /// the last attempt of a pass ends it.
    pub(super) fn fail(&mut self, now: Instant, n: u32, error: AttemptError, cancel: Option<CancelReason>) {
        let fatal = error.kind.is_fatal();
        self.pass.endings.note(error.kind == ErrorKind::Tls);
        self.record_error(n, error);
        self.end_attempt(now, n, AttemptState::Failed);
        self.stats.failed += 1;
        if let Some(reason) = cancel {
            self.commands.push_back(Command::Cancel { attempt: self.id(n), reason });
        }
        if fatal {
            self.cancel_all(now, CancelReason::Fatal);
            self.give_up(GiveUpReason::Fatal);
            return;
        }
        if self.attempts.answering() == 0 && !self.pass.overtaken.is_empty() {
            // Every broker that answered failed after all (an error answer,
            // REBOOTSTRAP_REQUIRED, a close).
            self.pass.requeue_overtaken();
        }
        let timed_out = cancel == Some(CancelReason::TimedOut);
        if self.config.fanout.tuning.next_on_failure || timed_out {
            self.launch(now, true);
        }
        if self.attempts.in_flight() == 0 && !self.has_candidate() {
            self.end_pass(now);
        } else {
            self.arm_stagger();
        }
    }

    /// Ends the refresh with `reason`, every broker's error and the last one.
    pub(super) fn give_up(&mut self, reason: GiveUpReason) {
        // The one copy of an error the core makes: the last error, once, at the very end.
        let last_error = self.last_failure.and_then(|(n, candidate)| {
            let error = self.outcomes.get(candidate)?.last_error.clone()?;
            Some((self.id(n), self.candidates[candidate], error))
        });
        let error = RefreshError { reason, last_error, brokers: core::mem::take(&mut self.outcomes) };
        self.commands.push_back(Command::GiveUp(error));
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_by_the_multiplier_up_to_the_cap_with_full_jitter() {
        let retry = Backoff {
            retries: 9,
            initial: Duration::from_millis(100),
            multiplier: 2.0,
            cap: Duration::from_millis(500),
        };
        // Each pass draws once; the same seed gives the same unit draw.
        let unit = Rng::new(7).unit();
        let expected = [100, 200, 400, 500, 500].map(|ms| scale_duration(Duration::from_millis(ms), unit));
        for (pass, want) in expected.into_iter().enumerate() {
            assert_eq!(backoff_delay(&retry, pass as u32, &mut Rng::new(7)), want, "pass {pass}");
        }
        let mut rng = Rng::new(1);
        for _ in 0..100 {
            assert!(backoff_delay(&retry, 3, &mut rng) <= retry.cap);
        }
    }
}
