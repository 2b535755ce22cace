//! The contract between the core and its adapters: what goes in ([`Input`]), what comes out
//! ([`Command`]), and the names both sides use for attempts, reasons and timers.

use alloc::vec::Vec;
use core::fmt;
use core::net::SocketAddr;
use serde::{Deserialize, Serialize};

use crate::brokers::BrokerIndex;
use crate::error::{AttemptError, RefreshError};
use crate::metadata::Metadata;
use crate::time::Instant;

pub use super::attempt_id::AttemptId;

/// What the adapter reports about an attempt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Input {
    /// The transport handshake completed (informational; feeds the adaptive stagger).
    Connected {
        /// Which attempt.
        attempt: AttemptId,
        /// Whether a TLS handshake follows on this connection: the broker's first answer is
        /// then the end of that handshake, which costs the broker far more than an
        /// ApiVersions answer, so the adaptive stagger judges its silence by the TLS pace
        /// ([`crate::config::Adaptive::silent_tls`]). [`crate::kafka::KafkaAttempt`] sets
        /// it; a kept connection's resumed exchange has no handshake and says `false`.
        #[serde(default)]
        tls: bool,
    },
    /// The broker's process answered on this attempt: the end of its TLS handshake, or its
    /// first Kafka frame (the ApiVersions response, even an error one), so it is alive and
    /// reading its socket. Feeds the adaptive stagger, which hedges silent brokers quickly
    /// and answering ones patiently; [`crate::kafka::KafkaAttempt`] says when. Adapters that
    /// cannot tell should skip it: without it every connected attempt looks silent, and the
    /// adaptive stagger hedges once the broker pace has run out twice.
    FirstFrame {
        /// Which attempt.
        attempt: AttemptId,
    },
    /// The broker is checking this attempt's credentials: the first SASL authentication
    /// message went out after the broker answered the handshake, and its verdict is not in
    /// yet. A broker authenticates on its network threads, not behind its request queue, and
    /// answers a wrong credential only after a deliberate delay (Kafka's
    /// `connection.failed.authentication.delay.ms`); another broker would say the same, at
    /// the cost of a TLS handshake and a failed authentication more. So while a broker is
    /// authenticating, no attempt is hedged before the adaptive stagger's `ceiling`
    /// ([`crate::config::Adaptive::ceiling`]). [`crate::kafka::KafkaAttempt`] says when;
    /// it needs the attempt's [`Input::FirstFrame`] before it.
    Authenticating {
        /// Which attempt.
        attempt: AttemptId,
    },
    /// The broker accepted the credentials of an [`Input::Authenticating`] attempt; the
    /// Metadata request follows, and the attempt is hedged as any answering one again. (A
    /// refusal is an [`Input::Failed`].)
    Authenticated {
        /// Which attempt.
        attempt: AttemptId,
    },
    /// The broker answered with metadata.
    Response {
        /// Which attempt.
        attempt: AttemptId,
        /// What it answered.
        metadata: Metadata,
    },
    /// The attempt failed; the adapter has already closed its connection. For an attempt
    /// asked to resolve ([`Command::Resolve`]), a failed lookup, with kind
    /// [`crate::ErrorKind::Dns`] (NXDOMAIN, no answer from the resolver, …).
    Failed {
        /// Which attempt.
        attempt: AttemptId,
        /// Why.
        error: AttemptError,
    },
    /// The name of a [`Command::Resolve`] resolved to these addresses, in the resolver's
    /// order (RFC 6724's, for `getaddrinfo`). Each becomes a candidate of its own, in
    /// RFC 8305's order (see [`crate::Refresh`]); the first
    /// [`MAX_RESOLVED_ADDRESSES`] distinct ones are taken. An empty list fails the attempt
    /// ("no addresses"). `Resolved` for an attempt that was not asked to resolve is
    /// [`InputOutcome::Unexpected`].
    Resolved {
        /// Which attempt.
        attempt: AttemptId,
        /// What the name resolved to (the port is the entry's).
        addresses: Vec<SocketAddr>,
    },
}

