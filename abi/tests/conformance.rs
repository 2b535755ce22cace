//! The conformance suite every host replays (`conformance/README.md`): scenarios of a session
//! — its config, then steps of a time and the host's events, each with the actions and the
//! next wake-up the session answered — in `conformance/*.json`.
//!
//! The scenarios are written here as scripts: a fake network (brokers that answer, hang,
//! refuse or reset; names that resolve; tokens) and host events at given times. Running a
//! script drives a real session through the exported functions, one `stagger_step` per
//! wake-up, and every broker answer is a Kafka frame `kafka-protocol` encodes for the request
//! the session actually sent (its correlation id, its version). The files are the record of
//! that run, so they cannot drift from the core:
//!
//! * `STAGGER_BLESS=1 cargo test -p stagger-abi --test conformance` (re)writes them, and
//!   removes any `conformance/*.json` no script writes;
//! * otherwise every script runs again in memory and the test fails when a file differs from
//!   its record, naming the first step that differs;
//! * then every file is replayed through the native ABI as a host would (read by
//!   `stagger_abi::conformance`, events encoded and actions decoded by `stagger_abi::host`),
//!   failing with the first differing action.
//!
//! `bindings/go/conformance_test.go` and `bindings/python/tests/test_conformance.py` replay the
//! same files through their own codecs.

mod common;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use common::*;
use kafka_protocol::messages::ApiKey;
use serde_json::{json, Value};
use stagger_abi::conformance::{action_json, event_json, Scenario, FORMAT};
use stagger_abi::host::{decode_actions, encode_events, HostAction, HostEvent};
use stagger_abi::*;

/// Where every scenario starts: the host's monotonic clock, in ns.
const T0: u64 = SECOND;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance")
}

// ---- comparing with the files ----

/// The deterministic part of the report a file's `end` compares: the counters, how the last
/// refresh ended, the connections and the events ignored.
fn report_subset(report: &Value) -> Value {
    let pick = |from: &Value, keys: &[&str]| -> Value {
        if from.is_null() {
            return Value::Null;
        }
        Value::Object(keys.iter().map(|k| (k.to_string(), from[*k].clone())).collect())
    };
    json!({
        "stats": report["stats"],
        "running": pick(&report["running"], &["epoch", "cause"]),
        "last_refresh": pick(&report["last_refresh"], &["epoch", "cause", "outcome", "winner"]),
        "open_connections": report["open_connections"],
        "kept_connection": report["kept_connection"],
        "ignored_events": report["ignored_events"],
    })
}

/// Whether `actual` has every field of `expected` with the same value (objects: the fields
/// `expected` names; arrays: the same length, each element so; anything else: equal). The
/// path of the first difference otherwise.
fn subset(expected: &Value, actual: &Value, path: &str) -> Result<(), String> {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => e.iter().try_for_each(|(k, v)| {
            let at = format!("{path}.{k}");
            a.get(k).map_or_else(|| Err(format!("{at}: expected {v}, got nothing")), |got| subset(v, got, &at))
        }),
        (Value::Array(e), Value::Array(a)) if e.len() == a.len() => {
            e.iter().zip(a).enumerate().try_for_each(|(i, (e, a))| subset(e, a, &format!("{path}[{i}]")))
        }
        (e, a) if e == a => Ok(()),
        (e, a) => Err(format!("{path}: expected {e}, got {a}")),
    }
}

// ---- the file layout ----

/// A scenario as its file holds it: one event or action per line, so diffs read step by
/// step.
fn render(doc: &Value) -> String {
    let compact = |v: &Value| serde_json::to_string(v).unwrap();
    // `"key": value` lines at `indent`, with `[` and `]` around one compact item per line.
    let list = |items: &Value, indent: &str| -> String {
        let items: Vec<String> =
            items.as_array().unwrap().iter().map(|i| format!("{indent}  {}", compact(i))).collect();
        if items.is_empty() {
            return "[]".into();
        }
        format!("[\n{}\n{indent}]", items.join(",\n"))
    };
    let steps: Vec<String> = doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            [
                "    {".to_owned(),
                format!("      \"now_ns\": {},", s["now_ns"]),
                format!("      \"events\": {},", list(&s["events"], "      ")),
                "      \"expect\": {".to_owned(),
                format!("        \"actions\": {},", list(&s["expect"]["actions"], "        ")),
                format!("        \"next_wakeup_ns\": {}", s["expect"]["next_wakeup_ns"]),
                "      }".to_owned(),
                "    }".to_owned(),
            ]
            .join("\n")
        })
        .collect();
    let end: Vec<String> = doc["end"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| format!("    {}: {}", compact(&json!(k)), compact(v)))
        .collect();
    let head: Vec<String> = ["format", "name", "description", "config", "now_ns", "seed"]
        .iter()
        .map(|k| format!("  \"{k}\": {},", compact(&doc[*k])))
        .collect();
    format!(
        "{{\n{}\n  \"steps\": [\n{}\n  ],\n  \"end\": {{\n{}\n  }}\n}}\n",
        head.join("\n"),
        steps.join(",\n"),
        end.join(",\n")
    )
}

// ---- replay ----

