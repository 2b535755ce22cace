//! Native tests of exactly what the page calls (the same functions, as JSON strings).

use core::time::Duration;

use serde_json::{json, Value};
use stagger::RefreshConfig;
use stagger_sim::{run_refresh, BrokerBehavior, Scenario};

use super::{
    compare, describe, describe_events, knob_values, knobs, presets, replay, set_knobs, simulate, validate, vocabulary,
};

fn parse(s: String) -> Value {
    serde_json::from_str(&s).expect("every answer is JSON")
}

fn hung_first() -> Scenario {
    let healthy = BrokerBehavior::Healthy { rtt: Duration::from_millis(5) };
    Scenario::from_behaviors([BrokerBehavior::Hung, healthy.clone(), healthy])
}

/// The log's lines for a report's events, as the page asks for them.
fn event_text(report: &Value) -> Vec<String> {
    let addresses: Vec<&Value> = report["lanes"].as_array().unwrap().iter().map(|l| &l["address"]).collect();
    let text = parse(describe_events(&report["events"].to_string(), &json!(addresses).to_string()));
    serde_json::from_value(text).expect("a line per event")
}

fn fixture(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn presets_are_the_cores() {
    let list = parse(presets());
    let names: Vec<&str> = list.as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, RefreshConfig::PRESETS);
    for p in list.as_array().unwrap() {
        let config: RefreshConfig = serde_json::from_value(p["config"].clone()).unwrap();
        assert_eq!(Some(config), RefreshConfig::preset(p["name"].as_str().unwrap()));
    }
}

#[test]
fn the_panel_reads_and_sets_every_knob_through_the_schema() {
    let schema = parse(knobs());
    assert_eq!(schema.as_array().unwrap().len(), stagger::knobs().len());
    let default = serde_json::to_string(&RefreshConfig::default()).unwrap();
    let values = parse(knob_values(&default));
    assert_eq!(values["fanout.tuning.spread_ticks"], "true");
    assert_eq!(values["fanout.stagger"], "adaptive");
    assert!(values.get("hedge_budget.burst").is_none(), "cluster knobs are not a refresh's");
    // The default's own values give back the default.
    let same = parse(set_knobs(&default, &values.to_string()));
    assert_eq!(serde_json::from_value::<RefreshConfig>(same["config"].clone()).unwrap(), RefreshConfig::default());
    // A fixed stagger: its adaptive parameters do not apply and are skipped, not refused.
    let changed = json!({ "fanout.stagger": "fixed:100ms", "fanout.stagger.adaptive.patience": "4", "fanout.tuning.spread_ticks": "false" });
    let answer = parse(set_knobs(&default, &changed.to_string()));
    let c: RefreshConfig = serde_json::from_value(answer["config"].clone()).unwrap();
    assert_eq!(c.fanout.stagger, stagger::Stagger::Fixed(Duration::from_millis(100)));
    assert!(!c.fanout.tuning.spread_ticks);
    assert_eq!(
        parse(knob_values(&serde_json::to_string(&c).unwrap()))["fanout.stagger.adaptive.patience"],
        Value::Null
    );
    let bad = parse(set_knobs(&default, &json!({ "fanout.max_in_flight": "many" }).to_string()));
    assert_eq!(bad["field"], "fanout.max_in_flight");
}

#[test]
fn validate_names_the_field() {
    let mut bad = RefreshConfig::default();
    bad.fanout.jitter = 2.0;
    let answer = parse(validate(&serde_json::to_string(&bad).unwrap()));
    assert_eq!(answer["field"], "fanout.jitter");
    assert_eq!(parse(validate(&serde_json::to_string(&RefreshConfig::default()).unwrap()))["ok"], true);
    assert!(parse(validate("{")).get("error").is_some());
}

