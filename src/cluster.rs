//! A long-lived client's view of the cluster: cached metadata, single-flight refresh,
//! periodic refresh, rebootstrap, the hedge budget and the connections kept between
//! refreshes (`keeping.rs`); what it emits is [`ClusterEvent`] (`event.rs`), why a refresh runs
//! [`RefreshCause`] (`cause.rs`).

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use crate::brokers::{BrokerBook, BrokerIdentity, BrokerIndex};
use crate::client_stats::ClientStats;
use crate::config::ClusterConfig;
use crate::error::{ConfigError, ErrorKind};
use crate::estimator::Estimator;
use crate::metadata::Metadata;
use crate::refresh::{attempt_capacity, Command, Input, InputOutcome, Refresh};
use crate::time::Instant;
use crate::trace::{Trace, TraceEvent, TRACE_VERSION};
use smallvec::SmallVec;

mod cause;
mod event;
mod keeping;
mod settle;
pub use cause::RefreshCause;
pub use event::ClusterEvent;
pub use keeping::Drain;

/// A long-lived client's view of the cluster: cached metadata, single-flight refresh,
/// periodic refresh, rebootstrap and the hedge budget.
///
/// [`Cluster`] owns a [`BrokerBook`] and runs one [`Refresh`] at a time. Concurrent refresh
/// requests join the running one (single-flight), so a burst of "leader not available"
/// errors in an application costs one refresh, not one per caller. It follows the same
/// sans-IO contract as `Refresh`: `handle_*` in, [`ClusterEvent`]s out, `poll_timeout`.
///
/// It also decides which connection outlives a refresh, so no adapter writes that policy:
/// the winner's connection is kept ([`ClusterEvent::Keep`]), the next refresh asks that
/// broker first on it ([`ClusterEvent::Reuse`]), and a kept connection that a newer winner
/// replaces, that a rebootstrap forgets or whose broker is named as the trouble's source
/// is closed ([`ClusterEvent::Release`]). Beside the winner's, up to
/// [`ClusterConfig::spare_connections`] losers' connections may be kept
/// ([`Cluster::wants_spare`], [`Cluster::keep_spare`]): a later refresh's hedge then runs on
/// one of them before it opens a new one. The broker a bootstrap tried first becomes the
/// client's home once it answers, whether it won or was outrun while its handshake queued and
/// kept late ([`Cluster::keep_first_choice`]); the home leads every refresh while kept, and a
/// later refresh that outruns it drains it back the same way. [`Cluster::stats`] counts what
/// that cost.
///
/// Its refreshes run gently until the view is calm ([`ClusterConfig::gentle_until_calm`]):
/// the bootstrap, the refresh after a TLS bootstrap (which shows no kept connection's pace),
/// and each refresh after one that met a queue or failed, suspect a broker
/// only at the adaptive stagger's `pace` while connecting and its `ceiling` once connected,
/// so a fleet starting together does not hedge into brokers queued by its own handshakes.
///
/// | event | the adapter |
/// |---|---|
/// | `Connect` | opens a connection and runs the attempt's exchange on it |
/// | `Reuse` | runs the attempt's Metadata request on the kept connection |
/// | `Resolve` | looks the name up |
/// | `Cancel` | abandons the attempt and closes its connection |
/// | `Keep` | keeps the winner's connection, watched for the broker closing it |
/// | `Release` | closes the kept connection |
/// | `Refreshed`, `RefreshFailed` | answers the callers waiting for that epoch |
/// | `Rebootstrapped` | nothing (it is news for the application) |
#[derive(Clone, Debug)]
pub struct Cluster {
    config: ClusterConfig,
    book: BrokerBook,
    metadata: Option<Metadata>,
    fetched_at: Option<Instant>,
    current: Option<Refresh>,
    /// The refresh that finished last, kept so callers can read its attempts.
    last: Option<Refresh>,
    epoch: u32,
    now: Instant,
    next_periodic: Instant,
    /// Hedge budget in thousandths of a token.
    hedge_millitokens: u64,
    events: VecDeque<ClusterEvent>,
    /// The response-time window: recent winning response times, for the adaptive stagger
    /// of later refreshes.
    response_times: Estimator,
    /// The window of recent handshake times of fresh connections: stand in for a kept
    /// connection's.
    handshake_times: Estimator,
    /// The window of recent first answers on fresh connections (handshake → the broker's
    /// first answer): the broker pace of the adaptive stagger's silent phase.
    first_answer_times: Estimator,
    /// The window of recent first answers on kept connections (reuse → the ApiVersions
    /// answer): the broker pace of a kept connection's silent phase.
    kept_answer_times: Estimator,
    /// Whether an attempt of the running refresh failed with REBOOTSTRAP_REQUIRED.
    rebootstrap_required: bool,
    /// The broker that reset a kept connection since the last refresh request, if one did.
    lost: Option<BrokerIndex>,
    /// The brokers whose connections the adapter keeps idle (after `Keep` or
    /// [`Cluster::keep_spare`], until `Reuse`, `Release` or the adapter says it closed),
    /// the latest winner's first; at most one per broker.
    kept: SmallVec<[BrokerIndex; keeping::KEPT_INLINE]>,
    /// The client's home: the broker of its first winning attempt, or its bootstrap's first
    /// choice once [`Cluster::keep_first_choice`] kept it late. Refreshes ask it first while
    /// a connection to it is kept.
    home: Option<BrokerIndex>,
    /// Whether the latest refresh ended with an answer and no queue
    /// ([`Refresh::saw_queue`]), and the view knows a kept connection's pace (a calm
    /// refresh's Metadata on an authenticated connection): until then refreshes run gently
    /// ([`ClusterConfig::gentle_until_calm`]).
    calm: bool,
    /// What the view has cost so far (`kept` is filled in by [`Cluster::stats`]).
    counters: ClientStats,
    /// Whether (under which recorder name) each refresh is recorded, the running one's
    /// trace, and the last finished one's.
    recorder: Option<String>,
    recording: Option<Trace>,
    last_trace: Option<Trace>,
}

