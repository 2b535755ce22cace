//! The whole client conversation as one sans-IO state machine: bytes and time in, bytes to
//! send and connections to open out.
//!
//! A [`Session`] owns a [`Cluster`] (the policy: which broker, when, which connection to
//! keep), one [`KafkaAttempt`](crate::kafka::KafkaAttempt) per attempt (ApiVersions, SASL,
//! Metadata) and the table of connections it dialled. A host — a Rust adapter, the browser,
//! a Go or Python host over a C ABI — only moves bytes: it carries out [`Action`]s (dial,
//! send, close, resolve, fetch a nonce or a token) and reports [`Event`]s (connected,
//! secured, bytes received, closed, failed, resolved, the nonce, the token) and time. None
//! of them re-implements the glue between the policy and the wire.
//!
//! # The run loop
//!
//! 1. **Build** with [`Session::new`] and ask with [`Session::request_refresh`].
//! 2. **Drain** [`Session::poll_action`] until `None` and carry out every action, in order.
//! 3. **Wait** for I/O or until [`Session::poll_timeout`].
//! 4. **Feed** what happened with [`Session::handle_event`] or the time with
//!    [`Session::handle_timeout`], and go back to 2.
//!
//! The invariant: after every `handle_*` or `request_*` call, drain the actions before
//! waiting. Every refresh asked for ends in exactly one [`Action::Refreshed`] or
//! [`Action::RefreshFailed`] with its epoch, after every `Close` of its losers; every
//! connection dialled is closed by an [`Action::Close`], reported closed by the host, or kept
//! for the next refresh (which then sends on it with no `Dial`).
//!
//! Below, a one-shot refresh against a fake broker whose answers `kafka-protocol` encodes.
//!
//! ```
//! use bytes::{Bytes, BytesMut};
//! use kafka_protocol::messages::api_versions_response::ApiVersion;
//! use kafka_protocol::messages::metadata_response::MetadataResponseBroker;
//! use kafka_protocol::messages::*;
//! use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
//! use stagger::session::{Action, Event, Session, SessionConfig};
//! use stagger::{BrokerBook, Instant};
//!
//! /// The fake broker: the answer to one request frame.
//! fn answer(frame: &Bytes) -> Vec<u8> {
//!     let mut body = frame.slice(4..);
//!     let key = ApiKey::try_from(i16::from_be_bytes([body[0], body[1]])).unwrap();
//!     let version = i16::from_be_bytes([body[2], body[3]]);
//!     let header = RequestHeader::decode(&mut body, key.request_header_version(version)).unwrap();
//!     let mut out = BytesMut::new();
//!     let response_header = ResponseHeader::default().with_correlation_id(header.correlation_id);
//!     response_header.encode(&mut out, key.response_header_version(version)).unwrap();
//!     match key {
//!         ApiKey::ApiVersions => ApiVersionsResponse::default()
//!             .with_api_keys(vec![ApiVersion::default().with_api_key(ApiKey::Metadata as i16).with_max_version(12)])
//!             .encode(&mut out, version),
//!         _ => MetadataResponse::default()
//!             .with_brokers(vec![MetadataResponseBroker::default()
//!                 .with_node_id(BrokerId(1))
//!                 .with_host(StrBytes::from_static_str("10.0.0.1"))
//!                 .with_port(9092)])
//!             .encode(&mut out, version),
//!     }
//!     .unwrap();
//!     let mut framed = (out.len() as u32).to_be_bytes().to_vec();
//!     framed.extend_from_slice(&out);
//!     framed
//! }
//!
//! let config = SessionConfig { one_shot: true, ..SessionConfig::default() };
//! let book = BrokerBook::new(["10.0.0.1:9092"])?;
//! let mut now = Instant::ZERO;
//! let mut session = Session::new(config, book, now)?;
//! let epoch = session.request_refresh(now);
//! let mut inbox = Vec::new(); // events the fake network will deliver
//! let (mut dials, mut closes) = (0, 0);
//! let refreshed = 'run: loop {
//!     // 2. Drain the actions and carry each one out.
//!     while let Some(action) = session.poll_action() {
//!         match action {
//!             Action::Dial { conn, .. } => {
//!                 dials += 1;
//!                 inbox.push((conn, None)); // the broker accepts at once
//!             }
//!             Action::Send { conn, bytes } => inbox.push((conn, Some(answer(&bytes)))),
//!             Action::Close { .. } => closes += 1,
//!             Action::Refreshed { epoch: done, .. } => break 'run done,
//!             Action::RefreshFailed { error, .. } => return Err(error.into()),
//!             other => unreachable!("no names, SASL or rebootstrap here: {other:?}"),
//!         }
//!     }
//!     // 3 and 4. Feed what the network did, or the time when nothing did.
//!     now = now.saturating_add(std::time::Duration::from_millis(1));
//!     match inbox.pop() {
//!         Some((conn, None)) => session.handle_event(now, Event::Connected { conn }),
//!         Some((conn, Some(bytes))) => session.handle_event(now, Event::Received { conn, bytes: &bytes }),
//!         None => session.handle_timeout(now),
//!     }
//! };
//! assert_eq!(refreshed, epoch);
//! assert_eq!(session.metadata().unwrap().brokers[0].host, "10.0.0.1");
//! // One connection, closed because a one-shot session keeps none; nothing left to do.
//! assert_eq!((dials, closes), (1, 1));
//! assert_eq!(session.poll_timeout(), None);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec::Vec;

