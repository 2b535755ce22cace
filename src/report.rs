//! What a refresh reports, in one vocabulary for every host: live [`Event`]s while it runs
//! ([`Session::poll_event`](crate::session::Session::poll_event)) and one [`AttemptReport`]
//! per attempt when it ends ([`Session::reports`](crate::session::Session::reports)).
//!
//! The tokio, blocking and browser adapters, the CLI's live view and `--json`, the simulator
//! and the web demo read these types; none keeps a ledger of its own. Times are offsets from
//! the start of the refresh, taken from the instants the policy was given, so a report
//! agrees exactly with the policy's decisions (an attempt started because another failed has
//! the same offset as that failure).

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::net::SocketAddr;
use core::time::Duration;

use serde::de::Deserializer;
use serde::ser::{SerializeStruct, Serializer};
use serde::{Deserialize, Serialize};

#[cfg(feature = "kafka")]
use crate::error::ErrorKind;
use crate::error::{AttemptError, GiveUpReason};
use crate::refresh::{AttemptId, AttemptPhase, CancelReason, TimerKind};
#[cfg(feature = "kafka")]
use crate::refresh::{AttemptInfo, AttemptState};
#[cfg(feature = "kafka")]
use crate::session::AttemptNote;

#[cfg(feature = "std")]
mod client_error;
#[cfg(feature = "std")]
pub use client_error::{connect_error, io_error, io_error_kind, ClientError, TLS_HUNG_UP};

/// Something that happened during a refresh, for live views (a terminal progress display,
/// a log line per attempt) and the simulator's reports, in the order it happened.
///
/// Deserialises too, so a report that carries events (the simulator's) reads back from its
/// JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Time since the refresh started (in a record of a long-lived cluster's many refreshes,
    /// such as the simulator's, since the cluster started).
    #[serde(rename = "elapsed_ms", serialize_with = "millis", deserialize_with = "from_millis")]
    pub elapsed: Duration,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// The kinds of [`Event`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    /// The policy started an attempt against `broker` (a connection, a kept connection, or
    /// a name lookup).
    Started {
        /// Which attempt.
        attempt: AttemptId,
        /// The broker's `host:port`.
        broker: String,
    },
    /// The attempt's name resolved: it ends here, and each address goes on as an attempt
    /// of its own (each with its `Started`).
    Resolved {
        /// Which attempt.
        attempt: AttemptId,
        /// The name's `host:port`.
        broker: String,
        /// What it resolved to, in the resolver's order.
        addresses: Vec<SocketAddr>,
    },
    /// The attempt's connection is up (a kept connection counts at once).
    Connected {
        /// Which attempt.
        attempt: AttemptId,
        /// The broker's `host:port`.
        broker: String,
    },
    /// The broker's first complete answer on this attempt (the ApiVersions response, even
    /// an error one): it is alive and working on the request. At most once per attempt,
    /// always between its `Connected` and its end.
    Answered {
        /// Which attempt.
        attempt: AttemptId,
        /// The broker's `host:port`.
        broker: String,
    },
    /// The attempt failed: an I/O or protocol error, its attempt timeout (kind
    /// `ConnectTimeout`/`ResponseTimeout`), or an answer that cannot win.
    Failed {
        /// Which attempt.
        attempt: AttemptId,
        /// The broker's `host:port`.
        broker: String,
        /// Why.
        error: AttemptError,
    },
    /// The policy cancelled the attempt (another won, another broker answered first, the
    /// throttle needed room, the deadline passed, a fatal error elsewhere) and its
    /// connection was closed.
    Cancelled {
        /// Which attempt.
        attempt: AttemptId,
        /// The broker's `host:port`.
        broker: String,
        /// Why.
        reason: CancelReason,
    },
    /// The attempt's answer won the refresh.
    Won {
        /// Which attempt.
        attempt: AttemptId,
        /// The broker's `host:port`.
        broker: String,
    },
    /// One of the policy's timers fired (stagger, attempt timeout, backoff, deadline); what
    /// follows it is what the policy did about it.
    Timer {
        /// Which timer.
        timer: TimerKind,
    },
    /// The refresh gave up: its last event, as `Won` is a successful one's. Without it a view
    /// could only guess that the refresh ended from the last attempt's failure.
    GaveUp {
        /// Why.
        reason: GiveUpReason,
    },
    /// The application asked a long-lived [`Cluster`](crate::Cluster) for fresh metadata:
    /// says which refresh answers whom (requests made while one runs share it).
    Requested {
        /// The epoch of the refresh that answers (the running one, when coalesced).
        epoch: u32,
    },
    /// A long-lived [`Cluster`](crate::Cluster)'s periodic-refresh timer fired: the refresh
    /// that follows is one nobody asked for. Not one of the policy's timers, so not a
    /// `Timer`.
    RefreshDue,
    /// A long-lived [`Cluster`](crate::Cluster) forgot the brokers it had discovered and went
    /// back to its seeds: why the next refresh tries brokers the last one never did.
    Rebootstrapped,
}

