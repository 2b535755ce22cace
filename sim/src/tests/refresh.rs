//! One refresh against the simulated brokers: each behaviour, presets, determinism, bad
//! input, the timeline, the scenario's serde form.

use super::*;

#[test]
fn healthy_cluster_needs_one_attempt() {
    let scenario = Scenario::from_behaviors([healthy(2), healthy(2), healthy(2)]);
    for (name, config) in presets() {
        let report = run(&config, &scenario);
        assert_eq!(report.winner(), Some(BrokerIndex(0)), "{name}");
        assert_eq!(report.time_to_metadata(), Some(ms(3)), "{name}: handshake 1 ms + rtt 2 ms");
        if name != "all_at_once" {
            assert_eq!(report.attempts_started, 1, "{name}");
            assert_eq!(report.requests_reached, 1, "{name}");
            assert_eq!(report.attempts_cancelled, 0, "{name}");
        }
        let span = &lane(&report, 0).spans[0];
        assert_eq!(span.connected_at, Some(at_ms(1)));
        assert_eq!(span.outcome, SpanOutcome::Won);
    }
}

#[test]
fn hung_first_broker_is_overtaken_and_cancelled() {
    let scenario = Scenario::from_behaviors([BrokerBehavior::Hung, healthy(2), healthy(2)]);
    let report = run(&listed(RefreshConfig::adaptive()), &scenario);
    let timeline = report.render_timeline();
    assert_eq!(report.winner(), Some(BrokerIndex(1)), "{timeline}");
    // Connected after 1 ms and silent: suspected 2 × the 12 ms silent pace = 24 ms after the
    // handshake, minus up to 20 % jitter. The tick starts one broker now and its partner
    // (growth Linear(2)) half that delay later, since two 1 ms handshakes fit in it.
    assert_eq!(report.attempts_started, 2, "{timeline}");
    assert_eq!(report.hedges, 1);
    let hedged = lane(&report, 1).spans[0].start;
    assert!(hedged >= at_ms(1).saturating_add(us(19_200)) && hedged <= at_ms(25), "{timeline}");
    // The hedge connects 1 ms later and its broker answers ApiVersions after another 1 ms,
    // before the partner is due: the still silent hung attempt is overtaken, the partner
    // dropped, and broker 1's metadata comes 1 ms on.
    let answered = hedged.saturating_add(ms(2));
    let span = &lane(&report, 0).spans[0];
    assert_eq!(span.outcome, SpanOutcome::Cancelled { reason: CancelReason::Overtaken }, "{timeline}");
    assert_eq!(span.end, Some(answered), "{timeline}");
    assert!(lane(&report, 2).spans.is_empty(), "the partner never started: {timeline}");
    assert_eq!(lane(&report, 1).spans[0].first_frame_at, Some(answered));
    assert_eq!(report.time_to_metadata(), Some(answered.saturating_since(Instant::ZERO) + ms(1)), "{timeline}");
    assert_eq!(report.requests_reached, 2);
    assert!(timeline.contains("cancelled(overtaken)"));
}

#[test]
fn refused_first_broker_starts_the_next_at_once() {
    let scenario = Scenario::from_behaviors([BrokerBehavior::Refused, healthy(2), healthy(2)]);
    for (name, config) in presets() {
        let report = run(&config, &scenario);
        assert_eq!(report.winner(), Some(BrokerIndex(1)), "{name}");
        let refused = &lane(&report, 0).spans[0];
        assert_eq!(refused.end, Some(at_ms(1)), "{name}");
        assert_eq!(refused.connected_at, None);
        assert!(matches!(refused.outcome, SpanOutcome::Failed { kind: ErrorKind::Refused, .. }), "{name}");
        if name != "all_at_once" {
            assert_eq!(lane(&report, 1).spans[0].start, at_ms(1), "{name}: no stagger wait after a refusal");
            assert_eq!(report.time_to_metadata(), Some(ms(4)), "{name}");
            assert_eq!(report.requests_reached, 1, "{name}: the refused attempt reached nobody");
            assert_eq!(report.attempts_failed, 1, "{name}");
        }
    }
}

