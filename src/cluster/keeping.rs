//! The connection a [`Cluster`] keeps between refreshes: what the adapter reports of it,
//! what the view says of it, and its release. Keeping a winner and reusing it are decided
//! where refreshes start and end (`start`, `pump`, `settle`).

use alloc::string::String;

use super::{Cluster, ClusterEvent};
use crate::brokers::BrokerIndex;
use crate::client_stats::ClientStats;

impl Cluster {
    /// The broker closed the kept connection to `broker` cleanly (as brokers close idle
    /// connections): it is no longer kept nor preferred.
    pub fn connection_closed(&mut self, broker: BrokerIndex) {
        self.book.set_connected(broker, false);
        if self.kept == Some(broker) {
            self.kept = None;
        }
    }

    /// The broker reset the (kept) connection to `broker`: as
    /// [`Cluster::connection_closed`], and the next plain [`Cluster::request_refresh`] is one
    /// because of it ([`RefreshCause::ConnectionLost`](super::RefreshCause::ConnectionLost), naming `broker`).
    pub fn connection_lost(&mut self, broker: BrokerIndex) {
        self.connection_closed(broker);
        self.lost = Some(broker);
    }

    /// The broker whose connection the adapter keeps for the next refresh, if any.
    pub fn kept(&self) -> Option<BrokerIndex> {
        self.kept
    }

    /// What this view has cost so far: refreshes, attempts, connections opened (attempts
    /// whose connection came up, a kept one aside) and reused, rebootstraps, and the kept
    /// connection's address (the one allocation: call it when a caller asks).
    pub fn stats(&self) -> ClientStats {
        let kept = self.kept.and_then(|b| self.book.get(b)).map(|e| String::from(&*e.address));
        ClientStats { kept, ..self.counters.clone() }
    }

    /// Asks the adapter to close the connection kept to `broker`.
    pub(super) fn release(&mut self, broker: BrokerIndex) {
        self.book.set_connected(broker, false);
        self.kept = None;
        self.events.push_back(ClusterEvent::Release { broker });
    }
}
