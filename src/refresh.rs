//! One refresh episode: staggered, throttled, jittered fan-out with retries and a deadline.
//!
//! [`Refresh`] is a sans-IO state machine in the style of quinn-proto and str0m: time and
//! I/O results go in through `handle_*`, commands come out of [`Refresh::poll_command`].
//! After every `handle_*` call, drain `poll_command()` until it returns `None`, then wait
//! until [`Refresh::poll_timeout`] or the next I/O result. Inputs that name an unknown,
//! finished or cancelled attempt are ignored; time that goes backwards is clamped; the
//! machine never panics on any input sequence (the property tests check this).
//!
//! Cost per input is O(1) amortised in the number of brokers: attempts live in a `Vec`
//! indexed by attempt number, attempt timeouts in a FIFO (every attempt has the same
//! timeout, so expiry order is start order), and every buffer is sized at construction, so
//! steady-state inputs do not allocate. (An [`Input::Answered`] and a supersede look over the
//! attempts still queued: O(attempts in flight), a handful.)
//!
//! Report [`Input::Connected`] when an attempt's transport is up and [`Input::Answered`] when
//! its broker first answers: the adaptive stagger hedges a broker that connected but stays
//! silent within a few handshake times, and one that is answering only after a long patience
//! (see [`crate::config::Adaptive`]); and the first broker to answer cancels the silent ones
//! (`fanout.cancel_silent_on_answer`), so each refresh sends one metadata request.

mod in_flight;

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;
use serde::{Deserialize, Serialize};

use crate::brokers::{BrokerBook, BrokerIndex};
use crate::config::{Growth, RefreshConfig, Stagger};
use crate::error::{AttemptError, BrokerFailure, ConfigError, ErrorKind, GiveUpReason, RefreshError};
use crate::metadata::Metadata;
use crate::rng::Rng;
use crate::time::{scale, Instant};
use in_flight::InFlightList;

/// Names one attempt (one connection to one broker) uniquely within a [`crate::Cluster`]:
/// the high 32 bits are the refresh's epoch, the low 32 bits the attempt's number in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AttemptId(pub u64);

impl AttemptId {
    fn new(epoch: u32, number: u32) -> Self {
        AttemptId(((epoch as u64) << 32) | number as u64)
    }
    /// The refresh this attempt belongs to.
    pub fn epoch(self) -> u32 {
        (self.0 >> 32) as u32
    }
    /// The attempt's number within its refresh, from 0.
    pub fn number(self) -> u32 {
        self.0 as u32
    }
}

impl fmt::Display for AttemptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}.{}", self.epoch(), self.number())
    }
}

/// What the adapter reports about an attempt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Input {
    /// The transport handshake completed (informational; feeds the adaptive stagger).
    Connected {
        /// Which attempt.
        attempt: AttemptId,
    },
    /// The broker sent its first answer on this attempt (for Kafka: the ApiVersions
    /// response, even an error one), so it is alive and reading its socket. Feeds the
    /// adaptive stagger, which hedges silent brokers quickly and answering ones patiently;
    /// the [`crate::kafka::Exchange`] says when ([`crate::kafka::Exchange::has_answered`]).
    /// Adapters that cannot tell should skip it: without it every connected attempt looks
    /// silent, and the adaptive stagger hedges after a few handshake times.
    Answered {
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
    /// The attempt failed; the adapter has already closed its connection.
    Failed {
        /// Which attempt.
        attempt: AttemptId,
        /// Why.
        error: AttemptError,
    },
}

impl Input {
    /// The attempt this input is about.
    pub fn attempt(&self) -> AttemptId {
        match self {
            Input::Connected { attempt }
            | Input::Answered { attempt }
            | Input::Response { attempt, .. }
            | Input::Failed { attempt, .. } => *attempt,
        }
    }
}

/// Error detail of an attempt superseded to make room in a full throttle.
const SUPERSEDED_FULL: &str = "superseded: no answer within the stagger delay while the throttle was full";
/// Error detail of an attempt cancelled because another broker started answering first.
const OVERTAKEN: &str = "overtaken: no answer yet while another broker was answering";
/// Error detail of an attempt superseded because no hedge budget was left to add one.
const SUPERSEDED_NO_BUDGET: &str = "superseded: no answer within the stagger delay and no hedge budget left";

/// Why the core asks the adapter to abandon an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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
    /// its place: the throttle was full (`fanout.replace_when_full`), or the hedge budget was
    /// spent (the load in flight stays the same).
    Superseded,
    /// The broker answered, but with metadata that cannot win (no brokers, top-level error).
    Rejected,
    /// Another attempt's broker started answering while this one's had said nothing
    /// (`fanout.cancel_silent_on_answer`).
    Overtaken,
}

impl CancelReason {
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

/// Why the core wants to be woken up; shown by traces and the visualiser.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimerKind {
    /// The stagger delay: start the next attempt if none answered.
    Stagger,
    /// The oldest in-flight attempt's timeout.
    AttemptTimeout,
    /// End of the backoff between two passes.
    Backoff,
    /// The overall deadline.
    Deadline,
}

