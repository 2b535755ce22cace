//! What a refresh reports: live [`Event`]s while it runs, and per-attempt
//! [`AttemptReport`]s when it ends — the material of a progress view, a table, `--json`.
//!
//! Times are offsets from the start of the refresh, taken from the same clock readings the
//! core was given, so a report agrees exactly with the core's decisions (an attempt started
//! because another failed has the same offset as that failure).

use std::net::SocketAddr;
use std::time::Duration;

use serde::ser::{SerializeStruct, Serializer};
use serde::Serialize;
use stagger::Trace;
use stagger::{AttemptError, AttemptId, CancelReason, Metadata, TimerKind};

/// Something that happened during a refresh, for live views (a terminal progress display,
/// a log line per attempt). Passed to the observer of [`crate::refresh_with`] in order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Event {
    /// Time since the refresh started.
    #[serde(rename = "elapsed_ms", serialize_with = "millis")]
    pub elapsed: Duration,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// The kinds of [`Event`].
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventKind {
    /// The core started an attempt against `broker`.
    Started {
        /// Which attempt.
        attempt: AttemptId,
        /// The broker's `host:port`.
        broker: String,
    },
    /// The attempt's name resolved (`Command::Resolve`): it ends here, and each address
    /// goes on as an attempt of its own (each with its `Started`).
    Resolved {
        /// Which attempt.
        attempt: AttemptId,
        /// The name's `host:port`.
        broker: String,
        /// What it resolved to, in the resolver's order.
        addresses: Vec<SocketAddr>,
    },
    /// The attempt's TCP connection is up (a kept connection counts at once).
    Connected {
        /// Which attempt.
        attempt: AttemptId,
        /// The broker's `host:port`.
        broker: String,
    },
    /// The broker sent its first complete answer on this attempt (for Kafka, the
    /// ApiVersions response, even an error one): it is alive and working on the request.
    /// From here the core's adaptive stagger waits patiently instead of suspecting a hang,
    /// and (with `fanout.tuning.cancel_silent_on_answer`) the attempts whose brokers have said
    /// nothing yet are cancelled as `overtaken`. At most once per attempt, always between
    /// its `Connected` and its end.
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
    /// The core cancelled the attempt (another won, another broker answered first, the
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
    /// One of the core's timers fired (stagger, attempt timeout, backoff, deadline); what
    /// follows it in the event stream is what the core did about it.
    Timer {
        /// Which timer.
        timer: TimerKind,
    },
}

/// How an attempt ended.
#[derive(Clone, Debug, PartialEq)]
pub enum AttemptOutcome {
    /// Its answer won.
    Won,
    /// It failed: I/O, protocol, TLS, its attempt timeout, or an answer that cannot win.
    Failed(AttemptError),
    /// The core cancelled it (lost the race, overtaken by a broker that answered first,
    /// superseded, deadline, fatal error elsewhere).
    Cancelled(CancelReason),
    /// Still running when the refresh ended (only for attempts of a refresh that was not
    /// driven to its end).
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

impl std::fmt::Display for AttemptOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AttemptOutcome::Won => f.write_str("won"),
            AttemptOutcome::Failed(e) => write!(f, "failed: {e}"),
            AttemptOutcome::Cancelled(reason) => write!(f, "cancelled ({})", reason.name()),
            AttemptOutcome::InFlight => f.write_str("in flight"),
            AttemptOutcome::Resolved(addresses) => write!(f, "resolved to {} addresses", addresses.len()),
        }
    }
}

/// One attempt of a refresh, start to end.
///
/// Serialises as `{attempt, broker, started_ms, connected_ms, answered_ms, ended_ms, outcome,
/// error?, error_kind?, reason?, addresses?}` — the shape of the CLI's `--json` attempt rows.
#[derive(Clone, Debug, PartialEq)]
pub struct AttemptReport {
    /// The core's id for it.
    pub attempt: AttemptId,
    /// The broker's `host:port`.
    pub broker: String,
    /// When it started, since the refresh started.
    pub started: Duration,
    /// When its transport came up, if it did.
    pub connected: Option<Duration>,
    /// When its broker first answered (ApiVersions), if it did before the attempt ended:
    /// tells a hung broker (connected, never answered) from a slow one (answered, then
    /// took its time), which is what the adaptive stagger acts on.
    pub answered: Option<Duration>,
    /// When it ended, if it did.
    pub ended: Option<Duration>,
    /// How it ended.
    pub outcome: AttemptOutcome,
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

/// A successful refresh: the metadata and how it was obtained.
#[derive(Clone, Debug)]
pub struct RefreshOutcome {
    /// The winning answer.
    pub metadata: Metadata,
    /// The `host:port` of the broker that answered.
    pub winner: String,
    /// The Metadata API version the winning exchange used.
    pub metadata_version: Option<i16>,
    /// Time from the start of the refresh to the win.
    pub elapsed: Duration,
    /// Every attempt, in start order.
    pub attempts: Vec<AttemptReport>,
    /// The core's trace, when [`crate::RefreshOptions::record_trace`] was set.
    pub trace: Option<Trace>,
}

impl RefreshOutcome {
    /// The serialisable summary `{elapsed_ms, winner, attempts}` (metadata and trace are
    /// written separately: the metadata is the payload, the trace goes to its own file).
    pub fn report(&self) -> RefreshReport<'_> {
        RefreshReport { elapsed: Some(self.elapsed), winner: Some(&self.winner), attempts: &self.attempts }
    }

    /// TCP connections the refresh opened (attempts whose transport came up).
    pub fn connections_opened(&self) -> usize {
        self.attempts.iter().filter(|a| a.connected.is_some()).count()
    }
}

/// The serialisable summary of a refresh, successful or not (see
/// [`RefreshOutcome::report`] and [`crate::Error::report`]).
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

fn opt_millis<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&ms(*d)),
        None => s.serialize_none(),
    }
}
