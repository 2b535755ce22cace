//! What a host tells a [`Session`](super::Session) ([`Event`]) and what the session asks of
//! it ([`Action`]), with the settings it runs with ([`SessionConfig`]).

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::net::SocketAddr;

use bytes::Bytes;

use crate::brokers::BrokerIndex;
use crate::config::ClusterConfig;
use crate::error::{AttemptError, RefreshError};
use crate::kafka::sasl::{Nonce, Secret};
use crate::kafka::ExchangeConfig;
use crate::refresh::{AttemptId, CancelReason, RefreshStats};

/// A connection the session asked for, named by the session (never reused within one
/// session), so a host can keep its sockets in a map and a late report about a closed one
/// is recognised as such.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

/// How the broker ended a connection: the difference between a broker closing an idle
/// connection (nothing to worry about) and one that reset it (the next refresh is gentle,
/// [`crate::RefreshCause::ConnectionLost`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseKind {
    /// End of stream (FIN).
    Clean,
    /// Reset (RST) or any other abrupt end.
    Reset,
}

/// Everything the host reports, in one enum so a host (or a C ABI) has one entry point.
#[derive(Debug)]
pub enum Event<'a> {
    /// The connection `conn` of a [`Action::Dial`] is up (TCP connected): time the
    /// handshake from here.
    Connected {
        /// Which connection.
        conn: ConnId,
    },
    /// The TLS handshake of `conn` completed (only for a session with
    /// [`SessionConfig::tls`]): the broker process runs.
    Secured {
        /// Which connection.
        conn: ConnId,
    },
    /// Bytes read from `conn`, in whatever pieces the transport delivers.
    Received {
        /// Which connection.
        conn: ConnId,
        /// The bytes, handed to the Kafka exchange without a copy of their own.
        bytes: &'a [u8],
    },
    /// The peer ended `conn`; the host need not send [`Action::Close`]'s close for it.
    Closed {
        /// Which connection.
        conn: ConnId,
        /// Clean end of stream, or reset.
        how: CloseKind,
    },
    /// Dialling, reading, writing or the TLS handshake of `conn` failed (refused, timed
    /// out, unreachable, a certificate refused); the host drops the connection.
    IoError {
        /// Which connection.
        conn: ConnId,
        /// What failed, as the attempt's error (its kind steers the policy).
        error: AttemptError,
    },
    /// The answer to [`Action::Resolve`]: the addresses, or why the lookup failed.
    Resolved {
        /// The lookup, as the action named it.
        lookup: AttemptId,
        /// The addresses (the port is ignored: the seed's is used), or the failure.
        result: Result<Vec<SocketAddr>, AttemptError>,
    },
    /// Fresh random bytes for `conn`'s SCRAM nonce, as [`Action::NeedNonce`] asked.
    Nonce {
        /// Which connection.
        conn: ConnId,
        /// The nonce's raw bytes (from an OS source, the browser's `crypto`, or a seeded
        /// PRNG where runs must repeat).
        bytes: Nonce,
    },
    /// The OAUTHBEARER token for `conn`, as [`Action::NeedToken`] asked, or why there is
    /// none (which fails that attempt as an authentication error).
    Token {
        /// Which connection.
        conn: ConnId,
        /// The token (redacted in `Debug`), or the token source's complaint.
        token: Result<Secret, String>,
    },
}

impl Event<'_> {
    /// The connection the event is about, if it is about one.
    pub fn conn(&self) -> Option<ConnId> {
        match self {
            Event::Connected { conn }
            | Event::Secured { conn }
            | Event::Received { conn, .. }
            | Event::Closed { conn, .. }
            | Event::IoError { conn, .. }
            | Event::Nonce { conn, .. }
            | Event::Token { conn, .. } => Some(*conn),
            Event::Resolved { .. } => None,
        }
    }
}