impl Cluster {
    /// Creates a cluster view over `book`; no refresh runs until requested or due.
    pub fn new(config: ClusterConfig, book: BrokerBook, now: Instant) -> Result<Self, ConfigError> {
        config.validate()?;
        // The seeds must fit one refresh; brokers discovered later are fitted to it.
        attempt_capacity(&config.refresh, book.len())?;
        Ok(Cluster {
            config,
            book,
            metadata: None,
            fetched_at: None,
            current: None,
            last: None,
            epoch: 0,
            now,
            next_periodic: now.saturating_add(config.refresh_interval),
            hedge_millitokens: config.hedge_budget.burst as u64 * 1000,
            events: VecDeque::with_capacity(16),
            response_times: Estimator::new(),
            handshake_times: Estimator::new(),
            first_answer_times: Estimator::new(),
            kept_answer_times: Estimator::new(),
            rebootstrap_required: false,
            lost: None,
            kept: SmallVec::new(),
            home: None,
            calm: false,
            counters: ClientStats::default(),
            recorder: None,
            recording: None,
            last_trace: None,
        })
    }

    /// Asks for fresh metadata. If a refresh is running, the request joins it
    /// (single-flight); otherwise one starts now. Returns the epoch of the refresh that will
    /// answer: wait for `Refreshed` or `RefreshFailed` with that epoch.
    pub fn request_refresh(&mut self, now: Instant) -> u32 {
        self.request_refresh_because(now, RefreshCause::Requested, None)
    }

