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

/// A trace of another format version does not load: the error says the version found and
/// the version this core reads, and it comes before any field the old trace has in a shape
/// no longer read (here an attempt id as a plain integer).
#[test]
fn a_trace_of_another_version_is_refused_saying_which_version_was_found_and_expected() {
    let trace = record();
    let mut json = serde_json::to_value(&trace).unwrap();
    assert_eq!(json["version"], stagger::TRACE_VERSION);
    assert_eq!(stagger::TRACE_VERSION, 4);
    for old in [1, 3, 5] {
        json["version"] = old.into();
        let error = serde_json::from_value::<Trace>(json.clone()).unwrap_err().to_string();
        assert_eq!(
            error,
            format!("trace format version {old}, but this core reads version 4 only: record the trace again")
        );
    }
    // As an older recorder wrote it: the version first, then ids as integers.
    let old = r#"{"version": 3, "recorder": "x", "events": [{"type": "command", "at": 0,
        "command": {"connect": {"attempt": 0, "broker": 0}}}]}"#;
    let error = serde_json::from_str::<Trace>(old).unwrap_err().to_string();
    assert!(error.starts_with("trace format version 3, but this core reads version 4 only"), "{error}");
    // One built in memory with another version does not replay either.
    let mut trace = trace;
    trace.version = 3;
    let error = trace.replay().unwrap_err();
    assert_eq!(error.field, "version");
    assert_eq!(
        error.to_string(),
        "invalid configuration: `version` is trace format version 3, but this core reads version 4 only: \
         record the trace again"
    );
}

/// The names older traces and configs were read with are gone: the fan-out's switches at its
/// top level (today under `tuning`) are unknown fields, ignored as every unknown field of a
/// config is (the CLI's policy files refuse them, naming `fanout.tuning.<switch>`).
#[test]
fn the_switches_at_the_top_of_fanout_are_no_longer_read() {
    let old = r#"{"fanout": {"max_in_flight": 2, "spread_ticks": false, "cancel_silent_on_answer": false}}"#;
    let config: RefreshConfig = serde_json::from_str(old).unwrap();
    assert_eq!(config.fanout.max_in_flight, 2);
    assert_eq!(config.fanout.tuning, RefreshConfig::default().fanout.tuning, "ignored: every switch at its default");
    let new = r#"{"fanout": {"tuning": {"spread_ticks": false}}}"#;
    let config: RefreshConfig = serde_json::from_str(new).unwrap();
    assert!(!config.fanout.tuning.spread_ticks && config.fanout.tuning.cancel_silent_on_answer);
    let written = serde_json::to_value(config).unwrap();
    assert!(written["fanout"].get("spread_ticks").is_none(), "{written}");
    assert_eq!(serde_json::from_value::<RefreshConfig>(written).unwrap(), config);
}
