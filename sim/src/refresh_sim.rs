//! One [`Refresh`](stagger::Refresh) against a simulated cluster, in virtual time, and the
//! [`Report`] it produces: outcome, counters, per-broker lanes, the core's events and a
//! trace.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::time::Duration;
use serde::{Deserialize, Serialize};

use super::world::World;
use super::{Scenario, SimBroker, SimError, MAX_STEPS, RECORDER};
use stagger::report::{Event, EventKind};
use stagger::{
    AttemptError, AttemptId, BrokerBook, BrokerIndex, CancelReason, Command, ErrorKind, Instant, RefreshConfig,
    RefreshError, RefreshStats,
};
use stagger::{Recorder, Trace};

/// How a simulated refresh ended.
///
/// Why three cases: `Done` and `GiveUp` are the core's own terminal commands; `Aborted`
/// is the simulator refusing to go on (bad input, or a core bug it caught).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Outcome {
    /// The refresh got metadata.
    Done {
        /// The broker whose answer won.
        winner: BrokerIndex,
        /// The winning attempt.
        attempt: AttemptId,
        /// Virtual time from the start of the refresh to `Done`: the number to minimise.
        time_to_metadata: Duration,
    },
    /// The refresh gave up, with the core's error (last error and every broker's story).
    GiveUp {
        /// The core's terminal error.
        error: RefreshError,
        /// When it gave up.
        at: Instant,
    },
    /// The simulator stopped before the refresh finished.
    Aborted {
        /// Why.
        error: SimError,
        /// When.
        at: Instant,
    },
}

/// How one attempt ended, as drawn on its broker's lane.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SpanOutcome {
    /// Its answer won the refresh.
    Won,
    /// It failed: the broker said no, closed, timed out, or answered unusable metadata.
    Failed {
        /// Human-readable reason.
        reason: String,
        /// What kind of failure (drives the core's decisions).
        kind: ErrorKind,
    },
    /// The core abandoned it (lost the race, deadline, fatal error elsewhere).
    Cancelled {
        /// Why.
        reason: CancelReason,
    },
    /// Still running when the simulation stopped (only after an abort).
    InFlight,
    /// It resolved a seed's name (`Command::Resolve`) to `addresses` addresses, each then an
    /// attempt of its own (only in replays of real traces: simulated brokers have no names).
    Resolved {
        /// How many addresses the name resolved to.
        addresses: u32,
    },
}

/// How an attempt the core cancelled for `reason` ends, on its lane and in the log. A
/// timed-out or rejected one failed (the core counts it so, and a live view says so): with
/// `timed_out` (the timeout of the phase it was in) or why its answer cannot win
/// (`rejection`; a protocol error if unknown). Any other was cancelled.
///
/// Why public: the web demo's replay ends its spans and logs its events the same way, so a
/// replayed run draws and reads as the simulated one did.
pub fn cancel_ending(
    attempt: AttemptId,
    broker: String,
    reason: CancelReason,
    timed_out: AttemptError,
    rejection: Option<AttemptError>,
) -> (SpanOutcome, EventKind) {
    let error = match reason {
        CancelReason::TimedOut => timed_out,
        CancelReason::Rejected => rejection.unwrap_or_else(|| AttemptError::new(ErrorKind::Protocol)),
        reason => return (SpanOutcome::Cancelled { reason }, EventKind::Cancelled { attempt, broker, reason }),
    };
    let outcome = SpanOutcome::Failed { reason: error.to_string(), kind: error.kind };
    (outcome, EventKind::Failed { attempt, broker, error })
}

/// One attempt on a broker's lane: when it started, connected and ended, and how.
///
/// Why spans: they are what a timeline view draws — one bar per attempt, a tick where the
/// connection came up, a colour for the ending.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// The attempt.
    pub attempt: AttemptId,
    /// When the core asked for it (`Connect`).
    pub start: Instant,
    /// When the simulator reported the transport up, if it did before the attempt ended.
    pub connected_at: Option<Instant>,
    /// When the broker first answered (ApiVersions), if it did before the attempt ended.
    #[serde(default)]
    pub first_frame_at: Option<Instant>,
    /// When it ended, if it did.
    pub end: Option<Instant>,
    /// How it ended.
    pub outcome: SpanOutcome,
    /// Which pass over the brokers it belonged to (0 = first).
    pub pass: u32,
    /// Whether the core started it while another attempt was in flight (a hedge).
    pub hedge: bool,
    /// Whether a spread tick started it after the tick's first attempt.
    #[serde(default)]
    pub partner: bool,
}

