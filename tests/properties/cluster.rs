//! Cluster properties (12–12e): a [`Cluster`] under arbitrary requests, inputs, closed
//! connections and timeouts, each call replayed on a copy of the running refresh so one
//! [`Tracker`] per refresh checks its commands.

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use stagger::test_util::numbered_seeds;
use stagger::{BrokerBook, BrokerIndex, Cluster, ClusterConfig, ClusterEvent, Command, Refresh};

use crate::cases;
use crate::driver::drain;
use crate::strategies::{
    arb_config, arb_hedge_budget, arb_window_quantile, at, decode_dt, decode_input_kind, decode_target, make_input,
    resolve, us, InputKind, Target,
};
use crate::tracker::{Inv, Tracker};

#[derive(Clone, Debug)]
enum ClusterOp {
    Request,
    Timeout,
    PollTimeout,
    Input(InputKind, Target),
    Closed(u8),
    /// A loser's drained connection offered as a spare ([`Cluster::keep_spare`]).
    KeepSpare(u8),
    /// A cold start's first choice offered late ([`Cluster::keep_first_choice`]).
    KeepFirstChoice(u8),
}

#[derive(Clone, Debug)]
struct ClusterStep {
    dt: i64,
    op: ClusterOp,
}

#[derive(Clone, Debug)]
struct ClusterScenario {
    config: ClusterConfig,
    brokers: usize,
    start: u64,
    steps: Vec<ClusterStep>,
}

fn decode_cluster_step((a, d, x): (u8, u32, u64)) -> ClusterStep {
    let op = match a % 16 {
        0 | 1 => ClusterOp::Timeout,
        2 | 3 => ClusterOp::Request,
        4..=6 => ClusterOp::PollTimeout,
        15 if x & 3 < 2 => ClusterOp::Closed((x >> 8) as u8),
        15 if x & 3 == 2 => ClusterOp::KeepSpare((x >> 8) as u8),
        15 => ClusterOp::KeepFirstChoice((x >> 8) as u8),
        _ => ClusterOp::Input(decode_input_kind(a / 16, x), decode_target(x)),
    };
    ClusterStep { dt: decode_dt(d), op }
}

fn arb_cluster_scenario() -> impl Strategy<Value = ClusterScenario> {
    let step = (any::<u8>(), any::<u32>(), any::<u64>()).prop_map(decode_cluster_step);
    (
        arb_config(),
        prop_oneof![1_000u64..=5_000_000, 1_000u64..=600_000_000],
        (
            any::<bool>(),
            arb_hedge_budget(),
            arb_window_quantile(),
            0u32..=ClusterConfig::MAX_SPARE_CONNECTIONS,
            any::<bool>(),
        ),
        1usize..=6,
        prop_oneof![4 => 0u64..=1_000_000_000_000, 1 => (u64::MAX - 100_000_000)..=u64::MAX],
        prop::collection::vec(step, 0..200),
    )
        .prop_map(
            |(
                refresh,
                interval,
                (rebootstrap, hedge_budget, window_quantile, spares, gentle_until_calm),
                brokers,
                start,
                steps,
            )| {
                ClusterScenario {
                    config: ClusterConfig {
                        refresh,
                        refresh_interval: us(interval),
                        rebootstrap,
                        hedge_budget,
                        window_quantile,
                        spare_connections: spares,
                        gentle_until_calm,
                    },
                    brokers,
                    start,
                    steps,
                }
            },
        )
}

fn event_epoch(e: &ClusterEvent) -> Option<u32> {
    match e {
        ClusterEvent::Connect { attempt, .. }
        | ClusterEvent::Reuse { attempt, .. }
        | ClusterEvent::Keep { attempt, .. }
        | ClusterEvent::Resolve { attempt, .. }
        | ClusterEvent::Cancel { attempt, .. } => Some(attempt.epoch()),
        ClusterEvent::Refreshed { epoch, .. } | ClusterEvent::RefreshFailed { epoch, .. } => Some(*epoch),
        _ => None,
    }
}