use crate::brokers::BrokerBook;
use crate::client_stats::ClientStats;
use crate::cluster::{Cluster, RefreshCause};
use crate::error::ConfigError;
use crate::metadata::Metadata;
use crate::refresh::Refresh;
use crate::time::Instant;
use crate::BrokerIndex;

mod callers;
mod conns;
mod contract;
mod drive;
mod notes;
mod observe;
mod published;

pub use callers::{Answer, Callers, ClientRequest};
pub use contract::{Action, AttemptNote, CloseKind, ConnId, Event, SessionConfig};
pub use published::Published;

/// One client's whole conversation with a Kafka cluster (see the module documentation).
///
/// Inputs are `handle_*` and `request_*` calls; outputs are `#[must_use]` `poll_*` calls.
/// After every input, drain [`Session::poll_action`] until `None`, then wait until
/// [`Session::poll_timeout`] or the next I/O. Inputs about a connection the session does not
/// know (never dialled, closed, or a duplicate) are ignored and counted
/// ([`Session::ignored_events`]), never a panic; time that goes backwards is clamped.
#[derive(Debug)]
pub struct Session {
    cluster: Cluster,
    config: SessionConfig,
    conns: conns::Conns,
    actions: VecDeque<Action>,
    /// Connections whose exchange may have bytes to send or inputs to feed.
    dirty: Vec<contract::ConnId>,
    now: Instant,
    ignored: u64,
    notes: notes::Notes,
    /// Live events, with [`SessionConfig::observe`].
    events: VecDeque<crate::report::Event>,
    /// SCRAM's keys derived from the password for the brokers' salt, shared by every
    /// connection ([`crate::kafka::sasl::ScramKeys`]): PBKDF2 runs once per session, not
    /// once per connection.
    scram_keys: Option<Arc<crate::kafka::sasl::ScramKeys>>,
}

impl Session {
    /// A session over `book` (the seeds); no refresh runs until requested (or, unless
    /// [`SessionConfig::one_shot`], the periodic refresh is due).
    ///
    /// The seeds' host names and the exchange settings are checked here
    /// ([`crate::kafka::validate`]), before any broker is contacted.
    pub fn new(mut config: SessionConfig, book: BrokerBook, now: Instant) -> Result<Session, ConfigError> {
        crate::kafka::validate::seeds(&book)?;
        crate::kafka::validate::exchange(&config.exchange)?;
        if config.fresh_tokens && config.exchange.sasl.is_none() {
            // A token source and no SASL: OAUTHBEARER, each connection's token asked for.
            let token = crate::kafka::sasl::Secret::new(alloc::string::String::new());
            config.exchange.sasl = Some(crate::kafka::sasl::Sasl::OAuthBearer { token });
        }
        // The attempts of one refresh at once (no more than the brokers: "all at once" is
        // `u32::MAX`), the kept connections, and a loser being closed; more grows the table.
        let in_flight = config.cluster.refresh.fanout.max_in_flight as usize;
        let capacity = in_flight.min(book.len()) + 2 + config.cluster.spare_connections as usize;
        // A one-shot refresh runs alone (an operator's probe, a CLI), not as one of a fleet
        // starting together: it keeps its speed past stopped brokers.
        config.cluster.gentle_until_calm &= !config.one_shot;
        let mut cluster = Cluster::new(config.cluster, book, now)?;
        if let Some(recorder) = &config.recorder {
            cluster.record_traces(recorder.clone());
        }
        Ok(Session {
            cluster,
            config,
            conns: conns::Conns::with_capacity(capacity),
            actions: VecDeque::with_capacity(2 * capacity + 4),
            dirty: Vec::with_capacity(capacity),
            now,
            ignored: 0,
            notes: notes::Notes::default(),
            events: VecDeque::new(),
            scram_keys: None,
        })
    }

