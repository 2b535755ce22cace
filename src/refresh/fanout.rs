//! The fan-out policy: when the next attempt starts (the stagger delay), how many a tick
//! starts (growth) and how far apart (spreading), what makes room when the throttle is full
//! or the hedge budget spent (superseding), and what a broker's first answer cancels.
//!
//! [`Refresh::tick_step`] alone answers "may a tick start an attempt now?": the stagger
//! timer is armed exactly when it says yes, and the tick and the spread partners do what it
//! says.
//!
//! An attempt starts when, and only when:
//!
//! 1. the refresh begins: `fanout.initial` of them (`Refresh::new`);
//! 2. an attempt fails fast (refused, reset, a broker error) and
//!    `fanout.tuning.next_on_failure` holds: the next at once (`inputs.rs`);
//! 3. the stagger timer fires — the leader is suspected ([`Refresh::stagger_deadline`],
//!    `stagger.rs`):
//!    the growth's count (one in a gentle refresh, whose timer waits `pace` for a connect
//!    and `ceiling` for a connected broker; any refresh's timer waits `ceiling` while a
//!    broker checks the credentials), the first now and the rest spread
//!    ([`Refresh::on_stagger`]);
//! 4. a spread partner is due and no broker has answered ([`Refresh::on_spread`]);
//! 5. at a tick with the throttle full, in place of the newest silent suspect it supersedes
//!    (`TickStep::ReplaceFull`), or, out of hedge budget with every broker in flight
//!    silent, in place of one (`TickStep::ReplaceInPlace`);
//! 6. the broker that overtook others fails: the overtaken are tried again (`retry.rs`);
//! 7. every broker of the pass failed: a new pass after the backoff (`retry.rs`);
//! 8. a name resolved: its addresses are candidates of their own (`resolve.rs`).
//!
//! And one is cancelled when another broker answers first (`Overtaken`), a later one connects
//! long before it (`Outrun`), a tick makes room (`Superseded`), the winner's answer comes
//! (`Lost`), or the deadline or a fatal error ends the refresh.

use core::time::Duration;

use crate::config::{Growth, Stagger};
use crate::time::Instant;

use super::attempts::{AttemptSlot, Auth};
use super::contract::{AttemptInfo, AttemptPhase, AttemptState, CancelReason, Command, TimerKind};
use super::{Phase, Refresh};

/// Error detail of an attempt superseded to make room in a full throttle.
const SUPERSEDED_FULL: &str = "superseded: no answer within the stagger delay while the throttle was full";
/// Error detail of an attempt cancelled because another broker started answering first.
const OVERTAKEN: &str = "overtaken: no answer yet while another broker was answering";
/// Error detail of an attempt superseded because no hedge budget was left to add one.
const SUPERSEDED_NO_BUDGET: &str = "superseded: no answer within the stagger delay and no hedge budget left";
/// Error detail of an attempt still connecting long after a later one connected.
const OUTRUN: &str = "outrun: still connecting long after a later attempt had connected";
/// Error detail of an attempt whose lookup was still under way long after a later one
/// connected (its kind says the name did not resolve; this says why that ended it).
const OUTRUN_LOOKUP: &str = "outrun: the lookup was still under way long after a later attempt had connected";

/// What a stagger tick may do now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TickStep {
    /// Start the next broker beside those in flight (a hedge, paid from the budget), or
    /// alone when nothing is in flight.
    Add,
    /// The throttle is full: cancel the newest silent suspect, then start the next broker
    /// (`fanout.tuning.replace_when_full`).
    ReplaceFull,
    /// Out of hedge budget with every broker in flight silent: replace one in place, so the
    /// load in flight stays the same (`fanout.tuning.replace_when_full`).
    ReplaceInPlace,
}

/// The tick state of the current pass: where the stagger timer counts from, how the
/// growth stands, and a spread tick's partners still to start.
#[derive(Clone, Copy, Debug)]
pub(super) struct Ticks {
    /// The attempt the stagger timer counts from: the latest start, except that a spread
    /// partner leaves it on the tick's first attempt while that one is in flight.
    pub(super) leader: Option<u32>,
    /// Exponential growth: the size of the next tick.
    pub(super) size: f64,
    /// Partners of the current spread tick still to start, how far apart, and the attempt
    /// numbers below which attempts were suspects when the tick fired.
    pub(super) spread_left: u32,
    pub(super) spread_gap: Duration,
    pub(super) spread_suspects: u32,
    /// Silent attempts superseded so far (a full throttle, or no hedge budget left); each
    /// doubles the silent-phase delay of the attempts started after it, up to the pace.
    pub(super) superseded: u32,
    /// The longest wait for a first answer that came late (after its broker was suspected):
    /// queueing seen in this refresh, the evidence of an overload (zero while none).
    pub(super) queueing: Duration,
}