/// `events` as the refresh's commands would be forwarded if nothing were kept: a `Reuse` as
/// the `Connect` it stands for, without the `Keep` that precedes each `Refreshed`.
fn unkept(events: &[ClusterEvent]) -> Vec<ClusterEvent> {
    events
        .iter()
        .filter(|ev| !matches!(ev, ClusterEvent::Keep { .. }))
        .map(|ev| match *ev {
            ClusterEvent::Reuse { attempt, broker } => ClusterEvent::Connect { attempt, broker },
            ref other => other.clone(),
        })
        .collect()
}

/// Checks the keep/reuse/release events of one call against the brokers kept before it
/// (updated), and `Keep` right before the `Refreshed` of the same attempt.
fn check_keeping(i: usize, events: &[ClusterEvent], kept: &mut Vec<BrokerIndex>, v: &mut Vec<(Inv, String)>) {
    for (k, ev) in events.iter().enumerate() {
        match *ev {
            ClusterEvent::Reuse { broker, .. } | ClusterEvent::Release { broker } => {
                let Some(at) = kept.iter().position(|&b| b == broker) else {
                    v.push((Inv::Keeping, format!("step {i}: {ev:?} while {kept:?} are kept")));
                    continue;
                };
                kept.remove(at);
            }
            ClusterEvent::Keep { attempt, broker } => {
                if kept.contains(&broker) {
                    v.push((Inv::Keeping, format!("step {i}: {ev:?} while {kept:?} are still kept")));
                }
                let next = events.get(k + 1);
                if !matches!(next, Some(ClusterEvent::Refreshed { attempt: a, broker: b, .. }) if *a == attempt && *b == broker)
                {
                    v.push((Inv::Keeping, format!("step {i}: {ev:?} followed by {next:?}")));
                }
                kept.insert(0, broker);
            }
            ClusterEvent::Refreshed { attempt, .. } => {
                let before = k.checked_sub(1).and_then(|p| events.get(p));
                if !matches!(before, Some(ClusterEvent::Keep { attempt: a, .. }) if *a == attempt) {
                    v.push((Inv::Keeping, format!("step {i}: {ev:?} without its Keep")));
                }
            }
            _ => {}
        }
    }
}

fn as_event(epoch: u32, c: &Command, stats: stagger::RefreshStats) -> ClusterEvent {
    match c.clone() {
        Command::Connect { attempt, broker } => ClusterEvent::Connect { attempt, broker },
        Command::Resolve { attempt, broker } => ClusterEvent::Resolve { attempt, broker },
        Command::Cancel { attempt, reason } => ClusterEvent::Cancel { attempt, reason },
        Command::Done { attempt, broker, .. } => ClusterEvent::Refreshed { epoch, attempt, broker, stats },
        Command::GiveUp(error) => ClusterEvent::RefreshFailed { epoch, error },
    }
}

/// How the cluster driver's clock moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClusterClock {
    /// As generated, backwards steps included, for every call.
    Backwards,
    /// Backwards steps for every call but `request_refresh`, which gets the cluster's clock
    /// at least, so only 12c depends on `request_refresh` clamping an earlier `now` (it once
    /// did not: `regressions::request_refresh_with_earlier_now_starts_refresh_in_the_past`).
    RequestsClamped,
    /// Never backwards.
    Monotonic,
}

