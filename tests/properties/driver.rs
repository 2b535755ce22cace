//! Driving a [`Refresh`] through a generated scenario, feeding every call's commands and
//! inputs to a [`Tracker`], and recording the same scenario as a trace.

use std::collections::BTreeMap;

use proptest::test_runner::TestCaseError;
use stagger::test_util::numbered_seeds;
use stagger::{
    AttemptId, AttemptState, BrokerBook, BrokerIndex, Command, Growth, Input, Instant, Refresh, RefreshConfig, Stagger,
};
use stagger::{Recorder, Trace};

use crate::strategies::{at, make_input, resolve, Action, InputKind, Scenario};
use crate::tracker::{Inv, Tracker};

pub fn drain(r: &mut Refresh) -> Vec<Command> {
    std::iter::from_fn(|| r.poll_command()).collect()
}

/// How the driver's clock moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// As generated: jumps of up to 3 s and backwards steps, oversleeping timers.
    Free,
    /// Never past `poll_timeout()`: an adapter whose timers fire on time.
    OnTime,
}

pub struct Run {
    pub tracker: Tracker,
    /// Every command with the (clamped) time of the call that produced it.
    pub log: Vec<(Instant, Command)>,
    pub refresh: Refresh,
}

fn timeout_call(r: &mut Refresh, t: &mut Tracker, now: Instant, log: &mut Vec<(Instant, Command)>) {
    t.begin_call(now);
    r.handle_timeout(now);
    let commands = drain(r);
    t.on_commands(&commands);
    t.after_call(r, false);
    log.extend(commands.into_iter().map(|c| (t.now, c)));
}

fn input_call(r: &mut Refresh, t: &mut Tracker, now: Instant, input: Input, log: &mut Vec<(Instant, Command)>) {
    t.begin_call(now);
    // What the timers due by `now` emit on their own: `handle_input` must fire them first.
    let mut due = r.clone();
    due.handle_timeout(now);
    let before = drain(&mut due);
    r.handle_input(now, input.clone());
    let commands = drain(r);
    let split = if commands.starts_with(&before) {
        before.len()
    } else {
        t.violate(Inv::Contract, format!("handle_input did not fire the due timers first: {before:?} vs {commands:?}"));
        0
    };
    t.on_commands(&commands[..split]);
    t.on_input(&input);
    t.on_commands(&commands[split..]);
    t.end_input();
    t.after_call(r, false);
    log.extend(commands.into_iter().map(|c| (t.now, c)));
}

/// Generous bound on `handle_timeout(poll_timeout())` calls to finish: each fires a timer,
/// and a pass has at most one stagger tick and one timeout per broker, plus its backoff.
fn completion_bound(config: &RefreshConfig, brokers: usize) -> u64 {
    let passes = config.retry.retries as u64 + 1;
    passes * (2 * brokers as u64 + 1) + 2
}

pub fn run(s: &Scenario, clock: Clock) -> Run {
    run_book(s, clock, false)
}

/// As [`run`], over a book whose even seeds are names to resolve (`broker-i:9092`) and odd
/// ones IP literals (`10.0.0.i:9092`); the inputs to resolving attempts are mostly
/// `Resolved` with addresses from a small pool (some of them the IP seeds', some shared
/// between names, sometimes none or more than a refresh takes).
pub fn run_resolving(s: &Scenario, clock: Clock) -> Run {
    run_book(s, clock, true)
}

/// The book of a scenario: numbered seeds, or (`resolving`) names and IP literals mixed.
pub fn scenario_book(s: &Scenario, resolving: bool) -> BrokerBook {
    if !resolving {
        return BrokerBook::new(numbered_seeds(s.brokers)).expect("numbered seeds are valid");
    }
    let seeds =
        (0..s.brokers).map(|i| if i % 2 == 0 { format!("broker-{i}:9092") } else { format!("10.0.0.{i}:9092") });
    BrokerBook::resolving(seeds).expect("valid seeds")
}