#[test]
fn simulate_hung_first_broker_hedges_after_the_stagger_delay() {
    let scenario = serde_json::to_string(&hung_first()).unwrap();
    let config = RefreshConfig { shuffle_seeds: false, ..RefreshConfig::staggered() };
    let answer = parse(simulate(&scenario, &serde_json::to_string(&config).unwrap()));
    let report = &answer["report"];
    assert_eq!(report["outcome"]["type"], "done");
    assert_eq!(report["outcome"]["winner"], 1);
    let stagger_tick = report["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"] == "timer" && e["timer"] == "stagger")
        .expect("a stagger tick");
    let second = &report["lanes"][1]["spans"][0];
    let start = second["start"].as_u64().unwrap();
    assert_eq!(stagger_tick["elapsed_ms"].as_f64(), Some(start as f64 / 1000.0), "the tick starts the second");
    assert!((400_000..=500_000).contains(&start), "second attempt at {start} µs, jitter 0.2 of 500 ms");
    assert_eq!(second["outcome"]["type"], "won");
    assert_eq!(event_text(report).len(), report["events"].as_array().unwrap().len());
    assert_eq!(report["events"].as_array().unwrap().last().unwrap()["event"], "won");
    assert!(answer["summary"].as_str().unwrap().starts_with("metadata in"));
}

#[test]
fn simulate_adaptive_answering_overtakes_the_silent_attempts() {
    // The adaptive default without jitter, and the tick's two attempts started together (no
    // spreading), so every time follows from the model: broker-0 accepts after its 1 ms
    // handshake and stays silent; suspected 2 × the 12 ms silent pace = 24 ms after the
    // handshake (25 ms in), when the tick starts two attempts (Linear(2)). Both connect at
    // 26 ms and answer ApiVersions one handshake later, at 27 ms: the first answer
    // (broker-1's, started first) cancels everything still silent — the hung attempt and
    // broker-2's, whose answer had not come yet — as overtaken. Metadata at 26 + 5 = 31 ms.
    let scenario = serde_json::to_string(&hung_first()).unwrap();
    let mut config = RefreshConfig { shuffle_seeds: false, ..RefreshConfig::default() };
    config.fanout.jitter = 0.0;
    config.fanout.tuning.spread_ticks = false;
    let answer = parse(simulate(&scenario, &serde_json::to_string(&config).unwrap()));
    let report = &answer["report"];
    assert_eq!(report["outcome"]["winner"], 1, "{answer}");
    let span = |lane: usize| &report["lanes"][lane]["spans"][0];
    assert_eq!((span(1)["start"].as_u64(), span(2)["start"].as_u64()), (Some(25_000), Some(25_000)), "two per tick");
    assert_eq!(span(1)["first_frame_at"], 27_000);
    assert_eq!(span(1)["end"], 31_000);
    assert_eq!(span(1)["outcome"]["type"], "won");
    for lane in [0, 2] {
        assert_eq!(span(lane)["first_frame_at"], Value::Null, "lane {lane} never answered");
        assert_eq!(span(lane)["end"], 27_000, "lane {lane} ends at the first answer");
        assert_eq!(span(lane)["outcome"], json!({ "type": "cancelled", "reason": "overtaken" }), "lane {lane}");
    }
    let text = event_text(report);
    let answered = text.iter().position(|t| t == "#1 answered ← broker-1 (first answer: alive)").expect("{text:?}");
    assert_eq!(text[answered + 1], "#0 cancelled on broker-0 (overtaken)", "{text:?}");
    assert_eq!(text[answered + 2], "#2 cancelled on broker-2 (overtaken)", "{text:?}");
    assert_eq!(text.last().map(String::as_str), Some("#1 won: metadata from broker-1"), "{text:?}");
    // The trace replays to the same picture, answering phase included.
    let trace = serde_json::to_string(&report["trace"]).unwrap();
    let replayed = parse(replay(&trace));
    assert_eq!(replayed["verdict"], "match", "{replayed}");
    for lane in 0..3 {
        assert_eq!(replayed["report"]["lanes"][lane]["spans"], report["lanes"][lane]["spans"], "lane {lane}");
    }
    assert_eq!(replayed["report"]["events"], report["events"]);
}