/// Where an attempt stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptState {
    /// Started, no answer yet.
    InFlight,
    /// Answered with metadata that won.
    Won,
    /// Failed (reported by the adapter, timed out, or rejected).
    Failed,
    /// Cancelled by the core (lost, deadline, fatal elsewhere).
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
    /// When its broker first answered ([`Input::Answered`]), if it did.
    #[serde(default)]
    pub answered_at: Option<Instant>,
    /// Whether it went to a broker whose connection was kept from an earlier refresh (its
    /// handshake then measures nothing).
    #[serde(default)]
    pub kept: bool,
    /// When it ended, if it did.
    pub ended_at: Option<Instant>,
    /// Where it stands.
    pub state: AttemptState,
    /// Whether it was started while another attempt was still in flight (a hedge).
    pub hedge: bool,
    /// Whether a spread tick started it after the tick's first attempt
    /// (`fanout.spread_ticks`): it came a share of the delay later, because no broker had
    /// answered meanwhile.
    #[serde(default)]
    pub partner: bool,
}

/// Counters of one refresh, for reports and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefreshStats {
    /// Attempts started (Connect commands).
    pub started: u32,
    /// Attempts the core cancelled.
    pub cancelled: u32,
    /// Attempts that failed (including timeouts and rejected answers).
    pub failed: u32,
    /// Attempts started while another was in flight (spend hedge budget).
    pub hedges: u32,
    /// Passes over the brokers begun (1 + retries used).
    pub passes: u32,
}

/// Context a [`crate::Cluster`] passes to each refresh it runs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RefreshContext {
    pub(crate) epoch: u32,
    pub(crate) hedge_tokens: u32,
    pub(crate) warm_stagger: Option<Duration>,
    /// A high quantile of recent fresh handshakes: stands in for the handshake of a kept
    /// connection in the adaptive stagger.
    pub(crate) handshake_hint: Option<Duration>,
}

impl Default for RefreshContext {
    fn default() -> Self {
        RefreshContext { epoch: 0, hedge_tokens: u32::MAX, warm_stagger: None, handshake_hint: None }
    }
}

/// One metadata refresh episode. See the module documentation for the driving contract.
#[derive(Clone, Debug)]
pub struct Refresh {
    config: RefreshConfig,
    epoch: u32,
    rng: Rng,
    started_at: Instant,
    now: Instant,
    deadline_at: Instant,
    /// Brokers in attempt order.
    candidates: Vec<BrokerIndex>,
    /// Per candidate position: attempts, last error (handed to `GiveUp` without copying).
    outcomes: Vec<BrokerFailure>,
    /// Next candidate position to try in the current pass.
    cursor: usize,
    /// Candidate positions whose attempts this pass were cancelled as overtaken by a broker
    /// that has not won yet. Should every answering attempt then fail, they are retried.
    overtaken: Vec<u32>,
    /// Candidate positions to try before the cursor moves on (a stack: the earliest
    /// overtaken on top), filled from `overtaken` when the broker that overtook them failed.
    retry_next: Vec<u32>,
    /// Per candidate position: 1 + the pass in which it was last retried that way (0:
    /// never). A candidate is retried at most once per pass, so a pass starts at most two
    /// attempts per broker and the attempt table sized for that never grows.
    retried_in: Vec<u32>,
    /// Current pass, from 0.
    pass: u32,
    attempts: Vec<AttemptSlot>,
    in_flight: u32,
    /// The attempts in flight, oldest (next to time out) first.
    timeout_queue: InFlightList,
    stagger_at: Option<Instant>,
    backoff_at: Option<Instant>,
    /// Attempt number of the most recent launch (the stagger timer's anchor).
    latest: Option<u32>,
    /// Stagger ticks so far in this pass (drives growth).
    ticks: u32,
    /// A spread tick's next attempt (see `fanout.spread_ticks`): when it is due, how many
    /// are left, how far apart, and which attempts were suspects when the tick fired.
    spread_at: Option<Instant>,
    spread_left: u32,
    spread_gap: Duration,
    spread_suspects: u32,
    /// Exponential growth: size of the next tick's wave.
    wave: f64,
    hedge_tokens: u32,
    warm_stagger: Option<Duration>,
    handshake_hint: Option<Duration>,
    /// Per candidate position: whether its connection is kept from an earlier refresh.
    kept: Vec<bool>,
    /// In-flight attempts whose broker has answered something.
    answering: u32,
    /// Attempts superseded so far (a full throttle, or no hedge budget left); each doubles
    /// the next stagger delay.
    doublings: u32,
    /// The latest failure: its attempt and candidate position (the error itself lives in
    /// `outcomes`, so recording a failure never copies it).
    last_failure: Option<(u32, usize)>,
    commands: VecDeque<Command>,
    finished: bool,
    stats: RefreshStats,
}