/// One broker's lane: its address, its simulated behaviour and its attempts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Lane {
    /// The broker's index in the refresh's broker book.
    pub broker: BrokerIndex,
    /// Its `host:port`.
    pub address: String,
    /// Its simulated behaviour; `None` for an address no simulated broker listens on.
    pub behavior: Option<SimBroker>,
    /// Its attempts, in start order.
    pub spans: Vec<Span>,
}

/// Everything one simulated refresh did.
///
/// Why so much: the summary numbers compare presets (time to metadata against load), the
/// lanes and events drive the visualiser, and the trace lets anyone replay the run through
/// the core and check that it still makes the same decisions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// How the refresh ended.
    pub outcome: Outcome,
    /// `Connect` commands the core issued (the load the refresh put on the cluster).
    pub attempts_started: u32,
    /// Attempts the core abandoned: lost the race, deadline, fatal error elsewhere.
    pub attempts_cancelled: u32,
    /// Attempts that failed: refused, closed, timed out, or answered unusable metadata.
    pub attempts_failed: u32,
    /// Attempts whose request reached a broker (the broker accepted the connection):
    /// the load the brokers themselves felt, unlike refused or early-cancelled attempts.
    pub requests_reached: u32,
    /// Attempts started while another was in flight (the core's count).
    pub hedges: u32,
    /// Passes over the brokers (the core's count; 1 + retries used).
    pub passes: u32,
    /// The core's own counters, to cross-check the simulator's.
    pub stats: RefreshStats,
    /// Virtual time when the simulation stopped.
    pub ended_at: Instant,
    /// Broker events dropped because the core cancelled their attempt first.
    pub dropped_events: u32,
    /// One lane per broker, in broker-book order.
    pub lanes: Vec<Lane>,
    /// What happened, in order, in the core's vocabulary (the one a live view of a real
    /// refresh reads), timed from the refresh's start; each names its broker by the
    /// address of its lane.
    pub events: Vec<Event>,
    /// The recorded trace (`None` if the refresh could not even start).
    pub trace: Option<Trace>,
}

impl Report {
    /// The winning broker, if the refresh got metadata.
    pub fn winner(&self) -> Option<BrokerIndex> {
        match self.outcome {
            Outcome::Done { winner, .. } => Some(winner),
            _ => None,
        }
    }

    /// Time from start to metadata, if the refresh got metadata.
    pub fn time_to_metadata(&self) -> Option<Duration> {
        match self.outcome {
            Outcome::Done { time_to_metadata, .. } => Some(time_to_metadata),
            _ => None,
        }
    }

    /// The core's terminal error, if the refresh gave up.
    pub fn give_up(&self) -> Option<&RefreshError> {
        match &self.outcome {
            Outcome::GiveUp { error, .. } => Some(error),
            _ => None,
        }
    }

    /// Every span of every lane, in lane order.
    pub fn spans(&self) -> impl Iterator<Item = (BrokerIndex, &Span)> {
        self.lanes.iter().flat_map(|l| l.spans.iter().map(move |s| (l.broker, s)))
    }

    fn new(world: &World<'_>, book: Option<&BrokerBook>, outcome: Outcome, ended_at: Instant) -> Self {
        let mut report = Report {
            outcome,
            attempts_started: 0,
            attempts_cancelled: 0,
            attempts_failed: 0,
            requests_reached: 0,
            hedges: 0,
            passes: 0,
            stats: RefreshStats::default(),
            ended_at,
            dropped_events: world.dropped,
            lanes: book.map(|b| world.lanes(b)).unwrap_or_default(),
            events: world.events.clone(),
            trace: None,
        };
        for span in world.spans() {
            report.attempts_started += 1;
            report.requests_reached += span.connected_at.is_some() as u32;
            match span.outcome {
                SpanOutcome::Cancelled { .. } => report.attempts_cancelled += 1,
                SpanOutcome::Failed { .. } => report.attempts_failed += 1,
                SpanOutcome::Won | SpanOutcome::InFlight | SpanOutcome::Resolved { .. } => {}
            }
        }
        report
    }
}