/// Replays a scenario through the native ABI as a host does: its config and seed to
/// `stagger_session_new`, each step's events encoded into one batch for `stagger_step`, the
/// action batch decoded and compared in the JSON form. The first difference, named by step
/// and action, is the error.
fn replay(doc: &Value) -> Result<(), String> {
    let scenario = Scenario::from_json(doc)?;
    let abi = Abi::new(&scenario.config.to_string(), scenario.now_ns, scenario.seed)
        .map_err(|f| format!("stagger_session_new refused the config: {}", f.json))?;
    for (i, step) in scenario.steps.iter().enumerate() {
        let at = format!("step {i} (now_ns {})", step.now_ns);
        let answer = abi
            .step_raw(step.now_ns, &encode_events(&step.events))
            .map_err(|f| format!("{at}: stagger_step failed: {}", f.json))?;
        let actions = decode_actions(&answer.bytes).map_err(|e| format!("{at}: the action batch: {e:?}"))?;
        let got: Vec<Value> = actions.actions.iter().map(action_json).collect();
        for j in 0..step.actions.len().max(got.len()) {
            match (step.actions.get(j), got.get(j)) {
                (Some(e), Some(g)) if e == g => {}
                (e, g) => {
                    let show = |v: Option<&Value>| v.map_or_else(|| "no action".to_owned(), Value::to_string);
                    return Err(format!("{at}, action {j}: expected {}, got {}", show(e), show(g)));
                }
            }
        }
        if actions.next_wakeup_ns != step.next_wakeup_ns {
            return Err(format!(
                "{at}: next_wakeup_ns: expected {}, got {}",
                json!(step.next_wakeup_ns),
                json!(actions.next_wakeup_ns)
            ));
        }
    }
    if let Some(report) = &scenario.end_report {
        subset(report, &abi.report(), "report").map_err(|m| format!("end: {m}"))?;
    }
    if let Some(metadata) = &scenario.end_metadata {
        subset(metadata, &abi.metadata(), "metadata").map_err(|m| format!("end: {m}"))?;
    }
    Ok(())
}

/// Where a regenerated scenario first differs from its file, in words.
fn first_difference(file: &Value, now: &Value) -> String {
    for key in ["format", "name", "description", "config", "now_ns", "seed"] {
        if file[key] != now[key] {
            return format!("{key}: the file has {}, the script {}", file[key], now[key]);
        }
    }
    let (a, b) = (file["steps"].as_array(), now["steps"].as_array());
    let (a, b) = (a.map_or(&[][..], Vec::as_slice), b.map_or(&[][..], Vec::as_slice));
    for i in 0..a.len().max(b.len()) {
        let (Some(f), Some(n)) = (a.get(i), b.get(i)) else {
            return format!("the file has {} steps, the script {}", a.len(), b.len());
        };
        for key in ["now_ns", "events"] {
            if f[key] != n[key] {
                return format!("step {i}: {key}: the file has {}, the script {}", f[key], n[key]);
            }
        }
        let (fa, na) = (f["expect"]["actions"].as_array(), n["expect"]["actions"].as_array());
        let (fa, na) = (fa.map_or(&[][..], Vec::as_slice), na.map_or(&[][..], Vec::as_slice));
        for j in 0..fa.len().max(na.len()) {
            if fa.get(j) != na.get(j) {
                let show = |v: Option<&Value>| v.map_or_else(|| "no action".to_owned(), Value::to_string);
                return format!(
                    "step {i}, action {j}: the file has {}, the core now {}",
                    show(fa.get(j)),
                    show(na.get(j))
                );
            }
        }
        if f["expect"]["next_wakeup_ns"] != n["expect"]["next_wakeup_ns"] {
            return format!(
                "step {i}: next_wakeup_ns: the file has {}, the core now {}",
                f["expect"]["next_wakeup_ns"], n["expect"]["next_wakeup_ns"]
            );
        }
    }
    if let Some(at) = differing_path(&file["end"], &now["end"], "end") {
        return at;
    }
    "only the layout (whitespace)".into()
}

/// The first path where `file` and `now` differ (a field only one has, arrays of other
/// lengths, other values), with both values.
fn differing_path(file: &Value, now: &Value, path: &str) -> Option<String> {
    match (file, now) {
        (Value::Object(f), Value::Object(n)) => {
            let keys: BTreeSet<&String> = f.keys().chain(n.keys()).collect();
            keys.into_iter().find_map(|k| match (f.get(k), n.get(k)) {
                (Some(f), Some(n)) => differing_path(f, n, &format!("{path}.{k}")),
                (f, n) => {
                    let show = |v: Option<&Value>| v.map_or_else(|| "nothing".to_owned(), Value::to_string);
                    Some(format!("{path}.{k}: the file has {}, the core now {}", show(f), show(n)))
                }
            })
        }
        (Value::Array(f), Value::Array(n)) if f.len() == n.len() => {
            f.iter().zip(n).enumerate().find_map(|(i, (f, n))| differing_path(f, n, &format!("{path}[{i}]")))
        }
        (f, n) if f == n => None,
        (f, n) => Some(format!("{path}: the file has {f}, the core now {n}")),
    }
}

// ---- the fake network the scripts run in ----

/// What a broker does with one request frame.
enum Reply {
    /// Answers with these bytes (one `RECEIVED`).
    Bytes(Vec<u8>),
    /// Answers with these bytes this many nanoseconds later than `Bytes` would.
    Delayed(Vec<u8>, u64),
    /// Never answers.
    Nothing,
    /// Resets the connection (`CLOSED`, reset).
    Reset,
}

/// How a dial to an address goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dial {
    /// Connects (and, in a TLS session, completes the handshake).
    Up,
    /// Refused (`IO_ERROR` refused).
    Refused,
    /// Connects, then the TLS handshake fails (`IO_ERROR` tls).
    TlsFails,
}

/// How a broker answers one request frame (given its healthy self, `Broker`).
type Answer = Box<dyn FnMut(&mut Broker, &[u8]) -> Reply>;

/// A fake broker: how its dials go and how it answers each request (by default as a healthy
/// Kafka broker: `Broker::answer`).
struct Fake {
    dial: Dial,
    broker: Broker,
    reply: Answer,
}