    /// Asks for fresh metadata and says why, which the policy reads ([`RefreshCause`]): a
    /// cause every client sees at once (a refused or reset connection, stale metadata) makes
    /// the refresh gentle. `broker`, the broker the trouble came from when the caller knows,
    /// counts as failed: tried last, no longer preferred for a kept connection (a request
    /// that joins a running refresh still marks it). Returns the epoch, as
    /// [`Cluster::request_refresh`].
    pub fn request_refresh_because(&mut self, now: Instant, cause: RefreshCause, broker: Option<BrokerIndex>) -> u32 {
        // Settle whatever is due first: a refresh whose deadline has passed must not be joined.
        self.handle_timeout(now);
        // A plain request after a reset connection follows from it (`connection_lost`).
        let (cause, broker) = match (cause, self.lost.take()) {
            (RefreshCause::Requested, Some(lost)) => (RefreshCause::ConnectionLost, Some(lost)),
            _ => (cause, broker),
        };
        if let Some(broker) = broker {
            self.book.record_failure(broker, self.now);
        }
        if let Some(r) = &self.current {
            return r.epoch();
        }
        self.start(self.now, cause)
    }

    /// Feeds an I/O result for an attempt and says what became of it, as
    /// [`Refresh::handle_input`]: an input of a refresh that has finished changes nothing
    /// (`RefreshFinished`). Then fires what is due, as [`Cluster::handle_timeout`].
    pub fn handle_input(&mut self, now: Instant, input: Input) -> InputOutcome {
        self.advance(now);
        let epoch = input.attempt().epoch();
        let outcome = match &mut self.current {
            Some(r) if epoch == r.epoch() => {
                let rebootstrap = asks_to_rebootstrap(&input);
                let fresh_connection = match input {
                    Input::Connected { attempt, .. } => r.attempt(attempt).is_some_and(|a| !a.reused_connection),
                    _ => false,
                };
                if let Some(trace) = &mut self.recording {
                    trace.events.push(TraceEvent::Input { at: self.now, input: input.clone() });
                }
                let outcome = r.handle_input(self.now, input);
                if fresh_connection && outcome.is_applied() {
                    self.counters.connections_opened += 1;
                }
                // The addresses a name resolved to are entries of the book from now on.
                self.book.absorb(r);
                // An applied REBOOTSTRAP_REQUIRED failed its attempt; the rule this feeds is
                // documented on `ClusterEvent::Rebootstrapped`.
                if rebootstrap && outcome.is_applied() {
                    self.rebootstrap_required = true;
                }
                self.pump();
                outcome
            }
            // A refresh of this view that has finished (epochs count up from 1).
            _ if epoch != 0 && epoch <= self.epoch => InputOutcome::RefreshFinished,
            _ => InputOutcome::OtherRefresh,
        };
        self.handle_timeout(self.now);
        outcome
    }

    /// Which node of which cluster `broker` should be, as far as this view knows: the cached
    /// metadata's cluster id and the node id it listed at that address. `None` unless the
    /// broker is currently discovered and both are known (a seed, or metadata without a
    /// cluster id, has none), since a check of one half only is refused by the broker.
    ///
    /// Adapters hand it to each attempt (`kafka::Exchange::with_identity`), so a discovered
    /// broker is asked to confirm it with ApiVersions v5 (Kafka 4.4, KIP-1242).
    pub fn identity(&self, broker: BrokerIndex) -> Option<BrokerIdentity> {
        let node_id = self.book.get(broker)?.node_id?;
        let cluster_id = self.metadata.as_ref()?.cluster_id.clone()?;
        Some(BrokerIdentity { cluster_id, node_id }).filter(BrokerIdentity::is_complete)
    }

