//! The session `refresh()` runs (`options::session_config`), driven on the host as the
//! browser drives it — a WebSocket per `Dial`, bytes both ways, `setTimeout` for time —
//! against a hung bridge and a healthy one whose broker `kafka-protocol` encodes: what
//! `onEvent` receives is the core's events, what `refreshWith()` resolves with is the core's
//! report, and its trace replays to the same commands (also after a trip through JSON, as
//! the web demo reads it).
#![cfg(not(target_arch = "wasm32"))]

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::metadata_response::MetadataResponseBroker;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use serde_json::{json, Value};
use stagger::report::{AttemptOutcome, RefreshReport};
use stagger::session::{Action, Event, Session};
use stagger::{Instant, RefreshConfig, Trace};
use stagger_web::options::{session_config, Seeds, RECORDER};

/// The healthy broker: the answer to one request frame.
fn answer(frame: &Bytes) -> Vec<u8> {
    let mut body = frame.slice(4..);
    let key = ApiKey::try_from(i16::from_be_bytes([body[0], body[1]])).unwrap();
    let version = i16::from_be_bytes([body[2], body[3]]);
    let header = RequestHeader::decode(&mut body, key.request_header_version(version)).unwrap();
    let mut out = BytesMut::new();
    let response_header = ResponseHeader::default().with_correlation_id(header.correlation_id);
    response_header.encode(&mut out, key.response_header_version(version)).unwrap();
    match key {
        ApiKey::ApiVersions => ApiVersionsResponse::default()
            .with_api_keys(vec![ApiVersion::default().with_api_key(ApiKey::Metadata as i16).with_max_version(12)])
            .encode(&mut out, version),
        _ => MetadataResponse::default()
            .with_brokers(vec![MetadataResponseBroker::default()
                .with_node_id(BrokerId(1))
                .with_host(StrBytes::from_static_str("10.0.0.2"))
                .with_port(9092)])
            .encode(&mut out, version),
    }
    .unwrap();
    let mut framed = (out.len() as u32).to_be_bytes().to_vec();
    framed.extend_from_slice(&out);
    framed
}

#[test]
fn a_refresh_past_a_hung_bridge_reports_the_cores_events_and_a_trace_that_replays() {
    let seeds = Seeds::new(&["ws://hung:1", "ws://healthy:2/kafka"]).unwrap();
    let config = session_config(RefreshConfig { shuffle_seeds: false, ..RefreshConfig::default() }, Default::default());
    let mut now = Instant::ZERO;
    let mut session = Session::new(config, seeds.book.clone(), now).unwrap();
    session.request_refresh(now);
    let (mut events, mut inbox, mut urls) = (Vec::new(), Vec::new(), Vec::new());
    'run: for _ in 0..10_000 {
        while let Some(action) = session.poll_action() {
            match action {
                // The hung bridge's socket opens and its broker never answers.
                Action::Dial { conn, address, tls } => {
                    assert_eq!(tls, None, "TLS is the browser's business");
                    urls.push((conn, seeds.url_of(&address).unwrap().to_owned()));
                    inbox.push((conn, None));
                }
                Action::Send { conn, bytes } if urls.iter().any(|(c, u)| *c == conn && u.contains("healthy")) => {
                    inbox.push((conn, Some(answer(&bytes))))
                }
                Action::Refreshed { .. } => break 'run,
                Action::Send { .. } | Action::Close { .. } => {}
                other => panic!("not asked of the browser here: {other:?}"),
            }
        }
        while let Some(event) = session.poll_event() {
            events.push(event);
        }
        now = now.saturating_add(Duration::from_millis(1));
        match inbox.pop() {
            Some((conn, None)) => session.handle_event(now, Event::Connected { conn }),
            Some((conn, Some(bytes))) => session.handle_event(now, Event::Received { conn, bytes: &bytes }),
            None => session.handle_timeout(now),
        }
    }
    while let Some(event) = session.poll_event() {
        events.push(event);
    }
    let urls: Vec<&str> = urls.iter().map(|(_, u)| u.as_str()).collect();
    assert_eq!(urls, ["ws://hung:1", "ws://healthy:2/kafka"], "each dial goes to its bridge's URL");

    // onEvent: the core's events as they serialise (the browser sets `elapsed_ms` by hand).
    let js: Vec<Value> = events.iter().map(|e| serde_json::to_value(e).unwrap()).collect();
    let first = &js[0];
    assert_eq!(first["event"], "started");
    assert_eq!(first["broker"], "hung:1");
    assert_eq!(first["elapsed_ms"], json!(0.0));
    assert!(first["attempt"]["number"].is_number());
    let names: Vec<&str> = js.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(names.last(), Some(&"won"), "{names:?}");
    assert!(names.contains(&"timer"), "the stagger timer started the second attempt: {names:?}");
    assert!(js.iter().any(|e| e["event"] == "answered" && e["broker"] == "healthy:2"), "{js:?}");
    assert!(js.iter().any(|e| e["event"] == "cancelled" && e["broker"] == "hung:1"), "{js:?}");

    // refreshWith(): the report (the CLI's `--json` `refresh`) and the trace.
    let attempts = session.reports();
    let won = attempts.iter().find(|a| a.outcome == AttemptOutcome::Won).unwrap();
    let report = RefreshReport { elapsed: won.ended, winner: Some(&won.broker), attempts: &attempts };
    let report = serde_json::to_value(report).unwrap();
    assert_eq!(report["winner"], "healthy:2");
    assert_eq!(report["attempts"][0]["outcome"], "cancelled");
    assert_eq!(report["attempts"][1]["outcome"], "won");
    let trace = session.last_trace().unwrap();
    assert_eq!(trace.recorder, RECORDER);
    assert!(matches!(trace.replay(), Ok(Ok(_))), "{:?}", trace.replay());
    let read: Trace = serde_json::from_value(serde_json::to_value(trace).unwrap()).unwrap();
    assert!(matches!(read.replay(), Ok(Ok(_))), "the trace replays after a trip through JSON");
}
