//! The conformance files' JSON form (`conformance/README.md`), for hosts written in Rust:
//! the names the files give error kinds and causes, events and actions as the files write
//! them, and a reader of whole scenarios into [`HostEvent`]s ready for
//! [`encode_events`](crate::host::encode_events).
//!
//! It exists so that the Rust programs that replay the scenarios read them one way: the
//! conformance test (`abi/tests/conformance.rs`), which writes the files and replays them
//! through the native ABI, and the lab's boundary benchmark (`lab/src/bin/boundary.rs`),
//! which replays them to time the ABI. The Go and Python bindings read the same files with
//! their own code, as any host in another language does.
//!
//! Not built for wasm32: the ABI's wasm module has no use for it.

use std::net::SocketAddr;

use serde_json::{json, Value};

use crate::codes::*;
use crate::host::{HostAction, HostEvent};

/// The version of the file format (`"format"` in every file) this module reads and writes.
pub const FORMAT: u64 = 1;

/// The error kinds by their names in `docs/abi.md` ("Codes"): `io_error` and
/// `resolve_failed` events name their kind so.
pub const ERROR_KIND_NAMES: [(u8, &str); 13] = [
    (STAGGER_ERROR_DNS, "dns"),
    (STAGGER_ERROR_REFUSED, "refused"),
    (STAGGER_ERROR_CONNECT_TIMEOUT, "connect_timeout"),
    (STAGGER_ERROR_RESPONSE_TIMEOUT, "response_timeout"),
    (STAGGER_ERROR_CLOSED, "closed"),
    (STAGGER_ERROR_PROTOCOL, "protocol"),
    (STAGGER_ERROR_FRAME_TOO_LARGE, "frame_too_large"),
    (STAGGER_ERROR_BROKER, "broker"),
    (STAGGER_ERROR_NO_BROKERS, "no_brokers"),
    (STAGGER_ERROR_TLS, "tls"),
    (STAGGER_ERROR_AUTHENTICATION, "authentication"),
    (STAGGER_ERROR_AUTHORIZATION, "authorization"),
    (STAGGER_ERROR_IO, "io"),
];

/// The causes of `REQUEST_REFRESH` by their names in `docs/abi.md` ("Codes").
pub const CAUSE_NAMES: [(u8, &str); 6] = [
    (STAGGER_CAUSE_REQUESTED, "requested"),
    (STAGGER_CAUSE_BOOTSTRAP, "bootstrap"),
    (STAGGER_CAUSE_PERIODIC, "periodic"),
    (STAGGER_CAUSE_STALE_METADATA, "stale_metadata"),
    (STAGGER_CAUSE_CONNECTION_LOST, "connection_lost"),
    (STAGGER_CAUSE_REQUEST_TIMED_OUT, "request_timed_out"),
];