    /// Advances time: fires refresh timers and starts a periodic refresh when due.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
        if let Some(r) = &mut self.current {
            let due = r.next_timer().filter(|(at, _)| *at <= self.now).map(|(_, kind)| kind);
            if let (Some(trace), Some(timer)) = (&mut self.recording, due) {
                trace.events.push(TraceEvent::Timeout { at: self.now, timer: Some(timer) });
            }
            r.handle_timeout(self.now);
            self.pump();
        }
        if self.current.is_none() && self.now >= self.next_periodic {
            self.start(self.now, RefreshCause::Periodic);
        }
    }

    /// The next event, if any. Drain after every `handle_*` and `request_refresh`.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<ClusterEvent> {
        self.events.pop_front()
    }

    /// When to call [`Cluster::handle_timeout`] next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        match &self.current {
            Some(r) => r.poll_timeout(),
            None => Some(self.next_periodic),
        }
    }

    /// The latest good metadata, if any refresh has succeeded.
    pub fn metadata(&self) -> Option<&Metadata> {
        self.metadata.as_ref()
    }

    /// How old the cached metadata is at `now`.
    pub fn metadata_age(&self, now: Instant) -> Option<Duration> {
        self.fetched_at.map(|at| now.saturating_since(at))
    }

    /// The broker book (seeds, discovered brokers, health).
    pub fn book(&self) -> &BrokerBook {
        &self.book
    }

    /// The running refresh, if any (for visualisers).
    pub fn current(&self) -> Option<&Refresh> {
        self.current.as_ref()
    }

    /// The refresh that finished most recently (kept until the next one finishes), so a
    /// caller that saw `Refreshed` or `RefreshFailed` can read every attempt's record —
    /// when it started, connected, answered and ended, and how — from the core itself.
    pub fn last_refresh(&self) -> Option<&Refresh> {
        self.last.as_ref()
    }

    /// Whole hedge tokens available to the next refresh.
    pub fn hedge_tokens(&self) -> u32 {
        (self.hedge_millitokens / 1000).min(u32::MAX as u64) as u32
    }

    /// The response-time window (what the adaptive stagger of the next refresh learns from).
    pub fn estimator(&self) -> &Estimator {
        &self.response_times
    }

    /// The settings this view runs with.
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// Records every refresh from the next one on as a replayable [`Trace`] under the name
    /// `recorder` (e.g. `stagger-cli 0.1.0`); read the last with [`Cluster::last_trace`].
    pub fn record_traces(&mut self, recorder: impl Into<String>) {
        self.recorder = Some(recorder.into());
    }

    /// The trace of the refresh that finished last, if traces are recorded
    /// ([`Cluster::record_traces`]).
    pub fn last_trace(&self) -> Option<&Trace> {
        self.last_trace.as_ref()
    }

    fn advance(&mut self, now: Instant) {
        if now > self.now {
            self.now = now;
        }
    }

    fn start(&mut self, now: Instant, cause: RefreshCause) -> u32 {
        // Without metadata, whatever the caller says, this is a bootstrap.
        let cause = if self.metadata.is_none() && !cause.storm_likely() { RefreshCause::Bootstrap } else { cause };
        self.epoch = self.epoch.wrapping_add(1);
        self.rebootstrap_required = false;
        // A kept connection to a broker since recorded as failed (named as the trouble's
        // source) is not trusted with this refresh: it goes, and the broker is tried last.
        self.release_where(|book, b| !book.get(b).is_some_and(|e| e.connected));
        self.book.set_lead(self.lead());
        let mut config = self.config.refresh;
        // Each refresh draws from its own stream: same cluster seed ⇒ same sequence of refreshes.
        config.seed = config.seed.wrapping_add(self.epoch as u64);
        let ctx = self.context(&config, cause);
        // Validated in `new`, and the book is never empty; should it fail anyway, report it.
        match Refresh::with_context(&config, &self.book, now, ctx) {
            Ok(r) => {
                // A kept connection to a broker that is no longer a candidate (the metadata
                // stopped listing it) would never be asked again: it goes.
                self.release_where(|_, kept| !r.candidates().contains(&kept));
                self.counters.refreshes += 1;
                self.recording = self.recorder.as_ref().map(|recorder| Trace {
                    version: TRACE_VERSION,
                    recorder: recorder.clone(),
                    config,
                    book: self.book.clone(),
                    started_at: now,
                    recent_response_time: ctx.recent_response_time,
                    events: Vec::new(),
                    context: Some(ctx),
                });
                self.current = Some(r);
                self.pump();
            }
            Err(_) => self.next_periodic = now.saturating_add(self.config.refresh_interval),
        }
        self.epoch
    }

    /// Moves the running refresh's commands into events and settles a finished refresh.
    fn pump(&mut self) {
        let Some(r) = &mut self.current else { return };
        let epoch = r.epoch();
        while let Some(cmd) = r.poll_command() {
            if let Some(trace) = &mut self.recording {
                trace.events.push(TraceEvent::Command { at: self.now, command: cmd.clone() });
            }
            match cmd {
                Command::Connect { attempt, broker } => {
                    self.counters.attempts += 1;
                    // The refresh counts on a kept connection for its first attempt there
                    // (`AttemptInfo::reused_connection`); it goes to that attempt.
                    let kept = self.kept.iter().position(|&k| k == broker);
                    let reuse = kept.filter(|_| r.attempt(attempt).is_some_and(|a| a.reused_connection));
                    if let Some(i) = reuse {
                        self.kept.remove(i);
                        self.counters.connections_reused += 1;
                        self.events.push_back(ClusterEvent::Reuse { attempt, broker });
                    } else {
                        self.events.push_back(ClusterEvent::Connect { attempt, broker });
                    }
                }
                Command::Resolve { attempt, broker } => {
                    self.counters.attempts += 1;
                    self.events.push_back(ClusterEvent::Resolve { attempt, broker })
                }
                Command::Cancel { attempt, reason } => self.events.push_back(ClusterEvent::Cancel { attempt, reason }),
                Command::Done { attempt, broker, metadata } => {
                    let stats = r.stats();
                    // Whether the winner was asked to confirm the cluster (see `identity`).
                    let checked = self.book.get(broker).is_some_and(|e| e.node_id.is_some())
                        && self.metadata.as_ref().is_some_and(|m| m.cluster_id.is_some());
                    self.book.update_from_metadata(&metadata);
                    self.book.record_success(broker, self.now);
                    self.metadata = Some(metadata);
                    self.fetched_at = Some(self.now);
                    let spares = self.config.spare_connections as usize;
                    let (kept, book, events) = (&mut self.kept, &mut self.book, &mut self.events);
                    keeping::keep_winner(kept, book, events, &mut self.home, spares, broker);
                    self.events.push_back(ClusterEvent::Keep { attempt, broker });
                    self.events.push_back(ClusterEvent::Refreshed { epoch, attempt, broker, stats });
                    if self.rebootstrap_required && !checked && self.config.rebootstrap {
                        self.counters.rebootstraps += 1;
                        self.events.push_back(ClusterEvent::Rebootstrapped);
                    }
                }
                Command::GiveUp(error) => {
                    self.events.push_back(ClusterEvent::RefreshFailed { epoch, error });
                }
            }
        }
        if !r.is_finished() {
            return;
        }
        let Some(done) = self.current.take() else { return };
        if let Some(trace) = self.recording.take() {
            self.last_trace = Some(trace);
        }
        self.settle(&done);
        self.last = Some(done);
    }
}

/// Whether `input` reports REBOOTSTRAP_REQUIRED: a failed attempt with error 129 (the
/// exchange's ApiVersions v5 check, or its own cluster-id check), or a Metadata answer
/// carrying it at the top level (which the refresh rejects).
fn asks_to_rebootstrap(input: &Input) -> bool {
    const REBOOTSTRAP_REQUIRED: ErrorKind = ErrorKind::BrokerError(129);
    match input {
        Input::Failed { error, .. } => error.kind == REBOOTSTRAP_REQUIRED,
        Input::Response { metadata, .. } => metadata.rejection().is_some_and(|e| e.kind == REBOOTSTRAP_REQUIRED),
        Input::Connected { .. }
        | Input::FirstFrame { .. }
        | Input::Authenticating { .. }
        | Input::Authenticated { .. }
        | Input::Resolved { .. } => false,
    }
}

#[cfg(test)]
mod tests;