#[test]
fn simulate_reports_bad_input_as_json() {
    assert!(parse(simulate("{}", "{}")).get("error").is_some());
    let empty = serde_json::to_string(&Scenario::new(vec![])).unwrap();
    let config = serde_json::to_string(&RefreshConfig::default()).unwrap();
    assert_eq!(parse(simulate(&empty, &config))["report"]["outcome"]["type"], "aborted");
}

#[test]
fn a_simulated_trace_replays_to_the_same_picture() {
    let scenarios = [
        hung_first(),
        Scenario::from_behaviors([BrokerBehavior::Refused, BrokerBehavior::Hung, BrokerBehavior::Refused]),
        Scenario::from_behaviors([
            BrokerBehavior::Flaky { p: 0.5, rtt: Duration::from_millis(3) },
            BrokerBehavior::Slow { min: Duration::from_millis(5), max: Duration::from_millis(300) },
            BrokerBehavior::Hung,
        ]),
    ];
    for preset in RefreshConfig::PRESETS {
        for (i, scenario) in scenarios.iter().enumerate() {
            let mut config = RefreshConfig::preset(preset).unwrap().with_seed(i as u64);
            config.attempt_timeout = Duration::from_secs(2);
            let report = run_refresh(&config, &scenario.clone().with_seed(i as u64));
            let trace = serde_json::to_string(report.trace.as_ref().unwrap()).unwrap();
            let answer = parse(replay(&trace));
            assert_eq!(answer["verdict"], "match", "{preset} #{i}: {answer}");
            assert_eq!(answer["finished"], true);
            let view = &answer["report"];
            let expected = serde_json::to_value(&report).unwrap();
            for key in ["outcome", "events", "attempts_started", "attempts_cancelled", "attempts_failed", "ended_at"] {
                assert_eq!(view[key], expected[key], "{preset} #{i}: {key}");
            }
            assert_eq!(view["requests_reached"], expected["requests_reached"], "{preset} #{i}");
            for (lane, want) in view["lanes"].as_array().unwrap().iter().zip(expected["lanes"].as_array().unwrap()) {
                assert_eq!(lane["spans"], want["spans"], "{preset} #{i}");
            }
        }
    }
}

#[test]
fn a_tampered_trace_diverges_and_says_where() {
    let report = run_refresh(&RefreshConfig::staggered(), &hung_first());
    let mut trace = serde_json::to_value(report.trace.unwrap()).unwrap();
    // Drop the first recorded command: the core still emits it, and the replay must say so.
    let events = trace["events"].as_array_mut().unwrap();
    let first_command = events.iter().position(|e| e["type"] == "command").unwrap();
    events.remove(first_command);
    let answer = parse(replay(&trace.to_string()));
    assert_eq!(answer["verdict"], "diverges", "{answer}");
    assert!(answer["divergence"]["replayed"].as_str().unwrap().starts_with("Connect"), "{answer}");
}

#[test]
fn junk_is_not_a_trace() {
    let answer = parse(replay("{\"hello\": 1}"));
    assert_eq!(answer["verdict"], "invalid");
    assert!(answer["error"].as_str().unwrap().contains("not a stagger trace"));
}

#[test]
fn a_trace_of_another_format_version_is_refused_saying_which() {
    let mut trace: Value = serde_json::from_str(&fixture("hung-refused-healthy.trace.json")).unwrap();
    trace["version"] = json!(3);
    let answer = parse(replay(&trace.to_string()));
    assert_eq!(answer["verdict"], "invalid", "{answer}");
    let error = answer["error"].as_str().unwrap();
    assert!(
        error.starts_with(
            "this stagger trace cannot be replayed here: trace format version 3, but this core reads version 4 only"
        ),
        "{error}"
    );
}

