//! Traces: a recorded refresh round-trips through JSON and replays to the same commands;
//! a tampered trace is reported as diverging, at the first differing command.

use std::time::Duration;

use stagger::{AttemptError, BrokerBook, BrokerMetadata, Command, ErrorKind, Input, Instant, Metadata, RefreshConfig};
use stagger::{Recorder, Trace, TraceEvent};

fn ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

/// Records a refresh over 4 brokers: the first hangs, the second refuses, the third answers.
fn record() -> Trace {
    let book = BrokerBook::new(stagger::test_util::numbered_seeds(4)).unwrap();
    let config = RefreshConfig::default().with_seed(42);
    let mut rec = Recorder::new(&config, &book, Instant::ZERO, "tests").unwrap();
    let mut attempts = Vec::new();
    let drain = |rec: &mut Recorder, now: Instant, attempts: &mut Vec<_>| {
        while let Some(c) = rec.poll_command(now) {
            if let Command::Connect { attempt, .. } = c {
                attempts.push(attempt);
            }
        }
    };
    drain(&mut rec, Instant::ZERO, &mut attempts);
    rec.handle_input(ms(1), Input::Connected { attempt: attempts[0], tls: false });
    drain(&mut rec, ms(1), &mut attempts);
    while attempts.len() < 2 {
        let at = rec.refresh().poll_timeout().unwrap();
        rec.handle_timeout(at);
        drain(&mut rec, at, &mut attempts);
    }
    rec.handle_input(
        ms(12),
        Input::Failed { attempt: attempts[1], error: AttemptError::with_detail(ErrorKind::Refused, "os error 111") },
    );
    drain(&mut rec, ms(12), &mut attempts);
    let metadata = Metadata {
        cluster_id: Some("c1".into()),
        brokers: vec![BrokerMetadata { node_id: 1, host: "broker-2".into(), port: 9092, rack: Some("r1".into()) }],
        ..Metadata::default()
    };
    rec.handle_input(ms(15), Input::Response { attempt: attempts[2], metadata });
    drain(&mut rec, ms(15), &mut attempts);
    assert!(rec.refresh().is_finished());
    rec.into_trace()
}