#[test]
fn all_hung_gives_up_exactly_at_the_deadline() {
    let scenario = Scenario::from_behaviors([BrokerBehavior::Hung, BrokerBehavior::Hung, BrokerBehavior::Hung]);
    for (name, config) in presets() {
        let config = with_deadline(config, Duration::from_secs(5)); // below the 10 s attempt timeout
        let report = run(&config, &scenario);
        match &report.outcome {
            Outcome::GiveUp { error, at } => {
                assert_eq!(error.reason, GiveUpReason::DeadlineExceeded, "{name}");
                assert_eq!(*at, Instant::from_millis(5000), "{name}");
            }
            other => panic!("{name}: {other:?}"),
        }
        assert_eq!(report.ended_at, Instant::from_millis(5000));
        for (_, span) in report.spans() {
            assert_eq!(span.outcome, SpanOutcome::Cancelled { reason: CancelReason::Deadline }, "{name}");
            assert_eq!(span.end, Some(Instant::from_millis(5000)));
        }
        assert_eq!(report.requests_reached, report.attempts_started);
    }
    // With the default 60 s deadline, four passes of 10 s timeouts run out first.
    let report = run(&listed(RefreshConfig::adaptive()), &scenario);
    let error = report.give_up().expect("gives up");
    assert_eq!(error.reason, GiveUpReason::AllFailed { passes: 4 });
    assert_eq!(report.passes, 4);
    assert_eq!(report.attempts_started, 12);
    assert_eq!(report.attempts_failed, 12);
    assert!(matches!(error.last_error, Some((_, _, ref e)) if e.kind == ErrorKind::ResponseTimeout));
}

#[test]
fn same_seed_gives_an_identical_report() {
    let mut scenario = example_scenario();
    scenario.brokers.push(SimBroker::new(BrokerBehavior::Flaky { p: 0.5, rtt: ms(3) }));
    let scenario = scenario.with_seed(42);
    for (name, config) in presets() {
        let config = config.with_seed(7);
        let a = serde_json::to_string(&run_refresh(&config, &scenario)).unwrap();
        let b = serde_json::to_string(&run_refresh(&config, &scenario)).unwrap();
        assert_eq!(a, b, "{name}");
        // And the report survives a serde round trip.
        let back: Report = serde_json::from_str(&a).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), a, "{name}");
    }
    // The simulator's seed matters: slow answers take other times.
    let slow = Scenario::from_behaviors([BrokerBehavior::Slow { min: ms(20), max: ms(40) }]);
    let times: Vec<_> = (0..8)
        .map(|s| run(&listed(RefreshConfig::adaptive()), &slow.clone().with_seed(s)).time_to_metadata())
        .collect();
    assert!(times.iter().any(|t| *t != times[0]), "{times:?}");
}

#[test]
fn example_scenario_works_with_every_preset() {
    for seed in 0..20 {
        let scenario = example_scenario().with_seed(seed);
        for (name, config) in presets() {
            let report = run(&config.with_seed(seed), &scenario);
            assert!(report.winner().is_some(), "{name}\n{}", report.render_timeline());
            assert!(matches!(lane(&report, 1).spans[0].outcome, SpanOutcome::Failed { kind: ErrorKind::Refused, .. }));
        }
    }
    let report = run(&listed(RefreshConfig::sequential()), &example_scenario());
    // Sarama's behaviour: a full 10 s attempt timeout on the hung broker first.
    let t = report.time_to_metadata().unwrap();
    assert!(t > Duration::from_secs(10) && t < Duration::from_millis(10_045), "{t:?}");
    // The default: at most 24 ms of silence from the hung broker (its handshake takes 1 ms),
    // the refusal at once, then the slow broker's 20–40 ms.
    let report = run(&listed(RefreshConfig::adaptive()), &example_scenario());
    assert!(report.time_to_metadata().unwrap() < ms(70), "{}", report.render_timeline());
}