/// Runs one refresh with `config` against `scenario` in virtual time and reports it.
///
/// Builds a [`BrokerBook`] from [`Scenario::seeds`] (so `BrokerIndex(i)` is simulated broker
/// `i`) and a [`Refresh`](stagger::Refresh) at [`Instant::ZERO`], then repeatedly advances to
/// the earliest of the core's next timer and the next broker event — timers first on a tie,
/// as [`Refresh::handle_input`](stagger::Refresh::handle_input) itself does — until `Done` or
/// `GiveUp`. A `Cancel` drops the attempt's pending broker events. Never panics: a bad
/// config or scenario, or more than [`MAX_STEPS`] steps, ends in [`Outcome::Aborted`].
pub fn run_refresh(config: &RefreshConfig, scenario: &Scenario) -> Report {
    let mut world = World::new(scenario);
    let book = match BrokerBook::new(scenario.seeds()) {
        Ok(book) => book,
        Err(e) => {
            let outcome = Outcome::Aborted { error: e.into(), at: Instant::ZERO };
            return Report::new(&world, None, outcome, Instant::ZERO);
        }
    };
    let mut rec = match Recorder::new(config, &book, Instant::ZERO, RECORDER) {
        Ok(rec) => rec,
        Err(e) => {
            let outcome = Outcome::Aborted { error: e.into(), at: Instant::ZERO };
            return Report::new(&world, Some(&book), outcome, Instant::ZERO);
        }
    };
    let mut now = Instant::ZERO;
    let mut outcome = drain(&mut rec, &mut world, &book, now);
    let mut steps = 0u64;
    while outcome.is_none() {
        if steps >= MAX_STEPS {
            outcome = Some(Outcome::Aborted { error: SimError::StepLimit { steps }, at: now });
            break;
        }
        steps += 1;
        let timer = rec.refresh().next_timer();
        let event_at = world.next_event_at();
        match (timer, event_at) {
            (Some((at, kind)), e) if e.is_none_or(|e| at <= e) => {
                now = now.max(at);
                world.record(now, EventKind::Timer { timer: kind });
                rec.handle_timeout(now);
            }
            (_, Some(_)) => {
                let Some((at, input, delivery)) = world.pop_input() else { continue };
                now = now.max(at);
                if rec.handle_input(now, input).is_applied() {
                    world.delivered(delivery);
                }
            }
            _ => {
                // Unreachable while the core keeps its deadline timer; reported, not panicked.
                outcome = Some(Outcome::Aborted { error: SimError::Stalled { at: now }, at: now });
                break;
            }
        }
        if let Some(end) = drain(&mut rec, &mut world, &book, now) {
            outcome = Some(end);
        }
    }
    let outcome = outcome.unwrap_or(Outcome::Aborted { error: SimError::Stalled { at: now }, at: now });
    let mut report = Report::new(&world, Some(&book), outcome, now);
    let stats = rec.refresh().stats();
    report.stats = stats;
    report.hedges = stats.hedges;
    report.passes = stats.passes;
    report.trace = Some(rec.into_trace());
    report
}

/// Carries out every command the core has queued; returns the outcome if one was terminal.
fn drain(rec: &mut Recorder, world: &mut World<'_>, book: &BrokerBook, now: Instant) -> Option<Outcome> {
    let mut outcome = None;
    while let Some(command) = rec.poll_command(now) {
        match command {
            Command::Connect { attempt, broker } => {
                world.connect(now, attempt, broker, book.address(broker), false);
                if let Some(info) = rec.refresh().attempt(attempt) {
                    world.annotate(attempt, info);
                }
            }
            // The simulator's brokers are addresses, never names marked to resolve
            // (`BrokerBook::resolving`): were one asked, it would go unanswered and the
            // core's attempt timeout would fail it (kind `Dns`).
            Command::Resolve { .. } => {}
            Command::Cancel { attempt, reason } => world.cancel(now, attempt, reason),
            Command::Done { attempt, broker, .. } => {
                world.won(now, attempt);
                let time_to_metadata = now.saturating_since(rec.refresh().started_at());
                outcome = Some(Outcome::Done { winner: broker, attempt, time_to_metadata });
            }
            Command::GiveUp(error) => {
                world.record(now, EventKind::GaveUp { reason: error.reason });
                outcome = Some(Outcome::GiveUp { error, at: now });
            }
        }
    }
    outcome
}
