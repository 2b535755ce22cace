//! What a host gets wrong comes back as a status and a clear JSON error, never a crash:
//! malformed batches (refused whole, nothing applied), unknown handles, bad configs (the
//! field named, no secret quoted), null pointers.

mod common;

use common::*;
use proptest::prelude::*;
use stagger_abi::host::{encode_events, HostEvent};
use stagger_abi::*;

fn session() -> Abi {
    Abi::new(r#"{"seeds": ["b1:9092", "b2:9093"], "one_shot": true}"#, 0, 1).unwrap()
}

fn malformed(abi: &Abi, batch: &[u8]) -> String {
    let failure = abi.step_raw(MS, batch).err().unwrap_or_else(|| panic!("{batch:?} was taken"));
    assert_eq!(failure.status, STAGGER_ERR_MALFORMED, "{failure:?}");
    assert_eq!(failure.json["error"], "malformed_batch");
    assert_eq!(last_error().status, STAGGER_ERR_MALFORMED, "the thread's last error is the same");
    failure.json["message"].as_str().unwrap().to_owned()
}

#[test]
fn malformed_batches_are_refused_whole_with_where_and_why() {
    let abi = session();
    let request = encode_events(&[HostEvent::RequestRefresh(STAGGER_CAUSE_REQUESTED, String::new())]);
    let with = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = request.clone();
        f(&mut b);
        b
    };
    let table: Vec<(Vec<u8>, &str)> = vec![
        (vec![1, 0, 0], "event batch header: the flags needs 2 bytes, 1 left"),
        (with(&|b| b[0] = 9), "event batch header: version 9, but this module speaks version 1"),
        (with(&|b| b[2] = 1), "event batch header: flags 0x0001, but no flag is defined: they must be 0"),
        (with(&|b| b[4] = 2), "event 1 at byte 14: the record kind needs 1 bytes, 0 left"),
        (with(&|b| b[4] = 0), "event batch: 6 bytes after the 0 records its header counts"),
        (with(&|b| b[8] = 99), "event 0 (unknown) at byte 8: unknown event kind 99 (1 to 11)"),
        (with(&|b| b[9] = 7), "event 0 (REQUEST_REFRESH) at byte 8: the body needs 7 bytes, 1 left"),
        (with(&|b| b[13] = 6), "event 0 (REQUEST_REFRESH) at byte 8: cause 6: 0 to 5"),
        (with(&|b| b.push(0)), "event batch: 1 bytes after the 1 records its header counts"),
        (encode_events(&[HostEvent::Raw(STAGGER_EVENT_CONNECTED, vec![1; 9])]), "1 bytes after the body's last field"),
        (encode_events(&[HostEvent::Raw(STAGGER_EVENT_CLOSED, vec![0; 8])]), "how needs 1 bytes, 0 left"),
        (encode_events(&[HostEvent::Raw(STAGGER_EVENT_CLOSED, [vec![0; 8], vec![2]].concat())]), "how 2"),
        (encode_events(&[HostEvent::IoError(1, 0, 0, String::new())]), "error kind 0: 1 to 13"),
        (encode_events(&[HostEvent::Raw(STAGGER_EVENT_NONCE, vec![0; 20])]), "the nonce (18 bytes) needs 18 bytes, 12"),
        (encode_events(&[HostEvent::Raw(STAGGER_EVENT_TOKEN, [vec![0; 8], vec![0xff]].concat())]), "not UTF-8"),
        (encode_events(&[HostEvent::Raw(STAGGER_EVENT_RESOLVED, [vec![0; 8], vec![5]].concat())]), "family 5"),
        (encode_events(&[HostEvent::Raw(STAGGER_EVENT_RESOLVED, [vec![0; 8], vec![4, 1, 2]].concat())]), "IPv4"),
    ];
    for (batch, expected) in table {
        let message = malformed(&abi, &batch);
        assert!(message.contains(expected), "{message:?} should say {expected:?}");
    }
    // A valid request followed by garbage: refused whole, so no refresh started.
    let mut half = encode_events(&[
        HostEvent::RequestRefresh(STAGGER_CAUSE_REQUESTED, String::new()),
        HostEvent::Raw(42, Vec::new()),
    ]);
    malformed(&abi, &half);
    assert_eq!(abi.report()["running"], serde_json::Value::Null, "nothing of a refused batch is applied");
    half.truncate(request.len());
    half[4] = 1;
    assert_eq!(abi.step_raw(MS, &half).expect("the valid half alone is taken").actions().actions.len(), 2);
}