impl Ticks {
    pub(super) fn new() -> Self {
        Ticks {
            leader: None,
            size: 1.0,
            spread_left: 0,
            spread_gap: Duration::ZERO,
            spread_suspects: 0,
            superseded: 0,
            queueing: Duration::ZERO,
        }
    }
}

impl Refresh {
    /// May a tick start an attempt now, and how? `None` when the refresh is not racing, no
    /// broker is left in this pass, or neither the throttle nor the budget allows one.
    pub(super) fn tick_step(&self) -> Option<TickStep> {
        if self.phase != Phase::Racing || !self.has_candidate() || self.attempts.is_full() {
            return None;
        }
        let in_flight = self.attempts.in_flight();
        if in_flight > 0 && self.hedge_tokens == 0 {
            // An answering broker is busy on our request: replacing it, or a silent attempt
            // beside it, would throw away work already under way.
            let all_silent = self.attempts.answering() == 0;
            return (self.config.fanout.tuning.replace_when_full && all_silent).then_some(TickStep::ReplaceInPlace);
        }
        if in_flight < self.config.fanout.max_in_flight {
            Some(TickStep::Add)
        } else {
            self.config.fanout.tuning.replace_when_full.then_some(TickStep::ReplaceFull)
        }
    }

    /// The stagger delay ran out with no answer: the tick starts the next `want` brokers
    /// (growth), or only the first of them now and the rest spread over the next delay.
    pub(super) fn on_stagger(&mut self, now: Instant) {
        self.timers.stop(TimerKind::Stagger);
        self.timers.stop(TimerKind::Spread);
        let want = match self.config.fanout.growth {
            Growth::Linear(n) => n.max(1),
            Growth::Exponential(factor) => {
                self.ticks.size = (self.ticks.size * factor).min(u32::MAX as f64);
                (self.ticks.size as u32).max(1)
            }
        };
        // A gentle refresh (a failover, or a view not yet calm) adds one at a time.
        let want = if self.gentle { 1 } else { want };
        let mut gap = self.spread_gap_for_tick(want);
        let share = self.spread_share(want).map(|(share, _)| share);
        // Attempts from this tick are not suspects yet: never supersede them.
        let suspects = self.attempts.len();
        let mut started = 0;
        while started < want && (started == 0 || gap.is_none()) {
            let Some(step) = self.tick_step() else { break };
            if !self.take_step(now, step, suspects) {
                break;
            }
            started += 1;
            if step == TickStep::ReplaceInPlace {
                break;
            }
            // One that went out on a kept connection (established, authenticated) answers
            // in about a kept connection's answer time: the rest wait a share of the delay
            // for it rather than open connections beside it.
            if started < want && self.attempts.info(self.attempts.len() - 1).reused_connection {
                gap = gap.or(share);
            }
        }
        self.arm_stagger();
        if let (Some(gap), true) = (gap, started > 0 && started < want) {
            self.ticks.spread_left = want - started;
            self.ticks.spread_gap = gap;
            self.ticks.spread_suspects = suspects;
            self.timers.set(TimerKind::Spread, Some(now.saturating_add(gap)));
        }
    }

    /// Carries out `step`; returns whether an attempt started.
    fn take_step(&mut self, now: Instant, step: TickStep, suspects: u32) -> bool {
        match step {
            TickStep::Add => self.launch(now, false),
            TickStep::ReplaceFull => {
                self.supersede_newest_silent(now, suspects, SUPERSEDED_FULL, false);
                self.launch(now, false)
            }
            TickStep::ReplaceInPlace => {
                self.supersede_newest_silent(now, suspects, SUPERSEDED_NO_BUDGET, true) && self.launch(now, true)
            }
        }
    }

    /// Whether this tick should spread its attempts, and how far apart: a share of the delay
    /// that just ran out, when the leader can answer well within it — a fresh broker answers
    /// about two handshakes after its start, and the handshake of the attempt just suspected
    /// is the best guess of this network's. Otherwise (a slow network) waiting would only
    /// delay the partner: the tick starts all at once.
    fn spread_gap_for_tick(&self, want: u32) -> Option<Duration> {
        let (gap, handshake) = self.spread_share(want)?;
        let fired = self.stagger_basis(self.ticks.leader?).1;
        (handshake.saturating_mul(2) < fired / want).then_some(gap)
    }