/// The name of `code` in `table` ([`ERROR_KIND_NAMES`] or [`CAUSE_NAMES`]).
pub fn name_of(table: &[(u8, &'static str)], code: u8) -> Option<&'static str> {
    table.iter().find(|(c, _)| *c == code).map(|(_, name)| *name)
}

/// The code named `name` in `table` ([`ERROR_KIND_NAMES`] or [`CAUSE_NAMES`]).
pub fn code_of(table: &[(u8, &str)], name: &str) -> Result<u8, String> {
    table.iter().find(|(_, n)| *n == name).map(|(c, _)| *c).ok_or_else(|| format!("unknown name {name:?}"))
}

/// Bytes as the files write them: lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of a file's hex string.
pub fn unhex(text: &str) -> Result<Vec<u8>, String> {
    if !text.len().is_multiple_of(2) {
        return Err(format!("odd hex length {}", text.len()));
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            let pair = text.get(i..i + 2).ok_or_else(|| format!("hex at {i}: not ASCII"))?;
            u8::from_str_radix(pair, 16).map_err(|e| format!("hex at {i}: {e}"))
        })
        .collect()
}

/// An event as the files write it: `{"kind": {fields}}`.
///
/// # Panics
///
/// On [`HostEvent::Raw`] (the files have no raw records) and on an error kind or cause byte
/// that has no name.
pub fn event_json(event: &HostEvent) -> Value {
    let kind_name = |kind: u8| name_of(&ERROR_KIND_NAMES, kind).unwrap_or_else(|| panic!("no error kind {kind}"));
    match event {
        HostEvent::Connected(conn) => json!({"connected": {"conn": conn}}),
        HostEvent::Secured(conn) => json!({"secured": {"conn": conn}}),
        HostEvent::Received(conn, bytes) => json!({"received": {"conn": conn, "hex": hex(bytes)}}),
        HostEvent::Closed(conn, reset) => json!({"closed": {"conn": conn, "reset": reset}}),
        HostEvent::IoError(conn, kind, code, detail) => json!({"io_error":
            {"conn": conn, "kind": kind_name(*kind), "code": code, "detail": detail}}),
        HostEvent::Resolved(lookup, addresses) => json!({"resolved":
            {"lookup": lookup, "addresses": addresses.iter().map(|a| a.to_string()).collect::<Vec<_>>()}}),
        HostEvent::ResolveFailed(lookup, kind, code, detail) => json!({"resolve_failed":
            {"lookup": lookup, "kind": kind_name(*kind), "code": code, "detail": detail}}),
        HostEvent::Nonce(conn, nonce) => json!({"nonce": {"conn": conn, "hex": hex(nonce)}}),
        HostEvent::Token(conn, token) => json!({"token": {"conn": conn, "token": token}}),
        HostEvent::TokenFailed(conn, why) => json!({"token_failed": {"conn": conn, "why": why}}),
        HostEvent::RequestRefresh(cause, broker) => {
            let cause = name_of(&CAUSE_NAMES, *cause).unwrap_or_else(|| panic!("no cause {cause}"));
            json!({"request_refresh": {"cause": cause, "broker": broker}})
        }
        HostEvent::Raw(..) => panic!("the files have no raw records"),
    }
}

/// The one `{"kind": {fields}}` entry of an event or action object.
fn tagged(value: &Value) -> Result<(&str, &Value), String> {
    match value.as_object().and_then(|map| map.iter().next().filter(|_| map.len() == 1)) {
        Some((kind, fields)) => Ok((kind, fields)),
        None => Err(format!("not an object with one key: {value}")),
    }
}

/// A file's event as the host writes it.
pub fn event_from_json(value: &Value) -> Result<HostEvent, String> {
    let (kind, f) = tagged(value)?;
    let u64_of = |name: &str| f[name].as_u64().ok_or_else(|| format!("{kind}.{name} is not a u64: {value}"));
    let str_of = |name: &str| f[name].as_str().ok_or_else(|| format!("{kind}.{name} is not a string: {value}"));
    let code = || f["code"].as_i64().and_then(|c| i16::try_from(c).ok()).ok_or_else(|| format!("{kind}.code: {value}"));
    Ok(match kind {
        "connected" => HostEvent::Connected(u64_of("conn")?),
        "secured" => HostEvent::Secured(u64_of("conn")?),
        "received" => HostEvent::Received(u64_of("conn")?, unhex(str_of("hex")?)?),
        "closed" => HostEvent::Closed(
            u64_of("conn")?,
            f["reset"].as_bool().ok_or_else(|| format!("closed.reset is not a bool: {value}"))?,
        ),
        "io_error" => HostEvent::IoError(
            u64_of("conn")?,
            code_of(&ERROR_KIND_NAMES, str_of("kind")?)?,
            code()?,
            str_of("detail")?.to_owned(),
        ),
        "resolved" => HostEvent::Resolved(
            u64_of("lookup")?,
            f["addresses"]
                .as_array()
                .ok_or_else(|| format!("resolved.addresses is not an array: {value}"))?
                .iter()
                .map(|a| a.as_str().and_then(|a| a.parse::<SocketAddr>().ok()).ok_or(format!("address {a}")))
                .collect::<Result<_, _>>()?,
        ),
        "resolve_failed" => HostEvent::ResolveFailed(
            u64_of("lookup")?,
            code_of(&ERROR_KIND_NAMES, str_of("kind")?)?,
            code()?,
            str_of("detail")?.to_owned(),
        ),
        "nonce" => HostEvent::Nonce(
            u64_of("conn")?,
            unhex(str_of("hex")?)?.try_into().map_err(|_| format!("a nonce is 18 bytes: {value}"))?,
        ),
        "token" => HostEvent::Token(u64_of("conn")?, str_of("token")?.to_owned()),
        "token_failed" => HostEvent::TokenFailed(u64_of("conn")?, str_of("why")?.to_owned()),
        "request_refresh" => {
            HostEvent::RequestRefresh(code_of(&CAUSE_NAMES, str_of("cause")?)?, str_of("broker")?.to_owned())
        }
        other => return Err(format!("unknown event {other:?}")),
    })
}

/// An action as the files write it. A refresh error, JSON in the batch, is parsed: files
/// and hosts compare it as JSON.
///
/// # Panics
///
/// When a `REFRESH_FAILED` error is not JSON (the session writes JSON).
pub fn action_json(action: &HostAction<'_>) -> Value {
    match *action {
        HostAction::Dial { conn, address, tls } => json!({"dial": {"conn": conn, "address": address, "tls": tls}}),
        HostAction::Send { conn, bytes } => json!({"send": {"conn": conn, "hex": hex(bytes)}}),
        HostAction::Close { conn } => json!({"close": {"conn": conn}}),
        HostAction::Resolve { lookup, name } => json!({"resolve": {"lookup": lookup, "name": name}}),
        HostAction::NeedNonce { conn } => json!({"need_nonce": {"conn": conn}}),
        HostAction::NeedToken { conn } => json!({"need_token": {"conn": conn}}),
        HostAction::Refreshed { epoch, broker, address } => {
            json!({"refreshed": {"epoch": epoch, "broker": broker, "address": address}})
        }
        HostAction::RefreshFailed { epoch, error } => json!({"refresh_failed": {"epoch": epoch,
            "error": serde_json::from_str::<Value>(error).expect("the refresh error is JSON")}}),
        HostAction::Rebootstrapped => json!({"rebootstrapped": {}}),
        HostAction::RefreshRequested { epoch } => json!({"refresh_requested": {"epoch": epoch}}),
    }
}

/// One step of a scenario: one `stagger_step` call and what it must answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The host's clock for the call, in ns.
    pub now_ns: u64,
    /// The events, encoded as one batch.
    pub events: Vec<HostEvent>,
    /// The actions the call must answer, in order, in the files' form ([`action_json`]).
    pub actions: Vec<Value>,
    /// The wake-up it must answer (`None`: `STAGGER_NO_WAKEUP`).
    pub next_wakeup_ns: Option<u64>,
}

/// A scenario file, read: `stagger_session_new`'s arguments and the steps, with their
/// events as a host writes them.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// The config, exactly as the file holds it (serialise it as is).
    pub config: Value,
    /// The host's clock when the session is made, in ns.
    pub now_ns: u64,
    /// The session's seed.
    pub seed: u64,
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// What `stagger_report` must answer after the last step, as a subset (`end.report`).
    pub end_report: Option<Value>,
    /// What `stagger_metadata` must answer after the last step, as a subset
    /// (`end.metadata`).
    pub end_metadata: Option<Value>,
}