impl Fake {
    fn healthy() -> Fake {
        Fake::answering(|broker, frame| Reply::Bytes(broker.answer(frame)))
    }

    fn answering(reply: impl FnMut(&mut Broker, &[u8]) -> Reply + 'static) -> Fake {
        Fake { dial: Dial::Up, broker: Broker::default(), reply: Box::new(reply) }
    }

    fn refusing() -> Fake {
        Fake { dial: Dial::Refused, ..Fake::healthy() }
    }

    /// Connects, and never answers anything.
    fn hung() -> Fake {
        Fake::answering(|_, _| Reply::Nothing)
    }
}

/// The API key of a request frame.
fn api_key(frame: &[u8]) -> ApiKey {
    ApiKey::try_from(i16::from_be_bytes([frame[4], frame[5]])).unwrap()
}

/// A connection the session dialled, as the network sees it.
struct Conn {
    address: String,
    /// When the connection is (or will be) ready for requests: connected, and secured in a
    /// TLS session.
    ready_at: u64,
}

/// A scenario being recorded: a real session through the ABI, the fake network that carries
/// out its actions, and every step so far.
struct Script {
    name: &'static str,
    description: &'static str,
    config: Value,
    seed: u64,
    abi: Abi,
    tls: bool,
    steps: Vec<Value>,
    /// The latest host time of a step.
    now: u64,
    wakeup: Option<u64>,
    /// Events the host will report: when, the order they were scheduled in, the event.
    queue: Vec<(u64, u64, HostEvent)>,
    scheduled: u64,
    brokers: BTreeMap<String, Fake>,
    conns: BTreeMap<u64, Conn>,
    names: BTreeMap<String, Result<Vec<SocketAddr>, String>>,
    tokens: VecDeque<Result<String, String>>,
    /// Every action so far, in the JSON form.
    actions: Vec<Value>,
    /// Refreshes ended so far: their epoch and whether they succeeded.
    ended: Vec<(u32, bool)>,
}

/// How long a connection takes to come up (and a TLS handshake after it), and a broker to
/// answer a request, in the fake network.
const LATENCY: u64 = MS;

impl Script {
    fn new(name: &'static str, description: &'static str, config: Value, seed: u64) -> Script {
        let abi = Abi::new(&config.to_string(), T0, seed).unwrap_or_else(|f| panic!("{name}: {}", f.json));
        let tls = config["tls"] == true;
        Script {
            name,
            description,
            config,
            seed,
            abi,
            tls,
            steps: Vec::new(),
            now: T0,
            wakeup: None,
            queue: Vec::new(),
            scheduled: 0,
            brokers: BTreeMap::new(),
            conns: BTreeMap::new(),
            names: BTreeMap::new(),
            tokens: VecDeque::new(),
            actions: Vec::new(),
            ended: Vec::new(),
        }
    }

    fn broker(mut self, address: &str, fake: Fake) -> Script {
        self.brokers.insert(address.into(), fake);
        self
    }

    /// Schedules an event the host reports at `at`.
    fn at(&mut self, at: u64, event: HostEvent) {
        self.scheduled += 1;
        self.queue.push((at, self.scheduled, event));
    }

    /// The connection the session dialled to `address` last.
    fn dialled(&self, address: &str) -> u64 {
        let mut dials = self.actions.iter().filter_map(|a| {
            let d = a.get("dial")?;
            (d["address"] == address).then(|| d["conn"].as_u64().unwrap())
        });
        dials.next_back().unwrap_or_else(|| panic!("{}: no connection to {address}", self.name))
    }

    /// One step: `events` at `now`, recorded with the session's answer; the network carries
    /// the actions out (scheduling what the host will report).
    fn step(&mut self, now: u64, events: Vec<HostEvent>) {
        assert!(self.steps.len() < 200, "{}: more than 200 steps", self.name);
        // A connection the host reports gone says nothing more.
        for event in &events {
            if let HostEvent::Closed(conn, _) | HostEvent::IoError(conn, ..) = *event {
                self.conns.remove(&conn);
                self.queue.retain(|(_, _, e)| conn_of(e) != Some(conn));
            }
        }
        let answer = self.abi.step(now, &events);
        let decoded = answer.actions();
        let actions: Vec<Value> = decoded.actions.iter().map(action_json).collect();
        self.steps.push(json!({
            "now_ns": now,
            "events": events.iter().map(event_json).collect::<Vec<_>>(),
            "expect": {"actions": actions, "next_wakeup_ns": decoded.next_wakeup_ns},
        }));
        self.actions.extend(actions);
        self.wakeup = decoded.next_wakeup_ns;
        self.now = self.now.max(now);
        let now = self.now;
        for action in &decoded.actions {
            self.carry_out(now, action);
        }
    }