    /// Asks for fresh metadata (joining a running refresh); returns the epoch that
    /// [`Action::Refreshed`] or [`Action::RefreshFailed`] will carry.
    pub fn request_refresh(&mut self, now: Instant) -> u32 {
        self.request_refresh_because(now, RefreshCause::Requested, None)
    }

    /// As [`Session::request_refresh`], saying why and which broker the trouble came from
    /// ([`Cluster::request_refresh_because`]): the policy reads both.
    pub fn request_refresh_because(&mut self, now: Instant, cause: RefreshCause, broker: Option<BrokerIndex>) -> u32 {
        self.advance(now);
        let epoch = self.cluster.request_refresh_because(self.now, cause, broker);
        self.drive();
        epoch
    }

    /// Feeds what the host saw happen. An event about a connection the session does not
    /// know, or one it did not ask for (a nonce nobody waits for), is counted and ignored.
    pub fn handle_event(&mut self, now: Instant, event: contract::Event<'_>) {
        self.advance(now);
        if !self.apply(event) {
            self.ignored = self.ignored.saturating_add(1);
        }
        self.tick();
    }

    /// Feeds the time: fires what is due (stagger, attempt timeouts, the deadline, the
    /// periodic refresh).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
        self.tick();
    }

    /// The next thing for the host to do, in order; `None` when there is nothing.
    #[must_use]
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// When to call [`Session::handle_timeout`] next; `None` when nothing is due ever (a
    /// one-shot session that has answered).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.config.one_shot && self.cluster.current().is_none() {
            return None;
        }
        match (self.cluster.poll_timeout(), self.conns.next_drain_end()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The latest good metadata, if a refresh has succeeded.
    pub fn metadata(&self) -> Option<&Metadata> {
        self.cluster.metadata()
    }

    /// What the session has cost: refreshes, attempts, connections opened and reused.
    pub fn stats(&self) -> ClientStats {
        self.cluster.stats()
    }

    /// The refresh that finished last, with every attempt's record (when it started,
    /// connected, answered and ended, and how): the reports a host shows.
    pub fn last_refresh(&self) -> Option<&Refresh> {
        self.cluster.last_refresh()
    }

    /// What the session saw of every attempt of the refresh that finished last
    /// ([`Session::last_refresh`]), in start order: each one's error, why it was cancelled,
    /// the Metadata version it used.
    pub fn attempt_notes(&self) -> &[AttemptNote] {
        self.notes.finished()
    }

    /// The policy's view (book, running refresh, estimators), for hosts that show more.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// How many host events named a connection the session did not know, or came unasked.
    pub fn ignored_events(&self) -> u64 {
        self.ignored
    }

    /// The connections the session holds open (dialling, running an attempt, or kept).
    pub fn open_connections(&self) -> impl Iterator<Item = ConnId> + '_ {
        self.conns.iter().map(|c| c.id)
    }

    /// The connection the latest winner left kept for the next refresh, if any.
    pub fn kept_connection(&self) -> Option<ConnId> {
        let broker = self.cluster.kept()?;
        self.conns.iter().find(|c| c.attempt.is_none() && c.kafka.is_none() && c.broker == broker).map(|c| c.id)
    }

    /// Every connection kept idle for later refreshes: the winner's and the spares.
    pub fn kept_connections(&self) -> impl Iterator<Item = ConnId> + '_ {
        self.conns.iter().filter(|c| c.attempt.is_none() && c.kafka.is_none()).map(|c| c.id)
    }

    /// Received bytes held until their frame is complete, over every connection: bounded
    /// by the attempts at once times the maximum frame size (plus the last piece received).
    pub fn buffered_bytes(&self) -> usize {
        self.conns.iter().filter_map(|c| c.kafka.as_ref()).map(|k| k.buffered()).sum()
    }

    fn advance(&mut self, now: Instant) {
        if now > self.now {
            self.now = now;
        }
    }

    /// Fires due timers (not a one-shot session's periodic refresh), ends drains whose time
    /// ran out, and moves everything.
    fn tick(&mut self) {
        let actions = &mut self.actions;
        self.conns.end_drains(self.now, |conn| actions.push_back(Action::Close { conn }));
        if !(self.config.one_shot && self.cluster.current().is_none()) {
            self.observe_timer();
            self.cluster.handle_timeout(self.now);
        }
        self.drive();
    }
}

#[cfg(test)]
mod tests;
