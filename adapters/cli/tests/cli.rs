//! The `stagger` binary against a real Kafka-protocol cluster (librdkafka's mock, started
//! in this test process): listing, JSON, a hung first broker, a dead cluster, traces, and
//! bad flags. Assertions are on output and exit codes, never on wall-clock time.

use std::net::TcpListener;
use std::time::Duration;

use assert_cmd::Command;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;
use serde_json::Value;

struct Mock {
    cluster: MockCluster<'static, DefaultProducerContext>,
    /// Broker addresses, in broker-id order (1..=n).
    addresses: Vec<String>,
}

fn mock(brokers: i32) -> Mock {
    let cluster = MockCluster::new(brokers).expect("mock cluster");
    cluster.create_topic("orders", 3, brokers.min(3)).expect("topic");
    cluster.create_topic("payments", 2, brokers.min(3)).expect("topic");
    let addresses = cluster.bootstrap_servers().split(',').map(str::to_owned).collect();
    Mock { cluster, addresses }
}

/// A loopback port with nothing listening: connections to it are refused.
fn closed_port() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    addr.to_string()
}

/// The CLI with no config file of the machine's (an empty XDG directory, no
/// `STAGGER_CONFIG`): these tests say everything on the command line.
fn stagger() -> Command {
    let mut cmd = Command::cargo_bin("stagger").unwrap();
    let empty = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-stagger-config");
    cmd.timeout(Duration::from_secs(60))
        .env("XDG_CONFIG_HOME", &empty)
        .env("HOME", &empty)
        .env_remove("STAGGER_CONFIG");
    cmd
}

#[test]
fn lists_brokers_topics_and_partitions() {
    let m = mock(3);
    let out = stagger().args(["metadata", "-b", &m.addresses.join(",")]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(" 3 brokers:"), "{text}");
    for a in &m.addresses {
        assert!(text.contains(a.as_str()), "{a} missing in\n{text}");
    }
    assert!(text.contains("topic \"orders\" with 3 partitions"), "{text}");
    assert!(text.contains("topic \"payments\" with 2 partitions"), "{text}");
    assert!(text.contains("partition 0, leader "), "{text}");
}