/// Drives a `Cluster`; returns every violation. Each call is replayed on a copy of the
/// refresh that was running before it, so the bookkeeper sees that refresh's commands (and
/// its final hedge count) even when the cluster settles and drops it within the call.
fn run_cluster(s: &ClusterScenario, clock: ClusterClock) -> Vec<(Inv, String)> {
    let book = BrokerBook::new(numbered_seeds(s.brokers)).unwrap();
    let mut cluster = Cluster::new(s.config, book, at(s.start)).expect("valid config");
    let budget = s.config.hedge_budget;
    let earned = (budget.ratio * 1000.0) as u64;
    let mut v: Vec<(Inv, String)> = Vec::new();
    let mut now = at(s.start);
    let mut wall = s.start;
    let mut running: Option<u32> = None;
    let mut kept: Vec<BrokerIndex> = Vec::new();
    let mut last_epoch = 0u32;
    let mut trackers: BTreeMap<u32, Tracker> = BTreeMap::new();
    let mut tokens_at_start: BTreeMap<u32, u32> = BTreeMap::new();
    let (mut spent, mut settled) = (0u64, 0u64);
    let (mut issued, mut ended) = (Vec::new(), Vec::new());
    for (i, step) in s.steps.iter().enumerate() {
        wall = match clock {
            ClusterClock::Backwards | ClusterClock::RequestsClamped => wall.saturating_add_signed(step.dt),
            ClusterClock::Monotonic => wall.max(now.as_micros()).saturating_add(step.dt.unsigned_abs()),
        };
        if clock == ClusterClock::RequestsClamped && matches!(step.op, ClusterOp::Request) {
            wall = wall.max(now.as_micros());
        }
        let mut t = at(wall);
        let before = cluster.current().cloned();
        let mut input = None;
        match &step.op {
            ClusterOp::Request => {
                let e = cluster.request_refresh(t);
                // Joins the running refresh if it is still running after what was due fired,
                // otherwise starts a new one; either way, the one running now.
                let running_now = cluster.current().map(Refresh::epoch);
                if running_now != Some(e) {
                    v.push((Inv::SingleFlight, format!("step {i}: request_refresh → {e}, running: {running_now:?}")));
                }
                if before.as_ref().is_none_or(|r| r.epoch() != e) && e <= last_epoch {
                    v.push((Inv::SingleFlight, format!("step {i}: new refresh reuses epoch {e}")));
                }
            }
            ClusterOp::Timeout => cluster.handle_timeout(t),
            ClusterOp::PollTimeout => {
                if let Some(p) = cluster.poll_timeout() {
                    t = if clock == ClusterClock::Monotonic { p.max(now) } else { p };
                    wall = t.as_micros();
                }
                cluster.handle_timeout(t);
            }
            ClusterOp::Input(kind, target) => {
                let attempt = resolve(target, running.unwrap_or(last_epoch), &issued, &ended);
                let made = make_input(kind, attempt);
                cluster.handle_input(t, made.clone());
                input = Some(made);
            }
            ClusterOp::Closed(b) => {
                let broker = BrokerIndex(*b as u32 % cluster.book().len() as u32);
                cluster.connection_closed(broker);
                kept.retain(|&k| k != broker);
            }
            ClusterOp::KeepSpare(b) => {
                let broker = BrokerIndex(*b as u32 % cluster.book().len() as u32);
                let running = cluster.current().is_some();
                if cluster.keep_spare(broker) {
                    if running || kept.contains(&broker) {
                        v.push((Inv::Keeping, format!("step {i}: spare {broker:?} kept while running or kept")));
                    }
                    kept.push(broker);
                }
            }
            ClusterOp::KeepFirstChoice(b) => {
                let broker = BrokerIndex(*b as u32 % cluster.book().len() as u32);
                if cluster.keep_first_choice(broker) {
                    if kept.contains(&broker) {
                        v.push((Inv::Keeping, format!("step {i}: first choice {broker:?} kept twice")));
                    }
                    kept.insert(0, broker);
                    if cluster.kept() != Some(broker) {
                        v.push((Inv::Keeping, format!("step {i}: the first choice {broker:?} does not lead")));
                    }
                }
            }
        }
        // `connection_closed` takes no time and fires nothing; every other call advances the
        // cluster's clock and fires what is due (`request_refresh` settles before it joins).
        let handled =
            !matches!(step.op, ClusterOp::Closed(_) | ClusterOp::KeepSpare(_) | ClusterOp::KeepFirstChoice(_));
        if t > now && handled {
            now = t;
        }
        let events: Vec<ClusterEvent> = std::iter::from_fn(|| cluster.poll_event()).collect();
        check_keeping(i, &events, &mut kept, &mut v);
        if cluster.kept_brokers() != kept {
            let said = cluster.kept_brokers();
            v.push((Inv::Keeping, format!("step {i}: events say {kept:?} are kept, kept_brokers() says {said:?}")));
        }
        if kept.len() > 1 + s.config.spare_connections as usize {
            v.push((Inv::Keeping, format!("step {i}: {kept:?} kept, over the spares' room")));
        }
        let events = unkept(&events);

        // At most one refresh in flight, judged from the event stream alone.
        for ev in &events {
            match ev {
                ClusterEvent::Connect { attempt, .. } | ClusterEvent::Cancel { attempt, .. } => {
                    if matches!(ev, ClusterEvent::Connect { .. }) {
                        issued.push(*attempt);
                    } else {
                        ended.push(*attempt);
                    }
                    let e = attempt.epoch();
                    match running {
                        None if matches!(ev, ClusterEvent::Connect { .. }) && e > last_epoch => {
                            running = Some(e);
                            last_epoch = e;
                        }
                        Some(r) if r == e => {}
                        _ => v.push((Inv::SingleFlight, format!("step {i}: {ev:?} while {running:?} runs"))),
                    }
                }
                ClusterEvent::Refreshed { epoch, .. } | ClusterEvent::RefreshFailed { epoch, .. } => {
                    if running != Some(*epoch) {
                        v.push((Inv::SingleFlight, format!("step {i}: end of {epoch} while {running:?} runs")));
                    }
                    running = None;
                }
                _ => {}
            }
        }
        let current = cluster.current().map(Refresh::epoch);
        if running != current {
            v.push((Inv::SingleFlight, format!("step {i}: events say {running:?} runs, current() says {current:?}")));
        }

        // The refresh that was running: replay the call on a copy to see its commands.
        // (`connection_closed` does not call into the refresh.)
        if let Some(mut shadow) = before.filter(|_| handled) {
            let e = shadow.epoch();
            let mut due_first = Vec::new();
            let mut applied = None;
            match (&step.op, &input) {
                (ClusterOp::Timeout | ClusterOp::PollTimeout | ClusterOp::Request, _) => shadow.handle_timeout(now),
                (ClusterOp::Input(..), Some(inp)) => {
                    if inp.attempt().epoch() == e {
                        let mut due = shadow.clone();
                        due.handle_timeout(now);
                        due_first = drain(&mut due);
                        shadow.handle_input(now, inp.clone());
                        applied = Some(inp.clone());
                    }
                    shadow.handle_timeout(now);
                }
                _ => {}
            }
            let commands = drain(&mut shadow);
            let expected: Vec<ClusterEvent> = commands.iter().map(|c| as_event(e, c, shadow.stats())).collect();
            let actual: Vec<ClusterEvent> = events.iter().filter(|ev| event_epoch(ev) == Some(e)).cloned().collect();
            if expected != actual {
                v.push((Inv::Forwarding, format!("step {i}: events {actual:?}, refresh commands {expected:?}")));
            }
            let split = if commands.starts_with(&due_first) { due_first.len() } else { 0 };
            let tr = trackers.get_mut(&e).expect("tracked since it started");
            tr.begin_call(now);
            tr.on_commands(&commands[..split]);
            if let Some(inp) = &applied {
                tr.on_input(inp);
            }
            tr.on_commands(&commands[split..]);
            if applied.is_some() {
                tr.end_input();
            }
            tr.after_call(&shadow, false);
            if shadow.is_finished() {
                let hedges = shadow.stats().hedges as u64;
                let tokens = tokens_at_start[&e];
                if hedges > tokens as u64 {
                    v.push((
                        Inv::HedgeBudget,
                        format!("step {i}: refresh {e} hedged {hedges} times with {tokens} tokens"),
                    ));
                }
                spent += hedges;
                settled += 1;
            }
        }

        // A refresh that started in this call.
        let mut started_now = false;
        if let Some(r) = cluster.current() {
            let e = r.epoch();
            if let std::collections::btree_map::Entry::Vacant(slot) = trackers.entry(e) {
                started_now = true;
                tokens_at_start.insert(e, cluster.hedge_tokens());
                let mut tr = Tracker::new(r.config(), None, e, r.started_at());
                tr.budget = Some(tokens_at_start[&e]);
                let commands: Vec<Command> = events
                    .iter()
                    .filter_map(|ev| match ev {
                        ClusterEvent::Connect { attempt, broker } if attempt.epoch() == e => {
                            Some(Command::Connect { attempt: *attempt, broker: *broker })
                        }
                        _ => None,
                    })
                    .collect();
                tr.begin_call(now);
                tr.on_commands(&commands);
                tr.after_call(r, true);
                slot.insert(tr);
            }
        }

        let tokens = cluster.hedge_tokens();
        if tokens > budget.burst {
            v.push((Inv::HedgeTokens, format!("step {i}: hedge_tokens() = {tokens} > burst {}", budget.burst)));
        }
        if spent * 1000 > budget.burst as u64 * 1000 + settled * earned {
            v.push((
                Inv::HedgeBudget,
                format!(
                    "step {i}: {spent} hedges over {settled} refreshes; budget burst {} + ratio {}",
                    budget.burst, budget.ratio
                ),
            ));
        }
        // `connection_closed` fires no timer, so a timer may be overdue after it (the next
        // `handle_timeout` fires it).
        match cluster.poll_timeout() {
            Some(p) if p > now || (p == now && started_now) || !handled => {}
            other => v.push((Inv::PollTimeout, format!("step {i}: cluster poll_timeout() {other:?} at now {now:?}"))),
        }
    }
    for tr in trackers.values() {
        v.extend(tr.violations.iter().filter(|(inv, _)| *inv != Inv::Deadline).cloned());
    }
    v
}

