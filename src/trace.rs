//! Traces: a serde record of one refresh — config, brokers, and every timed input and
//! command — that replays to the same commands.
//!
//! The CLI writes one with `--trace FILE`; the web demo replays it through the core and
//! says whether the replay diverges. [`Recorder`] wraps a [`Refresh`] and records as it
//! drives it, so an adapter cannot forget to log an input.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

use crate::brokers::BrokerBook;
use crate::config::RefreshConfig;
use crate::error::ConfigError;
use crate::refresh::{Command, Input, InputOutcome, Refresh, RefreshContext, TimerKind};
use crate::time::Instant;

/// Format version of [`Trace`]; bumped on incompatible changes. A trace of another version
/// does not load: deserialising it fails, saying the version found and this one, and
/// [`Trace::start`] refuses one built in memory. Version 4 reads only today's shapes: attempt
/// ids as `{"epoch", "number"}`, `Input::FirstFrame` as `first_frame`, the fan-out's four
/// switches under `fanout.tuning`, and `AttemptInfo`'s `first_frame_at` and
/// `reused_connection` by those names (versions 1 to 3 were written while other names were
/// still read).
pub const TRACE_VERSION: u32 = 4;

/// One timed step of a refresh.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TraceEvent {
    /// `handle_input(at, input)` was called.
    Input {
        /// When.
        at: Instant,
        /// What.
        input: Input,
    },
    /// `handle_timeout(at)` was called; `timer` is what the core said it was waiting for.
    Timeout {
        /// When.
        at: Instant,
        /// The reason of the timer that was due, if one was.
        timer: Option<TimerKind>,
    },
    /// The core emitted a command (after the preceding call).
    Command {
        /// When (the time of the call that produced it).
        at: Instant,
        /// What.
        command: Command,
    },
}

/// A complete record of one refresh.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// [`TRACE_VERSION`] at recording time; a trace of another version does not load.
    #[serde(deserialize_with = "read_version")]
    pub version: u32,
    /// Who recorded it (e.g. `stagger-cli 0.1.0`).
    pub recorder: String,
    /// The policy (its `seed` drives every random choice).
    pub config: RefreshConfig,
    /// The broker book the refresh was built from (seeds, discovered, health).
    pub book: BrokerBook,
    /// When the refresh started.
    pub started_at: Instant,
    /// The recent response time the refresh started with (see
    /// [`Refresh::with_estimate`]); `None` for a cold start.
    #[serde(default)]
    pub recent_response_time: Option<core::time::Duration>,
    /// Every call and command, in order.
    pub events: Vec<TraceEvent>,
    /// What the [`crate::Cluster`] that ran the refresh told it (epoch, hedge tokens, pace
    /// hints, cause); `None` for a refresh started on its own ([`Recorder`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<RefreshContext>,
}

/// Where a replay first disagreed with the recorded commands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Divergence {
    /// Index into [`Trace::events`] of the first mismatch.
    pub event_index: usize,
    /// What the trace recorded there (`None` if the replay produced an extra command).
    pub recorded: Option<Command>,
    /// What the replay produced there (`None` if the replay produced too few).
    pub replayed: Option<Command>,
}

impl core::fmt::Display for Divergence {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "replay diverges at event {}: recorded {:?}, replayed {:?}",
            self.event_index, self.recorded, self.replayed
        )
    }
}

impl Trace {
    /// A fresh [`Refresh`] as the trace's started: its config, book, start time and recent
    /// response time (or the [`RefreshContext`] of the cluster that ran it). A trace of another
    /// [`TRACE_VERSION`] is a [`ConfigError`] for `version`.
    pub fn start(&self) -> Result<Refresh, ConfigError> {
        if self.version != TRACE_VERSION {
            return Err(ConfigError::new("version", format!("is {}", version_problem(self.version))));
        }
        match self.context {
            Some(context) => Refresh::with_context(&self.config, &self.book, self.started_at, context),
            None => Refresh::with_estimate(&self.config, &self.book, self.started_at, self.recent_response_time),
        }
    }

