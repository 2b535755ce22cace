//! Random scenarios under random policies, checked against every invariant.

use super::*;

const CASES: u64 = 400;

/// Random scenarios under random policies: no aborts, every invariant of `check_report`.
#[test]
fn random_scenarios_keep_every_invariant() {
    let mut rng = Rng::new(0x5eed);
    for case in 0..CASES {
        let n = 1 + rng.below(6);
        let brokers = (0..n)
            .map(|_| {
                let d = |rng: &mut Rng, max_ms: usize| Duration::from_micros(rng.below(max_ms * 1000) as u64);
                let behavior = match rng.below(6) {
                    0 => BrokerBehavior::Healthy { rtt: d(&mut rng, 5) },
                    1 => {
                        let (a, b) = (d(&mut rng, 50), d(&mut rng, 50));
                        BrokerBehavior::Slow { min: a, max: b }
                    }
                    2 => BrokerBehavior::Hung,
                    3 => BrokerBehavior::Refused,
                    4 => BrokerBehavior::Flaky { p: rng.unit(), rtt: d(&mut rng, 5) },
                    _ => BrokerBehavior::DiesAt { at: d(&mut rng, 30), rtt: d(&mut rng, 5) },
                };
                SimBroker::new(behavior).with_handshake(d(&mut rng, 3))
            })
            .collect();
        let scenario = Scenario::new(brokers).with_seed(case);
        let (_, mut config) = presets()[rng.below(4)];
        config.seed = rng.next_u64();
        if rng.below(2) == 0 {
            let f = &mut config.fanout;
            f.max_in_flight = 1 + rng.below(5) as u32;
            f.initial = 1 + rng.below(f.max_in_flight as usize) as u32;
            f.growth = if rng.below(2) == 0 {
                stagger::Growth::Linear(1 + rng.below(3) as u32)
            } else {
                stagger::Growth::Exponential(1.0 + 2.0 * rng.unit())
            };
            f.jitter = rng.unit();
            f.tuning.next_on_failure = rng.below(2) == 0;
            config.retry.retries = rng.below(4) as u32;
        }
        if rng.below(3) == 0 {
            config.attempt_timeout = ms(5 + rng.below(50) as u64);
            config = with_deadline(config, ms(20 + rng.below(500) as u64));
        }
        let report = run_refresh(&config, &scenario);
        check_report(&config, &report);
        if case % 8 == 0 {
            let cluster = ClusterConfig { refresh: config, ..ClusterConfig::default() };
            let r = run_cluster(&cluster, &scenario, &[Duration::ZERO, ms(1), Duration::from_secs(70)]);
            assert_eq!(r.error, None, "{}", r.render_summary());
            assert!(r.refreshes.iter().all(|r| r.end.is_some()), "{}", r.render_summary());
            check_events(&r.events, config.fanout.max_in_flight, &r.lanes, &|| r.render_summary());
        }
    }
}