    fn carry_out(&mut self, now: u64, action: &HostAction<'_>) {
        match *action {
            HostAction::Dial { conn, address, .. } => {
                let dial = self.brokers.get(address).map_or(Dial::Refused, |b| b.dial);
                match dial {
                    Dial::Refused => {
                        let detail = "connection refused (os error 111)".to_owned();
                        self.at(now + LATENCY, HostEvent::IoError(conn, STAGGER_ERROR_REFUSED, 0, detail));
                    }
                    Dial::Up | Dial::TlsFails => {
                        self.at(now + LATENCY, HostEvent::Connected(conn));
                        let mut ready_at = now + LATENCY;
                        if self.tls {
                            ready_at += LATENCY;
                            self.at(
                                ready_at,
                                match dial {
                                    Dial::Up => HostEvent::Secured(conn),
                                    _ => HostEvent::IoError(
                                        conn,
                                        STAGGER_ERROR_TLS,
                                        0,
                                        "invalid peer certificate: UnknownIssuer".into(),
                                    ),
                                },
                            );
                        }
                        self.conns.insert(conn, Conn { address: address.into(), ready_at });
                    }
                }
            }
            HostAction::Send { conn, bytes } => {
                let Some(c) = self.conns.get(&conn) else { return };
                let at = c.ready_at.max(now) + LATENCY;
                let fake = self.brokers.get_mut(&c.address).expect("a connection is to a fake broker");
                if fake.dial == Dial::TlsFails {
                    return;
                }
                match (fake.reply)(&mut fake.broker, bytes) {
                    Reply::Bytes(answer) => self.at(at, HostEvent::Received(conn, answer)),
                    Reply::Delayed(answer, later) => self.at(at + later, HostEvent::Received(conn, answer)),
                    Reply::Nothing => {}
                    Reply::Reset => self.at(at, HostEvent::Closed(conn, true)),
                }
            }
            HostAction::Close { conn } => {
                self.conns.remove(&conn);
                self.queue.retain(|(_, _, e)| conn_of(e) != Some(conn));
            }
            HostAction::Resolve { lookup, name } => {
                let event = match self.names.get(name) {
                    Some(Ok(addresses)) => HostEvent::Resolved(lookup, addresses.clone()),
                    Some(Err(detail)) => HostEvent::ResolveFailed(lookup, STAGGER_ERROR_DNS, 0, detail.clone()),
                    None => HostEvent::ResolveFailed(lookup, STAGGER_ERROR_DNS, 0, "no such host".into()),
                };
                self.at(now + LATENCY, event);
            }
            HostAction::NeedNonce { conn } => {
                // What the OS would give, here a fixed pattern per connection.
                let nonce: [u8; 18] = std::array::from_fn(|i| (conn as u8).wrapping_mul(31).wrapping_add(i as u8));
                self.at(now, HostEvent::Nonce(conn, nonce));
            }
            HostAction::NeedToken { conn } => {
                let token = self.tokens.pop_front().unwrap_or_else(|| panic!("{}: no token left", self.name));
                self.at(
                    now,
                    match token {
                        Ok(token) => HostEvent::Token(conn, token),
                        Err(why) => HostEvent::TokenFailed(conn, why),
                    },
                );
            }
            HostAction::Refreshed { epoch, .. } => self.ended.push((epoch, true)),
            HostAction::RefreshFailed { epoch, .. } => self.ended.push((epoch, false)),
            HostAction::Rebootstrapped | HostAction::RefreshRequested { .. } => {}
        }
    }

    /// Steps as a host loop does — at the next event or the next wake-up, whichever comes
    /// first, with every event due by then — until `done`.
    fn run_until(&mut self, done: impl Fn(&Script) -> bool) {
        while !done(self) {
            let next_event = self.queue.iter().map(|(t, _, _)| *t).min();
            let t = match (next_event, self.wakeup) {
                (Some(e), Some(w)) => e.min(w),
                (Some(e), None) => e,
                (None, Some(w)) => w,
                (None, None) => panic!("{}: nothing is due, and the script waits", self.name),
            };
            self.queue.sort_by_key(|(t, seq, _)| (*t, *seq));
            let due = self.queue.iter().take_while(|(at, _, _)| *at <= t).count();
            let events = self.queue.drain(..due).map(|(_, _, e)| e).collect();
            self.step(t.max(self.now), events);
        }
    }

    /// Runs until `n` refreshes have ended.
    fn run_until_ended(&mut self, n: usize) {
        self.run_until(|s| s.ended.len() >= n);
    }

    /// Lets every exchange still under way end, checks that nothing was closed, then asks for
    /// a second refresh (stale metadata) 10 ms later and runs it to its end; returns the step
    /// it started at.
    fn settle_then_refresh_again(&mut self) -> usize {
        self.run_until(|s| s.queue.is_empty());
        assert_eq!(self.count("close", &self.actions_since(0)), 0, "{}: nothing is closed", self.name);
        let from = self.steps.len();
        self.at(self.now + 10 * MS, request(STAGGER_CAUSE_STALE_METADATA, ""));
        self.run_until_ended(2);
        from
    }

    /// The actions of the steps from `from` on, in the JSON form.
    fn actions_since(&self, from: usize) -> Vec<&Value> {
        self.steps[from..].iter().flat_map(|s| s["expect"]["actions"].as_array().unwrap()).collect()
    }

    fn count(&self, kind: &str, actions: &[&Value]) -> usize {
        actions.iter().filter(|a| a.get(kind).is_some()).count()
    }

    /// The file: the record, and at the end the deterministic part of the report (and the
    /// metadata, when `metadata`).
    fn finish(self, metadata: bool) -> Value {
        assert!(self.queue.is_empty(), "{}: events left unreported: {:?}", self.name, self.queue);
        let mut end = json!({"report": report_subset(&self.abi.report())});
        if metadata {
            end["metadata"] = self.abi.metadata();
        }
        json!({
            "format": FORMAT,
            "name": self.name,
            "description": self.description,
            "config": self.config,
            "now_ns": T0,
            "seed": self.seed,
            "steps": self.steps,
            "end": end,
        })
    }
}

fn conn_of(event: &HostEvent) -> Option<u64> {
    match *event {
        HostEvent::Connected(c)
        | HostEvent::Secured(c)
        | HostEvent::Received(c, _)
        | HostEvent::Closed(c, _)
        | HostEvent::IoError(c, ..)
        | HostEvent::Nonce(c, _)
        | HostEvent::Token(c, _)
        | HostEvent::TokenFailed(c, _) => Some(c),
        _ => None,
    }
}

fn request(cause: u8, broker: &str) -> HostEvent {
    HostEvent::RequestRefresh(cause, broker.into())
}