#[derive(Clone, Copy, Debug)]
struct AttemptSlot {
    candidate: u32,
    info: AttemptInfo,
    timeout_at: Instant,
    /// Scales this attempt's stagger delay, fixed at launch: the jitter drawn then, in
    /// `[1 - jitter, 1]`, times 2 per supersede so far (see `supersede_newest_silent`).
    delay_factor: f64,
}

impl Refresh {
    /// Starts a refresh at `now` over the brokers of `book`.
    ///
    /// Validates `config` (the error names the bad field) and refuses an empty book. The
    /// first attempts are ready in [`Refresh::poll_command`] right away.
    pub fn new(config: &RefreshConfig, book: &BrokerBook, now: Instant) -> Result<Self, ConfigError> {
        Self::with_context(config, book, now, RefreshContext::default())
    }

    /// Starts a refresh that knows how this cluster usually answers: `recent` is a high
    /// quantile of recent response times (see [`crate::estimator::Estimator`]), used by the
    /// adaptive stagger instead of the cold 250 ms guess.
    pub fn with_estimate(
        config: &RefreshConfig,
        book: &BrokerBook,
        now: Instant,
        recent: Option<Duration>,
    ) -> Result<Self, ConfigError> {
        Self::with_context(config, book, now, RefreshContext { warm_stagger: recent, ..RefreshContext::default() })
    }

    pub(crate) fn with_context(
        config: &RefreshConfig,
        book: &BrokerBook,
        now: Instant,
        ctx: RefreshContext,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        let mut rng = Rng::new(config.seed ^ ((ctx.epoch as u64) << 40));
        let mut candidates = Vec::with_capacity(book.len());
        book.attempt_order(now, &mut rng, &mut candidates);
        if candidates.is_empty() {
            return Err(ConfigError::new("seeds", "the broker book has no broker to try"));
        }
        let outcomes = candidates
            .iter()
            .map(|&b| BrokerFailure {
                broker: b,
                address: book.get(b).map(|e| e.address.clone()).unwrap_or_else(|| "?".into()),
                attempts: 0,
                last_error: None,
            })
            .collect();
        let kept = candidates.iter().map(|&b| book.get(b).is_some_and(|e| e.connected)).collect();
        let n = candidates.len();
        let passes = (config.retry.retries as usize).saturating_add(1);
        let width = (config.fanout.max_in_flight as usize).min(n);
        let attempts = n.saturating_mul(passes).saturating_mul(2).min(1 << 16);
        let mut refresh = Refresh {
            config: *config,
            epoch: ctx.epoch,
            rng,
            started_at: now,
            now,
            deadline_at: now.saturating_add(config.deadline),
            candidates,
            outcomes,
            cursor: 0,
            overtaken: Vec::with_capacity(n),
            retry_next: Vec::with_capacity(n),
            retried_in: alloc::vec![0; n],
            pass: 0,
            // One attempt per broker per pass, and at most one retry (see `retried_in`).
            attempts: Vec::with_capacity(attempts),
            in_flight: 0,
            timeout_queue: InFlightList::with_capacity(attempts),
            stagger_at: None,
            backoff_at: None,
            latest: None,
            ticks: 0,
            spread_at: None,
            spread_left: 0,
            spread_gap: Duration::ZERO,
            spread_suspects: 0,
            wave: 1.0,
            hedge_tokens: ctx.hedge_tokens,
            warm_stagger: ctx.warm_stagger,
            handshake_hint: ctx.handshake_hint,
            kept,
            answering: 0,
            doublings: 0,
            last_failure: None,
            commands: VecDeque::with_capacity(2 * width + 8),
            finished: false,
            stats: RefreshStats::default(),
        };
        refresh.begin_pass(now);
        Ok(refresh)
    }

    /// The next command to carry out, if any. Drain until `None` after every `handle_*`.
    #[must_use]
    pub fn poll_command(&mut self) -> Option<Command> {
        self.commands.pop_front()
    }

