//! The fleet simulation's bookkeeping, the oracle as a yardstick, and what warm clients hold
//! of the two mechanisms the fleet tunes: the adaptive estimator window and the hedge budget.
//! (Those two mechanisms' own tests are the core's, in `tests/estimator_and_budget.rs`.)

use stagger::{ClusterConfig, HedgeBudget, RefreshConfig};
use stagger_sim::fleet::{
    run_matrix, FleetConfig, FleetReport, FleetScenario, ScenarioResult, Strategy as Policy, WarmFleet,
};

// ============================================================================================
// Fleet bookkeeping
// ============================================================================================

fn small_fleet(clients: u32, seed: u64) -> FleetReport {
    let config = FleetConfig { clients, seed, ..FleetConfig::default() };
    run_matrix(&config, &Policy::standard())
}

fn check_books(r: &ScenarioResult, clients: u32) {
    let who = format!("{} / {}", r.scenario.name(), r.strategy);
    assert_eq!(r.refreshes, clients, "{who}: one measured refresh per client");
    assert_eq!(r.times_us.len(), clients as usize, "{who}");
    // Every attempt is accounted for: it ran on a kept connection, or its new connection
    // reached a broker, was refused, or was cancelled by the core before its handshake
    // completed.
    assert_eq!(r.attempts, r.reused + r.connections + r.refused + r.cancelled_before_handshake, "{who}: {r:?}");
    // Requests the brokers counted (per broker, on arrival) equal the metadata requests the
    // clients sent (on the ApiVersions answer of a live attempt).
    assert_eq!(r.requests_per_broker.iter().sum::<u64>(), r.requests, "{who}");
    assert!(r.requests <= r.reused + r.connections && r.reused + r.connections <= r.attempts, "{who}: {r:?}");
    if r.failed == 0 && r.strategy != "oracle" {
        // The core's own count of started attempts agrees with the simulator's.
        assert_eq!(r.core_started, r.attempts, "{who}");
    }
    if r.strategy == "oracle" {
        assert_eq!((r.attempts, r.requests, r.failed), (clients as u64, clients as u64, 0), "{who}");
    }
    if r.scenario != FleetScenario::FailoverStorm {
        assert_eq!(r.refused, 0, "{who}: only the storm has a dead broker");
    }
    assert!(r.peak_requests as u64 <= r.requests, "{who}");
    let ok = r.times_us.iter().filter(|&&t| t != u64::MAX).count() as u32;
    assert_eq!(ok + r.failed, r.refreshes, "{who}");
    assert!(r.times_us.windows(2).all(|w| w[0] <= w[1]), "{who}: sorted");
}

#[test]
fn small_fleet_keeps_its_books() {
    let report = small_fleet(100, 7);
    assert_eq!(report.results.len(), FleetScenario::ALL.len() * Policy::standard().len());
    for r in &report.results {
        check_books(r, 100);
    }
    // Sequential never has two attempts in flight, so it never hedges.
    for s in FleetScenario::ALL {
        assert_eq!(report.result(s, "sequential").unwrap().hedges, 0);
    }
    // Healthy: one attempt each for everything but the broadcast.
    for name in ["sequential", "staggered-500ms", "oracle"] {
        let r = report.result(FleetScenario::Healthy, name).unwrap();
        assert_eq!(r.attempts_per_refresh, 1.0, "{name}");
    }
    assert_eq!(report.result(FleetScenario::Healthy, "all-at-once").unwrap().attempts, 100 * 30);
}

#[test]
fn the_fleet_is_deterministic() {
    let config = FleetConfig { clients: 60, seed: 3, ..FleetConfig::default() };
    let strategy = Policy::core("adaptive", RefreshConfig::adaptive());
    let a = WarmFleet::new(&config, &strategy);
    let b = WarmFleet::new(&config, &strategy);
    for s in FleetScenario::ALL {
        let (x, y) = (a.run(s), b.run(s));
        assert_eq!(serde_json::to_string(&x).unwrap(), serde_json::to_string(&y).unwrap());
        assert_eq!(x.times_us, y.times_us);
    }
}