    /// A spread tick's gap — the share of the delay that ran out, but never less than the
    /// adaptive floor: by its definition no broker's first answer is reliably faster, so a
    /// partner due sooner would often go out while the leader's answer is on its way — and
    /// the handshake this network shows. `None` when ticks are not spread.
    fn spread_share(&self, want: u32) -> Option<(Duration, Duration)> {
        if !self.config.fanout.tuning.spread_ticks || want < 2 {
            return None;
        }
        let n = self.ticks.leader?;
        let info = self.attempts.info(n);
        // A broker that never completed its handshake says nothing about the network: use
        // the cluster's recent handshakes, or — knowing nothing — assume the fired delay
        // (then the cold one) is long enough for a healthy broker to answer within a share.
        // A kept connection's typical answer stands for the round trip there: whether the
        // tick's first attempt typically answers within a share is a question of the usual
        // case, not of the slowest answer the window still holds.
        let handshake = match info.connected_at {
            Some(at) if info.reused_connection => {
                let typical = self.kept_answer_typical.or(self.kept_answer_hint);
                typical.map_or_else(|| self.handshake_of(info, at), |kept| self.handshake_of(info, at).min(kept))
            }
            Some(at) => self.handshake_of(info, at),
            None => self.handshake_hint.unwrap_or(Duration::ZERO),
        };
        let floor = match self.config.fanout.stagger {
            Stagger::Adaptive(a) => a.floor,
            Stagger::Fixed(_) => Duration::ZERO,
        };
        Some(((self.stagger_basis(n).1 / want).max(floor), handshake))
    }

    /// The next attempt of a spread tick: started unless a broker answered meanwhile
    /// (`on_answered` stops the rest), by the same rules as the tick's own — except that a
    /// partner never replaces in place: out of budget, the tick's first attempt is enough.
    /// It is a partner, not a new leader: the next tick still counts from the tick's first
    /// attempt, so spreading never slows the walk past a run of hung brokers.
    pub(super) fn on_spread(&mut self, now: Instant) {
        self.timers.stop(TimerKind::Spread);
        let left = core::mem::take(&mut self.ticks.spread_left);
        let step = match self.tick_step() {
            Some(step @ (TickStep::Add | TickStep::ReplaceFull)) if left > 0 => step,
            _ => return,
        };
        let leader = self.ticks.leader;
        let launched = self.take_step(now, step, self.ticks.spread_suspects);
        if launched {
            let n = self.attempts.len() - 1;
            self.attempts.info_mut(n).partner = true;
            // The next tick keeps counting from the tick's first attempt while it runs.
            if leader.is_some_and(|l| self.attempts.info(l).state == AttemptState::InFlight) {
                self.ticks.leader = leader;
            }
        }
        self.arm_stagger();
        if launched && left > 1 {
            self.ticks.spread_left = left - 1;
            self.timers.set(TimerKind::Spread, Some(now.saturating_add(self.ticks.spread_gap)));
        }
    }

    /// Makes room: cancels the newest suspect (attempt number below `suspects`) whose broker
    /// has said nothing and whose own stagger delay has run out — failing that, the newest
    /// silent one; or, unless `silent_only`, the newest suspect at all when every broker is
    /// answering. Returns whether it cancelled one; each cancellation doubles the next
    /// silent-phase delay, up to the adaptive pace ([`crate::config::Adaptive::while_silent`]).
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
    /// much as of an outage, so a refresh that has already met several silent brokers slows
    /// down (measured in `docs/performance/fleet.md`) — up to the pace only, because it may
    /// just as well be a long run of hung brokers (`docs/performance/hung-first.md`).
    fn supersede_newest_silent(
        &mut self,
        now: Instant,
        suspects: u32,
        detail: &'static str,
        silent_only: bool,
    ) -> bool {
        let live = |n: &u32| *n < suspects;
        let is_silent = |n: &u32| self.attempts.info(*n).phase() != AttemptPhase::Answering;
        let silent_newest_first = || self.attempts.in_flight_iter().rev().filter(live).filter(is_silent);
        let overdue = |n: &u32| self.stagger_deadline(*n) <= now;
        let silent = silent_newest_first().find(overdue).or_else(|| silent_newest_first().next());
        let any = || if silent_only { None } else { self.attempts.in_flight_iter().rev().find(live) };
        let Some(n) = silent.or_else(any) else { return false };
        self.cancel(now, n, CancelReason::Superseded, Some(detail));
        self.ticks.superseded = self.ticks.superseded.saturating_add(1);
        true
    }

    /// Attempt `n` just connected: cancels the older attempts still connecting after more
    /// than the adaptive wait for `n`'s handshake (`fanout.tuning.cancel_outrun`). Their
    /// SYN was lost or their host is gone; a bold connect past them has found a broker, and
    /// asking only that one keeps one conversation where the cold delay started two.
    pub(super) fn cancel_outrun(&mut self, now: Instant, n: u32) {
        let Stagger::Adaptive(a) = self.config.fanout.stagger else { return };
        if !self.config.fanout.tuning.cancel_outrun {
            return;
        }
        let info = self.attempts.info(n);
        let Some(connected_at) = info.connected_at else { return };
        let limit = a.after_handshake(self.handshake_of(info, connected_at));
        let mut walk = self.attempts.oldest();
        while let Some(m) = walk.filter(|&m| m < n) {
            walk = self.attempts.next_of(m);
            let older = self.attempts.info(m);
            if older.connected_at.is_none() && now.saturating_since(older.started_at) > limit {
                let detail = if self.is_resolving(m) { OUTRUN_LOOKUP } else { OUTRUN };
                self.cancel(now, m, CancelReason::Outrun, Some(detail));
                self.pass.overtaken.push(self.attempts.slot(m).candidate);
            }
        }
    }