impl Scenario {
    /// Reads a scenario file's JSON; the error names the step and event it stopped at.
    pub fn from_json(doc: &Value) -> Result<Self, String> {
        if doc["format"] != FORMAT {
            return Err(format!("format {}, this reader reads {FORMAT}", doc["format"]));
        }
        let steps = doc["steps"].as_array().ok_or("steps is not an array")?;
        let steps = steps
            .iter()
            .enumerate()
            .map(|(i, step)| {
                let now_ns = step["now_ns"].as_u64().ok_or_else(|| format!("step {i}: now_ns is not a u64"))?;
                let at = format!("step {i} (now_ns {now_ns})");
                let events = step["events"].as_array().ok_or_else(|| format!("{at}: events is not an array"))?;
                let events = events
                    .iter()
                    .enumerate()
                    .map(|(j, e)| event_from_json(e).map_err(|m| format!("{at}, event {j}: {m}")))
                    .collect::<Result<_, _>>()?;
                let expect = &step["expect"];
                let actions = expect["actions"].as_array().ok_or_else(|| format!("{at}: expect.actions"))?.clone();
                let next_wakeup_ns = match &expect["next_wakeup_ns"] {
                    Value::Null => None,
                    n => Some(n.as_u64().ok_or_else(|| format!("{at}: expect.next_wakeup_ns is not a u64"))?),
                };
                Ok(Step { now_ns, events, actions, next_wakeup_ns })
            })
            .collect::<Result<_, String>>()?;
        Ok(Scenario {
            config: doc["config"].clone(),
            now_ns: doc["now_ns"].as_u64().ok_or("now_ns is not a u64")?,
            seed: doc["seed"].as_u64().ok_or("seed is not a u64")?,
            steps,
            end_report: doc["end"].get("report").cloned(),
            end_metadata: doc["end"].get("metadata").cloned(),
        })
    }

