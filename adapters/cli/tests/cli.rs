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

/// The listing's header says what it lists: all topics, the one asked for with `-t`, or
/// each of several.
#[test]
fn the_header_says_which_topics_are_listed() {
    let m = mock(3);
    let header = |topics: &[&str]| {
        let mut cmd = stagger();
        cmd.args(["metadata", "-b", &m.addresses.join(",")]);
        for t in topics {
            cmd.args(["-t", t]);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        let first = text.lines().next().unwrap_or_default().to_owned();
        let (head, from) = first.split_once(" (from broker ").unwrap_or_else(|| panic!("{text}"));
        assert!(m.addresses.iter().any(|a| from == format!("{a}):")), "{first}");
        (head.to_owned(), text)
    };
    assert_eq!(header(&[]).0, "Metadata for all topics");
    let (head, text) = header(&["orders"]);
    assert_eq!(head, "Metadata for topic \"orders\"");
    assert!(text.contains(" 1 topics:") && !text.contains("payments"), "{text}");
    assert_eq!(header(&["orders", "payments"]).0, "Metadata for topics \"orders\", \"payments\"");
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
    let out = stagger()
        .args(["metadata", "-b", &seeds, "--json", "--seed", "1", "--set", "shuffle_seeds=false"])
        .output()
        .unwrap();
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
    let seeds = m.addresses.join(",");
    let trace = path.to_str().unwrap();
    let out =
        stagger().args(["metadata", "-b", &seeds, "--set", "shuffle_seeds=false", "--trace", trace]).output().unwrap();
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
fn each_run_draws_its_own_seed_unless_one_is_given() {
    // Runs started together must not all shuffle and jitter alike: a seed left unset is
    // drawn per run (the trace records the seed used); `--seed` is kept as given.
    let m = mock(3);
    let dir = std::env::temp_dir().join(format!("stagger-cli-seed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let seeds = m.addresses.join(",");
    let seed_of = |name: &str, extra: &[&str]| {
        let path = dir.join(name);
        let out =
            stagger().args(["metadata", "-b", &seeds, "--trace", path.to_str().unwrap()]).args(extra).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let trace: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        trace["config"]["seed"].as_u64().expect("the trace records the seed")
    };
    let drawn = [seed_of("a.json", &[]), seed_of("b.json", &[]), seed_of("c.json", &[])];
    assert!(drawn.iter().all(|&s| s != 0), "an unset seed is drawn: {drawn:?}");
    assert!(drawn[0] != drawn[1] || drawn[1] != drawn[2], "each run draws its own: {drawn:?}");
    // The trace records the refresh's own stream: the seed plus the refresh's number, 1.
    assert_eq!(seed_of("d.json", &["--seed", "7"]), 8, "a given seed is kept");
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

/// The adaptive flags' help gives each knob's default as `stagger knobs --json` has it,
/// in both subcommands that take them.
#[test]
fn adaptive_flags_help_gives_the_schemas_defaults() {
    let schema: Value = serde_json::from_slice(&stagger().args(["knobs", "--json"]).output().unwrap().stdout).unwrap();
    let default = |path: &str| {
        let knob = schema.as_array().unwrap().iter().find(|k| k["path"] == path).expect(path);
        knob["default"].as_str().expect("a default as text").to_owned()
    };
    for sub in ["metadata", "demo"] {
        let help = String::from_utf8(stagger().args([sub, "--help"]).output().unwrap().stdout).unwrap();
        for (flag, knob) in
            [("--cold", "cold"), ("--silent", "silent"), ("--floor", "floor"), ("--patience", "patience")]
        {
            let path = format!("fanout.stagger.adaptive.{knob}");
            let line = help.lines().find(|l| l.trim_start().starts_with(flag)).unwrap_or_else(|| panic!("{flag}"));
            assert!(line.ends_with(&format!("({path}; default {})", default(&path))), "{sub} {flag}: {line}");
        }
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

// --- `stagger bridge` and the demo's bridges: origins, tokens, forwarded requests ---------

/// A spawned `stagger` that is killed (and reaped) when dropped, whose stdout and stderr
/// lines arrive on channels.
struct Running {
    child: std::process::Child,
    stdout: std::sync::mpsc::Receiver<String>,
    stderr: std::sync::mpsc::Receiver<String>,
}

impl Running {
    fn spawn(args: &[&str], env: &[(&str, &std::path::Path)]) -> Running {
        use std::io::{BufRead, BufReader};
        use std::process::Stdio;
        let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("stagger"));
        command.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().unwrap();
        let lines = |pipe: Box<dyn std::io::Read + Send>| {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let _ = tx.send(line);
                }
            });
            rx
        };
        let stdout = lines(Box::new(child.stdout.take().unwrap()));
        let stderr = lines(Box::new(child.stderr.take().unwrap()));
        Running { child, stdout, stderr }
    }

    /// The next stdout line (bounded, so a regression fails instead of hanging).
    fn line(&self) -> String {
        self.stdout.recv_timeout(Duration::from_secs(60)).expect("a line on stdout")
    }

    /// Stdout lines up to and including the first one starting with `prefix`.
    fn until(&self, prefix: &str) -> Vec<String> {
        let mut lines = vec![self.line()];
        while !lines.last().unwrap().starts_with(prefix) {
            lines.push(self.line());
        }
        lines
    }

    fn stderr_line(&self) -> String {
        self.stderr.recv_timeout(Duration::from_secs(60)).expect("a line on stderr")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A stand-in broker: records the bytes of each connection (sent when it closes).
fn recording_broker() -> (String, std::sync::mpsc::Receiver<Vec<u8>>) {
    use std::io::Read;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().map_while(Result::ok) {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut got = Vec::new();
                let _ = stream.read_to_end(&mut got);
                let _ = tx.send(got);
            });
        }
    });
    (addr, rx)
}

/// A WebSocket upgrade by hand (this crate has no WebSocket client): the status code, the
/// response head and body, and the stream for a 101.
fn upgrade(url: &str, origin: Option<&str>) -> (u16, String, std::net::TcpStream) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("ws://").expect("a ws:// URL");
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let origin = origin.map(|o| format!("Origin: {o}\r\n")).unwrap_or_default();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{origin}\r\n"
    )
    .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    let mut text = String::from_utf8(head).unwrap();
    let status: u16 = text.split(' ').nth(1).unwrap().parse().unwrap();
    if status != 101 {
        // A refusal: the body (the reason) follows, then the bridge closes.
        let _ = stream.read_to_string(&mut text);
    }
    (status, text, stream)
}