/// What a resolving scenario's adapter reports at step `step` for `kind` on `attempt`: for
/// an attempt that resolves, mostly its answer; for one that connects, rarely an answer it
/// should not get (the core ignores it as `Unexpected`).
pub fn resolving_input(kind: &InputKind, attempt: AttemptId, resolves: bool, step: usize) -> Input {
    let mix = (step as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16;
    let answer = || {
        let n = match mix % 29 {
            0 => return (0..20).map(|j| format!("10.1.0.{j}:9092").parse().unwrap()).collect(),
            x => x % 6,
        };
        (0..n)
            .map(|j| {
                let k = (mix >> (4 * j + 8)) % 8;
                if k < 4 { format!("10.0.0.{k}:9092") } else { format!("[fd00::{k}]:9092") }.parse().unwrap()
            })
            .collect()
    };
    match kind {
        InputKind::Failed(..) => make_input(kind, attempt),
        _ if resolves && !mix.is_multiple_of(8) => Input::Resolved { attempt, addresses: answer() },
        InputKind::Connected(_) if !resolves && mix.is_multiple_of(8) => {
            Input::Resolved { attempt, addresses: answer() }
        }
        _ => make_input(kind, attempt),
    }
}

fn run_book(s: &Scenario, clock: Clock, resolving: bool) -> Run {
    let book = scenario_book(s, resolving);
    let start = at(s.start);
    let mut r = match s.recent {
        None => Refresh::new(&s.config, &book, start),
        Some(recent) => Refresh::with_estimate(&s.config, &book, start, Some(recent)),
    }
    .expect("generated configs are valid");
    let candidates = (!resolving).then_some(s.brokers as u32);
    let mut t = Tracker::new(&s.config, candidates, r.epoch(), start);
    let mut log = Vec::new();
    let first = drain(&mut r);
    t.on_commands(&first);
    t.after_call(&r, true);
    log.extend(first.into_iter().map(|c| (start, c)));

    let mut wall = s.start;
    for (index, step) in s.steps.iter().enumerate() {
        let poll = r.poll_timeout().map(Instant::as_micros);
        let now = match (clock, &step.action) {
            (Clock::Free, Action::PollTimeout) => poll.unwrap_or(wall),
            (Clock::Free, _) => wall.saturating_add_signed(step.dt),
            (Clock::OnTime, Action::PollTimeout) => poll.unwrap_or(wall).max(wall),
            (Clock::OnTime, _) => {
                let next = wall.saturating_add(step.dt.unsigned_abs());
                poll.map_or(next, |p| next.min(p.max(wall)))
            }
        };
        wall = now;
        match &step.action {
            Action::Timeout | Action::PollTimeout => timeout_call(&mut r, &mut t, at(now), &mut log),
            Action::Input(kind, target) => {
                let attempt = resolve(target, r.epoch(), &t.issued, &t.ended);
                let input = match resolving {
                    true => resolving_input(kind, attempt, r.resolves(attempt), index),
                    false => make_input(kind, attempt),
                };
                input_call(&mut r, &mut t, at(now), input, &mut log);
            }
        }
    }

    // Drive to completion: handle_timeout at poll_timeout, exactly, until finished.
    let bound = completion_bound(&s.config, candidates_bound(s, resolving));
    let mut calls = 0;
    while let Some(next) = r.poll_timeout() {
        if calls == bound {
            t.violate(Inv::Completion, format!("still running after {bound} calls at poll_timeout()"));
            break;
        }
        calls += 1;
        timeout_call(&mut r, &mut t, next, &mut log);
    }
    if t.terminals == 0 {
        t.violate(Inv::Terminal, "no terminal command after driving to completion");
    }
    if clock == Clock::OnTime && t.terminal_at.is_some_and(|f| f > t.deadline_at) {
        let (f, d) = (t.terminal_at.unwrap().as_micros(), t.deadline_at.as_micros());
        t.violate(Inv::DeadlineDriven, format!("finished at {f} µs, after the deadline {d} µs"));
    }
    check_attempts(&r, &s.config, &mut t);
    Run { tracker: t, log, refresh: r }
}

/// How many candidates a scenario's refresh can have: its seeds, and for a resolving one the
/// addresses each name may add.
fn candidates_bound(s: &Scenario, resolving: bool) -> usize {
    match resolving {
        true => s.brokers + s.brokers.div_ceil(2) * stagger::MAX_RESOLVED_ADDRESSES,
        false => s.brokers,
    }
}

/// Checks of the machine's own attempt records: they agree with the command stream, and
/// stagger ticks are spaced by at least the jittered stagger delay.
fn check_attempts(r: &Refresh, config: &RefreshConfig, t: &mut Tracker) {
    let attempts: Vec<_> = r.attempts().map(|(id, a)| (id, *a)).collect();
    let listed: BTreeMap<AttemptId, BrokerIndex> = attempts.iter().map(|(id, a)| (*id, a.broker)).collect();
    if listed != t.started {
        t.violate(Inv::Contract, format!("attempts() {listed:?} differ from the Connects {:?}", t.started));
    }
    let base = match config.fanout.stagger {
        Stagger::Fixed(d) => d,
        Stagger::Adaptive(a) => a.floor,
    };
    // `scale(d, f)` counts whole µs, saturating at `u64::MAX` µs (the core's clock), and
    // f ≥ 1 − jitter, so this bound is exact.
    let base_micros = base.as_micros().min(u64::MAX as u128) as f64;
    let min_gap = (base_micros * (1.0 - config.fanout.jitter)).floor() as u64;
    // A spread tick's partners share the fired delay among the tick's attempts.
    let per_tick = match config.fanout.growth {
        Growth::Linear(n) => Some(n.max(1) as u64),
        Growth::Exponential(_) => None,
    };
    for (i, (id, a)) in attempts.iter().enumerate() {
        let pass_start = attempts.iter().find(|(_, b)| b.pass == a.pass).map(|(_, b)| b.started_at);
        if pass_start == Some(a.started_at) {
            continue; // the initial wave of a pass
        }
        // A hedge is always a stagger tick here; without next_on_failure, so is a non-hedge
        // that no failure at the same instant could have replaced.
        let by_tick = a.hedge
            || t.superseding.contains(id)
            || (!config.fanout.tuning.next_on_failure
                && !attempts.iter().any(|(_, b)| {
                    // A failure, or a name resolving, starts the next attempt at once.
                    matches!(b.state, AttemptState::Failed | AttemptState::Resolved) && b.ended_at == Some(a.started_at)
                }));
        if !by_tick {
            continue;
        }
        // A partner is spaced by its share of the delay (less a µs of rounding) from the
        // hedge before it (its tick's first attempt, or the partner before it); a tick's
        // first attempt by the whole delay from any earlier start but a partner.
        let (gap, prev) = if a.partner {
            let Some(n) = per_tick else { continue };
            let share = (min_gap / n.max(1)).saturating_sub(1);
            (share, attempts[..i].iter().rev().find(|(_, b)| b.started_at < a.started_at && (b.hedge || b.partner)))
        } else {
            (min_gap, attempts[..i].iter().rev().find(|(_, b)| b.started_at < a.started_at && !b.partner))
        };
        let Some((prev_id, prev)) = prev else {
            continue;
        };
        if a.partner && !config.fanout.tuning.spread_ticks {
            t.violate(Inv::Spacing, format!("{id} is a spread partner although spread_ticks is off"));
        }
        let min_gap = gap;
        let earliest = prev.started_at.as_micros().saturating_add(min_gap);
        if a.started_at.as_micros() < earliest {
            t.violate(
                Inv::Spacing,
                format!(
                    "{id} started by a stagger tick at {} µs, {} µs after {prev_id}; minimum {min_gap} µs",
                    a.started_at.as_micros(),
                    a.started_at.as_micros() - prev.started_at.as_micros()
                ),
            );
        }
    }
}

pub fn check(run: &Run, invs: &[Inv]) -> Result<(), TestCaseError> {
    match run.tracker.first(invs) {
        Some((inv, msg)) => Err(TestCaseError::fail(format!("{inv:?} violated: {msg}"))),
        None => Ok(()),
    }
}

/// Drives a `Recorder` through a scenario (free clock), then to completion.
pub fn record(s: &Scenario) -> (Trace, Vec<Command>) {
    record_book(s, false)
}

/// As [`record`], over the book and inputs of [`run_resolving`].
pub fn record_resolving(s: &Scenario) -> (Trace, Vec<Command>) {
    record_book(s, true)
}

fn record_book(s: &Scenario, resolving: bool) -> (Trace, Vec<Command>) {
    let book = scenario_book(s, resolving);
    let mut rec = Recorder::new(&s.config, &book, at(s.start), "stagger properties").expect("valid config");
    let (mut issued, mut ended, mut commands) = (Vec::new(), Vec::new(), Vec::new());
    let pump = |rec: &mut Recorder,
                now: u64,
                issued: &mut Vec<AttemptId>,
                ended: &mut Vec<AttemptId>,
                out: &mut Vec<Command>| {
        while let Some(c) = rec.poll_command(at(now)) {
            match &c {
                Command::Connect { attempt, .. } | Command::Resolve { attempt, .. } => issued.push(*attempt),
                Command::Cancel { attempt, .. } => ended.push(*attempt),
                _ => {}
            }
            out.push(c);
        }
    };
    pump(&mut rec, s.start, &mut issued, &mut ended, &mut commands);
    let mut wall = s.start;
    for (index, step) in s.steps.iter().enumerate() {
        wall = match step.action {
            Action::PollTimeout => rec.refresh().poll_timeout().map_or(wall, Instant::as_micros),
            _ => wall.saturating_add_signed(step.dt),
        };
        match &step.action {
            Action::Timeout | Action::PollTimeout => rec.handle_timeout(at(wall)),
            Action::Input(kind, target) => {
                let attempt = resolve(target, rec.refresh().epoch(), &issued, &ended);
                let input = match resolving {
                    true => resolving_input(kind, attempt, rec.refresh().resolves(attempt), index),
                    false => make_input(kind, attempt),
                };
                rec.handle_input(at(wall), input);
            }
        }
        pump(&mut rec, wall, &mut issued, &mut ended, &mut commands);
    }
    for _ in 0..completion_bound(&s.config, candidates_bound(s, resolving)) {
        let Some(next) = rec.refresh().poll_timeout() else { break };
        rec.handle_timeout(next);
        pump(&mut rec, next.as_micros(), &mut issued, &mut ended, &mut commands);
    }
    (rec.into_trace(), commands)
}
