//! One refresh episode: staggered, throttled, jittered fan-out with retries and a deadline.

mod attempt_id;
mod attempts;
mod context;
mod contract;
mod fanout;
mod in_flight;
mod inputs;
mod resolve;
mod retry;
mod stagger;
mod timers;

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::time::Duration;
use smallvec::SmallVec;

use crate::brokers::{BrokerBook, BrokerIndex};
use crate::cluster::RefreshCause;
use crate::config::RefreshConfig;
use crate::error::{AttemptError, BrokerFailure, ConfigError};
use crate::rng::Rng;
use crate::time::Instant;

pub(crate) use attempts::attempt_capacity;
pub use attempts::MAX_ATTEMPTS;
use attempts::{passes, AttemptTable};
pub use context::RefreshContext;
pub use contract::{
    AttemptId, AttemptInfo, AttemptPhase, AttemptState, CancelReason, Command, Input, InputOutcome, RefreshStats,
    TimerKind, MAX_RESOLVED_ADDRESSES,
};
use fanout::Ticks;
use resolve::Resolution;
pub use resolve::FIRST_ADDRESS_FAMILY_COUNT;
use retry::Pass;
use timers::TimerTable;

/// One entry per candidate broker: inline up to [`INLINE_CANDIDATES`], so a refresh of a
/// typical cluster allocates none of these (measured in `benches/refresh.rs`).
type PerCandidate<T> = SmallVec<[T; INLINE_CANDIDATES]>;

/// Brokers a refresh keeps per-candidate state for without allocating: most clusters and
/// seed lists are smaller.
const INLINE_CANDIDATES: usize = 8;

/// Where the refresh stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// A pass is under way: attempts start, and the stagger timer may be armed.
    Racing,
    /// Every broker of a pass failed; the backoff timer opens the next pass.
    BackingOff,
    /// `Done` or `GiveUp` has been emitted; no timer is armed and inputs are ignored.
    Finished,
}

