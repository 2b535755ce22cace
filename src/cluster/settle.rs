//! What a [`Cluster`] learns when a refresh finishes (broker health, the windows of pace
//! the adaptive stagger reads, whether its brokers answered without a queue (calm), the
//! hedge budget, whether to rebootstrap), and what of it the next refresh is told
//! ([`RefreshContext`]).

use super::{Cluster, ClusterEvent, RefreshCause};
use crate::config::{RefreshConfig, Stagger};
use crate::estimator::Estimator;
use crate::refresh::{AttemptState, Refresh, RefreshContext};

impl Cluster {
    /// Learns from a finished refresh: broker health, whether the cluster is calm, hedge
    /// budget, rebootstrap.
    pub(super) fn settle(&mut self, done: &Refresh) {
        let now = self.now;
        let winner_start = done.attempts().find(|(_, a)| a.state == AttemptState::Won).map(|(_, a)| a.started_at);
        let mut discovered_tried = 0u32;
        let mut discovered_failed = 0u32;
        // What a Metadata request on an authenticated connection takes, as a calm refresh
        // saw it: a kept connection's answer, or a fresh plaintext winner's from its first
        // answer (ApiVersions) on (with SASL's round trips: more, never less). Not a fresh
        // TLS winner's: its first answer ends the handshake, and the SASL exchange after it
        // queues behind a cold start's other handshakes. A refresh that met a queue (a
        // storm, a cold start's burst) would teach a pace no calm refresh needs.
        let calm = !done.saw_queue();
        for (_, a) in done.attempts() {
            if let (AttemptState::Won, Some(end)) = (a.state, a.ended_at) {
                self.response_times.observe(end.saturating_since(a.started_at));
                if let (false, false, Some(first), true) = (a.reused_connection, a.tls, a.first_frame_at, calm) {
                    self.kept_answer_times.observe(end.saturating_since(first));
                }
            }
            match (a.reused_connection, a.connected_at, a.first_frame_at) {
                (false, Some(up), first) => {
                    self.handshake_times.observe(up.saturating_since(a.started_at));
                    if let Some(first) = first {
                        self.first_answer_times.observe(first.saturating_since(up));
                    }
                }
                // A kept connection is asked for Metadata alone: its first answer is that.
                (true, Some(up), Some(first)) if calm => self.kept_answer_times.observe(first.saturating_since(up)),
                _ => {}
            }
            let discovered = self.book.get(a.broker).is_some_and(|e| e.is_discovered());
            discovered_tried += discovered as u32;
            let slow_loser = a.state == AttemptState::Cancelled && winner_start.is_some_and(|w| a.started_at < w);
            if a.state == AttemptState::Failed || slow_loser {
                self.book.record_failure(a.broker, now);
                discovered_failed += discovered as u32;
            }
        }
        let stats = done.stats();
        let budget = &self.config.hedge_budget;
        let cap = budget.burst as u64 * 1000;
        let earned = (budget.ratio * 1000.0) as u64;
        self.hedge_millitokens = (self.hedge_millitokens.saturating_sub(stats.hedges as u64 * 1000) + earned).min(cap);
        // The rule is documented on `ClusterEvent::Rebootstrapped`.
        let succeeded = winner_start.is_some();
        // Calm needs the pace of Metadata on a kept connection too: without it (after a TLS
        // bootstrap, whose fresh winner teaches none) the fast policy suspects a kept
        // connection at `cold`, while the fleet that bootstrapped with this client is still
        // handshaking with the same brokers.
        self.calm = succeeded && !done.saw_queue() && !self.kept_answer_times.is_empty();
        let every_discovered_failed = discovered_tried > 0 && discovered_failed == discovered_tried;
        let required = core::mem::take(&mut self.rebootstrap_required);
        if !succeeded && (every_discovered_failed || required) && self.config.rebootstrap && self.book.has_discovered()
        {
            // Connections kept to discovered brokers go with the view; one to a seed only
            // (which the next refresh asks anyway) stays.
            self.release_where(|book, kept| book.get(kept).is_some_and(|e| e.is_discovered()));
            self.book.rebootstrap();
            self.counters.rebootstraps += 1;
            self.events.push_back(ClusterEvent::Rebootstrapped);
        }
        self.next_periodic = now.saturating_add(self.config.refresh_interval);
    }

    /// What the refresh about to run with `config` for `cause` is told: the windows' hints
    /// (for an adaptive stagger), the hedge tokens, and whether it runs gently (until calm;
    /// a timeout is one client's evidence of a hung broker, so fast, calm or not).
    pub(super) fn context(&self, config: &RefreshConfig, cause: RefreshCause) -> RefreshContext {
        let q = self.config.window_quantile;
        let adaptive = matches!(config.fanout.stagger, Stagger::Adaptive(_));
        let hint = |window: &Estimator| if adaptive { window.quantile(q) } else { None };
        let gentle = adaptive && self.config.gentle_until_calm && !self.calm && cause != RefreshCause::RequestTimedOut;
        RefreshContext {
            epoch: self.epoch,
            hedge_tokens: self.hedge_tokens(),
            recent_response_time: hint(&self.response_times),
            handshake_hint: hint(&self.handshake_times),
            first_answer_hint: hint(&self.first_answer_times),
            kept_answer_hint: hint(&self.kept_answer_times),
            kept_answer_typical: if adaptive { self.kept_answer_times.quantile(0.5) } else { None },
            cause,
            gentle,
            fit_candidates: true,
        }
    }
}
