//! The fault matrix's rows (`docs/faults.md` lists them): every fault a broker or the
//! network can commit, the error kind its attempt must fail with, the words its error must
//! say, whether the broker sent a complete frame first, and a [`Lab`] that makes each fault
//! on loopback in front of a two-broker mock cluster. Each adapter's `fault_matrix.rs` runs
//! every row through its own API, so both are held to the same table.
//!
//! Where the faults come from: librdkafka's mock cluster (the healthy broker, and "accepted
//! but silent": a broker with an hour's round-trip time), the fault proxy (closes, garbage,
//! oversize prefix, slow drip), the scripted fake broker (protocol-level faults, answers
//! encoded by `kafka-protocol`), and plain sockets (refused: bound, not listening; never
//! answered: a listener whose accept queue is full).

use std::time::Duration;

use stagger::{ErrorKind, RefreshConfig, Stagger};

use crate::fake::{FakeBroker, Script};
use crate::mock::Mock;
use crate::proxy::{Fault as ProxyFault, Proxy};
use crate::sockets::{sockets_to, Refusing, Unanswered};

/// One row of the matrix.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fault {
    /// Nothing listens: the connection is refused (RST).
    Refused,
    /// The accept queue is full: the handshake never completes.
    ConnectNeverAnswered,
    /// Accepted, then nothing is ever sent back (a hung broker).
    AcceptedButSilent,
    /// ApiVersions answered, then silence (hung after the first answer).
    ApiVersionsThenSilent,
    /// The connection is closed as soon as it is accepted.
    ClosesAtOnce,
    /// The connection is closed in the middle of a response frame.
    ClosesMidFrame,
    /// Bytes that are not a Kafka response.
    Garbage,
    /// A length prefix above the maximum frame size.
    OversizeLength,
    /// A response sent a byte at a time, too slowly to finish in time.
    SlowDrip,
    /// A response to another request (wrong correlation id).
    WrongCorrelationId,
    /// ApiVersions answered with an error code.
    ApiVersionsError,
    /// Metadata that lists no brokers.
    NoBrokers,
    /// Metadata with a top-level error (REBOOTSTRAP_REQUIRED).
    MetadataTopLevelError,
    /// SASL authentication refused (fatal for the refresh).
    AuthenticationFailure,
    /// Not authorised to describe the cluster (fatal for the refresh).
    AuthorizationFailure,
}

/// Kafka's UNKNOWN_SERVER_ERROR, what the fake broker's ApiVersions error answers.
pub const UNKNOWN_SERVER_ERROR: i16 = -1;
/// Kafka's REBOOTSTRAP_REQUIRED (KIP-1102), the fake's top-level Metadata error.
pub const REBOOTSTRAP_REQUIRED: i16 = 129;
/// Kafka's SASL_AUTHENTICATION_FAILED.
pub const SASL_AUTHENTICATION_FAILED: i16 = 58;
/// Kafka's CLUSTER_AUTHORIZATION_FAILED.
pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;

impl Fault {
    /// Every row, in the order of `docs/faults.md`.
    pub const ALL: [Fault; 15] = [
        Fault::Refused,
        Fault::ConnectNeverAnswered,
        Fault::AcceptedButSilent,
        Fault::ApiVersionsThenSilent,
        Fault::ClosesAtOnce,
        Fault::ClosesMidFrame,
        Fault::Garbage,
        Fault::OversizeLength,
        Fault::SlowDrip,
        Fault::WrongCorrelationId,
        Fault::ApiVersionsError,
        Fault::NoBrokers,
        Fault::MetadataTopLevelError,
        Fault::AuthenticationFailure,
        Fault::AuthorizationFailure,
    ];

    /// The error kind its attempt must fail with.
    pub fn expected(self) -> ErrorKind {
        match self {
            Fault::Refused => ErrorKind::Refused,
            Fault::ConnectNeverAnswered => ErrorKind::ConnectTimeout,
            Fault::AcceptedButSilent | Fault::ApiVersionsThenSilent | Fault::SlowDrip => ErrorKind::ResponseTimeout,
            Fault::ClosesAtOnce | Fault::ClosesMidFrame => ErrorKind::Closed,
            Fault::Garbage | Fault::WrongCorrelationId => ErrorKind::Protocol,
            Fault::OversizeLength => ErrorKind::FrameTooLarge,
            Fault::ApiVersionsError => ErrorKind::BrokerError(UNKNOWN_SERVER_ERROR),
            Fault::NoBrokers => ErrorKind::NoBrokers,
            Fault::MetadataTopLevelError => ErrorKind::BrokerError(REBOOTSTRAP_REQUIRED),
            Fault::AuthenticationFailure => ErrorKind::BrokerError(SASL_AUTHENTICATION_FAILED),
            Fault::AuthorizationFailure => ErrorKind::BrokerError(CLUSTER_AUTHORIZATION_FAILED),
        }
    }