#[test]
fn dies_at_behaves() {
    let config = listed(RefreshConfig::adaptive());
    let dies = |at: Duration, rtt: u64| BrokerBehavior::DiesAt { at, rtt: ms(rtt) };

    // Alive long enough: just healthy.
    let report = run(&config, &Scenario::from_behaviors([dies(ms(100), 2)]));
    assert_eq!(report.time_to_metadata(), Some(ms(3)));

    // Dies while its answer is on the way: the attempt is closed at the moment of death.
    let report = run(&config, &Scenario::from_behaviors([dies(ms(2), 5), healthy(2)]));
    let span = &lane(&report, 0).spans[0];
    assert_eq!(span.connected_at, Some(at_ms(1)));
    assert_eq!(span.end, Some(at_ms(2)));
    assert!(matches!(span.outcome, SpanOutcome::Failed { kind: ErrorKind::Closed, .. }));
    assert_eq!(lane(&report, 1).spans[0].start, at_ms(2));
    assert_eq!(report.time_to_metadata(), Some(ms(5)));
    assert_eq!(report.requests_reached, 2);

    // Already dead: refused after the handshake, and nothing reached it.
    let report = run(&config, &Scenario::from_behaviors([dies(Duration::ZERO, 2), healthy(2)]));
    let span = &lane(&report, 0).spans[0];
    assert!(matches!(span.outcome, SpanOutcome::Failed { kind: ErrorKind::Refused, .. }));
    assert_eq!((span.connected_at, span.end), (None, Some(at_ms(1))));
    assert_eq!(report.requests_reached, 1);

    // Dies during the handshake: closed at death, never connected.
    let report = run(&config, &Scenario::from_behaviors([dies(Duration::from_micros(500), 2), healthy(2)]));
    let span = &lane(&report, 0).spans[0];
    assert!(matches!(span.outcome, SpanOutcome::Failed { kind: ErrorKind::Closed, .. }));
    assert_eq!((span.connected_at, span.end), (None, Some(Instant::from_micros(500))));
    assert_eq!(report.requests_reached, 1);
}

#[test]
fn flaky_behaves() {
    let config = listed(RefreshConfig::adaptive());
    let flaky = |p: f64| BrokerBehavior::Flaky { p, rtt: ms(2) };

    let report = run(&config, &Scenario::from_behaviors([flaky(1.0), healthy(2)]));
    let span = &lane(&report, 0).spans[0];
    assert_eq!(span.connected_at, Some(at_ms(1)));
    assert_eq!(span.end, Some(at_ms(3)));
    assert!(matches!(span.outcome, SpanOutcome::Failed { kind: ErrorKind::Closed, .. }));
    assert_eq!(report.winner(), Some(BrokerIndex(1)));
    assert_eq!(report.requests_reached, 2, "a flaky broker accepted the connection");

    let report = run(&config, &Scenario::from_behaviors([flaky(0.0), healthy(2)]));
    assert_eq!((report.winner(), report.time_to_metadata()), (Some(BrokerIndex(0)), Some(ms(3))));

    let winners: Vec<_> = (0..64)
        .map(|seed| run(&config, &Scenario::from_behaviors([flaky(0.5), healthy(2)]).with_seed(seed)).winner())
        .collect();
    assert!(winners.contains(&Some(BrokerIndex(0))) && winners.contains(&Some(BrokerIndex(1))), "{winners:?}");
}

#[test]
fn slow_answers_fall_in_range() {
    for seed in 0..32 {
        let scenario = Scenario::from_behaviors([BrokerBehavior::Slow { min: ms(20), max: ms(40) }]).with_seed(seed);
        let t = run(&listed(RefreshConfig::staggered()), &scenario).time_to_metadata().unwrap();
        assert!(t >= ms(21) && t <= ms(41), "{t:?}");
    }
}