/// Everything the session asks of the host or tells it, from [`Session::poll_action`](super::Session::poll_action).
#[derive(Clone, Debug, PartialEq)]
#[must_use]
pub enum Action {
    /// Open a new connection to `address` (`host:port`), then report [`Event::Connected`]
    /// (and [`Event::Secured`] after TLS) or [`Event::IoError`].
    Dial {
        /// The session's name for it.
        conn: ConnId,
        /// The broker's address, as the book holds it.
        address: Arc<str>,
        /// With TLS: the server name to verify (the seed's name for an address it resolved
        /// to); `None` for plaintext.
        tls: Option<Arc<str>>,
    },
    /// Write `bytes` on `conn`, after everything sent on it before. For a connection still
    /// dialling (or in its TLS handshake), write them once it is up.
    Send {
        /// Which connection.
        conn: ConnId,
        /// One complete Kafka request frame (SASL frames carry credentials: never log them).
        bytes: Bytes,
    },
    /// Close `conn` and forget it; nothing more is sent on it, and reports about it are
    /// ignored.
    Close {
        /// Which connection.
        conn: ConnId,
    },
    /// Look `name` (`host:port`) up, then report [`Event::Resolved`] with `lookup`.
    Resolve {
        /// The lookup's name for the answer.
        lookup: AttemptId,
        /// The seed's `host:port`.
        name: Arc<str>,
    },
    /// Report [`Event::Nonce`] for `conn` (a SCRAM conversation starts on it); its first
    /// request waits for the nonce.
    NeedNonce {
        /// Which connection.
        conn: ConnId,
    },
    /// Report [`Event::Token`] for `conn` (an OAUTHBEARER conversation starts on it); its
    /// first request waits for the token.
    NeedToken {
        /// Which connection.
        conn: ConnId,
    },
    /// The refresh `epoch` succeeded; [`Session::metadata`](super::Session::metadata) holds its metadata.
    Refreshed {
        /// What [`Session::request_refresh`](super::Session::request_refresh) returned.
        epoch: u32,
        /// The broker that answered.
        broker: BrokerIndex,
        /// The refresh's counters.
        stats: RefreshStats,
    },
    /// The refresh `epoch` gave up: the last error and every broker's.
    RefreshFailed {
        /// What [`Session::request_refresh`](super::Session::request_refresh) returned.
        epoch: u32,
        /// Why.
        error: RefreshError,
    },
    /// The session went back to the seeds (see [`crate::ClusterEvent::Rebootstrapped`]):
    /// news for the application.
    Rebootstrapped,
}

/// What a [`Session`](super::Session) runs with.
#[derive(Clone, Debug, Default)]
pub struct SessionConfig {
    /// The policy: refresh, periodic refresh, hedge budget, rebootstrap.
    pub cluster: ClusterConfig,
    /// What to say to brokers: client id, topics, frame limit, SASL (with `OAUTHBEARER`,
    /// the token here serves every connection unless [`SessionConfig::fresh_tokens`]).
    pub exchange: ExchangeConfig,
    /// Whether the host speaks TLS to the brokers (then it reports [`Event::Secured`]).
    pub tls: bool,
    /// With `OAUTHBEARER`: ask the host for a token for every new connection
    /// ([`Action::NeedToken`]), for tokens that expire. Without any SASL set, it implies
    /// `OAUTHBEARER`.
    pub fresh_tokens: bool,
    /// One refresh only: no periodic refresh, the winner's connection is closed rather
    /// than kept, and the refresh is fast from the start
    /// ([`ClusterConfig::gentle_until_calm`] off: it runs alone, not as one of a fleet
    /// starting together). What a one-shot `refresh` of an adapter wants.
    pub one_shot: bool,
    /// Queue live [`Event`](crate::report::Event)s for [`Session::poll_event`](super::Session::poll_event)
    /// (a progress view); off, the session allocates nothing for them.
    pub observe: bool,
    /// Record every refresh as a replayable [`Trace`](crate::Trace) under this recorder
    /// name (e.g. `stagger-cli 0.1.0`), read with [`Session::last_trace`](super::Session::last_trace).
    pub recorder: Option<String>,
}

impl SessionConfig {
    /// Gives a policy that left the PRNG seed at its default, 0, the host's own draw
    /// (`draw` is called only then); a seed the caller set is kept. A live host calls this
    /// with fresh randomness before [`Session::new`](super::Session::new), so programs
    /// started together shuffle their seeds and jitter each in their own way instead of all
    /// asking the same broker first ([`crate::RefreshConfig::seed`]).
    pub fn seed_unless_set(&mut self, draw: impl FnOnce() -> u64) {
        let seed = &mut self.cluster.refresh.seed;
        if *seed == 0 {
            *seed = draw();
        }
    }
}

/// What the session saw of one attempt beyond the policy's record of it
/// ([`Refresh::attempt`](crate::Refresh::attempt)): what a host reports per attempt, from
/// [`Session::attempt_notes`](super::Session::attempt_notes).
#[derive(Clone, Debug, PartialEq)]
pub struct AttemptNote {
    /// Which attempt.
    pub attempt: AttemptId,
    /// Why it failed, if it did: what the connection or the broker said, a rejected answer's
    /// reason, or the attempt timeout (`ConnectTimeout` before the connection came up,
    /// `ResponseTimeout` after).
    pub error: Option<AttemptError>,
    /// Why the policy closed it, if it did (lost the race, timed out, overtaken, …).
    pub cancelled: Option<CancelReason>,
    /// The Metadata API version its exchange used, if it answered.
    pub metadata_version: Option<i16>,
    /// What its name resolved to, if it was a lookup that answered.
    pub addresses: Option<Vec<SocketAddr>>,
}
