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
use crate::refresh::{AttemptId, CancelReason};

/// What a cancelled attempt's draining connection is offered as once its exchange ends
/// ([`Cluster::drain_on_cancel`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Drain {
    /// A loser's connection, kept as a spare ([`Cluster::keep_spare`]).
    Spare,
    /// A cold start's first choice, or the home's connection outrun in a later refresh,
    /// kept as the client's home ([`Cluster::keep_first_choice`]).
    FirstChoice,
}

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

    /// The broker whose kept connection the next refresh asks first, if any: the latest
    /// winner's, or the client's home ([`Cluster::keep_first_choice`]) while it is kept.
    pub fn kept(&self) -> Option<BrokerIndex> {
        self.lead()
    }

    /// Every broker a kept connection goes to: the latest winner's (or the home's) first,
    /// then the spares.
    pub fn kept_brokers(&self) -> &[BrokerIndex] {
        &self.kept
    }

    /// Whether a connection to `broker` that just lost a race would be kept as a spare
    /// once its exchange ends: no refresh is running, there is room
    /// ([`ClusterConfig::spare_connections`](crate::ClusterConfig::spare_connections)), the
    /// metadata lists the broker, none is kept to it yet, and it has not failed recently (a
    /// slow loser has). A host that may keep it lets the exchange run to its end
    /// ([`Cluster::keep_spare`]) instead of closing it.
    pub fn wants_spare(&self, broker: BrokerIndex) -> bool {
        self.spare_room() > 0 && !self.book.recently_failed(broker, self.now) && self.may_keep(broker)
    }

    /// Whether the host lets a cancelled attempt's connection finish its exchange (for at most
    /// `attempt_timeout`) rather than close it, and what to offer it as when its Metadata
    /// answer comes ([`Cluster::keep_drained`]). The host asks only for a connection still
    /// open with its exchange unfinished, says whether all it still owes is the Metadata
    /// answer, and how many connections it is draining already. Two losers drain:
    ///
    /// | loser | drains when | kept as |
    /// |---|---|---|
    /// | a bootstrap's first attempt, its transport up, outrun (`Lost`, `Overtaken`) | fewer than `spare_connections` drain | [`Drain::FirstChoice`] |
    /// | an attempt on the home's kept connection, outrun | fewer than `spare_connections` drain | [`Drain::FirstChoice`] |
    /// | any other `Lost` attempt owing only its Metadata answer | fewer drain than [`Cluster::spare_room`] and [`Cluster::wants_spare`] | [`Drain::Spare`] |
    ///
    /// At a cold start a silent first choice is most likely its handshake queued behind every
    /// other client's: the broker pays for the handshake either way, and finishing it keeps
    /// the client where it chose ([`Cluster::keep_first_choice`]). While the fleet's
    /// handshakes still queue, a later refresh on the home may be outrun the same way; its
    /// answer brings the client back home, so the fleet stays spread as its seeds were
    /// rather than drifting onto whichever broker answered fastest. A home that is hung
    /// never answers, and its connection is closed when the drain's time runs out.
    pub fn drain_on_cancel(
        &self,
        attempt: AttemptId,
        reason: CancelReason,
        owes_metadata: bool,
        draining: usize,
    ) -> Option<Drain> {
        let epoch = attempt.epoch();
        let refresh = self.current().or(self.last_refresh()).filter(|r| r.epoch() == epoch)?;
        let info = refresh.attempt(attempt)?;
        let first = refresh.attempts().next().is_some_and(|(a, _)| a == attempt);
        let outrun = matches!(reason, CancelReason::Lost | CancelReason::Overtaken);
        let first_choice = refresh.cause() == RefreshCause::Bootstrap && first && info.connected_at.is_some();
        let home = info.reused_connection && self.home == Some(info.broker);
        if (first_choice || home) && outrun {
            return (draining < self.config.spare_connections as usize).then_some(Drain::FirstChoice);
        }
        let spare = reason == CancelReason::Lost
            && owes_metadata
            && draining < self.spare_room()
            && self.wants_spare(info.broker);
        spare.then_some(Drain::Spare)
    }

    /// A draining connection to `broker` read its Metadata answer: offers it as `drain` says
    /// ([`Cluster::keep_first_choice`] or [`Cluster::keep_spare`]). `false`: close it.
    pub fn keep_drained(&mut self, broker: BrokerIndex, drain: Drain) -> bool {
        match drain {
            Drain::FirstChoice => self.keep_first_choice(broker),
            Drain::Spare => self.keep_spare(broker),
        }
    }

    /// Whether `broker` is one the metadata lists and no connection is kept to yet.
    fn may_keep(&self, broker: BrokerIndex) -> bool {
        !self.kept.contains(&broker) && self.book.get(broker).is_some_and(|e| !e.connected && e.is_discovered())
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
    /// host should close it.
    pub fn keep_spare(&mut self, broker: BrokerIndex) -> bool {
        if !self.wants_spare(broker) {
            return false;
        }
        self.keep(broker);
        self.kept.push(broker);
        true
    }

    /// Offers the connection to `broker` that was this client's first choice at its cold
    /// start (a bootstrap), or its home's in a later refresh, outrun while its broker stayed
    /// silent, its exchange now over: `true` when it is kept. It then becomes (again) the
    /// client's home: while a connection to it is kept, every refresh asks it first,
    /// whichever broker won since. At a cold start every
    /// client's handshake may queue behind every other's; staying where each chose keeps the
    /// clients spread as they chose, rather than herded onto whichever broker's queue was
    /// shortest. Its answer clears the failure the outrun recorded, and a refresh running
    /// meanwhile does not stop it (that refresh's winner joins it, and it still leads). With
    /// no room left, it takes the place of the newest plain spare (released), never of the
    /// winner's connection; with `spare_connections` 0 it is not kept.
    pub fn keep_first_choice(&mut self, broker: BrokerIndex) -> bool {
        let room = 1 + self.config.spare_connections as usize;
        if self.config.spare_connections == 0 || !self.may_keep(broker) {
            return false;
        }
        while self.kept.len() >= room {
            self.release_at(self.kept.len() - 1);
        }
        self.keep(broker);
        self.kept.insert(0, broker);
        self.home = Some(broker);
        true
    }

    /// Marks a drained connection to `broker` kept: the broker answered.
    fn keep(&mut self, broker: BrokerIndex) {
        self.book.record_success(broker, self.now);
        self.book.set_connected(broker, true);
        self.counters.spares_kept += 1;
    }

    /// The kept connection the next refresh asks first: the home's while it is kept
    /// ([`Cluster::keep_first_choice`]), else the latest winner's.
    pub(super) fn lead(&self) -> Option<BrokerIndex> {
        self.home.filter(|h| self.kept.contains(h)).or(self.kept.first().copied())
    }

    /// What this view has cost so far: refreshes, attempts, connections opened (attempts
    /// whose connection came up, a kept one aside), reused and kept as spares, rebootstraps,
    /// and the winner's kept connection's address (the one allocation: call it when a caller
    /// asks).
    pub fn stats(&self) -> ClientStats {
        let kept = self.kept().and_then(|b| self.book.get(b)).map(|e| String::from(&*e.address));
        ClientStats { kept, kept_connections: self.kept.len() as u32, ..self.counters.clone() }
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

/// Keeps the winner's connection to `broker` first; on fields, for a caller that holds the
/// running refresh. Of those kept before, one to the same broker or to a broker the metadata
/// does not list (a seed's name) goes; the newest others stay as spares while there is room.
/// The first winner is home until a first choice kept late takes its place
/// ([`Cluster::keep_first_choice`]).
pub(super) fn keep_winner(
    kept: &mut SmallVec<[BrokerIndex; KEPT_INLINE]>,
    book: &mut BrokerBook,
    events: &mut VecDeque<ClusterEvent>,
    home: &mut Option<BrokerIndex>,
    spares: usize,
    broker: BrokerIndex,
) {
    while let Some(i) = kept.iter().position(|&k| k == broker || !book.get(k).is_some_and(|e| e.is_discovered())) {
        release(kept, book, events, i);
    }
    while kept.len() > spares {
        release(kept, book, events, kept.len() - 1);
    }
    book.set_connected(broker, true);
    kept.insert(0, broker);
    home.get_or_insert(broker);
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