/// How an attempt ended.
#[derive(Clone, Debug, PartialEq)]
pub enum AttemptOutcome {
    /// Its answer won.
    Won,
    /// It failed: I/O, protocol, TLS, its attempt timeout, or an answer that cannot win.
    Failed(AttemptError),
    /// The policy cancelled it (lost the race, overtaken, superseded, deadline, fatal error
    /// elsewhere).
    Cancelled(CancelReason),
    /// Still running when the refresh ended.
    InFlight,
    /// It resolved a seed's name to these addresses, each of which went on as an attempt
    /// of its own.
    Resolved(Vec<SocketAddr>),
}

impl AttemptOutcome {
    /// A one-word name, for tables and JSON.
    pub fn name(&self) -> &'static str {
        match self {
            AttemptOutcome::Won => "won",
            AttemptOutcome::Failed(_) => "failed",
            AttemptOutcome::Cancelled(_) => "cancelled",
            AttemptOutcome::InFlight => "in_flight",
            AttemptOutcome::Resolved(_) => "resolved",
        }
    }
}

impl core::fmt::Display for AttemptOutcome {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            AttemptOutcome::Won => f.write_str("won"),
            AttemptOutcome::Failed(e) => write!(f, "failed: {e}"),
            AttemptOutcome::Cancelled(reason) => write!(f, "cancelled ({})", reason.name()),
            AttemptOutcome::InFlight => f.write_str("in flight"),
            AttemptOutcome::Resolved(addresses) => write!(f, "resolved to {} addresses", addresses.len()),
        }
    }
}

/// One attempt of a refresh, start to end: the policy's record of it with what the
/// session saw of it.
///
/// Serialises as `{attempt, broker, started_ms, connected_ms, answered_ms, ended_ms, outcome,
/// error?, error_kind?, reason?, addresses?}` — the shape of the CLI's `--json` attempt rows.
#[derive(Clone, Debug, PartialEq)]
pub struct AttemptReport {
    /// The policy's id for it.
    pub attempt: AttemptId,
    /// The broker's `host:port`.
    pub broker: String,
    /// When it started, since the refresh started.
    pub started: Duration,
    /// When its transport came up, if it did.
    pub connected: Option<Duration>,
    /// When its broker first answered (ApiVersions), if it did before the attempt ended:
    /// tells a hung broker (connected, never answered) from a slow one.
    pub answered: Option<Duration>,
    /// When it ended, if it did.
    pub ended: Option<Duration>,
    /// How it ended.
    pub outcome: AttemptOutcome,
    /// Whether it ran on a connection kept from an earlier refresh.
    pub reused_connection: bool,
    /// The Metadata API version its exchange used, if it answered.
    pub metadata_version: Option<i16>,
}

impl AttemptReport {
    /// How far it got towards its broker's answer (see [`AttemptPhase`]).
    pub fn phase(&self) -> AttemptPhase {
        match (self.connected, self.answered) {
            (_, Some(_)) => AttemptPhase::Answering,
            (Some(_), None) => AttemptPhase::Silent,
            (None, None) => AttemptPhase::Connecting,
        }
    }

    /// Why it failed, if it did (its outcome's error).
    pub fn error(&self) -> Option<&AttemptError> {
        match &self.outcome {
            AttemptOutcome::Failed(error) => Some(error),
            _ => None,
        }
    }

    /// Why the policy cancelled it, if it did (not for one that timed out or was rejected:
    /// those failed).
    pub fn cancelled(&self) -> Option<CancelReason> {
        match self.outcome {
            AttemptOutcome::Cancelled(reason) => Some(reason),
            _ => None,
        }
    }