fn bootstrap() -> HostEvent {
    request(STAGGER_CAUSE_BOOTSTRAP, "")
}

// ---- the scenarios ----

/// A broker that answers ApiVersions at once and its `n`th Metadata request as `metadata(n)`
/// says (counting from 0).
fn metadata_paced(mut metadata: impl FnMut(usize) -> Option<u64> + 'static) -> Fake {
    let mut seen = 0;
    Fake::answering(move |broker, frame| {
        if api_key(frame) != ApiKey::Metadata {
            return Reply::Bytes(broker.answer(frame));
        }
        seen += 1;
        match metadata(seen - 1) {
            Some(later) => Reply::Delayed(broker.answer(frame), later),
            None => Reply::Nothing,
        }
    })
}

fn spare_connection() -> Value {
    let mut s = Script::new(
        "spare_connection",
        "A long-lived session keeps a spare: b1 is slow to answer Metadata, the stagger hedges to b2,          b1 wins while b2 owes only its Metadata answer, so b2 is read to the end and kept (no CLOSE).          In the next refresh b1 hangs on its kept connection and the hedge runs on b2's spare: no DIAL.          b1, the client's home (its first winner), drains rather than closing.",
        json!({"seeds": ["b1:9092", "b2:9093"], "preset": "staggered",
               "settings": {"fanout.jitter": "0", "shuffle_seeds": "false"}}),
        7,
    )
    .broker("b1:9092", metadata_paced(|n| (n == 0).then_some(600 * MS)))
    .broker("b2:9093", metadata_paced(|n| Some(if n == 0 { 200 * MS } else { 0 })));
    s.at(T0, bootstrap());
    s.run_until_ended(1);
    let (b1, b2) = (s.dialled("b1:9092"), s.dialled("b2:9093"));
    assert!(s.actions.iter().any(|a| a["refreshed"]["address"] == "b1:9092"), "{}: b1 wins", s.name);
    // b2's Metadata answer is still on its way: the session reads it and keeps the connection.
    let from = s.settle_then_refresh_again();
    let second = s.actions_since(from);
    assert_eq!(s.count("dial", &second), 0, "{}: the hedge runs on the spare", s.name);
    assert!(second.iter().any(|a| a["send"]["conn"] == b1) && second.iter().any(|a| a["send"]["conn"] == b2));
    assert!(second.iter().any(|a| a["refreshed"]["address"] == "b2:9093"), "{}: b2 wins", s.name);
    assert!(!second.contains(&&json!({"close": {"conn": b1}})), "{}: the hung b1, home, drains", s.name);
    s.finish(false)
}

fn cold_start_first_choice() -> Value {
    let mut s = Script::new(
        "cold_start_first_choice",
        "A long-lived session's cold start: b1, its first choice, accepts the connection but answers \
         ApiVersions only after 600 ms (its queue is long); the stagger hedges to b2, which wins. b1 is \
         not closed: it finishes its exchange and is kept, and the next refresh runs on it (no DIAL).",
        json!({"seeds": ["b1:9092", "b2:9093"], "preset": "staggered",
               "settings": {"fanout.jitter": "0", "shuffle_seeds": "false"}}),
        7,
    )
    .broker("b1:9092", {
        let mut first = true;
        Fake::answering(move |broker, frame| {
            let reply = broker.answer(frame);
            if api_key(frame) == ApiKey::ApiVersions && std::mem::take(&mut first) {
                Reply::Delayed(reply, 600 * MS)
            } else {
                Reply::Bytes(reply)
            }
        })
    })
    .broker("b2:9093", Fake::healthy());
    s.at(T0, bootstrap());
    s.run_until_ended(1);
    let b1 = s.dialled("b1:9092");
    assert!(s.actions.iter().any(|a| a["refreshed"]["address"] == "b2:9093"), "{}: b2 wins", s.name);
    let from = s.settle_then_refresh_again();
    let second = s.actions_since(from);
    assert_eq!(s.count("dial", &second), 0, "{}: no new connection", s.name);
    assert!(second.iter().any(|a| a["refreshed"]["address"] == "b1:9092"), "{}: b1 answers it", s.name);
    assert!(second.iter().all(|a| a.get("send").is_none_or(|x| x["conn"] == b1)), "{}: on b1 only", s.name);
    s.finish(false)
}

fn one_shot_healthy() -> Value {
    let mut s = Script::new(
        "one_shot_healthy",
        "A one-shot refresh of a healthy cluster: one dial, ApiVersions, Metadata, the connection closed, refreshed.",
        json!({"seeds": ["b1:9092", "b2:9093"], "one_shot": true, "settings": {"shuffle_seeds": "false"}}),
        7,
    )
    .broker("b1:9092", Fake::healthy())
    .broker("b2:9093", Fake::healthy());
    s.at(T0, bootstrap());
    s.run_until_ended(1);
    let all = s.actions_since(0);
    assert_eq!((s.count("dial", &all), s.count("send", &all)), (1, 2), "{}: one dial, two requests", s.name);
    s.finish(true)
}

fn hung_seed_staggered() -> Value {
    let mut s = Script::new(
        "hung_seed_staggered",
        "The first seed connects and never answers: the stagger timer starts a second attempt, which \
         wins; the hung one is closed.",
        json!({"seeds": ["b1:9092", "b2:9093"], "one_shot": true, "settings": {"shuffle_seeds": "false"}}),
        7,
    )
    .broker("b1:9092", Fake::hung())
    .broker("b2:9093", Fake::healthy());
    s.at(T0, bootstrap());
    s.run_until_ended(1);
    let all = s.actions_since(0);
    let hung = s.dialled("b1:9092");
    assert!(all.contains(&&json!({"close": {"conn": hung}})), "{}: the hung attempt is closed", s.name);
    assert!(all.iter().any(|a| a["refreshed"]["address"] == "b2:9093"), "{}: the second seed wins", s.name);
    s.finish(false)
}