    /// Replays the trace's inputs and timeouts through a fresh [`Refresh`] and checks that
    /// it emits exactly the recorded commands. Returns the replayed commands on success.
    pub fn replay(&self) -> Result<Result<Vec<Command>, Divergence>, ConfigError> {
        let mut refresh = self.start()?;
        let mut produced: Vec<Command> = Vec::new();
        let mut cursor = 0usize; // next produced command to compare
        let drain = |r: &mut Refresh, out: &mut Vec<Command>| {
            while let Some(c) = r.poll_command() {
                out.push(c);
            }
        };
        drain(&mut refresh, &mut produced);
        for (index, event) in self.events.iter().enumerate() {
            match event {
                TraceEvent::Input { at, input } => {
                    if let Some(d) = check_exhausted(&produced, cursor, index) {
                        return Ok(Err(d));
                    }
                    refresh.handle_input(*at, input.clone());
                    drain(&mut refresh, &mut produced);
                }
                TraceEvent::Timeout { at, .. } => {
                    if let Some(d) = check_exhausted(&produced, cursor, index) {
                        return Ok(Err(d));
                    }
                    refresh.handle_timeout(*at);
                    drain(&mut refresh, &mut produced);
                }
                TraceEvent::Command { command, .. } => {
                    let replayed = produced.get(cursor);
                    if replayed != Some(command) {
                        return Ok(Err(Divergence {
                            event_index: index,
                            recorded: Some(command.clone()),
                            replayed: replayed.cloned(),
                        }));
                    }
                    cursor += 1;
                }
            }
        }
        if let Some(d) = check_exhausted(&produced, cursor, self.events.len()) {
            return Ok(Err(d));
        }
        Ok(Ok(produced))
    }
}

/// What is wrong with a trace of format version `found`.
fn version_problem(found: u32) -> String {
    format!("trace format version {found}, but this core reads version {TRACE_VERSION} only: record the trace again")
}

/// Reads [`Trace::version`], refusing any but [`TRACE_VERSION`]. `version` is the first field
/// a trace is written with, so an older trace is refused before its other fields are read
/// (in shapes this core no longer reads).
fn read_version<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    let found = u32::deserialize(deserializer)?;
    if found == TRACE_VERSION {
        Ok(found)
    } else {
        Err(serde::de::Error::custom(version_problem(found)))
    }
}

/// Before feeding the next input, every command the replay produced so far must have been
/// matched by a recorded one; an unmatched command means the recording missed it.
fn check_exhausted(produced: &[Command], cursor: usize, index: usize) -> Option<Divergence> {
    (cursor < produced.len()).then(|| Divergence {
        event_index: index,
        recorded: None,
        replayed: Some(produced[cursor].clone()),
    })
}

/// Drives a [`Refresh`] and records every call and command into a [`Trace`].
#[derive(Debug)]
pub struct Recorder {
    refresh: Refresh,
    trace: Trace,
}

impl Recorder {
    /// Starts a refresh (as [`Refresh::new`]) and begins recording it.
    pub fn new(config: &RefreshConfig, book: &BrokerBook, now: Instant, recorder: &str) -> Result<Self, ConfigError> {
        Self::with_estimate(config, book, now, recorder, None)
    }

    /// As [`Refresh::with_estimate`], recorded (the recent response time goes into the trace).
    pub fn with_estimate(
        config: &RefreshConfig,
        book: &BrokerBook,
        now: Instant,
        recorder: &str,
        recent_response_time: Option<core::time::Duration>,
    ) -> Result<Self, ConfigError> {
        let refresh = Refresh::with_estimate(config, book, now, recent_response_time)?;
        let trace = Trace {
            version: TRACE_VERSION,
            recorder: recorder.to_string(),
            config: *config,
            book: book.clone(),
            started_at: now,
            recent_response_time,
            events: Vec::new(),
            context: None,
        };
        Ok(Recorder { refresh, trace })
    }

    /// As [`Refresh::handle_input`], recorded.
    pub fn handle_input(&mut self, now: Instant, input: Input) -> InputOutcome {
        self.trace.events.push(TraceEvent::Input { at: now, input: input.clone() });
        self.refresh.handle_input(now, input)
    }

    /// As [`Refresh::handle_timeout`], recorded.
    pub fn handle_timeout(&mut self, now: Instant) {
        let timer = self.refresh.next_timer().filter(|(at, _)| *at <= now).map(|(_, k)| k);
        self.trace.events.push(TraceEvent::Timeout { at: now, timer });
        self.refresh.handle_timeout(now);
    }

    /// As [`Refresh::poll_command`], recorded. `now` stamps the record.
    #[must_use]
    pub fn poll_command(&mut self, now: Instant) -> Option<Command> {
        let cmd = self.refresh.poll_command()?;
        self.trace.events.push(TraceEvent::Command { at: now, command: cmd.clone() });
        Some(cmd)
    }

    /// The refresh being recorded (for `poll_timeout`, stats, attempts).
    pub fn refresh(&self) -> &Refresh {
        &self.refresh
    }

    /// The trace so far.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// Ends recording and returns the trace.
    pub fn into_trace(self) -> Trace {
        self.trace
    }
}