/// Sends one masked binary WebSocket message (a client's must be masked).
fn send_binary(stream: &mut std::net::TcpStream, payload: &[u8]) {
    use std::io::Write;
    assert!(payload.len() < 126);
    let mask = [0x12, 0x34, 0x56, 0x78];
    let mut frame = vec![0x82, 0x80 | payload.len() as u8];
    frame.extend_from_slice(&mask);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    stream.write_all(&frame).unwrap();
}

/// The next WebSocket frame from the bridge: (opcode, payload).
fn read_frame(stream: &mut std::net::TcpStream) -> (u8, Vec<u8>) {
    use std::io::Read;
    let mut head = [0u8; 2];
    stream.read_exact(&mut head).unwrap();
    let len = match head[1] & 0x7f {
        126 => {
            let mut n = [0u8; 2];
            stream.read_exact(&mut n).unwrap();
            u16::from_be_bytes(n) as usize
        }
        127 => panic!("no test frame is that large"),
        n => n as usize,
    };
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload).unwrap();
    (head[0] & 0x0f, payload)
}

/// Just the framing the bridge reads — size, api_key, api_version, correlation_id — and a
/// few body bytes. The broker here is a recorder, not Kafka (the bridge crate's own tests
/// send requests encoded by `kafka-protocol`).
fn request_frame(api_key: i16, api_version: i16) -> Vec<u8> {
    let mut frame = 12i32.to_be_bytes().to_vec();
    frame.extend_from_slice(&api_key.to_be_bytes());
    frame.extend_from_slice(&api_version.to_be_bytes());
    frame.extend_from_slice(&[0, 0, 0, 1, 0xff, 0xff, 0, 0]);
    frame
}