#[test]
fn json_output_has_the_documented_shape_and_topic_filter_works() {
    let m = mock(3);
    let out = stagger().args(["metadata", "-b", &m.addresses[0], "-t", "orders", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["cluster_id"].is_string());
    assert!(doc["controller_id"].is_i64());
    let brokers = doc["brokers"].as_array().unwrap();
    assert_eq!(brokers.len(), 3);
    for b in brokers {
        assert!(b["id"].is_i64() && b["host"].is_string() && b["port"].is_u64() && b.get("rack").is_some(), "{b}");
    }
    let topics = doc["topics"].as_array().unwrap();
    assert_eq!(topics.len(), 1, "only the requested topic: {topics:?}");
    assert_eq!(topics[0]["name"], "orders");
    let partitions = topics[0]["partitions"].as_array().unwrap();
    assert_eq!(partitions.len(), 3);
    for p in partitions {
        assert!(p["leader"].as_i64().unwrap() >= 1, "{p}");
        assert!(!p["replicas"].as_array().unwrap().is_empty() && p["isr"].is_array() && p["error"].is_null());
    }
    let refresh = &doc["refresh"];
    assert!(refresh["elapsed_ms"].as_f64().unwrap() >= 0.0);
    assert_eq!(refresh["winner"], m.addresses[0].as_str());
    let attempts = refresh["attempts"].as_array().unwrap();
    assert_eq!(attempts[0]["outcome"], "won");
    assert!(attempts[0]["started_ms"].is_number() && attempts[0]["ended_ms"].is_number());
    // The broker's first answer (ApiVersions) is reported between connection and end.
    let (connected, answered, ended) =
        (attempts[0]["connected_ms"].as_f64(), attempts[0]["answered_ms"].as_f64(), attempts[0]["ended_ms"].as_f64());
    assert!(
        connected.is_some() && answered.is_some() && connected <= answered && answered <= ended,
        "{:?}",
        attempts[0]
    );
}

#[test]
fn a_hung_first_broker_still_gives_metadata_and_is_cancelled() {
    let m = mock(3);
    m.cluster.broker_round_trip_time(1, Duration::from_secs(3600)).unwrap();
    let seeds = m.addresses.join(",");
    let out = stagger().args(["metadata", "-b", &seeds, "--json", "--seed", "1"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let attempts = doc["refresh"]["attempts"].as_array().unwrap();
    assert_eq!(attempts[0]["broker"], m.addresses[0].as_str());
    assert_eq!(attempts[0]["outcome"], "cancelled", "{attempts:?}");
    // It had said nothing when a later broker answered: overtaken (the default
    // `fanout.tuning.cancel_silent_on_answer`), not left to lose to the winner.
    assert_eq!(attempts[0]["reason"], "overtaken", "{attempts:?}");
    assert!(attempts[0]["answered_ms"].is_null() && attempts[0]["connected_ms"].is_number(), "{attempts:?}");
    assert_ne!(doc["refresh"]["winner"], m.addresses[0].as_str());
}

#[test]
fn a_dead_cluster_fails_with_every_brokers_error_and_a_non_zero_exit() {
    let seeds = [closed_port(), closed_port()];
    let out = stagger().args(["metadata", "-b", &seeds.join(","), "--retries", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with("error: metadata refresh failed: every broker failed in 2 passes"), "{err}");
    assert!(err.contains("last error from"), "{err}");
    for s in &seeds {
        assert!(err.contains(&format!("{s}: connection refused")), "{s} missing in {err}");
    }
    assert!(!err.contains("panicked") && !err.contains("RUST_BACKTRACE"), "{err}");
}

#[test]
fn trace_file_replays_to_the_same_commands() {
    let m = mock(3);
    m.cluster.broker_round_trip_time(1, Duration::from_secs(3600)).unwrap();
    let dir = std::env::temp_dir().join(format!("stagger-cli-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("refresh.json");
    let out =
        stagger().args(["metadata", "-b", &m.addresses.join(","), "--trace", path.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let trace: stagger::Trace = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let commands = trace.replay().unwrap().expect("the recorded trace replays without divergence");
    assert!(matches!(commands.last(), Some(stagger::Command::Done { .. })));
    assert!(
        commands.iter().any(|c| matches!(c, stagger::Command::Cancel { .. })),
        "the hung attempt was cancelled: {commands:?}"
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn bad_flags_and_addresses_get_one_clear_paragraph() {
    let cases: [(&[&str], &str); 4] = [
        (&["metadata", "-b", "no-port"], "has no port"),
        (&["metadata", "-b", "h:1", "--jitter", "3"], "fanout.jitter"),
        (&["metadata", "-b", "h:1", "--preset", "fastest"], "unknown preset"),
        (&["metadata", "-b", "h:1", "--stagger", "soon"], "250ms"),
    ];
    for (args, needle) in cases {
        let out = stagger().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn knobs_lists_the_cores_schema_and_set_and_policy_follow_it() {
    let out = stagger().args(["knobs"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for knob in stagger::knobs() {
        assert!(text.contains(knob.path), "{} missing from `stagger knobs`:\n{text}", knob.path);
    }
    let out = stagger().args(["knobs", "--json"]).output().unwrap();
    let schema: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(schema.as_array().map(Vec::len), Some(stagger::knobs().len()));

    let dir = std::env::temp_dir().join(format!("stagger-cli-knobs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let moved = dir.join("old.json");
    std::fs::write(&moved, r#"{"fanout": {"spread_ticks": false}}"#).unwrap();
    let moved = moved.to_str().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (&["metadata", "-b", "h:1", "--set", "fanout.max_inflight=2"], "did you mean: fanout.max_in_flight"),
        (&["metadata", "-b", "h:1", "--set", "fanout.stagger=later"], "`fanout.stagger` expects"),
        (&["metadata", "-b", "h:1", "--policy", moved], "fanout.tuning.spread_ticks"),
        (&["demo", "--set", "retry.retries=many"], "`retry.retries`"),
    ];
    for (args, needle) in cases {
        let out = stagger().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_set_knob_reaches_the_refresh() {
    // Two refused brokers first: with the throttle at 1 and no next-on-failure, the trace
    // records the config the refresh ran with.
    let m = mock(1);
    let dir = std::env::temp_dir().join(format!("stagger-cli-set-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("refresh.json");
    let brokers = format!("{},{}", closed_port(), m.addresses[0]);
    let out = stagger()
        .args(["metadata", "-b", &brokers, "--trace", path.to_str().unwrap()])
        .args(["--set", "fanout.max_in_flight=1", "--set", "fanout.tuning.spread_ticks=false", "--max-in-flight", "2"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let config = trace.get("config").expect("the trace carries its config");
    assert_eq!(config["fanout"]["max_in_flight"], 1, "--set comes after the shorthands");
    assert_eq!(config["fanout"]["tuning"]["spread_ticks"], false);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn help_has_examples() {
    for args in [&["--help"][..], &["metadata", "--help"], &["demo", "--help"], &["knobs", "--help"]] {
        let out = stagger().args(args).output().unwrap();
        assert!(out.status.success());
        assert!(String::from_utf8(out.stdout).unwrap().contains("Examples:"), "{args:?}");
    }
}

#[test]
fn demo_runs_against_its_embedded_cluster() {
    let out = stagger()
        .args(["demo", "--brokers", "4", "--hung", "1", "--down", "1", "--sequential-timeout", "1s"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("hung (accepts TCP, never answers)") && text.contains("down (refuses connections)"),
        "{text}"
    );
    assert!(text.contains("topic \"orders\""), "{text}");
    assert!(text.contains("sequential") && text.contains("sooner"), "{text}");
}

#[test]
fn demo_serve_keeps_the_cluster_up_with_tcp_and_websocket_addresses() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let bin = assert_cmd::cargo::cargo_bin("stagger");
    let mut child = std::process::Command::new(bin)
        .args(["demo", "--serve", "--brokers", "3", "--hung", "1", "--down", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // A watchdog so a regression cannot hang the suite.
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(60));
        let _ = std::process::Command::new("kill").arg(pid.to_string()).status();
    });
    let mut tcp = None;
    let mut ws = None;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("bootstrap (TCP):") {
            tcp = Some(rest.trim().to_owned());
        }
        if let Some(rest) = line.strip_prefix("bootstrap (WebSocket):") {
            ws = Some(rest.trim().to_owned());
        }
        if line.starts_with("serving until Ctrl-C") {
            break;
        }
    }
    let (tcp, ws) = (tcp.expect("TCP bootstrap printed"), ws.expect("ws bootstrap printed"));
    let ws: Vec<&str> = ws.split(',').collect();
    assert_eq!(ws.len(), 3);
    for url in &ws {
        let addr = url.strip_prefix("ws://").unwrap().trim_end_matches('/');
        std::net::TcpStream::connect(addr).expect("bridge listening");
    }
    let out = stagger().args(["metadata", "-b", &tcp, "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["topics"].as_array().unwrap().len(), 3);
    child.kill().unwrap();
    child.wait().unwrap();
    drop(watchdog);
}