    /// The report of `attempt` from the policy's record (`info`, in a refresh that started
    /// at `origin`) and the session's note, for the broker at `broker`.
    #[cfg(feature = "kafka")]
    pub fn new(
        attempt: AttemptId,
        info: &AttemptInfo,
        note: Option<&AttemptNote>,
        broker: &str,
        origin: crate::Instant,
    ) -> AttemptReport {
        let offset = |at: crate::Instant| at.saturating_since(origin);
        let error = note.and_then(|n| n.error.clone());
        let outcome = match info.state {
            AttemptState::Won => AttemptOutcome::Won,
            AttemptState::InFlight => AttemptOutcome::InFlight,
            AttemptState::Resolved => {
                AttemptOutcome::Resolved(note.and_then(|n| n.addresses.clone()).unwrap_or_default())
            }
            AttemptState::Failed => AttemptOutcome::Failed(error.unwrap_or_else(|| unexplained(info))),
            AttemptState::Cancelled => match note.and_then(|n| n.cancelled) {
                Some(reason) if !reason.is_failure() => AttemptOutcome::Cancelled(reason),
                Some(_) => AttemptOutcome::Failed(error.unwrap_or_else(|| unexplained(info))),
                None => AttemptOutcome::Cancelled(CancelReason::Lost),
            },
        };
        AttemptReport {
            attempt,
            broker: broker.to_string(),
            started: offset(info.started_at),
            connected: info.connected_at.map(offset),
            answered: info.first_frame_at.map(offset),
            ended: info.ended_at.map(offset),
            outcome,
            reused_connection: info.reused_connection,
            metadata_version: note.and_then(|n| n.metadata_version),
        }
    }
}

/// A failure the session has no words for (it always has: this is a fallback, not a path).
#[cfg(feature = "kafka")]
fn unexplained(_: &AttemptInfo) -> AttemptError {
    AttemptError::with_detail(ErrorKind::Protocol, "the session noted no reason")
}

impl Serialize for AttemptReport {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("AttemptReport", 10)?;
        s.serialize_field("attempt", &self.attempt.number())?;
        s.serialize_field("broker", &self.broker)?;
        s.serialize_field("started_ms", &ms(self.started))?;
        s.serialize_field("connected_ms", &self.connected.map(ms))?;
        s.serialize_field("answered_ms", &self.answered.map(ms))?;
        s.serialize_field("ended_ms", &self.ended.map(ms))?;
        s.serialize_field("outcome", self.outcome.name())?;
        match &self.outcome {
            AttemptOutcome::Failed(e) => {
                s.serialize_field("error", &e.to_string())?;
                s.serialize_field("error_kind", &e.kind)?;
            }
            AttemptOutcome::Cancelled(reason) => s.serialize_field("reason", reason)?,
            AttemptOutcome::Resolved(addresses) => s.serialize_field("addresses", addresses)?,
            AttemptOutcome::Won | AttemptOutcome::InFlight => {}
        }
        s.end()
    }
}

/// The serialisable summary of a refresh, successful or not: what the CLI's `--json`
/// writes beside the metadata.
#[derive(Clone, Debug, Serialize)]
pub struct RefreshReport<'a> {
    /// Time to the win; `None` for a refresh that gave up.
    #[serde(rename = "elapsed_ms", serialize_with = "opt_millis")]
    pub elapsed: Option<Duration>,
    /// The winner's address; `None` for a refresh that gave up.
    pub winner: Option<&'a str>,
    /// Every attempt, in start order.
    pub attempts: &'a [AttemptReport],
}

/// Milliseconds with microsecond precision, as JSON readers expect durations.
fn ms(d: Duration) -> f64 {
    d.as_micros() as f64 / 1000.0
}

fn millis<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(ms(*d))
}

/// The inverse of [`millis`], to the microsecond (a negative or NaN count reads as zero).
fn from_millis<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let ms = f64::deserialize(d)?;
    // `as` saturates; `+ 0.5` rounds to the nearest µs without `f64::round` (std only).
    Ok(Duration::from_micros((ms * 1000.0 + 0.5) as u64))
}

fn opt_millis<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&ms(*d)),
        None => s.serialize_none(),
    }
}

/// A successful refresh: the metadata and how it was obtained.
#[derive(Clone, Debug)]
pub struct RefreshOutcome {
    /// The winning answer.
    pub metadata: crate::Metadata,
    /// The `host:port` of the broker that answered.
    pub winner: String,
    /// The Metadata API version the winning exchange used.
    pub metadata_version: Option<i16>,
    /// Time from the start of the refresh to the win.
    pub elapsed: Duration,
    /// Every attempt, in start order.
    pub attempts: Vec<AttemptReport>,
    /// The policy's trace, when the session recorded one.
    pub trace: Option<crate::Trace>,
}

impl RefreshOutcome {
    /// The serialisable summary `{elapsed_ms, winner, attempts}` (metadata and trace are
    /// written separately: the metadata is the payload, the trace goes to its own file).
    pub fn report(&self) -> RefreshReport<'_> {
        RefreshReport { elapsed: Some(self.elapsed), winner: Some(&self.winner), attempts: &self.attempts }
    }

    /// Connections the refresh opened (attempts whose transport came up on a new
    /// connection).
    pub fn connections_opened(&self) -> usize {
        self.attempts.iter().filter(|a| a.connected.is_some() && !a.reused_connection).count()
    }
}