#[test]
fn warm_clients_hold_a_full_window_and_their_budget() {
    let config = FleetConfig { clients: 40, ..FleetConfig::default() };
    let warm = WarmFleet::new(&config, &Policy::core("adaptive", RefreshConfig::adaptive()));
    let budget = ClusterConfig::default().hedge_budget;
    for cluster in warm.clusters() {
        let cluster = cluster.expect("core clients have a cluster");
        assert_eq!(cluster.estimator().len(), stagger::Estimator::WINDOW, "64 calm refreshes fill the window");
        assert!(cluster.metadata().is_some());
        assert!(cluster.book().iter().filter(|(_, e)| e.is_discovered()).count() == 30);
        assert!(cluster.hedge_tokens() <= budget.burst);
    }
}

/// The hedge budget caps extra attempts even in a storm: a refresh hedges at most as many
/// times as it had tokens, and no client starts with more than `burst`.
#[test]
fn hedges_stay_within_the_budget_in_a_storm() {
    for burst in [0, 2, 10] {
        let cluster = ClusterConfig { hedge_budget: HedgeBudget { ratio: 0.1, burst }, ..ClusterConfig::default() };
        let config = FleetConfig { clients: 150, ..FleetConfig::default() };
        let r = WarmFleet::new(&config, &Policy::core_with("a", cluster)).run(FleetScenario::FailoverStorm);
        check_books(&r, 150);
        assert!(r.hedges <= burst as u64 * 150, "burst {burst}: {} hedges", r.hedges);
        if burst == 0 {
            assert_eq!(r.hedges, 0);
        }
    }
}

/// "The oracle is never slower than any strategy on the same seed" is not a theorem here,
/// and the test says what is true instead.
///
/// The oracle sends one request to the least loaded healthy broker. Two things can beat it:
/// a strategy that races several brokers (`all-at-once`, or a hedge) takes the fastest of
/// several service times, and the oracle balances *work*, so on an idle cluster its one
/// request is as slow as that request's own service time. What holds, and is asserted on
/// several seeds:
///
/// * no single-attempt-at-a-time policy beats it: every percentile of `sequential` and
///   `staggered-500ms` is at least the oracle's in every scenario (common random numbers
///   give client `i`'s first attempt the same network and broker time under every
///   strategy, so on an idle cluster the two are equal, and queues only add);
/// * where something is wrong (hung brokers, the storm), the one-at-a-time policies stay
///   above the oracle's p99 (the adaptive default is not held to it: when a broker is silent
///   it races two fresh brokers and keeps the faster, which can beat one oracle request);
/// * the oracle never gives up and sends exactly one request per refresh.
#[test]
fn the_oracle_is_a_lower_bound_for_single_attempt_policies() {
    for seed in [1, 2, 3] {
        let report = small_fleet(120, seed);
        for s in FleetScenario::ALL {
            let o = report.result(s, "oracle").unwrap();
            assert_eq!(o.failed, 0);
            let op = o.time_to_metadata;
            for name in ["sequential", "staggered-500ms"] {
                let p = report.result(s, name).unwrap().time_to_metadata;
                for (mine, oracle, what) in
                    [(p.p50_ms, op.p50_ms, "p50"), (p.p99_ms, op.p99_ms, "p99"), (p.p999_ms, op.p999_ms, "p99.9")]
                {
                    let mine = mine.unwrap_or(f64::INFINITY);
                    assert!(
                        mine >= oracle.unwrap(),
                        "seed {seed} {}: {name} {what} {mine} < oracle {oracle:?}",
                        s.name()
                    );
                }
            }
            if s != FleetScenario::Healthy {
                for name in ["sequential", "staggered-500ms"] {
                    let p99 = report.result(s, name).unwrap().time_to_metadata.p99_ms.unwrap_or(f64::INFINITY);
                    assert!(p99 >= op.p99_ms.unwrap(), "seed {seed} {}: {name} p99 {p99} < oracle", s.name());
                }
            }
        }
    }
}