fn refused_seed() -> Value {
    let mut s = Script::new(
        "refused_seed",
        "The first seed refuses the connection (IO_ERROR refused): the next seed is dialled at once and answers.",
        json!({"seeds": ["b1:9092", "b2:9093"], "one_shot": true, "settings": {"shuffle_seeds": "false"}}),
        7,
    )
    .broker("b1:9092", Fake::refusing())
    .broker("b2:9093", Fake::healthy());
    s.at(T0, bootstrap());
    s.run_until_ended(1);
    let second = s.steps.iter().position(|st| st["expect"]["actions"].to_string().contains("b2:9093")).unwrap();
    assert_eq!(s.steps[second]["now_ns"], T0 + LATENCY, "{}: the next seed at the refusal", s.name);
    s.finish(false)
}

fn scram_sha512() -> Value {
    let mut s = Script::new(
        "scram_sha512",
        "SASL SCRAM-SHA-512: the session asks for a nonce (NEED_NONCE), the first request waits for \
         the NONCE event, then SaslHandshake, two SaslAuthenticate and Metadata.",
        json!({"seeds": ["b1:9092"], "one_shot": true,
               "sasl": {"mechanism": "SCRAM-SHA-512", "username": "alice", "password": PASSWORD}}),
        7,
    )
    .broker("b1:9092", Fake::healthy());
    s.at(T0, bootstrap());
    s.run_until_ended(1);
    let seen = &s.brokers["b1:9092"].broker.seen;
    use ApiKey::*;
    assert_eq!(seen, &[ApiVersions, SaslHandshake, SaslAuthenticate, SaslAuthenticate, Metadata], "{}", s.name);
    assert_eq!(s.ended, [(1, true)], "{}: the broker checked the proof", s.name);
    s.finish(false)
}

fn oauthbearer_tokens() -> Value {
    let mut s = Script::new(
        "oauthbearer_tokens",
        "OAUTHBEARER with fresh tokens in a long-lived session: a TOKEN event authenticates the first \
         connection; after it is reset, the next connection's TOKEN_FAILED fails the refresh (fatal).",
        json!({"seeds": ["b1:9092"], "sasl": {"mechanism": "OAUTHBEARER"}, "fresh_tokens": true}),
        7,
    )
    .broker("b1:9092", Fake::healthy())
    .broker("b2:9093", Fake::healthy());
    s.tokens = VecDeque::from([
        Ok("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.".to_owned()),
        Err("identity provider unavailable".to_owned()),
    ]);
    s.at(T0, bootstrap());
    s.run_until_ended(1);
    assert_eq!(s.brokers["b1:9092"].broker.bearer.len(), 1, "{}: the token reached the broker", s.name);
    let kept = s.dialled("b1:9092");
    let t = s.now + 10 * MS;
    s.at(t, HostEvent::Closed(kept, true));
    s.at(t + MS, request(STAGGER_CAUSE_CONNECTION_LOST, "b1:9092"));
    s.run_until_ended(2);
    let failed = s.actions.iter().find_map(|a| a.get("refresh_failed")).expect("the second refresh fails");
    assert_eq!(failed["error"]["reason"], "fatal", "{}", s.name);
    s.finish(false)
}

fn kept_connection() -> Value {
    let mut s = Script::new(
        "kept_connection",
        "A long-lived session keeps the winner's connection: the next REQUEST_REFRESH sends on it \
         with no DIAL; after the broker resets it, a refresh naming that broker dials anew; then the \
         periodic refresh comes at the wake-up.",
        json!({"seeds": ["b1:9092"]}),
        7,
    )
    .broker("b1:9092", Fake::healthy())
    .broker("b2:9093", Fake::healthy());
    s.at(T0, bootstrap());
    s.run_until_ended(1);
    let kept = s.dialled("b1:9092");
    let from = s.steps.len();
    s.at(s.now + 10 * MS, request(STAGGER_CAUSE_STALE_METADATA, ""));
    s.run_until_ended(2);
    let second = s.actions_since(from);
    assert_eq!(s.count("dial", &second), 0, "{}: the second refresh reuses the kept connection", s.name);
    assert!(second.iter().any(|a| a["send"]["conn"] == kept), "{}", s.name);
    let t = s.now + 10 * MS;
    s.at(t, HostEvent::Closed(kept, true));
    s.at(t + MS, request(STAGGER_CAUSE_CONNECTION_LOST, "b1:9092"));
    let from = s.steps.len();
    s.run_until_ended(3);
    let third = s.actions_since(from);
    assert_eq!(s.count("dial", &third), 1, "{}: after the reset the refresh dials", s.name);
    let from = s.steps.len();
    s.run_until_ended(4);
    let periodic = s.actions_since(from);
    assert_eq!(s.count("refresh_requested", &periodic), 0, "{}: the periodic refresh is the session's own", s.name);
    s.finish(false)
}

fn every_broker_fails() -> Value {
    let mut s = Script::new(
        "every_broker_fails",
        "Every seed fails (refused, reset after connecting, hung) and there are no retries: \
         REFRESH_FAILED carries the last error and every broker's.",
        json!({"seeds": ["b1:9092", "b2:9093", "b3:9094"], "one_shot": true,
               "settings": {"retry.retries": "0", "shuffle_seeds": "false"}}),
        7,
    )
    .broker("b1:9092", Fake::refusing())
    .broker("b2:9093", Fake::answering(|_, _| Reply::Reset))
    .broker("b3:9094", Fake::hung());
    s.at(T0, bootstrap());
    s.run_until_ended(1);
    let failed = s.actions.iter().find_map(|a| a.get("refresh_failed")).expect("the refresh fails");
    assert_eq!(failed["error"]["brokers"].as_array().map(Vec::len), Some(3), "{}: every broker's error", s.name);
    s.finish(false)
}

