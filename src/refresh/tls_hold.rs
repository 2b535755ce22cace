//! The TLS burst hold (`fanout.tuning.tls_burst_hold`, a long-lived client's default): once
//! two fresh connections sit silent in their TLS handshakes, a queue behind a burst of
//! clients starting together is likelier than two stopped brokers, so the leader's stagger
//! delay is at least the adaptive `ceiling` (`stagger.rs`) and a spread tick's partner waits
//! (`fanout.rs`), once per refresh. Measured in `docs/performance/gentleness.md`.

use super::Refresh;

impl Refresh {
    /// Whether attempt `n` is one of a TLS burst's hold (`fanout.tuning.tls_burst_hold`):
    /// it and another fresh connection sit connected and silent in their TLS handshakes, and
    /// no tick of this refresh has waited such a hold out yet. Its stagger delay is then at
    /// least the adaptive `ceiling`.
    pub(super) fn tls_burst_held(&self, n: u32) -> bool {
        self.tls_handshake_due(n, false) && self.tls_handshakes_due(false) >= 2
    }

    /// Whether two attempts in flight hold the fan-out as a TLS burst: a spread tick's
    /// partner is then not started. Over a TLS listener an attempt still connecting counts
    /// as a handshake to come: a client busy with a burst of handshakes of its own may hear
    /// of the tick's connect only after the partner is due.
    pub(super) fn tls_burst_holds(&self) -> bool {
        self.tls_handshakes_due(true) >= 2
    }

    /// How many attempts in flight hold for a TLS burst ([`Refresh::tls_handshake_due`]);
    /// none while the hold is off or spent. (A fixed stagger has no ceiling to hold for: only
    /// a spread tick's partner waits.)
    fn tls_handshakes_due(&self, connecting: bool) -> usize {
        if !self.config.fanout.tuning.tls_burst_hold || self.ticks.tls_hold_spent {
            return 0;
        }
        self.attempts.in_flight_iter().filter(|&m| self.tls_handshake_due(m, connecting)).count()
    }

    /// Whether attempt `n` counts towards a TLS burst's hold: its fresh connection is up and
    /// its broker has not yet finished the TLS handshake (a kept connection has none to
    /// finish), or, with `connecting` over a TLS listener, its connection (or the lookup
    /// before it) is still to come.
    fn tls_handshake_due(&self, n: u32, connecting: bool) -> bool {
        let info = self.attempts.info(n);
        match info.connected_at {
            Some(_) => info.tls && !info.reused_connection && info.first_frame_at.is_none(),
            None => connecting && self.ticks.tls_seen,
        }
    }
}