#[test]
fn an_unknown_or_freed_handle_is_an_error_on_every_call() {
    let abi = session();
    let freed = Abi::new(r#"{"seeds": ["b1:9092"]}"#, 0, 1).unwrap();
    let stale = freed.handle;
    drop(freed);
    for handle in [0, stale, u64::MAX] {
        let events = encode_events(&[]);
        // SAFETY (here and below): valid slices and places.
        let step = call(|out| unsafe { stagger_step(handle, 0, events.as_ptr(), events.len(), out) });
        let metadata = call(|out| unsafe { stagger_metadata(handle, out) });
        let report = call(|out| unsafe { stagger_report(handle, out) });
        for failure in [step, metadata, report].map(Result::unwrap_err) {
            assert_eq!(failure.status, STAGGER_ERR_UNKNOWN_HANDLE);
            assert_eq!(failure.json["error"], "unknown_handle");
            assert!(failure.json["message"].as_str().unwrap().contains(&format!("no session has handle {handle}")));
        }
        assert_eq!(stagger_session_free(handle), STAGGER_ERR_UNKNOWN_HANDLE);
    }
    let fresh = Abi::new(r#"{"seeds": ["b1:9092"]}"#, 0, 1).unwrap();
    assert!(fresh.handle > stale, "handles count up and are never reused");
    assert!(abi.step_raw(0, &[]).is_ok(), "other sessions are untouched");
}

#[test]
fn null_pointers_are_argument_errors() {
    let abi = session();
    // SAFETY: null with a length is exactly what is under test; `out` is valid.
    let failure = call(|out| unsafe { stagger_step(abi.handle, 0, std::ptr::null(), 8, out) }).unwrap_err();
    assert_eq!((failure.status, failure.json["error"].as_str()), (STAGGER_ERR_ARGUMENT, Some("argument")));
    // SAFETY: a null `out` is refused before anything is written.
    assert_eq!(unsafe { stagger_step(abi.handle, 0, std::ptr::null(), 0, std::ptr::null_mut()) }, STAGGER_ERR_ARGUMENT);
    // SAFETY: null with a length.
    assert_eq!(unsafe { stagger_session_new(std::ptr::null(), 3, 0, 0) }, 0);
    assert_eq!(last_error().status, STAGGER_ERR_ARGUMENT);
}

#[test]
fn alloc_and_free_give_the_host_memory_for_its_inputs() {
    for len in [0, 1, 4096] {
        let ptr = stagger_alloc(len);
        assert!(!ptr.is_null());
        // SAFETY: `len` bytes were allocated.
        unsafe { std::ptr::write_bytes(ptr, 0xAB, len) };
        // SAFETY: allocated above with this length.
        unsafe { stagger_free(ptr, len) };
    }
    assert!(stagger_alloc(usize::MAX).is_null(), "too much is null, not a crash");
    // SAFETY: null is ignored.
    unsafe { stagger_free(std::ptr::null_mut(), 5) };
}

#[test]
fn a_bad_config_is_refused_naming_the_field() {
    let table = [
        ("", "", "the config is not valid JSON: EOF while parsing a value at line 1 column 0"),
        ("[1]", "", "the config must be a JSON object, not an array"),
        (r#"{"seeds": ["b1:9092"], "brokers": []}"#, "brokers", "is not a config field (the fields: seeds,"),
        (r#"{}"#, "seeds", "must list at least one broker as host:port"),
        (r#"{"seeds": "b1:9092"}"#, "seeds", "must be an array of strings, not a string"),
        (r#"{"seeds": ["b1:9092", 7]}"#, "seeds[1]", "must be a string, not a number"),
        (r#"{"seeds": ["b1"]}"#, "seeds", "host:port"),
        (r#"{"seeds": ["kafka 1:9092"]}"#, "seeds", "has an invalid host"),
        (r#"{"seeds": ["b1:9092"], "settings": {"fanout.jitter": "2"}}"#, "settings.fanout.jitter", "[0, 1]"),
        (r#"{"seeds": ["b1:9092"], "settings": {"fanout.jiter": "0.1"}}"#, "settings.fanout.jiter", "is not a knob"),
        (r#"{"seeds": ["b1:9092"], "settings": {"deadline": "soon"}}"#, "settings.deadline", "soon"),
        (r#"{"seeds": ["b1:9092"], "settings": {"seed": "1"}}"#, "settings.seed", "`seed` argument"),
        (r#"{"seeds": ["b1:9092"], "settings": {"deadline": []}}"#, "settings.deadline", "not an array"),
        (r#"{"seeds": ["b1:9092"], "preset": "fastest"}"#, "preset", "unknown preset \"fastest\" (one of adaptive,"),
        (r#"{"seeds": ["b1:9092"], "max_frame_size": 10}"#, "max_frame_size", "must be at least 1024 bytes"),
        (r#"{"seeds": ["b1:9092"], "max_frame_size": -1}"#, "max_frame_size", "whole number of bytes"),
        (r#"{"seeds": ["b1:9092"], "topics": ["a b"]}"#, "topics", "is not a valid Kafka topic name"),
        (r#"{"seeds": ["b1:9092"], "tls": "yes"}"#, "tls", "must be true or false, not a string"),
        (r#"{"seeds": ["b1:9092"], "sasl": {"mechanism": "GSSAPI"}}"#, "sasl.mechanism", "unknown mechanism"),
        (r#"{"seeds": ["b1:9092"], "sasl": {"mechanism": "PLAIN", "username": "a"}}"#, "sasl.password", "missing"),
        (r#"{"seeds": ["b1:9092"], "sasl": {"mechanism": "PLAIN", "password": "x"}}"#, "sasl.username", "missing"),
        (r#"{"seeds": ["b1:9092"], "sasl": {"mechanism": "OAUTHBEARER"}}"#, "sasl.token", "NEED_TOKEN"),
        (r#"{"seeds": ["b1:9092"], "sasl": {"mechanism": "PLAIN", "pasword": "x"}}"#, "sasl.pasword", "SASL field"),
        (r#"{"seeds": ["b1:9092"], "fresh_tokens": true}"#, "fresh_tokens", "OAUTHBEARER only"),
    ];
    for (config, field, expected) in table {
        let failure = Abi::new(config, 0, 0).err().unwrap_or_else(|| panic!("{config} was taken"));
        assert_eq!(failure.status, STAGGER_ERR_CONFIG, "{config}");
        assert_eq!(failure.json["error"], "config");
        assert_eq!(failure.json["field"], field, "{config}: {}", failure.json);
        let message = failure.json["message"].as_str().unwrap();
        assert!(message.contains(expected), "{config}: {message:?} should say {expected:?}");
    }
}

#[test]
fn no_config_error_quotes_a_secret() {
    for config in [
        r#"{"seeds": ["b1:9092"], "sasl": {"mechanism": "SCRAM-SHA-256", "username": "alice", "password": 8675309}}"#,
        r#"{"seeds": ["b1:9092"], "sasl": {"mechanism": "PLAIN", "username": "alice", "password": "8675309", "token": "8675309"}}"#,
        r#"{"seeds": ["b1:9092"], "sasl": {"mechanism": "OAUTHBEARER", "token": "8675309"}, "max_frame_size": "8675309"}"#,
        r#"{"seeds": ["b1:9092"], "sasl": {"mechanism": "OAUTHBEARER", "token": "8675309", "#,
    ] {
        let failure = Abi::new(config, 0, 0).err().expect("refused");
        assert!(!failure.json.to_string().contains("8675309"), "{config}: {}", failure.json);
    }
}

#[test]
fn a_good_config_takes_every_field() {
    let config = r#"{
        "seeds": ["b1:9092", "[::1]:9093"], "resolve_names": false, "preset": "staggered",
        "settings": {"fanout.max_in_flight": 2, "fanout.tuning.spread_ticks": false, "hedge_budget.burst": "4"},
        "client_id": "lister", "topics": ["orders"], "max_frame_size": 1048576, "tls": true,
        "sasl": {"mechanism": "scram-sha-512", "username": "alice", "password": "x"}, "fresh_tokens": false,
        "one_shot": false
    }"#;
    let abi = Abi::new(config, 0, 9).unwrap();
    let first = owned(&abi.step(0, &[HostEvent::RequestRefresh(STAGGER_CAUSE_BOOTSTRAP, String::new())]).actions());
    assert!(matches!(&first[1], Act::Dial(_, _, Some(name)) if name == "b1" || name == "::1"), "TLS: {first:?}");
    assert!(matches!(first[2], Act::NeedNonce(_)), "SCRAM: {first:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Arbitrary bytes: refused or taken, never a panic, and the session still steps.
    #[test]
    fn arbitrary_bytes_are_refused_or_taken_never_a_crash(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let abi = session();
        abi.step(0, &[HostEvent::RequestRefresh(STAGGER_CAUSE_REQUESTED, String::new())]);
        match abi.step_raw(MS, &bytes) {
            Ok(_) => {}
            Err(failure) => prop_assert_eq!(failure.status, STAGGER_ERR_MALFORMED),
        }
        prop_assert!(abi.step_raw(2 * MS, &[]).is_ok());
    }

    /// Well-framed records of any kind with arbitrary bodies, about the session's own
    /// connections: deeper into the decoder and the session, still never a panic.
    #[test]
    fn arbitrary_records_are_refused_or_taken_never_a_crash(
        records in proptest::collection::vec((0u8..14, proptest::collection::vec(any::<u8>(), 0..64)), 0..12),
        conn_first in any::<bool>(),
    ) {
        let abi = session();
        abi.step(0, &[HostEvent::RequestRefresh(STAGGER_CAUSE_REQUESTED, String::new())]);
        let events: Vec<HostEvent> = records
            .into_iter()
            .map(|(kind, mut body)| {
                // Name conn 1 (the session's first dial) often, so bodies reach its exchange.
                if conn_first && body.len() >= 8 {
                    body[..8].copy_from_slice(&1u64.to_le_bytes());
                }
                HostEvent::Raw(kind, body)
            })
            .collect();
        match abi.step_raw(MS, &encode_events(&events)) {
            Ok(step) => prop_assert!(stagger_abi::host::decode_actions(&step.bytes).is_ok()),
            Err(failure) => prop_assert_eq!(failure.status, STAGGER_ERR_MALFORMED),
        }
        prop_assert!(abi.step_raw(2 * MS, &[]).is_ok());
        let _ = abi.report();
    }
}