    /// Attempt `n`'s broker just gave its first answer: if it came late (after the fast
    /// adaptive stagger would have suspected the broker), it was queueing — the evidence of
    /// an overload — and the wait is remembered for the rest of the refresh.
    pub(super) fn note_first_answer(&mut self, now: Instant, n: u32) {
        let Stagger::Adaptive(a) = self.config.fanout.stagger else { return };
        let info = self.attempts.info(n);
        let Some(connected_at) = info.connected_at else { return };
        let wait = now.saturating_since(connected_at);
        if wait > self.fast_connected_wait(a, info, connected_at) {
            self.ticks.queueing = self.ticks.queueing.max(wait);
        }
    }

    /// A broker just answered: cancels every in-flight attempt whose broker has said nothing.
    /// They are hung, or queued behind others and would each send a metadata request once
    /// their broker caught up (see `fanout.tuning.cancel_silent_on_answer`).
    ///
    /// Why all of them, even one that connected a moment ago: sparing attempts still within
    /// their own stagger delay helps when a slow broker answers first (a healthy one can
    /// still win), but in a failover storm the spared attempts answer later and send their
    /// own requests: more requests and more peak load per broker (measured in
    /// `docs/performance/fleet.md`). The patience rule bounds what a slow broker can cost.
    pub(super) fn cancel_silent(&mut self, now: Instant) {
        let mut walk = self.attempts.oldest();
        while let Some(n) = walk {
            walk = self.attempts.next_of(n);
            if self.attempts.info(n).phase() != AttemptPhase::Answering {
                self.cancel(now, n, CancelReason::Overtaken, Some(OVERTAKEN));
                self.pass.overtaken.push(self.attempts.slot(n).candidate);
            }
        }
    }

    /// Starts the next candidate if the throttle, the pass and (for hedges) the budget allow.
    /// `replacement` marks a launch that replaces a failed attempt or opens a pass.
    pub(super) fn launch(&mut self, now: Instant, replacement: bool) -> bool {
        let in_flight = self.attempts.in_flight();
        if self.phase == Phase::Finished
            || !self.has_candidate()
            || in_flight >= self.config.fanout.max_in_flight
            || self.attempts.is_full()
        {
            return false;
        }
        let hedge = !replacement && in_flight > 0;
        if hedge {
            if self.hedge_tokens == 0 {
                return false;
            }
            self.hedge_tokens -= 1;
            self.stats.hedges += 1;
        }
        let candidate = self.pass.next_candidate();
        let broker = self.candidates[candidate];
        let n = self.attempts.start(AttemptSlot {
            candidate: candidate as u32,
            info: AttemptInfo {
                broker,
                pass: self.pass.number,
                started_at: now,
                connected_at: None,
                first_frame_at: None,
                // Only the first attempt to a candidate can have its kept connection.
                reused_connection: self.reused.get_mut(candidate).is_some_and(core::mem::take),
                tls: false,
                ended_at: None,
                state: AttemptState::InFlight,
                hedge,
                partner: false,
            },
            timeout_at: now.saturating_add(self.config.attempt_timeout),
            jitter: 1.0 - self.config.fanout.jitter * self.rng.unit(),
            superseded_before: self.ticks.superseded,
            outlived: 0,
            auth: Auth::NotYet,
        });
        self.timers.set(TimerKind::AttemptTimeout, self.attempts.next_timeout());
        let outcome = &mut self.outcomes[candidate];
        outcome.attempts += 1;
        // The broker's story is its latest attempt's: an earlier one's cancel no longer is.
        outcome.cancelled = None;
        self.stats.started += 1;
        self.ticks.leader = Some(n);
        self.timers.stop(TimerKind::Stagger);
        self.commands.push_back(Command::start(self.id(n), broker, self.is_name(candidate)));
        true
    }

    /// Arms the stagger timer at the leader's stagger deadline if a tick could start
    /// something then ([`Refresh::tick_step`]); disarms it otherwise.
    pub(super) fn arm_stagger(&mut self) {
        let at = match (self.tick_step(), self.ticks.leader) {
            (Some(_), Some(n)) => Some(self.stagger_deadline(n)),
            _ => None,
        };
        self.timers.set(TimerKind::Stagger, at);
    }
}