/// The `ws://` URL a `stagger bridge` banner announces.
fn bridge_url(banner: &str) -> String {
    let rest = banner.strip_prefix("bridging ").expect(banner);
    rest.split(' ').next().unwrap().to_owned()
}

#[test]
fn bridge_refuses_other_origins_and_lets_the_allowed_one_and_non_browsers_through() {
    let (broker, received) = recording_broker();
    let page = "http://127.0.0.1:8080";
    let bridge = Running::spawn(&["bridge", "--listen", "127.0.0.1:0", "--to", &broker, "--allow-origin", page], &[]);
    let url = bridge_url(&bridge.line());
    assert_eq!(
        bridge.line(),
        format!("accepting pages of {page} and clients without Origin; forwarding metadata requests only")
    );
    let (status, text, _) = upgrade(&url, Some("https://evil.example"));
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("origin \"https://evil.example\" is not allowed"), "{text}");
    let log = bridge.stderr_line();
    assert!(log.starts_with("stagger bridge: refused 127.0.0.1:") && log.contains("(HTTP 403)"), "{log}");
    for origin in [Some(page), None] {
        let (status, text, mut ws) = upgrade(&url, origin);
        assert_eq!(status, 101, "{origin:?}: {text}");
        send_binary(&mut ws, &request_frame(18, 3));
        drop(ws);
        assert_eq!(received.recv_timeout(Duration::from_secs(30)).unwrap(), request_frame(18, 3));
    }
}

#[test]
fn bridge_closes_on_produce_unless_told_to_forward_everything() {
    let (broker, received) = recording_broker();
    let bridge = Running::spawn(&["bridge", "--listen", "127.0.0.1:0", "--to", &broker], &[]);
    let url = bridge_url(&bridge.line());
    let (_, _, mut ws) = upgrade(&url, None);
    send_binary(&mut ws, &[request_frame(18, 3), request_frame(0, 9)].concat());
    let (opcode, payload) = read_frame(&mut ws);
    assert_eq!(opcode, 8, "a close frame");
    assert_eq!(u16::from_be_bytes([payload[0], payload[1]]), 1008, "policy violation");
    assert_eq!(&payload[2..], b"Kafka request Produce (0) v9 is not forwarded");
    assert_eq!(received.recv_timeout(Duration::from_secs(30)).unwrap(), b"", "nothing reached the broker");
    let log = bridge.stderr_line();
    assert!(log.contains("Kafka request Produce (0) v9 is not forwarded"), "{log}");

    let all = Running::spawn(&["bridge", "--listen", "127.0.0.1:0", "--to", &broker, "--forward-all-apis"], &[]);
    let url = bridge_url(&all.line());
    assert!(all.line().ends_with("forwarding every request"));
    let (_, _, mut ws) = upgrade(&url, None);
    send_binary(&mut ws, &request_frame(0, 9));
    drop(ws);
    assert_eq!(received.recv_timeout(Duration::from_secs(30)).unwrap(), request_frame(0, 9));
}