/// The most addresses of one name a refresh takes from a [`Input::Resolved`] (the first
/// ones, in the resolver's order): like the Java client's `use_all_dns_ips`, every address
/// is a candidate, but a name that resolves to hundreds must not make a refresh that long.
/// The attempt table is sized for this many per name.
pub const MAX_RESOLVED_ADDRESSES: usize = 16;

impl Input {
    /// The attempt this input is about.
    pub fn attempt(&self) -> AttemptId {
        match self {
            Input::Connected { attempt, .. }
            | Input::FirstFrame { attempt }
            | Input::Authenticating { attempt }
            | Input::Authenticated { attempt }
            | Input::Response { attempt, .. }
            | Input::Failed { attempt, .. }
            | Input::Resolved { attempt, .. } => *attempt,
        }
    }
}

/// What [`crate::Refresh::handle_input`] did with an input: whether it changed the attempt
/// it names, and if not, why. Adapters' reports and traces take it from here instead of
/// re-deriving the core's rules (timers due at the call fire first, so an input can find
/// its attempt already ended by the same call).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum InputOutcome {
    /// The input was applied to its attempt.
    Applied,
    /// The refresh had already finished, perhaps by a timer due at this very call.
    RefreshFinished,
    /// The attempt belongs to another refresh (another epoch).
    OtherRefresh,
    /// No such attempt had been issued before this call.
    NotIssued,
    /// The attempt had already ended (won, failed, cancelled, timed out), perhaps by a
    /// timer due at this very call.
    AttemptEnded,
    /// The same fact was reported before: a second `Connected` or `Answered`.
    Repeated,
    /// The input does not fit the attempt's phase: [`Input::Resolved`] for an attempt that
    /// was asked to connect, a connection's progress (`Connected`, `FirstFrame`,
    /// `Response`) for one that was asked to resolve and has no connection, or a credential
    /// check before the broker's first answer (`Authenticating`) or without one under way
    /// (`Authenticated`).
    Unexpected,
}

impl InputOutcome {
    /// Whether the input changed the refresh.
    pub fn is_applied(self) -> bool {
        self == InputOutcome::Applied
    }

    /// A short lowercase name for logs, tables and JSON (the serde name).
    pub fn name(self) -> &'static str {
        match self {
            InputOutcome::Applied => "applied",
            InputOutcome::RefreshFinished => "refresh_finished",
            InputOutcome::OtherRefresh => "other_refresh",
            InputOutcome::NotIssued => "not_issued",
            InputOutcome::AttemptEnded => "attempt_ended",
            InputOutcome::Repeated => "repeated",
            InputOutcome::Unexpected => "unexpected",
        }
    }
}

/// Why the core asks the adapter to abandon an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CancelReason {
    /// Another attempt won the race.
    Lost,
    /// This attempt exceeded `attempt_timeout`.
    TimedOut,
    /// The refresh's overall deadline passed.
    Deadline,
    /// Another attempt hit a fatal (authentication/authorisation) error.
    Fatal,
    /// A stagger tick cancelled this, the newest silent suspect, to start the next broker in
    /// its place: the throttle was full (`fanout.tuning.replace_when_full`), or the hedge budget was
    /// spent (the load in flight stays the same).
    Superseded,
    /// The broker answered, but with metadata that cannot win (no brokers, top-level error).
    Rejected,
    /// Another attempt's broker started answering while this one's had said nothing
    /// (`fanout.tuning.cancel_silent_on_answer`).
    Overtaken,
    /// A later attempt connected while this one was still connecting long after
    /// (`fanout.tuning.cancel_outrun`): its SYN was lost or its host is gone.
    Outrun,
}

impl CancelReason {
    /// Every reason, in declaration order: for UIs that explain each one (a legend, a
    /// tooltip table) without keeping their own list.
    pub const ALL: [CancelReason; 8] = [
        CancelReason::Lost,
        CancelReason::TimedOut,
        CancelReason::Deadline,
        CancelReason::Fatal,
        CancelReason::Superseded,
        CancelReason::Rejected,
        CancelReason::Overtaken,
        CancelReason::Outrun,
    ];

