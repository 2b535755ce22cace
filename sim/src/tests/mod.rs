//! Simulator scenarios: each checks an outcome, and every report is also checked against the
//! invariants in [`check_report`] (trace replays, counters agree with the core, spans agree
//! with the core's own attempt records, throttle respected).

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::time::Duration;

mod cluster;
mod random;
mod refresh;

use super::*;
use stagger::report::{Event, EventKind};
use stagger::TraceEvent;
use stagger::{
    AttemptState, BrokerIndex, CancelReason, ClusterConfig, ErrorKind, GiveUpReason, Refresh, RefreshConfig, Rng,
};

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn at_ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

fn healthy(rtt_ms: u64) -> BrokerBehavior {
    BrokerBehavior::Healthy { rtt: ms(rtt_ms) }
}

/// `config` with a shorter deadline, its stagger clamped so the config stays valid.
fn with_deadline(mut config: RefreshConfig, deadline: Duration) -> RefreshConfig {
    config.deadline = deadline;
    match &mut config.fanout.stagger {
        stagger::Stagger::Fixed(d) => *d = (*d).min(deadline),
        stagger::Stagger::Adaptive(a) => a.cold = a.cold.min(deadline),
    }
    config
}

/// `config` asking the scenario's brokers in the order listed, so a scenario's first broker
/// is the first asked.
fn listed(mut config: RefreshConfig) -> RefreshConfig {
    config.shuffle_seeds = false;
    config
}

/// Every preset, asking in the order listed.
fn presets() -> [(&'static str, RefreshConfig); 4] {
    [
        ("adaptive", listed(RefreshConfig::adaptive())),
        ("staggered", listed(RefreshConfig::staggered())),
        ("sequential", listed(RefreshConfig::sequential())),
        ("all_at_once", listed(RefreshConfig::all_at_once())),
    ]
}

/// The example's cluster: hung, refused, slow 20–40 ms, healthy, healthy.
fn example_scenario() -> Scenario {
    Scenario::from_behaviors([
        BrokerBehavior::Hung,
        BrokerBehavior::Refused,
        BrokerBehavior::Slow { min: ms(20), max: ms(40) },
        healthy(2),
        healthy(2),
    ])
}

fn lane(report: &Report, i: u32) -> &Lane {
    report.lanes.iter().find(|l| l.broker == BrokerIndex(i)).expect("lane exists")
}

/// Runs and checks every invariant; returns the report.
fn run(config: &RefreshConfig, scenario: &Scenario) -> Report {
    let report = run_refresh(config, scenario);
    check_report(config, &report);
    report
}

fn check_report(config: &RefreshConfig, report: &Report) {
    let show = || report.render_timeline();
    assert!(!matches!(report.outcome, Outcome::Aborted { .. }), "aborted:\n{}", show());

    // The trace replays to the same commands.
    let trace = report.trace.as_ref().expect("trace recorded");
    match trace.replay() {
        Ok(Ok(_)) => {}
        other => panic!("replay failed: {other:?}\n{}", show()),
    }

    // Counters agree with the event log and with the core.
    let connects = report.events.iter().filter(|e| matches!(e.kind, EventKind::Started { .. })).count() as u32;
    let trace_connects = trace
        .events
        .iter()
        .filter(|e| matches!(e, TraceEvent::Command { command: stagger::Command::Connect { .. }, .. }))
        .count() as u32;
    assert_eq!(report.attempts_started, connects, "{}", show());
    assert_eq!(report.attempts_started, trace_connects, "{}", show());
    assert_eq!(report.attempts_started, report.stats.started, "{}", show());
    assert_eq!(report.attempts_cancelled, report.stats.cancelled, "{}", show());
    assert_eq!(report.attempts_failed, report.stats.failed, "{}", show());
    assert!(report.requests_reached <= report.attempts_started, "{}", show());
    assert_eq!(report.spans().count() as u32, report.attempts_started);

    // Exactly one terminal event, and it is the last: nothing is started, cancelled or
    // delivered after it.
    let terminal = |e: &Event| matches!(e.kind, EventKind::Won { .. } | EventKind::GaveUp { .. });
    assert_eq!(report.events.iter().filter(|e| terminal(e)).count(), 1, "{}", show());
    assert!(report.events.last().is_some_and(terminal), "{}", show());

    check_events(&report.events, config.fanout.max_in_flight, &report.lanes, &show);

    // Spans agree with what a fresh core, fed the trace, knows about each attempt.
    let mut core = Refresh::new(&trace.config, &trace.book, trace.started_at).unwrap();
    for e in &trace.events {
        match e {
            TraceEvent::Input { at, input } => {
                core.handle_input(*at, input.clone());
            }
            TraceEvent::Timeout { at, .. } => core.handle_timeout(*at),
            TraceEvent::Command { .. } => {}
        }
    }
    assert_eq!(core.attempts().count() as u32, report.attempts_started);
    for (id, info) in core.attempts() {
        let (broker, span) = report.spans().find(|(_, s)| s.attempt == id).expect("span for every attempt");
        assert_eq!(broker, info.broker);
        assert_eq!(span.start, info.started_at, "{id}");
        assert_eq!(span.end, info.ended_at, "{id}");
        assert_eq!(span.connected_at, info.connected_at, "{id}");
        assert_eq!((span.pass, span.hedge, span.partner), (info.pass, info.hedge, info.partner), "{id}");
        let expected = match span.outcome {
            SpanOutcome::Won => AttemptState::Won,
            SpanOutcome::Failed { .. } => AttemptState::Failed,
            SpanOutcome::Cancelled { .. } => AttemptState::Cancelled,
            SpanOutcome::InFlight => AttemptState::InFlight,
            SpanOutcome::Resolved { .. } => AttemptState::Resolved,
        };
        assert_eq!(info.state, expected, "{id}\n{}", show());
    }
}

/// Time only moves forward; the throttle holds; one attempt per broker at a time; nothing
/// is left in flight at the end. Events name their broker by the address of its lane.
fn check_events(events: &[Event], max_in_flight: u32, lanes: &[Lane], show: &dyn Fn() -> String) {
    let mut last = Duration::ZERO;
    let mut in_flight = 0u32;
    let mut per_broker: Vec<u32> = vec![0; lanes.len()];
    let lane = |broker: &str| lanes.iter().position(|l| l.address == broker).expect("a lane for every broker");
    for e in events {
        assert!(e.elapsed >= last, "time went backwards at {e:?}");
        last = e.elapsed;
        match &e.kind {
            EventKind::Started { broker, .. } => {
                in_flight += 1;
                per_broker[lane(broker)] += 1;
                assert!(in_flight <= max_in_flight, "throttle exceeded\n{}", show());
                assert!(per_broker[lane(broker)] <= 1, "two attempts on {broker} at once\n{}", show());
            }
            EventKind::Cancelled { broker, .. } | EventKind::Won { broker, .. } | EventKind::Failed { broker, .. } => {
                in_flight -= 1;
                per_broker[lane(broker)] -= 1;
            }
            _ => {}
        }
    }
    assert_eq!(in_flight, 0, "attempts left in flight after the end\n{}", show());
}
