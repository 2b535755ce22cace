//! The session's connection table: every connection it dialled and has not yet seen closed,
//! in one of three states:
//!
//! | `attempt` | `kafka` | state |
//! |---|---|---|
//! | `Some` | `Some` | running that attempt's exchange |
//! | `None` | `Some` | draining: a loser finishing its exchange to be kept as a spare, until its deadline |
//! | `None` | `None` | kept idle between refreshes |
//!
//! Its size is bounded by the attempts a refresh runs at once plus the kept and draining
//! connections, so a linear scan is flat in the number of brokers; the table is reserved at
//! construction.

use alloc::vec::Vec;

use super::contract::ConnId;
use crate::brokers::BrokerIndex;
use crate::cluster::Drain;
use crate::kafka::KafkaAttempt;
use crate::refresh::AttemptId;
use crate::time::Instant;

/// One connection the session dialled.
#[derive(Debug)]
pub(super) struct Conn {
    pub(super) id: ConnId,
    pub(super) broker: BrokerIndex,
    /// The attempt running on it; `None` while it is kept between refreshes.
    pub(super) attempt: Option<AttemptId>,
    /// That attempt's conversation (`None` while kept).
    pub(super) kafka: Option<KafkaAttempt>,
    /// Whether requests may be written: the transport is up (and secured, with TLS).
    pub(super) up: bool,
    /// Whether its first request waits for a SCRAM nonce from the host.
    pub(super) waiting_nonce: bool,
    /// Whether its first request waits for an OAUTHBEARER token from the host.
    pub(super) waiting_token: bool,
    /// Whether its attempt's end was fed to the cluster (then it is kept or closed).
    pub(super) ended: bool,
    /// Whether the host reported it closed or failed (then no `Close` is owed).
    pub(super) gone: bool,
    /// While draining: what it is offered as once its Metadata answer comes
    /// ([`crate::Cluster::keep_drained`]), and when it is closed if that answer has not come.
    pub(super) draining: Option<(Drain, Instant)>,
    /// The Metadata version its broker agreed to in its latest exchange: a later attempt on
    /// it may ask for Metadata alone at that version (`KafkaAttempt::resumed_at`).
    pub(super) metadata_version: Option<i16>,
}

impl Conn {
    /// Keeps it idle between refreshes, remembering the Metadata version its exchange agreed.
    pub(super) fn keep(&mut self) {
        if let Some(version) = self.kafka.take().and_then(|k| k.metadata_version()) {
            self.metadata_version = Some(version);
        }
        self.attempt = None;
        self.draining = None;
    }
}

/// See the module documentation.
#[derive(Debug)]
pub(super) struct Conns {
    list: Vec<Conn>,
    next: u64,
}

impl Conns {
    /// A table reserved for `capacity` connections at once.
    pub(super) fn with_capacity(capacity: usize) -> Conns {
        Conns { list: Vec::with_capacity(capacity), next: 1 }
    }

    /// Adds a connection being dialled for `attempt`; returns its fresh id.
    pub(super) fn open(&mut self, broker: BrokerIndex, attempt: AttemptId, kafka: KafkaAttempt) -> &mut Conn {
        let id = ConnId(self.next);
        self.next += 1;
        self.list.push(Conn {
            id,
            broker,
            attempt: Some(attempt),
            kafka: Some(kafka),
            up: false,
            waiting_nonce: false,
            waiting_token: false,
            ended: false,
            gone: false,
            draining: None,
            metadata_version: None,
        });
        let last = self.list.len() - 1;
        &mut self.list[last]
    }

    /// The connection `id`, if the session still knows it.
    pub(super) fn get_mut(&mut self, id: ConnId) -> Option<&mut Conn> {
        self.list.iter_mut().find(|c| c.id == id)
    }

    /// The connection `attempt` runs on.
    pub(super) fn by_attempt(&mut self, attempt: AttemptId) -> Option<&mut Conn> {
        self.list.iter_mut().find(|c| c.attempt == Some(attempt))
    }

    /// The connection kept (idle) to `broker`.
    pub(super) fn kept(&mut self, broker: BrokerIndex) -> Option<&mut Conn> {
        self.list.iter_mut().find(|c| c.attempt.is_none() && c.kafka.is_none() && c.broker == broker)
    }

    /// How many connections are draining (each may become a spare).
    pub(super) fn draining(&self) -> usize {
        self.list.iter().filter(|c| c.draining.is_some()).count()
    }

    /// When the first draining connection runs out of time, if one is draining.
    pub(super) fn next_drain_end(&self) -> Option<Instant> {
        self.list.iter().filter_map(|c| c.draining.map(|(_, until)| until)).min()
    }

    /// Forgets every draining connection whose time ran out by `now`, calling `close` with
    /// those still open.
    pub(super) fn end_drains(&mut self, now: Instant, mut close: impl FnMut(ConnId)) {
        self.list.retain(|c| {
            let over = c.draining.is_some_and(|(_, until)| until <= now);
            if over && !c.gone {
                close(c.id);
            }
            !over
        });
    }

    /// Forgets `id`, returning it.
    pub(super) fn remove(&mut self, id: ConnId) -> Option<Conn> {
        let i = self.list.iter().position(|c| c.id == id)?;
        Some(self.list.swap_remove(i))
    }

    /// Forgets every connection whose attempt ended and that nobody kept, calling `close` with
    /// those still open (the host reported the others closed).
    pub(super) fn sweep(&mut self, mut close: impl FnMut(ConnId)) {
        self.list.retain(|c| {
            let done = c.ended && c.attempt.is_some();
            if done && !c.gone {
                close(c.id);
            }
            !done
        });
    }

    /// Every connection, for accessors.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Conn> {
        self.list.iter()
    }
}