#[test]
fn the_fixture_traces_replay_without_divergence() {
    // The first two come from the simulator (examples/make_fixtures.rs); the third was
    // recorded by `stagger metadata --trace` against the bridge testbed (hung, down, 2 healthy).
    for name in ["hung-refused-healthy.trace.json", "all-down-gives-up.trace.json", "cli-hung-down-healthy.trace.json"]
    {
        let text = fixture(name);
        let trace: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(trace["version"], stagger::TRACE_VERSION, "{name}");
        let answer = parse(replay(&text));
        assert_eq!(answer["verdict"], "match", "{name}: {answer}");
        assert_eq!(answer["finished"], true, "{name}");
    }
}

#[test]
fn compare_runs_every_seed_of_every_series() {
    let scenario = serde_json::to_string(&hung_first()).unwrap();
    let mut bad = RefreshConfig::default();
    bad.fanout.max_in_flight = 0;
    let series = json!([
        { "name": "adaptive", "config": RefreshConfig::adaptive() },
        { "name": "sequential", "config": RefreshConfig::sequential() },
        { "name": "bad", "config": bad },
    ]);
    let answer = parse(compare(&scenario, &series.to_string(), 50, 10.0));
    let series = answer["series"].as_array().unwrap();
    assert_eq!(series[0]["ttm_us"].as_array().unwrap().len(), 50);
    assert!(series[2]["error"].as_str().unwrap().contains("max_in_flight"));
    // Sequential waits a whole attempt timeout (10 s) on the hung broker; adaptive does not.
    let max = |s: &Value| s["ttm_us"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).max().unwrap();
    assert!(max(&series[0]) < 50_000, "adaptive {}", max(&series[0]));
    assert!(max(&series[1]) >= 10_000_000, "sequential {}", max(&series[1]));
}

#[test]
fn the_vocabulary_is_the_cores_words_for_every_reason_and_timer() {
    let v = parse(vocabulary());
    for r in stagger::CancelReason::ALL {
        let entry = &v["cancel_reasons"][r.name()];
        assert_eq!(entry["text"], json!(r.to_string()), "{r:?}");
        assert!(!entry["help"].as_str().unwrap().is_empty(), "{r:?} has a tooltip");
    }
    assert_eq!(v["cancel_reasons"]["timed_out"]["text"], json!("timed out"));
    assert_eq!(v["cancel_reasons"].as_object().unwrap().len(), stagger::CancelReason::ALL.len());
    assert_eq!(v["timers"].as_object().unwrap().len(), stagger::TimerKind::ALL.len());
    assert_eq!(v["timers"]["stagger"], json!("stagger delay elapsed"));
}