/// One refresh episode: staggered, throttled, jittered fan-out with retries and a deadline.
///
/// [`Refresh`] is a sans-IO state machine in the style of quinn-proto and str0m: time and
/// I/O results go in through `handle_*`, commands come out of [`Refresh::poll_command`].
/// After every `handle_*` call, drain `poll_command()` until it returns `None`, then wait
/// until [`Refresh::poll_timeout`] or the next I/O result. The crate documentation drives
/// one refresh through these steps as a runnable example. Inputs that name an unknown,
/// finished or cancelled attempt change nothing (the [`InputOutcome`] says why); time that
/// goes backwards is clamped; the machine never panics on any input sequence (the property
/// tests check this).
///
/// | In                                   | Out                                                   |
/// |--------------------------------------|-------------------------------------------------------|
/// | [`Refresh::new`]                     | `Connect` for the first `fanout.initial` brokers      |
/// | stagger timer (the leader's delay ran out) | `Connect` the next broker (a hedge), maybe `Cancel` (superseded) a silent one to make room |
/// | spread timer (`fanout.spread_ticks`) | `Connect` the tick's next broker, unless one answered meanwhile |
/// | [`Input::Connected`]                 | nothing; the adaptive stagger counts from the handshake |
/// | [`Input::FirstFrame`]                  | `Cancel` (overtaken) the silent attempts              |
/// | [`Input::Response`] that can win     | `Cancel` (lost) the rest, then `Done`                 |
/// | [`Input::Response`] that cannot win (no brokers, a top-level error) | `Cancel` (rejected) it, then as a failure |
/// | [`Input::Failed`], attempt timeout (`Cancel`, timed out) | maybe `Connect` the next broker; after the last, backoff and a new pass, or `GiveUp` (the retries spent, or every attempt of the pass refused by the TLS layer: [`crate::ErrorKind::Tls`]) |
/// | a name to resolve's turn (a seed of [`BrokerBook::resolving`]) | `Resolve` instead of `Connect` |
/// | [`Input::Resolved`] | the attempt ends resolved; each address a candidate next in the pass (RFC 8305 order), `Connect` the first at once |
/// | [`Input::Resolved`] empty; resolver timeout | a failure of kind `Dns`, as `Failed` |
/// | backoff timer                        | a new pass: `Connect` the first `fanout.initial` brokers |
/// | deadline, fatal error                | `Cancel` everything in flight, then `GiveUp`          |
///
/// Report [`Input::Connected`] when an attempt's transport is up and [`Input::FirstFrame`] when
/// its broker first answers: the adaptive stagger hedges a broker that connected but stays
/// silent for twice the broker pace, and one that is answering only after a long patience
/// (see [`crate::config::Adaptive`]); and the first broker to answer cancels the silent ones
/// (`fanout.tuning.cancel_silent_on_answer`), so each refresh sends one metadata request.
///
/// The machine is split by concern: `contract` (what crosses the boundary), `attempts`
/// (the attempt table), `fanout` (the stagger policy), `retry` (passes, backoff, deadline),
/// `timers` (the timer table) and `inputs` (what each input does). Cost per input is O(1)
/// in the number of brokers and of finished attempts, and every buffer is sized at
/// construction, so steady-state inputs do not allocate.
#[derive(Clone, Debug)]
pub struct Refresh {
    config: RefreshConfig,
    epoch: u32,
    rng: Rng,
    phase: Phase,
    started_at: Instant,
    now: Instant,
    timers: TimerTable,
    /// Brokers in attempt order.
    candidates: PerCandidate<BrokerIndex>,
    /// Per candidate position: whether a connection to it is kept from an earlier refresh.
    reused: PerCandidate<bool>,
    /// Per candidate position: attempts, last error (handed to `GiveUp` without copying).
    outcomes: Vec<BrokerFailure>,
    pass: Pass,
    attempts: AttemptTable,
    ticks: Ticks,
    hedge_tokens: u32,
    recent_response_time: Option<Duration>,
    handshake_hint: Option<Duration>,
    first_answer_hint: Option<Duration>,
    kept_answer_hint: Option<Duration>,
    kept_answer_typical: Option<Duration>,
    cause: RefreshCause,
    /// Suspects brokers late and adds one at a time: a storm-likely cause, or a view not yet
    /// calm ([`RefreshContext::gentle`]).
    gentle: bool,
    /// The latest failure: its attempt and candidate position (the error itself lives in
    /// `outcomes`, so recording a failure never copies it).
    last_failure: Option<(u32, usize)>,
    commands: VecDeque<Command>,
    stats: RefreshStats,
    /// Names to resolve and the addresses they resolved to (`resolve`); `None` when no
    /// candidate is a name.
    resolution: Option<alloc::boxed::Box<Resolution>>,
}

impl Refresh {
    /// Starts a refresh at `now` over the brokers of `book`.
    ///
    /// Validates `config` (the error names the bad field) and refuses an empty book. The
    /// first attempts are ready in [`Refresh::poll_command`] right away.
    pub fn new(config: &RefreshConfig, book: &BrokerBook, now: Instant) -> Result<Self, ConfigError> {
        Self::with_context(config, book, now, RefreshContext::default())
    }

    /// Starts a refresh that knows how this cluster usually answers: `recent_response_time`
    /// is the recent response time, a high quantile of the response-time window (see
    /// [`crate::estimator::Estimator`]), used by the
    /// adaptive stagger instead of the cold guess before a handshake, and as what an
    /// answer normally takes once a broker is answering.
    pub fn with_estimate(
        config: &RefreshConfig,
        book: &BrokerBook,
        now: Instant,
        recent_response_time: Option<Duration>,
    ) -> Result<Self, ConfigError> {
        Self::with_context(config, book, now, RefreshContext { recent_response_time, ..RefreshContext::default() })
    }

