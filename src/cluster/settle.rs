//! What a [`Cluster`] learns when a refresh finishes: broker health, the windows of pace
//! the adaptive stagger reads, whether its brokers answered without a queue (calm), the
//! hedge budget, and whether to rebootstrap.

use super::{Cluster, ClusterEvent};
use crate::refresh::{AttemptState, Refresh};

impl Cluster {
    /// Learns from a finished refresh: broker health, whether the cluster is calm, hedge
    /// budget, rebootstrap.
    pub(super) fn settle(&mut self, done: &Refresh) {
        let now = self.now;
        let winner_start = done.attempts().find(|(_, a)| a.state == AttemptState::Won).map(|(_, a)| a.started_at);
        let mut discovered_tried = 0u32;
        let mut discovered_failed = 0u32;
        for (_, a) in done.attempts() {
            if let (AttemptState::Won, Some(end)) = (a.state, a.ended_at) {
                self.response_times.observe(end.saturating_since(a.started_at));
            }
            match (a.reused_connection, a.connected_at, a.first_frame_at) {
                (false, Some(up), first) => {
                    self.handshake_times.observe(up.saturating_since(a.started_at));
                    if let Some(first) = first {
                        self.first_answer_times.observe(first.saturating_since(up));
                    }
                }
                (true, Some(up), Some(first)) => self.kept_answer_times.observe(first.saturating_since(up)),
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
        self.calm = succeeded && !done.saw_queue();
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
}
