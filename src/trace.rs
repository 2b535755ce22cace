//! Traces: a serde record of one refresh — config, brokers, and every timed input and
//! command — that replays to the same commands.
//!
//! The CLI writes one with `--trace FILE`; the web demo replays it through the core and
//! says whether the replay diverges. [`Recorder`] wraps a [`Refresh`] and records as it
//! drives it, so an adapter cannot forget to log an input.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

use crate::brokers::BrokerBook;
use crate::config::{RefreshConfig, Stagger};
use crate::error::ConfigError;
use crate::refresh::{Command, Input, InputOutcome, Refresh, RefreshContext, TimerKind};
use crate::time::Instant;

/// Format version of [`Trace`]; bumped on incompatible changes. Version 2 added
/// `fanout.stagger.adaptive.silent`: a version 1 trace was recorded when a connected broker
/// was judged by its handshake alone, which is `silent` = 0 ([`Trace::policy`]). Version 3
/// added `Input::Connected`'s `tls` (absent: no TLS handshake follows, as recorded, so
/// `silent_tls` never applies) and `BrokerFailure::cancelled` in a give-up (absent before:
/// an older trace's give-up is compared without it, see [`Trace::replay`]).
pub const TRACE_VERSION: u32 = 3;

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
    /// [`TRACE_VERSION`] at recording time.
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
    /// The policy the trace was recorded with, as this version of the core reads it: its
    /// `config`, with the knobs added since its version set to what the recording core did
    /// without them (so an old trace replays to its own commands).
    pub fn policy(&self) -> RefreshConfig {
        let mut config = self.config;
        if let (true, Stagger::Adaptive(a)) = (self.version < 2, &mut config.fanout.stagger) {
            a.silent = core::time::Duration::ZERO;
        }
        config
    }

    /// A fresh [`Refresh`] as the trace's started: its policy ([`Trace::policy`]), book,
    /// start time and recent response time.
    pub fn start(&self) -> Result<Refresh, ConfigError> {
        match self.context {
            Some(context) => Refresh::with_context(&self.policy(), &self.book, self.started_at, context),
            None => Refresh::with_estimate(&self.policy(), &self.book, self.started_at, self.recent_response_time),
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
                    if !replayed.is_some_and(|r| self.same_command(r, command)) {
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

impl Trace {
    /// Whether the replay's `replayed` is the recorded `recorded`. A give-up recorded before
    /// version 3 has no broker's cancel reason (`BrokerFailure::cancelled`), which the core now
    /// adds to what it decided then: it is compared without it.
    fn same_command(&self, replayed: &Command, recorded: &Command) -> bool {
        match (replayed, recorded) {
            (Command::GiveUp(r), Command::GiveUp(c)) if self.version < 3 => {
                r.reason == c.reason
                    && r.last_error == c.last_error
                    && r.brokers.len() == c.brokers.len()
                    && r.brokers.iter().zip(&c.brokers).all(|(r, c)| {
                        let mut r = r.clone();
                        r.cancelled = c.cancelled;
                        r == *c
                    })
            }
            _ => replayed == recorded,
        }
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