    /// How many refreshes end in it (`REFRESHED` and `REFRESH_FAILED` actions).
    pub fn refreshes(&self) -> usize {
        let ends = |a: &&Value| a.get("refreshed").is_some() || a.get("refresh_failed").is_some();
        self.steps.iter().map(|s| s.actions.iter().filter(ends).count()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{CAUSES, ERROR_KINDS};

    #[test]
    fn the_names_are_the_cores_own() {
        for (code, kind) in ERROR_KINDS {
            assert_eq!(name_of(&ERROR_KIND_NAMES, code), Some(kind.name()), "{kind:?}");
        }
        // A broker's error is `broker_error` in the core's JSON; the ABI names the byte `broker`.
        assert_eq!(name_of(&ERROR_KIND_NAMES, STAGGER_ERROR_BROKER), Some("broker"));
        assert_eq!(ERROR_KIND_NAMES.len(), ERROR_KINDS.len() + 1);
        for (code, cause) in CAUSES {
            assert_eq!(name_of(&CAUSE_NAMES, code), Some(cause.name()), "{cause:?}");
            assert_eq!(code_of(&CAUSE_NAMES, cause.name()), Ok(code));
        }
        assert_eq!(CAUSE_NAMES.len(), CAUSES.len());
        assert!(code_of(&CAUSE_NAMES, "whim").is_err());
    }

    #[test]
    fn every_event_kind_reads_back_as_written() {
        let events = [
            HostEvent::Connected(1),
            HostEvent::Secured(2),
            HostEvent::Received(3, vec![0, 1, 0xfe]),
            HostEvent::Closed(4, true),
            HostEvent::IoError(5, STAGGER_ERROR_BROKER, -1, "é".into()),
            HostEvent::Resolved(6, vec!["10.0.0.1:9092".parse().unwrap(), "[fd00::1]:9093".parse().unwrap()]),
            HostEvent::ResolveFailed(7, STAGGER_ERROR_DNS, 0, "no such host".into()),
            HostEvent::Nonce(8, [9; 18]),
            HostEvent::Token(9, "t".into()),
            HostEvent::TokenFailed(10, "why".into()),
            HostEvent::RequestRefresh(STAGGER_CAUSE_REQUEST_TIMED_OUT, "b1:9092".into()),
        ];
        for event in events {
            let json = event_json(&event);
            assert_eq!(event_from_json(&json), Ok(event), "{json}");
        }
        assert!(event_from_json(&json!({"nonce": {"conn": 1, "hex": "00"}})).is_err());
        assert!(event_from_json(&json!({"received": {"conn": 1, "hex": "0é"}})).is_err());
        assert!(event_from_json(&json!({"teleported": {}})).is_err());
        assert!(event_from_json(&json!({"connected": {"conn": 1}, "secured": {"conn": 1}})).is_err());
    }

    #[test]
    fn a_scenario_reads_with_its_events_and_counts_its_refreshes() {
        let doc = json!({
            "format": 1, "name": "n", "description": "d", "config": {"seeds": ["b1:9092"]},
            "now_ns": 5, "seed": 7,
            "steps": [
                {"now_ns": 5, "events": [{"request_refresh": {"cause": "bootstrap", "broker": ""}}],
                 "expect": {"actions": [{"refresh_requested": {"epoch": 1}}], "next_wakeup_ns": 9}},
                {"now_ns": 9, "events": [],
                 "expect": {"actions": [{"refreshed": {"epoch": 1}}, {"refresh_failed": {"epoch": 2}}],
                            "next_wakeup_ns": null}}
            ],
            "end": {"report": {"stats": {}}}
        });
        let s = Scenario::from_json(&doc).unwrap();
        assert_eq!((s.now_ns, s.seed, s.config.to_string()), (5, 7, r#"{"seeds":["b1:9092"]}"#.to_owned()));
        assert_eq!(s.steps[0].events, [HostEvent::RequestRefresh(STAGGER_CAUSE_BOOTSTRAP, String::new())]);
        assert_eq!((s.steps[0].next_wakeup_ns, s.steps[1].next_wakeup_ns), (Some(9), None));
        assert_eq!(s.refreshes(), 2);
        assert_eq!((s.end_report, s.end_metadata), (Some(json!({"stats": {}})), None));

        let mut bad = doc.clone();
        bad["steps"][1]["events"] = json!([{"closed": {"conn": 1}}]);
        let error = Scenario::from_json(&bad).unwrap_err();
        assert!(error.starts_with("step 1 (now_ns 9), event 0: closed.reset"), "{error}");
        bad["format"] = json!(2);
        assert_eq!(Scenario::from_json(&bad).unwrap_err(), "format 2, this reader reads 1");
    }
}