#[test]
fn describe_words_errors_and_give_up_reasons_as_the_core_displays_them() {
    assert_eq!(
        parse(describe("attempt_error", r#"{"kind": {"kind": "broker_error", "code": 3}, "detail": "x"}"#)),
        json!("broker error 3 (UNKNOWN_TOPIC_OR_PARTITION): x")
    );
    assert_eq!(parse(describe("attempt_error", r#"{"kind": {"kind": "refused"}}"#)), json!("connection refused"));
    assert_eq!(
        parse(describe("give_up_reason", r#"{"all_failed": {"passes": 2}}"#)),
        json!("every broker failed in 2 passes")
    );
    assert_eq!(parse(describe("give_up_reason", r#""deadline_exceeded""#)), json!("deadline exceeded"));
    assert!(parse(describe("give_up_reason", "{}"))["error"].is_string());
    assert!(parse(describe("metadata", "{}"))["error"].as_str().unwrap().contains("metadata"));
    let broker = |extra: &str| {
        parse(describe("broker_failure", &format!(r#"{{"broker": 1, "address": "b:1", "attempts": 1{extra}}}"#)))
    };
    assert_eq!(broker(r#", "cancelled": "fatal""#), json!("cancelled: another broker's failure was fatal"));
    assert_eq!(broker(r#", "last_error": {"kind": {"kind": "refused"}}"#), json!("connection refused"));
    let untried = describe("broker_failure", r#"{"broker": 1, "address": "b:1", "attempts": 0, "last_error": null}"#);
    assert_eq!(parse(untried), json!("not tried"));
}

#[test]
fn describe_events_words_any_mode_s_events_and_names_brokers_by_lane() {
    // As the browser adapter hands them over: a broker among the lanes goes by its lane's
    // name, one that is not by its address.
    let events = json!([
        { "elapsed_ms": 0.0, "event": "started", "attempt": { "epoch": 1, "number": 0 }, "broker": "b-0:9092" },
        { "elapsed_ms": 1.5, "event": "failed", "attempt": { "epoch": 1, "number": 0 }, "broker": "b-0:9092",
          "error": { "kind": { "kind": "refused" } } },
        { "elapsed_ms": 2.0, "event": "started", "attempt": { "epoch": 1, "number": 1 }, "broker": "other:9093" },
        { "elapsed_ms": 3.0, "event": "timer", "timer": "backoff" },
        { "elapsed_ms": 4.0, "event": "gave_up", "reason": { "all_failed": { "passes": 1 } } },
    ]);
    let text = parse(describe_events(&events.to_string(), &json!(["b-0:9092", "b-1:9092"]).to_string()));
    assert_eq!(
        text,
        json!([
            "#0 started → b-0",
            "#0 failed on b-0: connection refused",
            "#1 started → other:9093",
            "timer: backoff over: next pass",
            "gave up: every broker failed in 1 pass",
        ])
    );
    assert!(parse(describe_events("[{}]", "[]"))["error"].as_str().unwrap().starts_with("events:"));
    assert!(parse(describe_events("[]", "{}"))["error"].as_str().unwrap().starts_with("addresses:"));
}

#[test]
fn a_replayed_lookup_ends_on_its_names_lane_and_the_address_it_found_gets_its_own() {
    use stagger::{BrokerBook, Command, Input, Instant, Recorder};
    let book = BrokerBook::resolving(["kafka.example:9092"]).unwrap();
    let mut rec = Recorder::new(&RefreshConfig::default(), &book, Instant::ZERO, "test").unwrap();
    let commands = |rec: &mut Recorder, at: Instant| core::iter::from_fn(|| rec.poll_command(at)).collect::<Vec<_>>();
    let [Command::Resolve { attempt: lookup, .. }] = commands(&mut rec, Instant::ZERO)[..] else { panic!() };
    let addresses = vec!["10.0.0.1:9092".parse().unwrap(), "10.0.0.2:9092".parse().unwrap()];
    let at = Instant::from_millis(1);
    rec.handle_input(at, Input::Resolved { attempt: lookup, addresses });
    let [Command::Connect { attempt, .. }] = commands(&mut rec, at)[..] else { panic!() };
    rec.handle_input(Instant::from_millis(2), Input::Connected { attempt, tls: false });
    let metadata = stagger_sim::Scenario::standard_metadata(1);
    rec.handle_input(Instant::from_millis(3), Input::Response { attempt, metadata });
    assert!(commands(&mut rec, Instant::from_millis(3)).iter().any(|c| matches!(c, Command::Done { .. })));
    let answer = parse(replay(&serde_json::to_string(&rec.into_trace()).unwrap()));
    assert_eq!((answer["verdict"].as_str(), answer["finished"].as_bool()), (Some("match"), Some(true)), "{answer}");
    let report = &answer["report"];
    let lanes: Vec<&str> = report["lanes"].as_array().unwrap().iter().map(|l| l["address"].as_str().unwrap()).collect();
    assert_eq!(lanes, ["kafka.example:9092", "10.0.0.1:9092"]);
    assert_eq!(report["lanes"][0]["spans"][0]["outcome"], json!({ "type": "resolved", "addresses": 2 }));
    assert_eq!(report["lanes"][1]["spans"][0]["outcome"]["type"], "won");
    assert_eq!(
        event_text(report),
        [
            "#0 started → kafka.example",
            "#0 resolved kafka.example to 2 addresses",
            "#1 started → 10.0.0.1",
            "#1 connected to 10.0.0.1",
            "#1 won: metadata from 10.0.0.1",
        ]
    );
}
