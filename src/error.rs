//! Errors: why one attempt failed ([`AttemptError`]), why a whole refresh gave up
//! ([`RefreshError`]), and why a configuration was refused ([`ConfigError`]).

use alloc::borrow::Cow;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use serde::{Deserialize, Serialize};

use crate::brokers::BrokerIndex;
use crate::refresh::{AttemptId, CancelReason};

/// What went wrong in one attempt; small and `Copy` so the core can count and compare it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "code", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The host name did not resolve.
    Dns,
    /// The connection was actively refused (nothing listens on the port).
    Refused,
    /// The TCP (or WebSocket) handshake did not complete in time.
    ConnectTimeout,
    /// Connected, but no complete answer within the attempt timeout.
    ResponseTimeout,
    /// The peer closed the connection before a complete answer.
    Closed,
    /// The peer sent bytes that do not decode as the expected Kafka response.
    Protocol,
    /// A length prefix above the configured maximum frame size.
    FrameTooLarge,
    /// A Kafka error code from the broker (ApiVersions or Metadata).
    BrokerError(i16),
    /// A metadata response that lists no brokers.
    NoBrokers,
    /// The TLS layer refused the connection: a certificate one end did not accept, a TLS
    /// alert, or bytes that are not TLS. A pass in which every broker fails this way ends
    /// the refresh ([`GiveUpReason::AllFailed`]): the next would refuse the same
    /// certificates. A broker that closes or resets the connection in the middle of the
    /// handshake is [`ErrorKind::Closed`], which the next pass may find gone.
    Tls,
    /// SASL authentication failed: fatal for the whole refresh, retrying cannot help.
    Authentication,
    /// The client is not authorised to describe the cluster: fatal for the whole refresh.
    Authorization,
    /// Any other I/O failure.
    Io,
}

impl ErrorKind {
    /// Whether this failure ends the whole refresh at once: credentials that one broker
    /// refuses, every broker refuses, so asking the others only adds load and delay.
    pub fn is_fatal(self) -> bool {
        matches!(self, ErrorKind::Authentication | ErrorKind::Authorization)
            || matches!(self, ErrorKind::BrokerError(code) if is_auth_error_code(code))
    }
}

/// Kafka error codes that mean "your credentials or permissions are wrong".
fn is_auth_error_code(code: i16) -> bool {
    // 29 TOPIC_AUTHORIZATION_FAILED is per-topic and not fatal; these are cluster-wide:
    // 31 CLUSTER_AUTHORIZATION_FAILED, 33 UNSUPPORTED_SASL_MECHANISM,
    // 34 ILLEGAL_SASL_STATE, 58 SASL_AUTHENTICATION_FAILED.
    matches!(code, 31 | 33 | 34 | 58)
}

impl ErrorKind {
    /// The snake_case name used in JSON and by the adapters (`refused`, `broker_error`, …).
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Dns => "dns",
            ErrorKind::Refused => "refused",
            ErrorKind::ConnectTimeout => "connect_timeout",
            ErrorKind::ResponseTimeout => "response_timeout",
            ErrorKind::Closed => "closed",
            ErrorKind::Protocol => "protocol",
            ErrorKind::FrameTooLarge => "frame_too_large",
            ErrorKind::BrokerError(_) => "broker_error",
            ErrorKind::NoBrokers => "no_brokers",
            ErrorKind::Tls => "tls",
            ErrorKind::Authentication => "authentication",
            ErrorKind::Authorization => "authorization",
            ErrorKind::Io => "io",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Dns => f.write_str("host name did not resolve"),
            ErrorKind::Refused => f.write_str("connection refused"),
            ErrorKind::ConnectTimeout => f.write_str("connect timed out"),
            ErrorKind::ResponseTimeout => f.write_str("no response before the attempt timeout"),
            ErrorKind::Closed => f.write_str("connection closed by the broker"),
            ErrorKind::Protocol => f.write_str("malformed response"),
            ErrorKind::FrameTooLarge => f.write_str("response frame larger than the maximum"),
            ErrorKind::BrokerError(code) => write!(f, "broker error {code} ({})", kafka_error_name(*code)),
            ErrorKind::NoBrokers => f.write_str("metadata lists no brokers"),
            ErrorKind::Tls => f.write_str("TLS failure"),
            ErrorKind::Authentication => f.write_str("authentication failed"),
            ErrorKind::Authorization => f.write_str("not authorised"),
            ErrorKind::Io => f.write_str("I/O error"),
        }
    }
}

