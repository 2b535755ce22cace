//! The connections a [`Cluster`] keeps between refreshes: the winner's, and spares taken
//! from losers; what the adapter reports of them, what the view says of them, and their
//! release. Keeping a winner and reusing a kept connection are decided where refreshes start
//! and end (`start`, `pump`, `settle`).

use alloc::collections::VecDeque;
use alloc::string::String;

use smallvec::SmallVec;

use super::{Cluster, ClusterEvent, RefreshCause};
use crate::brokers::{BrokerBook, BrokerIndex};
use crate::client_stats::ClientStats;
use crate::refresh::{AttemptState, Refresh};

/// Kept connections held without allocating: the winner's and
/// [`ClusterConfig::MAX_SPARE_CONNECTIONS`](crate::ClusterConfig::MAX_SPARE_CONNECTIONS) spares.
pub(super) const KEPT_INLINE: usize = 4;

impl Cluster {
    /// The broker closed the kept connection to `broker` cleanly (as brokers close idle
    /// connections): it is no longer kept nor preferred.
    pub fn connection_closed(&mut self, broker: BrokerIndex) {
        self.book.set_connected(broker, false);
        self.kept.retain(|k| *k != broker);
    }

    /// The broker reset the (kept) connection to `broker`: as
    /// [`Cluster::connection_closed`], and the next plain [`Cluster::request_refresh`] is one
    /// because of it ([`RefreshCause::ConnectionLost`](super::RefreshCause::ConnectionLost), naming `broker`).
    pub fn connection_lost(&mut self, broker: BrokerIndex) {
        self.connection_closed(broker);
        self.lost = Some(broker);
    }

    /// The broker whose connection the latest winner left kept for the next refresh, if any.
    pub fn kept(&self) -> Option<BrokerIndex> {
        self.kept.first().copied()
    }

    /// Every broker a kept connection goes to: the latest winner's first, then the spares.
    pub fn kept_brokers(&self) -> &[BrokerIndex] {
        &self.kept
    }

    /// Whether a connection to `broker` that just lost a race would be kept as a spare
    /// once its exchange ends: no refresh is running, there is room
    /// ([`ClusterConfig::spare_connections`](crate::ClusterConfig::spare_connections)), the
    /// metadata lists the broker, none is kept to it yet, and it has not failed recently (a
    /// slow loser has) unless it was the client's first choice in a bootstrap
    /// (`first_choice_of_bootstrap`). A host that may keep it lets the exchange run to its
    /// end ([`Cluster::keep_spare`]) instead of closing it.
    pub fn wants_spare(&self, broker: BrokerIndex) -> bool {
        self.spare_room() > 0
            && !self.kept.contains(&broker)
            && self.book.get(broker).is_some_and(|e| !e.connected && e.is_discovered())
            && (!self.book.recently_failed(broker, self.now) || self.bootstrap_first_choice(broker))
    }

    /// Whether `broker` was the client's first choice in the last refresh, a bootstrap that
    /// another broker won (`first_choice_of_bootstrap`).
    fn bootstrap_first_choice(&self, broker: BrokerIndex) -> bool {
        self.last.as_ref().is_some_and(|r| first_choice_of_bootstrap(r, broker))
    }

    /// How many more connections may be kept as spares now: none while a refresh runs.
    pub fn spare_room(&self) -> usize {
        if self.current.is_some() {
            return 0;
        }
        (1 + self.config.spare_connections as usize).saturating_sub(self.kept.len())
    }

    /// Offers a lost attempt's connection to `broker`, its exchange over (authenticated, the
    /// Metadata answer read): `true` when it is kept as a spare ([`Cluster::wants_spare`]
    /// still holds), which the next refresh reuses as it would the winner's; `false` when the
    /// host should close it. The broker answered, so its failure record is cleared, as a
    /// winner's is.
    pub fn keep_spare(&mut self, broker: BrokerIndex) -> bool {
        if !self.wants_spare(broker) {
            return false;
        }
        self.book.record_success(broker, self.now);
        self.book.set_connected(broker, true);
        if self.bootstrap_first_choice(broker) {
            self.kept.insert(0, broker);
        } else {
            self.kept.push(broker);
        }
        self.counters.spares_kept += 1;
        true
    }

    /// What this view has cost so far: refreshes, attempts, connections opened (attempts
    /// whose connection came up, a kept one aside), reused and kept as spares, rebootstraps,
    /// and the winner's kept connection's address (the one allocation: call it when a caller
    /// asks).
    pub fn stats(&self) -> ClientStats {
        let kept = self.kept().and_then(|b| self.book.get(b)).map(|e| String::from(&*e.address));
        ClientStats { kept, ..self.counters.clone() }
    }

    /// Asks the adapter to close every kept connection whose broker `drop` names.
    pub(super) fn release_where(&mut self, mut drop: impl FnMut(&BrokerBook, BrokerIndex) -> bool) {
        for i in (0..self.kept.len()).rev() {
            if drop(&self.book, self.kept[i]) {
                self.release_at(i);
            }
        }
    }

    /// Asks the adapter to close the `i`th kept connection.
    pub(super) fn release_at(&mut self, i: usize) {
        release(&mut self.kept, &mut self.book, &mut self.events, i);
    }
}

/// Whether `broker` was tried before the winner in `refresh`, a bootstrap: the broker the
/// client chose first, outrun only because a cold start queued its handshake behind every
/// other client's. Kept, it leads again, so clients stay spread over the brokers as they
/// chose rather than herded onto whichever broker's queue was shortest.
fn first_choice_of_bootstrap(refresh: &Refresh, broker: BrokerIndex) -> bool {
    let won = refresh.attempts().find(|(_, a)| a.state == AttemptState::Won).map(|(_, a)| a.started_at);
    refresh.cause() == RefreshCause::Bootstrap
        && won.is_some_and(|w| refresh.attempts().any(|(_, a)| a.broker == broker && a.started_at < w))
}

/// Asks the adapter to close the `i`th of the `kept` connections; on fields, for a caller
/// that holds the running refresh.
pub(super) fn release(
    kept: &mut SmallVec<[BrokerIndex; KEPT_INLINE]>,
    book: &mut BrokerBook,
    events: &mut VecDeque<ClusterEvent>,
    i: usize,
) {
    let broker = kept.remove(i);
    book.set_connected(broker, false);
    events.push_back(ClusterEvent::Release { broker });
}