    /// When to call [`Refresh::handle_timeout`] next; `None` once the refresh is finished.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_timer().map(|(at, _)| at)
    }

    /// The next timer and its reason (for traces and visualisers).
    pub fn next_timer(&self) -> Option<(Instant, TimerKind)> {
        if self.finished {
            return None;
        }
        let mut best = (self.deadline_at, TimerKind::Deadline);
        let mut consider = |at: Option<Instant>, kind| {
            if let Some(at) = at {
                if at < best.0 {
                    best = (at, kind);
                }
            }
        };
        consider(self.oldest_timeout(), TimerKind::AttemptTimeout);
        consider(self.stagger_at, TimerKind::Stagger);
        consider(self.spread_at, TimerKind::Stagger);
        consider(self.backoff_at, TimerKind::Backoff);
        Some(best)
    }

    /// Advances time to `now`, firing every timer that is due.
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.clamp(now);
        self.fire_due(now);
    }

    /// Feeds one I/O result. Timers due by `now` fire first, so a response that arrives after
    /// the deadline does not win.
    pub fn handle_input(&mut self, now: Instant, input: Input) {
        let now = self.clamp(now);
        // Only attempts issued before this call can have results: a timer due now may issue
        // the very attempt the input names, which nobody has contacted yet.
        let issued = self.attempts.len();
        self.fire_due(now);
        let premature = input.attempt().epoch() == self.epoch && input.attempt().number() as usize >= issued;
        if self.finished || premature {
            return;
        }
        match input {
            Input::Connected { attempt } => self.on_connected(now, attempt),
            Input::Answered { attempt } => self.on_answered(now, attempt),
            Input::Response { attempt, metadata } => self.on_response(now, attempt, metadata),
            Input::Failed { attempt, error } => {
                if let Some(n) = self.live_attempt(attempt) {
                    self.fail(now, n, error, None);
                }
            }
        }
        self.fire_due(now);
    }

    /// This refresh's epoch (the high half of its attempt ids).
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Whether a terminal command (`Done` or `GiveUp`) has been emitted.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The configuration this refresh runs with.
    pub fn config(&self) -> &RefreshConfig {
        &self.config
    }

    /// When this refresh started.
    pub fn started_at(&self) -> Instant {
        self.started_at
    }

    /// The brokers in the order this refresh tries them.
    pub fn candidates(&self) -> &[BrokerIndex] {
        &self.candidates
    }

    /// Attempts currently in flight.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Counters so far.
    pub fn stats(&self) -> RefreshStats {
        self.stats
    }

    /// What is known about `attempt`, if it belongs to this refresh.
    pub fn attempt(&self, attempt: AttemptId) -> Option<&AttemptInfo> {
        if attempt.epoch() != self.epoch {
            return None;
        }
        self.attempts.get(attempt.number() as usize).map(|s| &s.info)
    }

    /// Every attempt so far, in start order, with its id.
    pub fn attempts(&self) -> impl Iterator<Item = (AttemptId, &AttemptInfo)> {
        let epoch = self.epoch;
        self.attempts.iter().enumerate().map(move |(i, s)| (AttemptId::new(epoch, i as u32), &s.info))
    }

    // ---- time and timers -------------------------------------------------------------

    fn clamp(&mut self, now: Instant) -> Instant {
        if now > self.now {
            self.now = now;
        }
        self.now
    }

    fn oldest_timeout(&self) -> Option<Instant> {
        self.timeout_queue.front().map(|n| self.attempts[n as usize].timeout_at)
    }

    fn fire_due(&mut self, now: Instant) {
        // Each round either finishes the refresh or consumes a timer; the bound is a
        // belt-and-braces guard against a logic error turning into a hang.
        let mut budget = 4 * (self.candidates.len() + self.in_flight as usize) + 64;
        while !self.finished && budget > 0 {
            budget -= 1;
            // An adapter that wakes up after the deadline must not see timers that were due
            // before it start new attempts: the deadline wins over everything overdue.
            if now >= self.deadline_at {
                self.on_deadline(now);
                return;
            }
            let Some((at, kind)) = self.next_timer() else { return };
            if at > now {
                return;
            }
            match kind {
                TimerKind::Deadline => self.on_deadline(now),
                TimerKind::AttemptTimeout => self.on_attempt_timeout(now),
                TimerKind::Stagger => self.on_stagger(now),
                TimerKind::Backoff => self.on_backoff(now),
            }
        }
    }

    fn on_deadline(&mut self, now: Instant) {
        while let Some(n) = self.timeout_queue.front() {
            let kind = self.timeout_kind(n);
            self.record_error(now, n, AttemptError::with_detail(kind, "overall deadline exceeded"));
            self.end_attempt(now, n, AttemptState::Cancelled);
            self.commands.push_back(Command::Cancel { attempt: self.id(n), reason: CancelReason::Deadline });
        }
        self.give_up(GiveUpReason::DeadlineExceeded);
    }

    fn on_attempt_timeout(&mut self, now: Instant) {
        while let Some(n) = self.timeout_queue.front() {
            let slot = &self.attempts[n as usize];
            if slot.timeout_at > now {
                return;
            }
            let kind = self.timeout_kind(n);
            self.fail(now, n, AttemptError::new(kind), Some(CancelReason::TimedOut));
            if self.finished {
                return;
            }
        }
    }

    fn timeout_kind(&self, n: u32) -> ErrorKind {
        match self.attempts[n as usize].info.connected_at {
            Some(_) => ErrorKind::ResponseTimeout,
            None => ErrorKind::ConnectTimeout,
        }
    }

    fn on_stagger(&mut self, now: Instant) {
        if self.stagger_at.is_none_or(|at| at > now) {
            self.on_spread(now);
            return;
        }
        self.stagger_at = None;
        self.spread_at = None;
        self.ticks = self.ticks.saturating_add(1);
        let want = match self.config.fanout.growth {
            Growth::Linear(n) => n.max(1),
            Growth::Exponential(factor) => {
                self.wave = (self.wave * factor).min(u32::MAX as f64);
                (self.wave as u32).max(1)
            }
        };
        let gap = self.spread_gap_for_tick(want);
        // Attempts from this tick are not suspects yet: never supersede them.
        let suspects = self.attempts.len() as u32;
        let started = self.stats.started;
        for _ in 0..if gap.is_some() { 1 } else { want } {
            if self.in_flight > 0 && self.hedge_tokens == 0 {
                self.replace_without_budget(now, suspects);
                break;
            }
            if self.throttle_full() && self.can_replace() {
                self.supersede_newest_silent(now, suspects, SUPERSEDED_FULL, false);
            }
            if !self.launch(now, false) {
                break;
            }
        }
        self.arm_stagger();
        if self.stats.started == started {
            // Nothing could start (no budget, and no silent suspect to replace): the tick
            // would fire again at once. Wait for an input to change the picture instead.
            self.stagger_at = None;
        } else if let Some(gap) = gap {
            self.spread_left = want - 1;
            self.spread_gap = gap;
            self.spread_suspects = suspects;
            self.spread_at = Some(now.saturating_add(self.spread_gap));
        }
    }

    /// Whether this tick should spread its attempts, and how far apart: a share of the delay
    /// that just ran out, when the leader can answer well within it — a fresh broker answers
    /// about two handshakes after its start, and the handshake of the attempt just suspected
    /// is the best guess of this network's. Otherwise (a slow network) waiting would only
    /// delay the partner: the tick starts all at once.
    fn spread_gap_for_tick(&self, want: u32) -> Option<Duration> {
        if !self.config.fanout.spread_ticks || want < 2 {
            return None;
        }
        let n = self.latest?;
        let info = &self.attempts[n as usize].info;
        // A broker that never completed its handshake says nothing about the network: use
        // the cluster's recent handshakes, or — knowing nothing — assume the fired delay
        // (then the cold one) is long enough for a healthy broker to answer within a share.
        let handshake = match info.connected_at {
            Some(at) => self.handshake_of(info, at),
            None => self.handshake_hint.unwrap_or(Duration::ZERO),
        };
        let fired = self.stagger_basis(n).1;
        if handshake.saturating_mul(2) >= fired / want {
            return None;
        }
        // The share of the delay, but never less than the adaptive floor: by its definition
        // no broker's first answer is reliably faster, so a partner due sooner would often
        // go out while the leader's answer is on its way.
        let floor = match self.config.fanout.stagger {
            Stagger::Adaptive(a) => a.floor,
            Stagger::Fixed(_) => Duration::ZERO,
        };
        Some((fired / want).max(floor))
    }

    /// The next attempt of a spread tick: started unless a broker answered meanwhile
    /// (`on_answered` drops the rest), by the same rules as the tick's own. It is a partner,
    /// not a new leader: the next tick still counts from the tick's first attempt, so
    /// spreading never slows the walk past a run of hung brokers.
    fn on_spread(&mut self, now: Instant) {
        self.spread_at = None;
        let left = core::mem::take(&mut self.spread_left);
        if left == 0 || (self.in_flight > 0 && self.hedge_tokens == 0) {
            return;
        }
        let leader = self.latest;
        if self.throttle_full() && self.can_replace() {
            self.supersede_newest_silent(now, self.spread_suspects, SUPERSEDED_FULL, false);
        }
        let launched = self.launch(now, false);
        if launched {
            if let Some(slot) = self.attempts.last_mut() {
                slot.info.partner = true;
            }
            // The next tick keeps counting from the tick's first attempt while it runs.
            if leader.is_some_and(|l| self.attempts[l as usize].info.state == AttemptState::InFlight) {
                self.latest = leader;
            }
        }
        self.arm_stagger();
        if launched && left > 1 {
            self.spread_left = left - 1;
            self.spread_at = Some(now.saturating_add(self.spread_gap));
        }
    }

    /// Out of hedge budget, a tick may not add an attempt, but the refresh must not sit on
    /// a suspect for a whole attempt timeout either: it replaces the newest silent suspect
    /// with the next broker (the load in flight stays the same), and each such replacement
    /// doubles the next stagger delay, so a client that is out of budget in a storm probes
    /// a handful of brokers, not one every few milliseconds.
    fn replace_without_budget(&mut self, now: Instant, suspects: u32) {
        if !self.config.fanout.replace_when_full || !self.has_candidate() {
            return;
        }
        // Only a silent suspect: an answering broker is busy on our request, and replacing
        // it would throw away a metadata request already sent.
        if self.supersede_newest_silent(now, suspects, SUPERSEDED_NO_BUDGET, true) {
            self.launch(now, true);
        }
    }

    fn throttle_full(&self) -> bool {
        self.in_flight >= self.config.fanout.max_in_flight
    }

    /// Whether a tick may cancel a silent attempt (see `supersede_newest_silent`) to start the
    /// next broker: enabled, a broker is left to try, and the replacement can be paid for.
    fn can_replace(&self) -> bool {
        self.config.fanout.replace_when_full && self.has_candidate() && (self.in_flight <= 1 || self.hedge_tokens > 0)
    }

    /// Makes room: cancels the newest suspect (attempt number below `suspects`) whose broker
    /// has said nothing and whose own stagger delay has run out — failing that, the newest
    /// silent one; or, unless `silent_only`, the newest suspect at all when every broker is
    /// answering. Returns whether it cancelled one; each cancellation doubles the next
    /// stagger delay.
    ///
    /// Why the newest: silent attempts are all suspects, but they are not worth the same.
    /// A hung broker's attempt is worthless whatever its age; a merely queued one (a loaded
    /// cluster, a failover storm) is worth more the earlier it queued. Keeping the oldest
    /// keeps the client on the broker it was first assigned to, which is what keeps a
    /// storm's load where it was balanced.
    ///
    /// Why only one whose delay ran out: a spread tick's partner that connected a moment
    /// ago is not suspected yet, and may be the healthy broker about to answer.
    ///
    /// Why the doubling: a throttle full of silent attempts is evidence of an overload as
    /// much as of an outage. In the fleet simulation's failover storm it cuts attempts per
    /// refresh from 13.8 to 8.8 and the p50 from 393 to 315 ms, while the hung scenarios'
    /// p99 do not move: only a refresh that has already met three silent brokers slows down.
    fn supersede_newest_silent(
        &mut self,
        now: Instant,
        suspects: u32,
        detail: &'static str,
        silent_only: bool,
    ) -> bool {
        let live = |n: &u32| *n < suspects;
        let is_silent = |n: &u32| self.attempts[*n as usize].info.answered_at.is_none();
        let silent_newest_first = || self.timeout_queue.iter().rev().filter(live).filter(is_silent);
        let overdue = |n: &u32| self.stagger_deadline(*n) <= now;
        let silent = silent_newest_first().find(overdue).or_else(|| silent_newest_first().next());
        let any = || if silent_only { None } else { self.timeout_queue.iter().rev().find(live) };
        let Some(n) = silent.or_else(any) else { return false };
        let kind = self.timeout_kind(n);
        self.record_error(now, n, AttemptError::with_detail(kind, detail));
        self.end_attempt(now, n, AttemptState::Cancelled);
        self.commands.push_back(Command::Cancel { attempt: self.id(n), reason: CancelReason::Superseded });
        self.doublings = self.doublings.saturating_add(1);
        true
    }

    fn on_backoff(&mut self, now: Instant) {
        self.backoff_at = None;
        self.pass += 1;
        self.begin_pass(now);
    }

    // ---- inputs -------------------------------------------------------------------------

    fn live_attempt(&self, attempt: AttemptId) -> Option<u32> {
        if attempt.epoch() != self.epoch {
            return None;
        }
        let n = attempt.number();
        let slot = self.attempts.get(n as usize)?;
        (slot.info.state == AttemptState::InFlight).then_some(n)
    }

    fn on_connected(&mut self, now: Instant, attempt: AttemptId) {
        let Some(n) = self.live_attempt(attempt) else { return };
        let slot = &mut self.attempts[n as usize];
        if slot.info.connected_at.is_some() {
            return;
        }
        slot.info.connected_at = Some(now);
        if self.latest == Some(n) && self.stagger_at.is_some() {
            self.stagger_at = Some(self.stagger_deadline(n));
        }
    }

    fn on_answered(&mut self, now: Instant, attempt: AttemptId) {
        let Some(n) = self.live_attempt(attempt) else { return };
        let info = &mut self.attempts[n as usize].info;
        if info.answered_at.is_some() {
            return;
        }
        info.answered_at = Some(now);
        info.connected_at.get_or_insert(now);
        self.answering += 1;
        // A broker is answering: the rest of a spread tick is not needed.
        self.spread_at = None;
        if self.config.fanout.cancel_silent_on_answer {
            self.cancel_silent(now);
        }
        self.arm_stagger();
    }

    /// A broker just answered: cancels every in-flight attempt whose broker has said nothing.
    /// They are hung, or queued behind others and would each send a metadata request once
    /// their broker caught up (see `fanout.cancel_silent_on_answer`).
    ///
    /// Why all of them, even one that connected a moment ago: sparing attempts still within
    /// their own stagger delay was measured in the fleet simulation — it helps when a slow
    /// broker answers first (a healthy one can still win), but in a failover storm the spared
    /// attempts answer later and send their own requests: 7 % more requests and 9 % more
    /// peak load per broker. The patience rule bounds what a slow broker can cost.
    fn cancel_silent(&mut self, now: Instant) {
        let mut walk = self.timeout_queue.front();
        while let Some(n) = walk {
            walk = self.timeout_queue.next_of(n);
            if self.attempts[n as usize].info.answered_at.is_none() {
                let kind = self.timeout_kind(n);
                self.record_error(now, n, AttemptError::with_detail(kind, OVERTAKEN));
                self.end_attempt(now, n, AttemptState::Cancelled);
                self.commands.push_back(Command::Cancel { attempt: self.id(n), reason: CancelReason::Overtaken });
                self.overtaken.push(self.attempts[n as usize].candidate);
            }
        }
    }

    fn on_response(&mut self, now: Instant, attempt: AttemptId, metadata: Metadata) {
        let Some(n) = self.live_attempt(attempt) else { return };
        if let Some(error) = metadata.rejection() {
            self.fail(now, n, error, Some(CancelReason::Rejected));
            return;
        }
        self.end_attempt(now, n, AttemptState::Won);
        self.cancel_all(now, CancelReason::Lost);
        let broker = self.candidates[self.attempts[n as usize].candidate as usize];
        self.commands.push_back(Command::Done { attempt, broker, metadata });
        self.finish();
    }

    // ---- the policy ----------------------------------------------------------------------

    fn begin_pass(&mut self, now: Instant) {
        self.stats.passes += 1;
        self.cursor = 0;
        self.overtaken.clear();
        self.retry_next.clear();
        self.ticks = 0;
        self.spread_at = None;
        self.wave = self.config.fanout.initial as f64;
        let initial = self.config.fanout.initial;
        for i in 0..initial {
            if !self.launch(now, i == 0) {
                break;
            }
        }
        self.arm_stagger();
    }

    /// Starts the next candidate if the throttle, the pass and (for hedges) the budget allow.
    /// `replacement` marks a launch that replaces a failed attempt or opens a pass.
    fn launch(&mut self, now: Instant, replacement: bool) -> bool {
        if self.finished || !self.has_candidate() || self.in_flight >= self.config.fanout.max_in_flight {
            return false;
        }
        let hedge = !replacement && self.in_flight > 0;
        if hedge {
            if self.hedge_tokens == 0 {
                return false;
            }
            self.hedge_tokens -= 1;
            self.stats.hedges += 1;
        }
        let candidate = match self.retry_next.pop() {
            Some(position) => position as usize,
            None => {
                self.cursor += 1;
                self.cursor - 1
            }
        };
        let n = self.attempts.len() as u32;
        let broker = self.candidates[candidate];
        self.attempts.push(AttemptSlot {
            candidate: candidate as u32,
            info: AttemptInfo {
                broker,
                pass: self.pass,
                started_at: now,
                connected_at: None,
                answered_at: None,
                kept: self.kept.get(candidate).copied().unwrap_or(false),
                ended_at: None,
                state: AttemptState::InFlight,
                hedge,
                partner: false,
            },
            timeout_at: now.saturating_add(self.config.attempt_timeout),
            delay_factor: (1.0 - self.config.fanout.jitter * self.rng.unit()) * (1u32 << self.doublings.min(20)) as f64,
        });
        self.outcomes[candidate].attempts += 1;
        self.in_flight += 1;
        self.stats.started += 1;
        self.timeout_queue.push_back(n);
        self.latest = Some(n);
        self.stagger_at = None;
        self.commands.push_back(Command::Connect { attempt: self.id(n), broker });
        true
    }

    /// Arms the stagger timer if its tick could start something: candidates remain, and
    /// either the throttle has room and a hedge could be paid for (or nothing is in flight),
    /// or — out of budget — a silent suspect could be replaced in place.
    fn arm_stagger(&mut self) {
        let can_launch = !self.finished
            && self.backoff_at.is_none()
            && self.has_candidate()
            && (((self.in_flight < self.config.fanout.max_in_flight || self.can_replace())
                && (self.in_flight == 0 || self.hedge_tokens > 0))
                // Out of budget, a tick can still replace a silent suspect in place.
                || (self.in_flight > 0 && self.config.fanout.replace_when_full && self.answering == 0));
        self.stagger_at = match (can_launch, self.latest) {
            (true, Some(n)) => Some(self.stagger_deadline(n)),
            _ => None,
        };
    }

    /// When the attempt `n` (the latest) is suspected and the next one should start.
    ///
    /// A fixed stagger counts from the attempt's start. The adaptive one depends on what
    /// the attempts have shown so far (see [`crate::config::Adaptive`]): while any broker
    /// is answering, patience from the latest start; otherwise, if the latest attempt is
    /// connected, a few of its handshake times from the handshake; before that, the cold
    /// or recent estimate from its start.
    fn stagger_deadline(&self, n: u32) -> Instant {
        let (from, delay) = self.stagger_basis(n);
        from.saturating_add(delay)
    }

    /// What the stagger deadline of attempt `n` counts from, and the (jittered, backed-off)
    /// delay it adds.
    fn stagger_basis(&self, n: u32) -> (Instant, Duration) {
        let info = &self.attempts[n as usize].info;
        let (from, delay) = match self.config.fanout.stagger {
            Stagger::Fixed(d) => (info.started_at, d),
            Stagger::Adaptive(a) if self.answering > 0 => {
                let typical = self.warm_stagger.unwrap_or_else(|| self.first_answer_time());
                (info.started_at, a.while_answering(typical))
            }
            Stagger::Adaptive(a) => match info.connected_at {
                Some(at) => (at, a.after_handshake(self.handshake_of(info, at))),
                None => (info.started_at, a.before_connect(self.warm_stagger)),
            },
        };
        (from, scale(delay, self.attempts[n as usize].delay_factor))
    }

    /// The handshake time that stands for attempt `info`'s round trip: its own, or the
    /// cluster's recent one for a kept connection (whose "handshake" measures nothing).
    fn handshake_of(&self, info: &AttemptInfo, connected_at: Instant) -> Duration {
        let measured = connected_at.saturating_since(info.started_at);
        match (info.kept, self.handshake_hint) {
            (true, Some(hint)) => hint,
            (false, Some(hint)) if measured.is_zero() => hint,
            _ => measured,
        }
    }

    /// The shortest start → first answer among answering attempts: what an answer takes on
    /// this cluster when nothing better is known.
    fn first_answer_time(&self) -> Duration {
        self.timeout_queue
            .iter()
            .filter_map(|n| {
                let info = &self.attempts[n as usize].info;
                let answered = info.answered_at?;
                Some(answered.saturating_since(info.started_at))
            })
            .min()
            .unwrap_or(Duration::ZERO)
    }

    fn fail(&mut self, now: Instant, n: u32, error: AttemptError, cancel: Option<CancelReason>) {
        let fatal = error.kind.is_fatal();
        self.record_error(now, n, error);
        self.end_attempt(now, n, AttemptState::Failed);
        self.stats.failed += 1;
        if let Some(reason) = cancel {
            self.commands.push_back(Command::Cancel { attempt: self.id(n), reason });
        }
        if fatal {
            self.cancel_all(now, CancelReason::Fatal);
            self.give_up(GiveUpReason::Fatal);
            return;
        }
        if self.answering == 0 && !self.overtaken.is_empty() {
            // Every broker that answered failed after all (an error answer, REBOOTSTRAP_REQUIRED,
            // a close): the silent attempts its answer cancelled lost to nothing, so their
            // brokers are the next to try, the earliest first, before the cursor moves on.
            let stamp = self.pass + 1;
            while let Some(position) = self.overtaken.pop() {
                if let Some(retried) = self.retried_in.get_mut(position as usize) {
                    if *retried != stamp {
                        *retried = stamp;
                        self.retry_next.push(position);
                    }
                }
            }
        }
        let timed_out = cancel == Some(CancelReason::TimedOut);
        if self.config.fanout.next_on_failure || timed_out {
            self.launch(now, true);
        }
        if self.in_flight == 0 && !self.has_candidate() {
            self.end_pass(now);
        } else {
            self.arm_stagger();
        }
    }

    fn end_pass(&mut self, now: Instant) {
        self.stagger_at = None;
        self.spread_at = None;
        if self.pass >= self.config.retry.retries {
            self.give_up(GiveUpReason::AllFailed { passes: self.pass + 1 });
            return;
        }
        // Exponential backoff with full jitter (AWS architecture blog): uniform in [0, d].
        let r = &self.config.retry;
        let mut d = r.initial;
        for _ in 0..self.pass {
            d = scale(d, r.multiplier).min(r.cap);
        }
        let d = scale(d.min(r.cap), self.rng.unit());
        self.backoff_at = Some(now.saturating_add(d));
    }

    fn record_error(&mut self, _now: Instant, n: u32, error: AttemptError) {
        let candidate = self.attempts[n as usize].candidate as usize;
        self.outcomes[candidate].last_error = Some(error);
        self.last_failure = Some((n, candidate));
    }

    /// Ends attempt `n`, if in flight.
    fn end_attempt(&mut self, now: Instant, n: u32, state: AttemptState) {
        let slot = &mut self.attempts[n as usize];
        if slot.info.state == AttemptState::InFlight {
            self.timeout_queue.remove(n);
            slot.info.state = state;
            slot.info.ended_at = Some(now);
            self.in_flight -= 1;
            if slot.info.answered_at.is_some() {
                self.answering -= 1;
            }
            if state == AttemptState::Cancelled {
                self.stats.cancelled += 1;
            }
        }
    }

    fn cancel_all(&mut self, now: Instant, reason: CancelReason) {
        while let Some(n) = self.timeout_queue.front() {
            self.end_attempt(now, n, AttemptState::Cancelled);
            self.commands.push_back(Command::Cancel { attempt: self.id(n), reason });
        }
    }

    fn give_up(&mut self, reason: GiveUpReason) {
        // The one copy of an error the core makes: the last error, once, at the very end.
        let last_error = self.last_failure.and_then(|(n, candidate)| {
            let error = self.outcomes.get(candidate)?.last_error.clone()?;
            Some((self.id(n), self.candidates[candidate], error))
        });
        let error = RefreshError { reason, last_error, brokers: core::mem::take(&mut self.outcomes) };
        self.commands.push_back(Command::GiveUp(error));
        self.finish();
    }

    fn finish(&mut self) {
        self.finished = true;
        self.stagger_at = None;
        self.spread_at = None;
        self.backoff_at = None;
    }

    /// Whether this pass has a broker left to try: one to retry, or one not yet tried.
    fn has_candidate(&self) -> bool {
        !self.retry_next.is_empty() || self.cursor < self.candidates.len()
    }

    fn id(&self, n: u32) -> AttemptId {
        AttemptId::new(self.epoch, n)
    }
}