#[test]
fn a_recorded_trace_replays_to_the_same_commands_after_a_json_round_trip() {
    let trace = record();
    let json = serde_json::to_string_pretty(&trace).unwrap();
    let back: Trace = serde_json::from_str(&json).unwrap();
    assert_eq!(back, trace);
    let replayed = back.replay().unwrap().expect("no divergence");
    let recorded: Vec<Command> = trace
        .events
        .iter()
        .filter_map(|e| match e {
            TraceEvent::Command { command, .. } => Some(command.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(replayed, recorded);
    assert!(matches!(recorded.last(), Some(Command::Done { .. })));
    assert!(recorded.iter().any(|c| matches!(c, Command::Cancel { .. })), "the hung attempt was cancelled");
}

#[test]
fn a_tampered_trace_diverges_at_the_first_changed_command() {
    let mut trace = record();
    let index = trace
        .events
        .iter()
        .position(|e| matches!(e, TraceEvent::Command { command: Command::Cancel { .. }, .. }))
        .unwrap();
    if let TraceEvent::Command { command: Command::Cancel { reason, .. }, .. } = &mut trace.events[index] {
        *reason = stagger::CancelReason::TimedOut;
    }
    let divergence = trace.replay().unwrap().unwrap_err();
    assert_eq!(divergence.event_index, index);
    assert!(divergence.to_string().contains("diverges"));
}

#[test]
fn a_trace_replayed_under_another_policy_diverges() {
    let mut trace = record();
    trace.config.fanout.max_in_flight = 1;
    assert!(trace.replay().unwrap().is_err());
}

#[test]
fn a_trace_missing_its_commands_is_reported() {
    let mut trace = record();
    trace.events.retain(|e| !matches!(e, TraceEvent::Command { .. }));
    let d = trace.replay().unwrap().unwrap_err();
    assert!(d.recorded.is_none() && d.replayed.is_some());
}

#[test]
fn a_trace_with_an_invalid_config_is_a_config_error_not_a_panic() {
    let mut trace = record();
    trace.config.deadline = Duration::ZERO;
    assert_eq!(trace.replay().unwrap_err().field, "deadline");
}

/// Traces and configs written before the four switches moved into `fanout.tuning` keep
/// their meaning: a switch at the top of `fanout` is read into `tuning`.
#[test]
fn a_config_with_the_switches_at_the_top_of_fanout_reads_them_into_tuning() {
    let old = r#"{"fanout": {"max_in_flight": 2, "spread_ticks": false, "cancel_silent_on_answer": false}}"#;
    let config: RefreshConfig = serde_json::from_str(old).unwrap();
    assert_eq!(config.fanout.max_in_flight, 2);
    assert!(!config.fanout.tuning.spread_ticks && !config.fanout.tuning.cancel_silent_on_answer);
    assert!(
        config.fanout.tuning.next_on_failure && config.fanout.tuning.replace_when_full,
        "the rest keep their defaults"
    );
    let written = serde_json::to_value(config).unwrap();
    assert!(written["fanout"].get("spread_ticks").is_none(), "written in today's shape only: {written}");
    assert_eq!(written["fanout"]["tuning"]["spread_ticks"], false);
    let again: RefreshConfig = serde_json::from_value(written).unwrap();
    assert_eq!(again, config);
}

#[test]
fn a_version_1_trace_replays_with_the_silence_rule_it_was_recorded_with() {
    // Version 1 predates `silent`: its core judged a connected broker by its handshake alone.
    let mut config = RefreshConfig::adaptive();
    config.fanout.jitter = 0.0;
    let stagger::Stagger::Adaptive(a) = &mut config.fanout.stagger else { unreachable!() };
    a.floor = Duration::from_millis(2);
    let mut old = config;
    let stagger::Stagger::Adaptive(a) = &mut old.fanout.stagger else { unreachable!() };
    a.silent = Duration::ZERO;
    let book = BrokerBook::new(["10.0.0.1:9092", "10.0.0.2:9092"]).unwrap();
    let mut recorder = Recorder::new(&old, &book, Instant::ZERO, "test").unwrap();
    let Some(Command::Connect { attempt: first, .. }) = recorder.poll_command(Instant::ZERO) else { panic!() };
    recorder.handle_input(Instant::from_micros(100), Input::Connected { attempt: first, tls: false });
    recorder.handle_timeout(Instant::from_micros(2_100)); // 2 ms floor: the hedge
    while recorder.poll_command(Instant::from_micros(2_100)).is_some() {}
    let mut trace = recorder.into_trace();
    assert!(trace.events.iter().filter(|e| matches!(e, TraceEvent::Command { .. })).count() >= 2, "{trace:?}");
    // As an old recorder wrote it: version 1, the config without `silent` (read as its default).
    trace.version = 1;
    trace.config = config;
    assert_eq!(trace.replay().unwrap().map(|c| c.len()), Ok(2), "replays as recorded");
    assert!(matches!(trace.policy().fanout.stagger, stagger::Stagger::Adaptive(a) if a.silent.is_zero()));
    trace.version = stagger::TRACE_VERSION;
    assert!(trace.replay().unwrap().is_err(), "a current core reads the same config as 24 ms of silence");
}

/// A give-up recorded before version 3 carries no broker's cancel reason
/// (`BrokerFailure::cancelled`), which the core adds today: such a trace still replays, while
/// a current trace missing it diverges.
#[test]
fn a_give_up_recorded_before_brokers_said_why_they_were_cancelled_still_replays() {
    let book = BrokerBook::new(stagger::test_util::numbered_seeds(3)).unwrap();
    let mut config = RefreshConfig::default().with_seed(7);
    config.fanout.initial = 2;
    let mut rec = Recorder::new(&config, &book, Instant::ZERO, "tests").unwrap();
    let mut attempts = Vec::new();
    while let Some(c) = rec.poll_command(Instant::ZERO) {
        if let Command::Connect { attempt, .. } = c {
            attempts.push(attempt);
        }
    }
    // The first broker refuses the credentials: fatal, and the second is cancelled for it.
    let error = AttemptError::with_detail(ErrorKind::Authentication, "bad password");
    rec.handle_input(ms(3), Input::Failed { attempt: attempts[0], error });
    while rec.poll_command(ms(3)).is_some() {}
    let mut trace = rec.into_trace();
    let give_up = trace.events.iter_mut().find_map(|e| match e {
        TraceEvent::Command { command: Command::GiveUp(error), .. } => Some(error),
        _ => None,
    });
    let give_up = give_up.expect("the refresh gave up");
    assert!(give_up.brokers.iter().any(|b| b.cancelled.is_some()), "{give_up:?}");
    for broker in &mut give_up.brokers {
        broker.cancelled = None; // as a version 2 recorder wrote it
    }
    trace.version = 2;
    assert!(trace.replay().unwrap().is_ok(), "an older give-up replays without the cancel reasons");
    trace.version = stagger::TRACE_VERSION;
    assert!(trace.replay().unwrap().is_err(), "a current trace must carry them");
}