    /// Words the error's text must contain, so a person can tell what happened.
    pub fn says(self) -> &'static str {
        match self {
            Fault::Refused => "refused",
            Fault::ConnectNeverAnswered => "connect timed out",
            Fault::AcceptedButSilent | Fault::ApiVersionsThenSilent | Fault::SlowDrip => {
                "no response before the attempt timeout"
            }
            // A clean EOF, or a reset when our request was still unread at the close.
            Fault::ClosesAtOnce => "connection closed by the broker",
            Fault::ClosesMidFrame => "closed mid-frame",
            Fault::Garbage => "correlation id mismatch",
            Fault::WrongCorrelationId => "correlation id mismatch",
            Fault::OversizeLength => "exceeds the maximum frame size",
            Fault::ApiVersionsError => "UNKNOWN_SERVER_ERROR",
            Fault::NoBrokers => "metadata lists no brokers",
            Fault::MetadataTopLevelError => "REBOOTSTRAP_REQUIRED",
            Fault::AuthenticationFailure => "SASL_AUTHENTICATION_FAILED",
            Fault::AuthorizationFailure => "CLUSTER_AUTHORIZATION_FAILED",
        }
    }

    /// Whether the fault ends the whole refresh (credentials, permissions).
    pub fn fatal(self) -> bool {
        self.expected().is_fatal()
    }

    /// Whether the broker sends a complete response frame before the attempt fails, so the
    /// adapter must report it `Answered` (the core then treats it as alive, not hung).
    pub fn answers(self) -> bool {
        match self {
            Fault::Refused
            | Fault::ConnectNeverAnswered
            | Fault::AcceptedButSilent
            | Fault::ClosesAtOnce
            | Fault::ClosesMidFrame
            | Fault::OversizeLength
            // One byte per 100 ms: not a whole frame before the 300 ms attempt timeout.
            | Fault::SlowDrip => false,
            // A well-framed frame of garbage is a frame: the broker said something.
            Fault::Garbage
            | Fault::ApiVersionsThenSilent
            | Fault::WrongCorrelationId
            | Fault::ApiVersionsError
            | Fault::NoBrokers
            | Fault::MetadataTopLevelError
            | Fault::AuthenticationFailure
            | Fault::AuthorizationFailure => true,
        }
    }
}

/// A two-broker mock cluster: broker 1 hung (accepts, reads, never answers), broker 2 healthy.
pub struct Lab {
    /// The mock cluster itself.
    pub mock: Mock,
}

/// A faulty broker and whatever keeps it alive.
pub struct Faulty {
    /// Where the faulty broker listens.
    pub address: String,
    /// Sockets of ours to its port before any refresh (the full queue of a never-answering
    /// listener is made of our own connections).
    pub baseline: usize,
    /// The proxy, fake broker or socket behind it, dropped with it.
    _keep: Option<Box<dyn std::any::Any>>,
}

impl Lab {
    /// Starts the mock cluster, broker 1 hung.
    pub fn start() -> Lab {
        let mock = Mock::start(2, &[("alpha", 2)]);
        mock.hang(1);
        Lab { mock }
    }

    /// The healthy broker's address.
    pub fn healthy(&self) -> String {
        self.mock.address(2)
    }

    /// A broker with `fault`, in front of (or instead of) the healthy one.
    pub async fn faulty(&self, fault: Fault) -> Faulty {
        let upstream = self.mock.address(2);
        let proxy = |f| Proxy::start(&upstream, f);
        let fake = FakeBroker::start;
        let (address, keep) = match fault {
            Fault::Refused => {
                let r = Refusing::new();
                (r.address.clone(), keep(r))
            }
            Fault::ConnectNeverAnswered => {
                let u = Unanswered::new();
                (u.address.clone(), keep(u))
            }
            Fault::AcceptedButSilent => (self.mock.address(1), None),
            Fault::ClosesAtOnce => keep_proxy(proxy(ProxyFault::CloseOnAccept).await),
            Fault::ClosesMidFrame => keep_proxy(proxy(ProxyFault::CloseMidFrame).await),
            Fault::Garbage => keep_proxy(proxy(ProxyFault::Garbage).await),
            Fault::OversizeLength => keep_proxy(proxy(ProxyFault::OversizeLength).await),
            Fault::SlowDrip => keep_proxy(proxy(ProxyFault::SlowDrip(Duration::from_millis(100))).await),
            Fault::ApiVersionsThenSilent => keep_fake(fake(Script::ApiVersionsThenSilent).await),
            Fault::WrongCorrelationId => keep_fake(fake(Script::WrongCorrelationId).await),
            Fault::ApiVersionsError => keep_fake(fake(Script::ApiVersionsError(UNKNOWN_SERVER_ERROR)).await),
            Fault::NoBrokers => keep_fake(fake(Script::NoBrokers).await),
            Fault::MetadataTopLevelError => keep_fake(fake(Script::MetadataError(REBOOTSTRAP_REQUIRED)).await),
            Fault::AuthenticationFailure => keep_fake(fake(Script::ApiVersionsError(SASL_AUTHENTICATION_FAILED)).await),
            Fault::AuthorizationFailure => keep_fake(fake(Script::MetadataError(CLUSTER_AUTHORIZATION_FAILED)).await),
        };
        let baseline = sockets_to(&[port(&address)]);
        Faulty { address, baseline, _keep: keep }
    }
}

fn keep(thing: impl std::any::Any) -> Option<Box<dyn std::any::Any>> {
    Some(Box::new(thing))
}

fn keep_proxy(p: Proxy) -> (String, Option<Box<dyn std::any::Any>>) {
    (p.address.clone(), keep(p))
}

fn keep_fake(f: FakeBroker) -> (String, Option<Box<dyn std::any::Any>>) {
    (f.address.clone(), keep(f))
}

/// The port of a `host:port` address.
pub fn port(address: &str) -> u16 {
    address.rsplit_once(':').unwrap().1.parse().unwrap()
}

/// One attempt at a time in the order listed (each fault is seen whole), 300 ms per attempt (the silent, drip
/// and unanswered faults end there), no retry pass.
pub fn config() -> RefreshConfig {
    let mut config = RefreshConfig::sequential();
    config.shuffle_seeds = false;
    config.attempt_timeout = Duration::from_millis(300);
    config.fanout.stagger = Stagger::Fixed(config.attempt_timeout);
    config.retry.retries = 0;
    config
}