    /// Whether the attempt cancelled for this reason *failed* (its broker's error is a
    /// timeout or the rejected answer) rather than being cancelled while it might still
    /// have answered: what reports call "failed" against "cancelled", as the core counts it.
    pub fn is_failure(self) -> bool {
        matches!(self, CancelReason::TimedOut | CancelReason::Rejected)
    }

    /// A short lowercase name for logs, tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            CancelReason::Lost => "lost",
            CancelReason::TimedOut => "timed_out",
            CancelReason::Deadline => "deadline",
            CancelReason::Fatal => "fatal",
            CancelReason::Rejected => "rejected",
            CancelReason::Superseded => "superseded",
            CancelReason::Overtaken => "overtaken",
            CancelReason::Outrun => "outrun",
        }
    }
}

/// The reason in words (`timed out`, `overtaken`, …), for timelines and logs; [`CancelReason::name`]
/// is the machine-readable form.
impl fmt::Display for CancelReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CancelReason::TimedOut => f.write_str("timed out"),
            other => f.write_str(other.name()),
        }
    }
}

/// What the core asks the adapter to do.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Command {
    /// Start an attempt: connect to `broker` and fetch metadata.
    Connect {
        /// The new attempt's id; report its progress with this id.
        attempt: AttemptId,
        /// Which broker of the book to connect to.
        broker: BrokerIndex,
    },
    /// Start an attempt by resolving the host name of `broker` (a seed entry marked
    /// [`crate::BrokerEntry::resolve`], see [`crate::BrokerBook::resolving`]): look it up,
    /// then answer [`Input::Resolved`] with every address, or [`Input::Failed`] with kind
    /// [`crate::ErrorKind::Dns`]. Resolution is the attempt's first phase, under its
    /// attempt timeout (a resolver that never answers times the attempt out, kind `Dns`) and
    /// the refresh's deadline; a `Cancel` of it abandons the lookup. Each address then
    /// becomes an attempt of its own (`Connect`), the first at once, the rest staggered.
    Resolve {
        /// The new attempt's id; answer with this id.
        attempt: AttemptId,
        /// The book entry whose name to resolve (its port is the addresses' port).
        broker: BrokerIndex,
    },
    /// Abandon an attempt and close its connection.
    Cancel {
        /// Which attempt.
        attempt: AttemptId,
        /// Why (for traces and visualisers).
        reason: CancelReason,
    },
    /// Terminal: the refresh succeeded. Nothing follows.
    Done {
        /// The winning attempt (its connection may be kept for reuse).
        attempt: AttemptId,
        /// The broker that answered.
        broker: BrokerIndex,
        /// Its answer.
        metadata: Metadata,
    },
    /// Terminal: the refresh gave up. Nothing follows.
    GiveUp(RefreshError),
}

impl Command {
    /// Whether this command ends the refresh.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Command::Done { .. } | Command::GiveUp(_))
    }
}

/// Why the core wants to be woken up; shown by traces and the visualiser. Each kind is one
/// slot of the refresh's timer table, and the declaration order is the one order of timer
/// kinds: the slot order, [`TimerKind::ALL`], and which of several timers due at the same
/// instant fires first. The deadline beats everything, an attempt's timeout beats the tick
/// that would hedge it, and a stagger tick beats the rest of a spread tick (it supersedes the
/// partners still to come).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TimerKind {
    /// The overall deadline.
    Deadline,
    /// The oldest in-flight attempt's timeout.
    AttemptTimeout,
    /// The stagger delay of the latest attempt (the leader) ran out: a tick starts the next
    /// attempts. Armed only while a tick could start one (throttle, budget, brokers left).
    Stagger,
    /// A spread tick's next attempt (`fanout.tuning.spread_ticks`): a share of the delay after the
    /// tick's first, unless a broker answered meanwhile.
    Spread,
    /// End of the backoff between two passes.
    Backoff,
}

impl TimerKind {
    /// Every timer, in declaration order: the timer table's slots and the firing order of
    /// timers due at the same instant (for UIs that list them, too).
    pub const ALL: [TimerKind; 5] =
        [TimerKind::Deadline, TimerKind::AttemptTimeout, TimerKind::Stagger, TimerKind::Spread, TimerKind::Backoff];