/// Names of the Kafka error codes a metadata refresh is likely to meet.
pub fn kafka_error_name(code: i16) -> &'static str {
    match code {
        -1 => "UNKNOWN_SERVER_ERROR",
        0 => "NONE",
        3 => "UNKNOWN_TOPIC_OR_PARTITION",
        5 => "LEADER_NOT_AVAILABLE",
        7 => "REQUEST_TIMED_OUT",
        8 => "BROKER_NOT_AVAILABLE",
        15 => "COORDINATOR_NOT_AVAILABLE",
        29 => "TOPIC_AUTHORIZATION_FAILED",
        31 => "CLUSTER_AUTHORIZATION_FAILED",
        33 => "UNSUPPORTED_SASL_MECHANISM",
        34 => "ILLEGAL_SASL_STATE",
        35 => "UNSUPPORTED_VERSION",
        58 => "SASL_AUTHENTICATION_FAILED",
        129 => "REBOOTSTRAP_REQUIRED",
        _ => "see the Kafka protocol error table",
    }
}

/// Why one attempt failed: a kind the core acts on, plus free text for people.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptError {
    /// What kind of failure this was; drives fatal-vs-retry decisions.
    pub kind: ErrorKind,
    /// Human detail from the adapter (OS error text, decoder message); may be empty.
    /// A `Cow` so that the core's own details (static text) never allocate.
    #[serde(default, skip_serializing_if = "str::is_empty")]
    pub detail: Cow<'static, str>,
}

impl AttemptError {
    /// An error of `kind` with no detail (does not allocate).
    pub fn new(kind: ErrorKind) -> Self {
        AttemptError { kind, detail: Cow::Borrowed("") }
    }

    /// An error of `kind` with a human-readable detail.
    pub fn with_detail(kind: ErrorKind, detail: impl Into<Cow<'static, str>>) -> Self {
        AttemptError { kind, detail: detail.into() }
    }

    /// An attempt the attempt timeout cut off while its name was still `resolving`, or its
    /// connection not yet `connected`, or its request unanswered. The core records this, and
    /// the adapters' attempt reports use it too, so both say the same (does not allocate).
    pub fn timed_out(resolving: bool, connected: bool) -> Self {
        match (resolving, connected) {
            (true, _) => {
                AttemptError::with_detail(ErrorKind::Dns, "no answer from the resolver within the attempt timeout")
            }
            (false, true) => AttemptError::new(ErrorKind::ResponseTimeout),
            (false, false) => AttemptError::new(ErrorKind::ConnectTimeout),
        }
    }
}

impl fmt::Display for AttemptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.detail.is_empty() {
            write!(f, "{}", self.kind)
        } else {
            write!(f, "{}: {}", self.kind, self.detail)
        }
    }
}

/// Why a refresh gave up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum GiveUpReason {
    /// Every broker failed in every pass (the first pass plus all retries), or every
    /// broker of a pass failed in the TLS layer ([`ErrorKind::Tls`]), which no retry changes.
    AllFailed {
        /// How many passes over the brokers ran.
        passes: u32,
    },
    /// The overall deadline passed; attempts still in flight were cancelled.
    DeadlineExceeded,
    /// A broker rejected our credentials or permissions; no other broker would differ.
    Fatal,
}

/// What happened at one broker during a refresh that gave up.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerFailure {
    /// The broker's index in the broker book the refresh was built from.
    pub broker: BrokerIndex,
    /// The broker's `host:port`.
    pub address: Arc<str>,
    /// Attempts started against this broker.
    pub attempts: u32,
    /// The most recent error from this broker, if any attempt ended with one.
    pub last_error: Option<AttemptError>,
    /// Why the core cancelled this broker's latest attempt, if that is how it ended. Without
    /// it a broker cancelled because another one's failure was fatal read as plainly
    /// `cancelled`, and one overtaken or superseded read as the timeout its `last_error`'s
    /// kind names, though no timeout ran out. `None` when the latest attempt failed (then
    /// `last_error` is its error), resolved a name, or never started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled: Option<CancelReason>,
}