    /// As [`Refresh::new`], with what a [`crate::Cluster`] tells each refresh it runs
    /// ([`RefreshContext`]): how a recorded refresh of a cluster view replays.
    pub fn with_context(
        config: &RefreshConfig,
        book: &BrokerBook,
        now: Instant,
        ctx: RefreshContext,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        let mut rng = Rng::new(config.seed ^ ((ctx.epoch as u64) << 40));
        let mut candidates = PerCandidate::with_capacity(book.len());
        book.attempt_order(now, &mut rng, config.shuffle_seeds, &mut candidates);
        if ctx.fit_candidates {
            candidates.truncate(MAX_ATTEMPTS / 2 / passes(config));
        }
        if candidates.is_empty() {
            return Err(ConfigError::new("seeds", "the broker book has no broker to try"));
        }
        let resolution = Resolution::new(book, &candidates, now).map(alloc::boxed::Box::new);
        // Room for the candidates resolution may add, so answers do not reallocate.
        let extra = resolution.as_ref().map_or(0, |r| r.room());
        candidates.reserve(extra);
        let mut outcomes: Vec<BrokerFailure> = candidates
            .iter()
            .map(|&b| BrokerFailure {
                broker: b,
                address: book.get(b).map(|e| e.address.clone()).unwrap_or_else(|| "?".into()),
                attempts: 0,
                last_error: None,
                cancelled: None,
            })
            .collect();
        outcomes.reserve(extra);
        let mut reused: PerCandidate<bool> =
            candidates.iter().map(|&b| book.get(b).is_some_and(|e| e.connected)).collect();
        reused.reserve(extra);
        let n = candidates.len();
        // Each resolved address may take two attempts a pass, like any candidate.
        let resolved_capacity = extra.saturating_mul(2).saturating_mul(passes(config));
        let capacity = attempt_capacity(config, n)?.saturating_add(resolved_capacity).min(MAX_ATTEMPTS);
        let mut pass = Pass::new(n);
        pass.reserve(extra);
        let width = (config.fanout.max_in_flight as usize).min(n);
        let mut timers = TimerTable::default();
        timers.set(TimerKind::Deadline, Some(now.saturating_add(config.deadline)));
        let mut refresh = Refresh {
            config: *config,
            epoch: ctx.epoch,
            rng,
            phase: Phase::Racing,
            started_at: now,
            now,
            timers,
            candidates,
            reused,
            outcomes,
            pass,
            attempts: AttemptTable::with_capacity(capacity),
            ticks: Ticks::new(),
            hedge_tokens: ctx.hedge_tokens,
            recent_response_time: ctx.recent_response_time,
            handshake_hint: ctx.handshake_hint,
            first_answer_hint: ctx.first_answer_hint,
            kept_answer_hint: ctx.kept_answer_hint,
            kept_answer_typical: ctx.kept_answer_typical,
            cause: ctx.cause,
            gentle: ctx.gentle || ctx.cause.storm_likely(),
            last_failure: None,
            commands: VecDeque::with_capacity(2 * width + 8),
            stats: RefreshStats::default(),
            resolution,
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
        self.timers.next()
    }

    /// Advances time to `now`, firing every timer that is due.
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.clamp(now);
        self.fire_due(now);
    }

    /// Feeds one I/O result and says what became of it. Timers due by `now` fire first, so a
    /// response that arrives after the deadline does not win, and an input about an attempt
    /// those timers ended is not applied.
    pub fn handle_input(&mut self, now: Instant, input: Input) -> InputOutcome {
        let now = self.clamp(now);
        // Only attempts issued before this call can have results: a timer due now may issue
        // the very attempt the input names, which nobody has contacted yet.
        let issued = self.attempts.len();
        self.fire_due(now);
        let attempt = input.attempt();
        let ours = attempt.epoch() == self.epoch;
        if self.phase == Phase::Finished {
            return InputOutcome::RefreshFinished;
        }
        if ours && attempt.number() >= issued {
            return InputOutcome::NotIssued;
        }
        let outcome = match self.attempts.live(attempt.number()) {
            _ if !ours => InputOutcome::OtherRefresh,
            Some(n) => self.apply(now, n, input),
            None => InputOutcome::AttemptEnded,
        };
        self.fire_due(now);
        outcome
    }