fn frame_too_large() -> Value {
    let mut s = Script::new(
        "frame_too_large",
        "Hostile input: the first broker's Metadata answer announces a frame over max_frame_size \
         (1024); its first bytes fail that attempt (frame_too_large) and the next seed answers.",
        json!({"seeds": ["b1:9092", "b2:9093"], "one_shot": true, "max_frame_size": 1024,
               "settings": {"shuffle_seeds": "false"}}),
        7,
    )
    .broker(
        "b1:9092",
        Fake::answering(|broker, frame| {
            if api_key(frame) != ApiKey::Metadata {
                return Reply::Bytes(broker.answer(frame));
            }
            // A real answer of 40 topics (about 2 KiB); only its first bytes arrive.
            let mut big = Broker::with(cluster(40, 2)).answer(frame);
            assert!(big.len() > 1024);
            big.truncate(64);
            Reply::Bytes(big)
        }),
    )
    .broker("b2:9093", Fake::healthy());
    s.at(T0, bootstrap());
    s.run_until_ended(1);
    assert!(s.abi.report().to_string().contains("frame_too_large"), "{}: the first attempt's error", s.name);
    s.finish(false)
}

fn malformed_response() -> Value {
    let mut s = Script::new(
        "malformed_response",
        "Hostile input: the first broker's Metadata answer is a whole frame whose body is cut short; \
         the attempt fails (protocol) and the next seed answers.",
        json!({"seeds": ["b1:9092", "b2:9093"], "one_shot": true, "settings": {"shuffle_seeds": "false"}}),
        7,
    )
    .broker(
        "b1:9092",
        Fake::answering(|broker, frame| {
            let mut answer = broker.answer(frame);
            if api_key(frame) == ApiKey::Metadata {
                // The header and half the body, with the length prefix saying so.
                answer.truncate(4 + (answer.len() - 4) / 2);
                let len = (answer.len() - 4) as u32;
                answer[..4].copy_from_slice(&len.to_be_bytes());
            }
            Reply::Bytes(answer)
        }),
    )
    .broker("b2:9093", Fake::healthy());
    s.at(T0, bootstrap());
    s.run_until_ended(1);
    assert!(s.abi.report().to_string().contains("\"protocol\""), "{}: the first attempt's error", s.name);
    s.finish(false)
}

fn hostile_host() -> Value {
    let mut s = Script::new(
        "hostile_host",
        "Hostile host events: events about connections the session never dialled or already closed \
         are ignored (and counted), and time going backwards is clamped.",
        json!({"seeds": ["b1:9092"], "one_shot": true}),
        7,
    )
    .broker("b1:9092", Fake::healthy());
    s.step(T0, vec![HostEvent::Connected(1000), HostEvent::Received(1001, b"\0\0\0\x04junk".to_vec())]);
    s.at(T0, bootstrap());
    s.run_until(|s| s.steps.len() == 3);
    // Back in time by half a second: nothing fires, the wake-up stays where it was.
    s.step(s.now - 500 * MS, Vec::new());
    s.run_until_ended(1);
    let closed = s.dialled("b1:9092");
    assert!(!s.conns.contains_key(&closed), "{}: the one-shot session closed it", s.name);
    s.step(s.now + MS, vec![HostEvent::Received(closed, b"\0\0\0\x04late".to_vec())]);
    assert_eq!(s.abi.report()["ignored_events"], 3, "{}", s.name);
    s.finish(false)
}

fn resolve_and_tls() -> Value {
    let mut s = Script::new(
        "resolve_and_tls",
        "A TLS session resolving its seeds: the first name fails (RESOLVE_FAILED), the second \
         resolves to an IPv4 and an IPv6 address; DIAL carries the server name, the first TLS \
         handshake fails, the second is CONNECTED and SECURED before the requests.",
        json!({"seeds": ["gone.example:9092", "kafka.example:9092"], "resolve_names": true, "tls": true,
               "one_shot": true, "settings": {"shuffle_seeds": "false"}}),
        7,
    )
    .broker("10.0.0.1:9092", Fake { dial: Dial::TlsFails, ..Fake::healthy() })
    .broker("[fd00::1]:9092", Fake::healthy());
    s.names.insert(
        "kafka.example:9092".into(),
        Ok(vec!["10.0.0.1:9092".parse().unwrap(), "[fd00::1]:9092".parse().unwrap()]),
    );
    s.names.insert(
        "gone.example:9092".into(),
        Err("failed to lookup address information: Name or service not known".into()),
    );
    s.at(T0, bootstrap());
    s.run_until_ended(1);
    let all = s.actions_since(0);
    let events = s.steps.iter().flat_map(|st| st["events"].as_array().unwrap());
    assert_eq!(events.filter(|e| e.get("resolve_failed").is_some()).count(), 1, "{}: a name fails", s.name);
    assert!(all.iter().any(|a| a["dial"]["tls"] == "kafka.example"), "{}: the server name to verify", s.name);
    assert!(all.iter().any(|a| a["refreshed"]["address"] == "[fd00::1]:9092"), "{}", s.name);
    s.finish(false)
}

/// Every scenario, by the name of its file.
const SCENARIOS: &[fn() -> Value] = &[
    one_shot_healthy,
    hung_seed_staggered,
    refused_seed,
    scram_sha512,
    oauthbearer_tokens,
    kept_connection,
    every_broker_fails,
    frame_too_large,
    malformed_response,
    hostile_host,
    resolve_and_tls,
    spare_connection,
    cold_start_first_choice,
];