/// Why the core cancelled an attempt, as a broker's story in a [`RefreshError`] tells it
/// (after `cancelled: `). [`CancelReason`]'s `Display` is the one-word label of timelines;
/// this says what happened, so a reader of the error does not mistake a broker that was
/// never given the time to answer for one that failed.
fn cancelled_because(reason: CancelReason) -> &'static str {
    match reason {
        CancelReason::Lost => "another broker answered first",
        CancelReason::TimedOut => "no answer within the attempt timeout",
        CancelReason::Deadline => "the overall deadline passed",
        CancelReason::Fatal => "another broker's failure was fatal",
        CancelReason::Superseded => "superseded: silent past its stagger delay, another broker was tried in its place",
        CancelReason::Rejected => "its answer could not be used",
        CancelReason::Overtaken => "overtaken: silent while another broker was answering",
        CancelReason::Outrun => "outrun: still connecting long after a later attempt had connected",
    }
}

/// One broker's story in words: `not tried`, `cancelled: another broker's failure was
/// fatal`, or its last error (`connection refused`). [`RefreshError`]'s `Display` lists it
/// with the broker's attempts; the browser adapter and the web demo show it as it is. A
/// cancellation comes before `last_error`: the error a cancel records (of the kind of the
/// timeout it pre-empted) is for counting, not for telling the broker's story.
impl fmt::Display for BrokerFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.cancelled, &self.last_error) {
            _ if self.attempts == 0 => f.write_str("not tried"),
            (Some(reason), _) => write!(f, "cancelled: {}", cancelled_because(reason)),
            (None, Some(err)) => err.fmt(f),
            // The only attempt that ends neither failed nor cancelled without winning is a
            // name's lookup: its addresses are candidates, listed as brokers of their own.
            (None, None) => f.write_str("resolved to the addresses listed on their own"),
        }
    }
}

/// The terminal error of a refresh: the reason, the last error seen, and every broker's story.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefreshError {
    /// Why the refresh stopped.
    pub reason: GiveUpReason,
    /// The last attempt error observed before giving up (what Sarama calls the last error).
    pub last_error: Option<(AttemptId, BrokerIndex, AttemptError)>,
    /// One entry per broker that was a candidate, in attempt order.
    pub brokers: Vec<BrokerFailure>,
}

impl RefreshError {
    /// The last error's broker address, if there was a last error.
    pub fn last_broker_address(&self) -> Option<&str> {
        let (_, broker, _) = self.last_error.as_ref()?;
        self.brokers.iter().find(|b| b.broker == *broker).map(|b| &*b.address)
    }
}

/// Why a refresh gave up, in words (`every broker failed in 2 passes`, `deadline exceeded`,
/// `fatal error`): what error messages, timelines and the web demo print.
impl fmt::Display for GiveUpReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            GiveUpReason::AllFailed { passes } => {
                let noun = if passes == 1 { "pass" } else { "passes" };
                write!(f, "every broker failed in {passes} {noun}")
            }
            GiveUpReason::DeadlineExceeded => f.write_str("deadline exceeded"),
            GiveUpReason::Fatal => f.write_str("fatal error"),
        }
    }
}

impl fmt::Display for RefreshError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "metadata refresh failed: {}", self.reason)?;
        match (&self.last_error, self.last_broker_address()) {
            (Some((_, _, err)), Some(addr)) => write!(f, "; last error from {addr}: {err}")?,
            (Some((_, _, err)), None) => write!(f, "; last error: {err}")?,
            (None, _) => {}
        }
        for b in &self.brokers {
            write!(f, "\n  {}: {b}", b.address)?;
            match b.attempts {
                0 => {}
                1 => f.write_str(" (1 attempt)")?,
                n => write!(f, " ({n} attempts)")?,
            }
        }
        Ok(())
    }
}

/// A configuration the core refuses, naming the offending field.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConfigError {
    /// Dotted path of the field, e.g. `fanout.jitter`.
    pub field: &'static str,
    /// What is wrong with it.
    pub problem: String,
}

impl ConfigError {
    /// A config error for `field` (dotted path); adapters use it for their own options.
    pub fn new(field: &'static str, problem: impl Into<String>) -> Self {
        ConfigError { field, problem: problem.into() }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid configuration: `{}` {}", self.field, self.problem)
    }
}

#[cfg(feature = "std")]
impl std::error::Error for AttemptError {}
#[cfg(feature = "std")]
impl std::error::Error for RefreshError {}
#[cfg(feature = "std")]
impl std::error::Error for ConfigError {}