    /// A short lowercase name for logs, tables and JSON (the serde name).
    pub fn name(self) -> &'static str {
        match self {
            TimerKind::Stagger => "stagger",
            TimerKind::Spread => "spread",
            TimerKind::AttemptTimeout => "attempt_timeout",
            TimerKind::Backoff => "backoff",
            TimerKind::Deadline => "deadline",
        }
    }
}

/// Where an attempt stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AttemptState {
    /// Started, no answer yet.
    InFlight,
    /// Answered with metadata that won.
    Won,
    /// Failed (reported by the adapter, timed out, or rejected).
    Failed,
    /// Its name resolved ([`Input::Resolved`]): the attempt ended there, and its addresses
    /// went on as attempts of their own. Neither a success nor a failure.
    Resolved,
    /// Cancelled by the core (lost, overtaken, superseded, deadline, fatal elsewhere). An
    /// attempt that timed out or was rejected is `Failed`, though the adapter is sent a
    /// `Cancel` for it too, to close its connection.
    Cancelled,
}

/// What the core knows about one attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptInfo {
    /// The broker it went to.
    pub broker: BrokerIndex,
    /// The pass (0 = first, 1 = first retry, …) it belongs to.
    pub pass: u32,
    /// When it started.
    pub started_at: Instant,
    /// When its transport came up, if it did.
    pub connected_at: Option<Instant>,
    /// When its broker's first frame arrived ([`Input::FirstFrame`]), if it did.
    #[serde(default)]
    pub first_frame_at: Option<Instant>,
    /// Whether it reused a connection kept from an earlier refresh (its handshake then
    /// measures nothing).
    #[serde(default)]
    pub reused_connection: bool,
    /// Whether its transport carries a TLS handshake after the TCP one
    /// ([`Input::Connected`]'s `tls`): its broker's first answer ends that handshake.
    #[serde(default)]
    pub tls: bool,
    /// When it ended, if it did.
    pub ended_at: Option<Instant>,
    /// Where it stands.
    pub state: AttemptState,
    /// Whether it was started while another attempt was still in flight (a hedge).
    pub hedge: bool,
    /// Whether a spread tick started it after the tick's first attempt
    /// (`fanout.tuning.spread_ticks`): it came a share of the delay later, because no broker had
    /// answered meanwhile.
    #[serde(default)]
    pub partner: bool,
}

impl AttemptInfo {
    /// How far the attempt got towards its broker's answer, from `connected_at` and
    /// `first_frame_at`: the phase the adaptive stagger judges it by
    /// ([`crate::config::Adaptive`]), and what a report or a live view shows.
    pub fn phase(&self) -> AttemptPhase {
        match (self.connected_at, self.first_frame_at) {
            (_, Some(_)) => AttemptPhase::Answering,
            (Some(_), None) => AttemptPhase::Silent,
            (None, None) => AttemptPhase::Connecting,
        }
    }
}

/// How far an attempt got towards its broker's answer ([`AttemptInfo::phase`]); whether it
/// is still in flight is its [`AttemptState`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AttemptPhase {
    /// Its transport has not come up (or a lookup is under way).
    Connecting,
    /// Connected, and its broker has said nothing yet: a stopped broker's kernel gets this
    /// far too.
    Silent,
    /// Its broker answered (the end of a TLS handshake, or a first Kafka frame): the broker
    /// process runs.
    Answering,
}

/// Counters of one refresh, for reports and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefreshStats {
    /// Attempts started (Connect and Resolve commands).
    pub started: u32,
    /// Attempts the core cancelled (not counting timed-out and rejected ones, which are
    /// failures even though each gets a `Cancel` command).
    pub cancelled: u32,
    /// Attempts that failed (including timeouts and rejected answers).
    pub failed: u32,
    /// Attempts started while another was in flight (spend hedge budget).
    pub hedges: u32,
    /// Passes over the brokers begun (1 + retries used).
    pub passes: u32,
    /// Attempts that resolved a name ([`Input::Resolved`] applied; started, but neither
    /// failed nor cancelled).
    #[serde(default)]
    pub resolved: u32,
}