fn check_cluster(v: &[(Inv, String)], invs: &[Inv]) -> Result<(), TestCaseError> {
    match v.iter().find(|(inv, _)| invs.contains(inv)) {
        Some((inv, msg)) => Err(TestCaseError::fail(format!("{inv:?} violated: {msg}"))),
        None => Ok(()),
    }
}

proptest! {
    #![proptest_config(cases(600))]

    /// 12. A `Cluster` under arbitrary requests, inputs and timeouts (clock going backwards
    /// too): no panic, at most one refresh in flight (requests join it), events are exactly
    /// the running refresh's commands, only kept connections are reused or released (no more
    /// than `spare_connections` beside the winner's), each refresh keeps the throttle and the
    /// one-attempt-per-broker rule and ends once, and hedges spent never exceed the budget
    /// (per refresh: the tokens it started with; overall: burst + ratio per settled refresh).
    #[test]
    fn cluster_single_flight_and_hedge_budget(s in arb_cluster_scenario()) {
        let v = run_cluster(&s, ClusterClock::RequestsClamped);
        check_cluster(&v, &[
            Inv::SingleFlight, Inv::Forwarding, Inv::Keeping, Inv::HedgeBudget, Inv::Contract, Inv::Throttle,
            Inv::OneBroker, Inv::Terminal, Inv::Done,
        ])?;
    }

    /// 12b. After any `handle_*(now)` the cluster's and the running refresh's
    /// `poll_timeout()` are later than `now` (time going backwards, but not for
    /// `request_refresh`: see 12c), and likewise with a monotonic clock.
    #[test]
    fn cluster_poll_timeout_is_never_due_after_a_call(s in arb_cluster_scenario()) {
        check_cluster(&run_cluster(&s, ClusterClock::RequestsClamped), &[Inv::PollTimeout])?;
        check_cluster(&run_cluster(&s, ClusterClock::Monotonic), &[Inv::PollTimeout])?;
    }

    /// 12c. The same, and the refresh's timeouts still come no earlier than
    /// `attempt_timeout` after the attempt's start as the caller's clock saw it, when
    /// `request_refresh` too is called with an earlier `now` than the cluster has seen (time
    /// going backwards must be clamped).
    #[test]
    fn cluster_poll_timeout_is_never_due_even_when_time_goes_backwards(s in arb_cluster_scenario()) {
        check_cluster(&run_cluster(&s, ClusterClock::Backwards), &[Inv::PollTimeout, Inv::Contract])?;
    }

    /// 12d. The hedge bucket never holds more than `hedge_budget.burst` tokens, for budgets
    /// whose per-refresh `ratio` does not exceed `burst` (see 12e for the others).
    #[test]
    fn cluster_hedge_tokens_never_exceed_burst(s in arb_cluster_scenario()) {
        let budget = s.config.hedge_budget;
        prop_assume!(budget.ratio <= budget.burst as f64);
        check_cluster(&run_cluster(&s, ClusterClock::RequestsClamped), &[Inv::HedgeTokens])?;
    }

    /// 12e. The same for every valid budget.
    #[test]
    fn cluster_hedge_tokens_never_exceed_burst_for_any_budget(s in arb_cluster_scenario()) {
        check_cluster(&run_cluster(&s, ClusterClock::RequestsClamped), &[Inv::HedgeTokens])?;
    }
}