#[test]
fn bridge_token_is_required_and_only_shown_in_the_url_to_open() {
    let (broker, _received) = recording_broker();
    let bridge = Running::spawn(
        &["bridge", "--listen", "127.0.0.1:0", "--to", &broker, "--generate-token", "--allow-origin", "http://h:1"],
        &[],
    );
    let lines = bridge.until("connect to ");
    let url = bridge_url(&lines[0]);
    assert!(lines[1].contains(", with the token;"), "{lines:?}");
    let with_token = lines.last().unwrap().strip_prefix("connect to ").unwrap().to_owned();
    let token = with_token.strip_prefix(&format!("{url}/?token=")).expect(&with_token).to_owned();
    assert_eq!(token.len(), 43);
    assert!(lines[..lines.len() - 1].iter().all(|l| !l.contains(&token)), "{lines:?}");
    for (target, why) in [(url.clone(), "had none"), (format!("{url}/?token=wrong-token-0123456789"), "is wrong")] {
        let (status, text, _) = upgrade(&target, Some("http://h:1"));
        assert_eq!(status, 401, "{text}");
        assert!(text.contains(why) && !text.contains(&token), "{text}");
        let log = bridge.stderr_line();
        assert!(log.contains("(HTTP 401)") && !log.contains(&token), "{log}");
    }
    assert_eq!(upgrade(&with_token, Some("http://h:1")).0, 101);

    // From a file; a short token is refused without being echoed.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("bridge-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("token");
    std::fs::write(&file, "from-a-file-0123456789\n").unwrap();
    let from_file = Running::spawn(
        &["bridge", "--listen", "127.0.0.1:0", "--to", &broker, "--token-file", file.to_str().unwrap()],
        &[],
    );
    let url = bridge_url(&from_file.line());
    assert_eq!(upgrade(&format!("{url}/?token=from-a-file-0123456789"), None).0, 101);
    assert_eq!(upgrade(&url, None).0, 401);
    let out = stagger().args(["bridge", "--to", &broker, "--token", "hunter2"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("a token must have 16 to 256 characters") && !err.contains("hunter2"), "{err}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn bridge_warns_when_listening_beyond_loopback_and_refuses_bad_origins() {
    let (broker, _received) = recording_broker();
    let bridge = Running::spawn(&["bridge", "--listen", "0.0.0.0:0", "--to", &broker], &[]);
    let warning = bridge.stderr_line();
    assert!(warning.starts_with("warning: 0.0.0.0:0 is reachable from other machines"), "{warning}");
    assert!(warning.contains("without a token"), "{warning}");
    drop(bridge);
    let out = stagger().args(["bridge", "--to", &broker, "--allow-origin", "127.0.0.1:8080"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not an origin: expected scheme://host[:port]"), "{err}");
}

#[test]
fn demo_web_bridges_allow_exactly_the_origin_of_the_page_they_serve() {
    let dist = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("demo-web-dist-{}", std::process::id()));
    std::fs::create_dir_all(&dist).unwrap();
    std::fs::write(dist.join("index.html"), "<!doctype html>").unwrap();
    let demo = Running::spawn(
        &["demo", "--web", "--port", "0", "--brokers", "2", "--hung", "0", "--down", "0"],
        &[("STAGGER_WEB_DIST", &dist)],
    );
    let lines = demo.until("serving until Ctrl-C");
    let web = lines.iter().find_map(|l| l.strip_prefix("web demo: ")).expect("the page's URL");
    let origin = web.split("/?").next().unwrap();
    assert!(origin.starts_with("http://127.0.0.1:"), "{web}");
    let access = lines.iter().find(|l| l.starts_with("bridges accepting")).unwrap();
    assert_eq!(
        access,
        &format!("bridges accepting pages of {origin} and clients without Origin; forwarding metadata requests only")
    );
    let ws = lines.iter().find_map(|l| l.strip_prefix("bootstrap (WebSocket):")).unwrap().trim().to_owned();
    for url in ws.split(',') {
        assert_eq!(upgrade(url, Some(origin)).0, 101, "{url}");
        assert_eq!(upgrade(url, Some(&origin.replace("127.0.0.1", "localhost"))).0, 403, "{url}");
        assert_eq!(upgrade(url, Some("https://evil.example")).0, 403, "{url}");
    }
    drop(demo);
    std::fs::remove_dir_all(dist).ok();
}

/// A reader that goes away before the output is written (`stagger knobs --json | head`)
/// ends the command quietly, as with any Unix filter: no panic on the broken pipe.
#[test]
fn a_reader_that_stops_early_ends_the_output_quietly() {
    use std::process::Stdio;
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("stagger"))
        .args(["knobs", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the read end at once: the command's first write finds nobody to read it.
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
}
