//! The stagger delay: when the leading attempt is suspected and the next one starts. A fixed
//! stagger counts from the attempt's start; the adaptive one reads the phase the attempt is
//! in (connecting, connected but silent, answering), the cluster's windows, the queueing seen
//! in this refresh and why the refresh runs ([`crate::RefreshCause`]).

use core::time::Duration;

use crate::config::{Adaptive, Stagger};
use crate::time::{scale_duration, Instant};

use super::contract::AttemptInfo;
use super::Refresh;

impl Refresh {
    ///
    /// A fixed stagger counts from the attempt's start. The adaptive one depends on what
    /// the attempts have shown so far (see [`crate::config::Adaptive`]): while any broker
    /// is answering, patience from the latest start; otherwise, if the latest attempt is
    /// connected, twice the broker pace (or its handshake, if longer) from the handshake;
    /// before that, the cold stagger or the recent response time from its start. A gentle
    /// refresh ([`Refresh::is_gentle`]) waits at least `pace` while connecting
    /// and at least `ceiling` once connected, and any refresh at least `ceiling` while a
    /// broker is checking its credentials.
    pub(super) fn stagger_deadline(&self, n: u32) -> Instant {
        let (from, delay) = self.stagger_basis(n);
        from.saturating_add(delay)
    }

    /// What the stagger deadline of attempt `n` counts from, and the (jittered) delay it
    /// adds; a silent phase's delay stretched by the supersedes before `n` started and by
    /// the queueing seen ([`crate::config::Adaptive::while_silent`]).
    pub(super) fn stagger_basis(&self, n: u32) -> (Instant, Duration) {
        let slot = self.attempts.slot(n);
        let info = &slot.info;
        let queueing = self.ticks.queueing;
        let (from, delay) = match self.config.fanout.stagger {
            Stagger::Fixed(d) => (info.started_at, d),
            Stagger::Adaptive(a) if self.attempts.answering() > 0 => {
                let typical = self.recent_response_time.unwrap_or_else(|| self.attempts.first_answer_time());
                let delay = self.gentle_delay(a, a.while_answering(typical.max(queueing)), true);
                (info.started_at, self.checking_credentials_delay(a, delay))
            }
            Stagger::Adaptive(a) => {
                let (from, delay) = match info.connected_at {
                    Some(at) => (at, self.fast_connected_wait(a, info, at)),
                    None => (info.started_at, a.before_connect(self.recent_response_time)),
                };
                (
                    from,
                    self.gentle_delay(
                        a,
                        a.while_silent(delay, slot.superseded_before, queueing),
                        info.connected_at.is_some(),
                    ),
                )
            }
        };
        (from, scale_duration(delay, slot.jitter))
    }

    /// How long the fast policy lets attempt `info`, connected `at`, stay silent: twice its
    /// broker's pace or handshake ([`Adaptive::while_connected`]); a kept connection at
    /// least `multiple × floor` ([`Adaptive::kept_floor`]) and, before the view has seen a
    /// calm Metadata answer, at most `cold`. The stagger waits this outside a gentle
    /// refresh, and a first answer later than this is a queue ([`Refresh::saw_queue`]).
    pub(super) fn fast_connected_wait(&self, a: Adaptive, info: &AttemptInfo, at: Instant) -> Duration {
        let wait = a.while_connected(self.handshake_of(info, at), self.broker_pace(info), info.tls);
        if !info.reused_connection {
            return wait;
        }
        let wait = wait.max(a.kept_floor());
        // A kept connection's first answer is its Metadata answer, whose pace calm refreshes
        // teach (`Cluster::settle`). Without it the pace stands on fresh connections' first
        // answers, which a cold start's burst of TLS handshakes slows: silent past `cold`, a
        // kept connection's broker costs what a blackholed one does.
        if self.kept_answer_hint.is_none() {
            wait.min(a.cold.max(a.kept_floor()))
        } else {
            wait
        }
    }

    /// `delay`, or in a gentle refresh ([`Refresh::is_gentle`]) at least the pace while
    /// connecting and the ceiling once `connected`: in a failover, or while a view's brokers
    /// are still working through a cold start's burst, a live broker looks silent, or slow to
    /// finish an answer, for longer than any window says, and a hedge to another would cost
    /// that queued broker a new connection (and over TLS its handshake).
    fn gentle_delay(&self, a: Adaptive, delay: Duration, connected: bool) -> Duration {
        if self.gentle {
            delay.max(if connected { a.ceiling } else { a.pace })
        } else {
            delay
        }
    }

    /// `delay`, or at least the ceiling while a broker is checking this refresh's
    /// credentials ([`crate::Input::Authenticating`]): a slow verdict is most likely a
    /// refusal the broker holds back on purpose, which every other broker would give too.
    fn checking_credentials_delay(&self, a: Adaptive, delay: Duration) -> Duration {
        if self.attempts.authenticating() > 0 {
            delay.max(a.ceiling)
        } else {
            delay
        }
    }

    /// How long attempt `info`'s live broker normally stays silent after connecting: the
    /// cluster's first answers on kept connections for a kept one (fresh ones' until it has
    /// seen any), on fresh ones otherwise (where the first answer may end a TLS handshake, and a burst of handshakes must not
    /// teach a kept connection to wait for a stopped broker).
    pub(super) fn broker_pace(&self, info: &AttemptInfo) -> Option<Duration> {
        if info.reused_connection {
            self.kept_answer_hint.or(self.first_answer_hint)
        } else {
            self.first_answer_hint
        }
    }

    /// The handshake time that stands for attempt `info`'s round trip: its own, or for a
    /// kept connection (whose "handshake" measures nothing) the cluster's recent one — no
    /// more than a kept connection's first answer takes. That answer is one round trip plus
    /// the broker's work, seen at every refresh, while a long-lived client sees handshakes
    /// mostly at its cold start, when every client's queued.
    pub(super) fn handshake_of(&self, info: &AttemptInfo, connected_at: Instant) -> Duration {
        let measured = connected_at.saturating_since(info.started_at);
        match (info.reused_connection, self.handshake_hint) {
            (true, Some(hint)) => self.kept_answer_hint.map_or(hint, |kept| hint.min(kept)),
            (false, Some(hint)) if measured.is_zero() => hint,
            _ => measured,
        }
    }
}
