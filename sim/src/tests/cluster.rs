//! A long-lived `Cluster` in the simulator: single-flight, the previous winner, rebootstrap.

use super::*;
use stagger::report::EventKind;

/// The default cluster view, but with the seeds tried in the order listed: the assertions
/// name brokers by position.
fn listed() -> ClusterConfig {
    let mut c = ClusterConfig::default();
    c.refresh.shuffle_seeds = false;
    c
}

#[test]
fn cluster_coalesces_concurrent_requests() {
    let scenario = Scenario::from_behaviors([healthy(2), healthy(2), healthy(2)]);
    let report = run_cluster(&listed(), &scenario, &[Duration::ZERO, ms(1)]);
    assert_eq!(report.error, None);
    assert_eq!(report.refreshes.len(), 1, "{}", report.render_summary());
    assert_eq!(report.requests.len(), 2);
    assert!(report.requests.iter().all(|r| r.epoch == 1));
    let r = &report.refreshes[0];
    assert_eq!(r.requests, 2);
    assert_eq!(r.winner(), Some(BrokerIndex(0)));
    assert_eq!(r.duration(), Some(ms(3)));
    assert_eq!(r.stats.map(|s| s.started), Some(1));
    // Both requests are in the log, each with the refresh that answers it.
    let requests: Vec<_> = report
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Requested { .. }))
        .map(|e| (e.elapsed, e.kind.clone()))
        .collect();
    let requested = EventKind::Requested { epoch: 1 };
    assert_eq!(requests, [(Duration::ZERO, requested.clone()), (ms(1), requested)]);
}

#[test]
fn cluster_refreshes_periodically_and_logs_the_timer() {
    let config = ClusterConfig { refresh_interval: Duration::from_secs(60), ..listed() };
    let scenario = Scenario::from_behaviors([healthy(2), healthy(2)]);
    let report = run_cluster(&config, &scenario, &[Duration::ZERO, Duration::from_secs(90)]);
    assert_eq!(report.error, None);
    assert_eq!(report.refreshes.len(), 3, "{}", report.render_summary());
    assert_eq!(report.refreshes[1].requests, 0, "the periodic one: {}", report.render_summary());
    let due = report.events.iter().position(|e| e.kind == EventKind::RefreshDue).expect("the periodic timer");
    assert_eq!(report.events[due].elapsed, Duration::from_secs(60) + ms(3), "a minute after the first win");
    let next = &report.events[due + 1].kind;
    assert!(matches!(next, EventKind::Started { attempt, .. } if attempt.epoch() == 2), "{next:?}");
}

#[test]
fn cluster_prefers_the_previous_winner() {
    let scenario = Scenario::from_behaviors([BrokerBehavior::Hung, healthy(2), healthy(2)]);
    let report = run_cluster(&listed(), &scenario, &[Duration::ZERO, Duration::from_secs(10)]);
    assert_eq!(report.error, None);
    assert_eq!(report.refreshes.len(), 2, "{}", report.render_summary());
    let (first, second) = (&report.refreshes[0], &report.refreshes[1]);
    // The hung broker is hedged by a tick of two (growth Linear(2)), spread: broker 1 answers
    // before its partner is due, so broker 2 is never tried.
    assert_eq!(first.brokers_tried, [BrokerIndex(0), BrokerIndex(1)]);
    let winner = first.winner().unwrap();
    assert_eq!(winner, BrokerIndex(1));
    assert_eq!(second.brokers_tried, [winner], "{}", report.render_summary());
    // On the connection kept from the first win: no handshake, one 2 ms round trip.
    assert_eq!(second.duration(), Some(ms(2)));
    assert_eq!(second.start, Instant::from_millis(10_000));
    assert!(report.render_summary().contains("answered 1 request"));
}

#[test]
fn cluster_rebootstraps_and_recovers() {
    // Everything dies after the first refresh: the second fails and falls back to seeds.
    let dies = BrokerBehavior::DiesAt { at: Duration::from_secs(1), rtt: ms(2) };
    let scenario = Scenario::from_behaviors([dies.clone(), dies.clone(), dies]);
    let report = run_cluster(&listed(), &scenario, &[Duration::ZERO, Duration::from_secs(2)]);
    assert_eq!(report.error, None);
    assert_eq!(report.refreshes.len(), 2, "{}", report.render_summary());
    assert!(report.refreshes[0].winner().is_some());
    assert!(matches!(report.refreshes[1].outcome, RefreshOutcome::Failed { .. }));
    assert_eq!(report.rebootstraps, 1, "{}", report.render_summary());
    // The log says it after the second refresh gave up.
    let gave_up = report.events.iter().position(|e| matches!(e.kind, EventKind::GaveUp { .. })).expect("a give-up");
    let rebootstrapped = report.events.iter().position(|e| e.kind == EventKind::Rebootstrapped).expect("logged");
    assert!(gave_up < rebootstrapped, "{:#?}", report.events);
}