/// `conformance/NAME.json`, as messages name a file.
fn shown(path: &Path) -> String {
    format!("conformance/{}", path.file_name().unwrap().to_string_lossy())
}

fn files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir())
        .map(|d| d.map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "json")).collect())
        .unwrap_or_default();
    files.sort();
    files
}

#[test]
fn the_files_are_the_record_of_the_scripts_and_replay_through_the_native_abi() {
    let bless = std::env::var("STAGGER_BLESS").as_deref() == Ok("1");
    let mut stale = Vec::new();
    let mut written = Vec::new();
    for script in SCENARIOS {
        let doc = script();
        let text = render(&doc);
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), doc, "the layout is the same JSON");
        let path = dir().join(format!("{}.json", doc["name"].as_str().unwrap()));
        written.push(path.clone());
        let file = std::fs::read_to_string(&path).ok();
        if file.as_deref() == Some(&text[..]) {
            continue;
        }
        if bless {
            std::fs::create_dir_all(dir()).unwrap();
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        let why = match file.as_deref().map(serde_json::from_str::<Value>) {
            None => "missing".to_owned(),
            Some(Err(e)) => format!("not JSON: {e}"),
            Some(Ok(file)) => first_difference(&file, &doc),
        };
        stale.push(format!("{}: {why}", shown(&path)));
    }
    for path in files() {
        if !written.contains(&path) {
            if bless {
                std::fs::remove_file(&path).unwrap();
            } else {
                stale.push(format!("{}: no script writes it", shown(&path)));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "conformance files that are not what the core does now:\n  {}\nIf the change in the core is meant, \
         rewrite them with STAGGER_BLESS=1 cargo test -p stagger-abi --test conformance (and rebuild \
         bindings/go/stagger.wasm: bash bindings/go/build-wasm.sh)",
        stale.join("\n  ")
    );

    let mut failures = Vec::new();
    for path in files() {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        if let Err(why) = replay(&doc) {
            failures.push(format!("{}: {why}", shown(&path)));
        }
    }
    assert!(failures.is_empty(), "replays that diverged:\n  {}", failures.join("\n  "));
    assert_eq!(files().len(), SCENARIOS.len());
}

/// A copy of `doc` with `change` applied to the action `j` of step `i`.
fn doctored(doc: &Value, i: usize, j: usize, change: impl FnOnce(&mut Value)) -> Value {
    let mut doc = doc.clone();
    change(&mut doc["steps"][i]["expect"]["actions"][j]);
    doc
}

#[test]
fn a_replay_that_diverges_fails_with_the_first_differing_step_and_action() {
    let doc = one_shot_healthy();
    replay(&doc).expect("the record replays");
    let step = |i: usize| doc["steps"][i]["expect"]["actions"].as_array().unwrap().clone();
    // Step 0: [refresh_requested, dial]; a later step sends Metadata.
    assert_eq!(step(0).len(), 2, "{doc}");

    let wrong_address = doctored(&doc, 0, 1, |a| a["dial"]["address"] = json!("b2:9093"));
    let error = replay(&wrong_address).unwrap_err();
    assert!(error.starts_with(&format!("step 0 (now_ns {T0}), action 1: expected ")), "{error}");
    assert!(
        error.contains(r#""address":"b2:9093""#) && error.contains(r#"got {"dial":{"address":"b1:9092""#),
        "{error}"
    );

    let sends: Vec<usize> = (0..doc["steps"].as_array().unwrap().len())
        .filter(|i| step(*i).iter().any(|a| a.get("send").is_some()))
        .collect();
    let last_send = *sends.last().unwrap();
    let flipped = doctored(&doc, last_send, 0, |a| {
        let hex = a["send"]["hex"].as_str().unwrap();
        a["send"]["hex"] = json!(format!("{}{}", &hex[..hex.len() - 1], if hex.ends_with('0') { "1" } else { "0" }));
    });
    let error = replay(&flipped).unwrap_err();
    assert!(error.contains(&format!("step {last_send} ")) && error.contains("action 0: expected"), "{error}");

    let mut missing = doc.clone();
    missing["steps"][0]["expect"]["actions"].as_array_mut().unwrap().pop();
    let error = replay(&missing).unwrap_err();
    assert!(error.contains("action 1: expected no action, got {\"dial\""), "{error}");

    let mut extra = doc.clone();
    extra["steps"][0]["expect"]["actions"].as_array_mut().unwrap().push(json!({"close": {"conn": 1}}));
    let error = replay(&extra).unwrap_err();
    assert!(error.contains("action 2: expected {\"close\":{\"conn\":1}}, got no action"), "{error}");

    let mut late = doc.clone();
    late["steps"][1]["expect"]["next_wakeup_ns"] = json!(1);
    let error = replay(&late).unwrap_err();
    assert!(error.starts_with("step 1 (now_ns ") && error.contains("next_wakeup_ns: expected 1, got "), "{error}");

    let mut counted = doc.clone();
    counted["end"]["report"]["stats"]["connections_opened"] = json!(2);
    let error = replay(&counted).unwrap_err();
    assert_eq!(error, "end: report.stats.connections_opened: expected 2, got 1");

    let mut cluster = doc.clone();
    cluster["end"]["metadata"]["cluster_id"] = json!("another");
    assert!(replay(&cluster).unwrap_err().starts_with("end: metadata.cluster_id: expected \"another\""));

    // A stale file names the same place.
    assert_eq!(
        first_difference(&wrong_address, &doc),
        format!(
            "step 0, action 1: the file has {}, the core now {}",
            wrong_address["steps"][0]["expect"]["actions"][1],
            step(0)[1]
        )
    );
}