#[test]
fn zero_times_and_handshakes_finish() {
    let scenario = Scenario::new(vec![
        SimBroker::new(healthy(0)).with_handshake(Duration::ZERO),
        SimBroker::new(BrokerBehavior::Refused).with_handshake(Duration::ZERO),
    ]);
    for (name, config) in presets() {
        let report = run(&config, &scenario);
        assert_eq!(report.time_to_metadata(), Some(Duration::ZERO), "{name}");
    }
}

#[test]
fn bad_input_is_reported_not_panicked() {
    let mut config = listed(RefreshConfig::adaptive());
    config.fanout.initial = 0;
    let report = run_refresh(&config, &example_scenario());
    assert!(
        matches!(&report.outcome, Outcome::Aborted { error: SimError::InvalidConfig { field, .. }, .. } if field == "fanout.initial")
    );
    assert!(report.trace.is_none());
    assert!(report.render_timeline().contains("aborted"));

    let report = run_refresh(&listed(RefreshConfig::adaptive()), &Scenario::new(Vec::new()));
    assert!(
        matches!(&report.outcome, Outcome::Aborted { error: SimError::InvalidConfig { field, .. }, .. } if field == "seeds")
    );

    // Metadata no broker can win with: every answer is rejected, the refresh gives up.
    let mut scenario = Scenario::from_behaviors([healthy(1), healthy(1)]);
    scenario.metadata = Some(stagger::Metadata::default());
    let report = run(&listed(RefreshConfig::adaptive()), &scenario);
    assert!(matches!(report.give_up().map(|e| e.reason), Some(GiveUpReason::AllFailed { .. })));
    assert!(report.spans().all(|(_, s)| matches!(s.outcome, SpanOutcome::Failed { kind: ErrorKind::NoBrokers, .. })));
}

#[test]
fn timeline_is_readable() {
    let report = run(&listed(RefreshConfig::adaptive()), &example_scenario());
    let text = report.render_timeline();
    for needle in
        ["broker-0", "broker-4", "hung", "refused", "slow 20ms-40ms", "won", "cancelled(overtaken)", "failed(refused)"]
    {
        assert!(text.contains(needle), "{needle:?} missing from\n{text}");
    }
    assert!(text.contains("metadata in") && text.contains("requests reached"), "{text}");
    assert_eq!(text.lines().count(), 6, "{text}");
    assert_eq!(render::fmt_duration(Duration::from_micros(1_500)), "1.5ms");
    assert_eq!(render::fmt_duration(Duration::from_micros(60_000_000)), "60s");
    assert_eq!(render::fmt_duration(Duration::from_micros(250)), "0.25ms");
}

#[test]
fn scenario_serde_defaults_and_addresses() {
    let json = r#"{"brokers":[{"behavior":{"kind":"hung"}},{"behavior":{"kind":"healthy","rtt":{"secs":0,"nanos":2000000}}}]}"#;
    let scenario: Scenario = serde_json::from_str(json).unwrap();
    assert_eq!(scenario.brokers[0].handshake, SimBroker::DEFAULT_HANDSHAKE);
    assert_eq!(scenario.seed, 0);
    assert_eq!(scenario.broker_for_address("broker-1:9092"), Some(1));
    assert_eq!(scenario.broker_for_address("broker-2:9092"), None);
    assert_eq!(scenario.broker_for_address("broker-01:9092"), None);
    let meta = scenario.metadata();
    assert_eq!(meta.brokers.len(), 2);
    assert!(meta.rejection().is_none());
    let mut book = stagger::BrokerBook::new(scenario.seeds()).unwrap();
    book.learn_from(&meta);
    assert_eq!(book.len(), 2, "metadata names the same brokers as the seeds");
}

#[test]
fn events_name_timer_kinds() {
    let report = run(&listed(RefreshConfig::adaptive()), &example_scenario());
    let stagger = stagger::TimerKind::Stagger;
    assert!(report.events.iter().any(|e| e.kind == EventKind::Timer { timer: stagger }));
    let text: String = serde_json::to_string(&report.events).unwrap();
    assert!(text.contains(r#""event":"timer","timer":"stagger""#), "{text}");
}