    /// This refresh's epoch (the high half of its attempt ids).
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Whether a terminal command (`Done` or `GiveUp`) has been emitted.
    pub fn is_finished(&self) -> bool {
        self.phase == Phase::Finished
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
        self.attempts.in_flight()
    }

    /// Why this refresh runs ([`RefreshCause::Bootstrap`] for a one-shot refresh).
    pub fn cause(&self) -> RefreshCause {
        self.cause
    }

    /// Whether this refresh runs gently: brokers suspected only at the adaptive stagger's
    /// `pace` while connecting and `ceiling` once connected, one added per tick (see
    /// [`RefreshCause`]).
    pub fn is_gentle(&self) -> bool {
        self.gentle
    }

    /// Whether a broker's first answer came later than the fast policy would have waited
    /// for it: a queue, which the fast policy would have hedged into. A [`crate::Cluster`]
    /// runs its next refresh gently after one.
    pub fn saw_queue(&self) -> bool {
        !self.ticks.queueing.is_zero()
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
        self.attempts.get(attempt.number()).map(|s| &s.info)
    }

    /// Every attempt so far, in start order, with its id.
    pub fn attempts(&self) -> impl Iterator<Item = (AttemptId, &AttemptInfo)> {
        let epoch = self.epoch;
        self.attempts.all().iter().enumerate().map(move |(i, s)| (AttemptId::new(epoch, i as u32), &s.info))
    }

    // ---- bookkeeping shared by the policy modules -----------------------------------------

    /// Whether this pass has a broker left to try.
    fn has_candidate(&self) -> bool {
        self.pass.has_candidate(self.walk_len())
    }

    fn record_error(&mut self, n: u32, error: AttemptError) {
        let candidate = self.attempts.slot(n).candidate as usize;
        self.outcomes[candidate].last_error = Some(error);
        self.last_failure = Some((n, candidate));
    }

    /// Ends attempt `n`, if in flight, and keeps the attempt-timeout timer on the oldest left.
    fn end_attempt(&mut self, now: Instant, n: u32, state: AttemptState) {
        if self.attempts.end(n, state, now) {
            self.timers.set(TimerKind::AttemptTimeout, self.attempts.next_timeout());
            if state == AttemptState::Cancelled {
                self.stats.cancelled += 1;
            }
        }
    }

    /// Cancels attempt `n` for `reason`; with a `detail`, its broker's error says why. The
    /// broker's story notes the reason either way, so a give-up tells a broker cancelled
    /// for another's fatal failure from one that failed (and a cancel's recorded error, of
    /// the kind of timeout it pre-empted, from a timeout).
    fn cancel(&mut self, now: Instant, n: u32, reason: CancelReason, detail: Option<&'static str>) {
        if let Some(detail) = detail {
            let kind = self.pending_kind(n);
            self.record_error(n, AttemptError::with_detail(kind, detail));
        }
        let candidate = self.attempts.slot(n).candidate as usize;
        self.outcomes[candidate].cancelled = Some(reason);
        self.pass.endings.note(false);
        self.end_attempt(now, n, AttemptState::Cancelled);
        self.commands.push_back(Command::Cancel { attempt: self.id(n), reason });
    }

    fn cancel_all(&mut self, now: Instant, reason: CancelReason) {
        while let Some(n) = self.attempts.oldest() {
            self.cancel(now, n, reason, None);
        }
    }

    fn finish(&mut self) {
        self.phase = Phase::Finished;
        self.timers.clear();
    }

    fn id(&self, n: u32) -> AttemptId {
        AttemptId::new(self.epoch, n)
    }
}

#[cfg(test)]
mod tests;
