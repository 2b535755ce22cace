//! The JS API compiled to wasm32 and driven from Rust in Node by wasm-bindgen-test: option
//! checking, config helpers, and the host's whole loop (the session's actions and live
//! events, timers, backoff, give-up with reports and a trace, abort — even from inside
//! `onEvent`) without a network.
//!
//! Node 20 has no global `WebSocket`, so every attempt fails as it starts (an `io` error);
//! on a Node that has one, `ws://127.0.0.1:9` is refused instead. Either way every broker
//! fails, which is what these tests need. Real sockets are tested in Chromium
//! (`browser.test.mjs`).
#![cfg(target_arch = "wasm32")]

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Array, Function, Object, Reflect, JSON};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::wasm_bindgen_test;
use web_sys::AbortController;

fn get(value: &JsValue, path: &str) -> JsValue {
    path.split('.')
        .fold(value.clone(), |v, key| Reflect::get(&v, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED))
}

fn set(target: &JsValue, key: &str, value: &JsValue) {
    Reflect::set(target, &JsValue::from_str(key), value).unwrap();
}

fn json(text: &str) -> JsValue {
    JSON::parse(text).unwrap()
}

fn stringify(value: &JsValue) -> String {
    JSON::stringify(value).unwrap().into()
}

/// The core's serde form of `value` as JavaScript reads it: what serde_json writes, parsed
/// and written again by `JSON`, so that numbers compare as JS numbers (`2.0` is `2`).
fn serde_form<T: serde::Serialize + ?Sized>(value: &T) -> String {
    stringify(&json(&serde_json::to_string(value).unwrap()))
}

/// Options for two unreachable bridges, asked in the order listed, one retry after a short
/// backoff.
fn failing_options() -> JsValue {
    let config = stagger_web::default_config();
    let config: JsValue = config.into();
    set(&config, "shuffle_seeds", &JsValue::FALSE);
    set(&get(&config, "retry"), "retries", &JsValue::from(1));
    set(&get(&config, "retry"), "initial", &json(r#"{"secs":0,"nanos":20000000}"#));
    let options: JsValue = Object::new().into();
    set(&options, "bootstrap", &json(r#"["ws://127.0.0.1:9", "ws://127.0.0.2:9"]"#));
    set(&options, "config", &config);
    options
}

/// Collects every event into a JS array.
fn recorder(events: &Array) -> Function {
    let events = events.clone();
    Closure::<dyn FnMut(JsValue)>::new(move |event: JsValue| {
        events.push(&event);
    })
    .into_js_value()
    .unchecked_into()
}

async fn settle(options: JsValue) -> Result<JsValue, JsValue> {
    JsFuture::from(js_sys::Promise::from(JsValue::from(stagger_web::refresh(options.unchecked_into())))).await
}

/// `started`, `failed`, … or `timer:backoff`: the core's event name, and its timer's.
fn kind_of(event: &JsValue) -> String {
    let name = get(event, "event").as_string().unwrap();
    match get(event, "timer").as_string() {
        Some(timer) => format!("{name}:{timer}"),
        None => name,
    }
}

#[wasm_bindgen_test]
fn config_helpers_round_trip_and_name_bad_fields() {
    let presets: JsValue = stagger_web::presets().into();
    let presets: Vec<String> = Array::from(&presets).iter().map(|v| v.as_string().unwrap()).collect();
    assert_eq!(presets, ["adaptive", "sequential", "all-at-once", "staggered"]);
    let default: JsValue = stagger_web::default_config().into();
    assert!(get(&default, "fanout.stagger.adaptive").is_object());
    assert_eq!(get(&default, "attempt_timeout.secs").as_f64(), Some(10.0));
    // Object, JSON text and preset names all validate to complete configs.
    let again: JsValue = stagger_web::validate_config(default.clone().unchecked_into()).unwrap().into();
    assert_eq!(JSON::stringify(&again).unwrap(), JSON::stringify(&default).unwrap());
    let text = JSON::stringify(&default).unwrap();
    let from_text: JsValue = stagger_web::validate_config(JsValue::from(text.clone()).unchecked_into()).unwrap().into();
    assert_eq!(JSON::stringify(&from_text).unwrap(), text);
    let staggered: JsValue =
        stagger_web::validate_config(JsValue::from_str("staggered").unchecked_into()).unwrap().into();
    assert_eq!(get(&staggered, "fanout.stagger.fixed.nanos").as_f64(), Some(5e8));
    // Bad values name the field, as the core does.
    set(&get(&default, "fanout"), "max_in_flight", &JsValue::from(0));
    let error = stagger_web::validate_config(default.unchecked_into()).err().unwrap();
    assert_eq!(get(&error, "name").as_string().unwrap(), "ConfigError");
    assert_eq!(get(&error, "field").as_string().unwrap(), "fanout.max_in_flight");
    for bad in [r#""fastest""#, r#""{not json""#, r#"{"fanout":1}"#, "42"] {
        let error = stagger_web::validate_config(json(bad).unchecked_into()).err().unwrap();
        assert_eq!(get(&error, "field").as_string().unwrap(), "config", "{bad}");
    }
}

#[wasm_bindgen_test]
fn js_values_are_the_cores_serde_form() {
    assert_eq!(stringify(&stagger_web::default_config().into()), serde_form(&stagger::RefreshConfig::default()));
    assert_eq!(stringify(&stagger_web::knobs().into()), serde_form(stagger::knobs()));
    for name in stagger::RefreshConfig::PRESETS {
        let config = stagger_web::validate_config(JsValue::from_str(name).unchecked_into()).unwrap();
        assert_eq!(stringify(&config.into()), serde_form(&stagger::RefreshConfig::preset(name).unwrap()), "{name}");
    }
}

#[wasm_bindgen_test]
fn config_objects_are_read_as_serde_reads_them() {
    let read = |text: &str| -> Result<String, String> {
        stagger_web::validate_config(json(text).unchecked_into())
            .map(|config| stringify(&config.into()))
            .map_err(|error| get(&error, "problem").as_string().unwrap())
    };
    // What serde_json makes of the same JSON is what the adapter makes of the object:
    // missing fields take their defaults, unknown ones are ignored (the fan-out's switches
    // are read under `tuning` only), both enum forms are read.
    for text in [
        r#"{}"#,
        r#"{"retry":{"retries":0,"multiplier":1.5},"seed":9007199254740991,"unknown":[1,{"a":null}]}"#,
        r#"{"fanout":{"stagger":{"fixed":{"secs":0,"nanos":250000000}},"growth":{"exponential":1.5}}}"#,
        r#"{"fanout":{"stagger":{"adaptive":{"cold":{"secs":1,"nanos":0}}},"growth":{"linear":3},"jitter":0}}"#,
        r#"{"fanout":{"next_on_failure":false,"spread_ticks":null,"tuning":{"cancel_outrun":false}}}"#,
        r#"{"fanout":{"tuning":{"next_on_failure":false,"spread_ticks":false}}}"#,
    ] {
        let expected: stagger::RefreshConfig = serde_json::from_str(text).unwrap();
        assert_eq!(read(text).unwrap(), serde_form(&expected), "{text}");
    }
    // Values of the wrong type fail with serde's words, naming what was expected.
    for (text, problem) in [
        (r#"{"retry":{"retries":1.5}}"#, "invalid type: floating point `1.5`, expected u32"),
        (r#"{"retry":{"retries":-1}}"#, "invalid type: integer `-1`, expected u32"),
        (r#"{"seed":9007199254740992}"#, "invalid type: floating point `9007199254740992.0`, expected u64"),
        (r#"{"shuffle_seeds":"yes"}"#, r#"invalid type: string "yes", expected a boolean"#),
        (r#"{"fanout":{"jitter":"0.1"}}"#, r#"invalid type: string "0.1", expected f64"#),
        (r#"{"attempt_timeout":[]}"#, "invalid type: sequence, expected struct Duration"),
        (r#"{"fanout":{"growth":{"linear":1,"exponential":2}}}"#, "invalid length 2, expected 1 variant"),
        (r#"{"fanout":{"growth":{"quadratic":2}}}"#, "unknown variant `quadratic`, expected `linear` or `exponential`"),
        (r#"{"fanout":{"growth":"linear"}}"#, "invalid type: unit value, expected u32"),
    ] {
        let message = read(text).unwrap_err();
        assert_eq!(message, format!("is not a RefreshConfig (start from defaultConfig()): {problem}"), "{text}");
    }
}

#[wasm_bindgen_test]
async fn bad_options_reject_with_a_config_error() {
    for (options, field) in [
        ("null", "options"),
        (r#"{}"#, "bootstrap"),
        (r#"{"bootstrap":"ws://h:1"}"#, "bootstrap"),
        (r#"{"bootstrap":["tcp://h:1"]}"#, "bootstrap"),
        (r#"{"bootstrap":["ws://h:1"],"topics":[1]}"#, "topics"),
        (r#"{"bootstrap":["ws://h:1"],"clientId":7}"#, "clientId"),
        (r#"{"bootstrap":["ws://h:1"],"onEvent":"log"}"#, "onEvent"),
        (r#"{"bootstrap":["ws://h:1"],"signal":{}}"#, "signal"),
    ] {
        let error = settle(json(options)).await.expect_err(options);
        assert_eq!(get(&error, "name").as_string().unwrap(), "ConfigError", "{options}");
        assert_eq!(get(&error, "field").as_string().unwrap(), field, "{options}");
        assert!(error.is_instance_of::<js_sys::Error>());
    }
}

#[wasm_bindgen_test]
async fn every_broker_failing_gives_up_with_each_brokers_error_after_backoff() {
    let options = failing_options();
    let events = Array::new();
    set(&options, "onEvent", &recorder(&events));
    let error = settle(options).await.expect_err("nothing is reachable");
    assert!(error.is_instance_of::<js_sys::Error>());
    assert_eq!(get(&error, "name").as_string().unwrap(), "RefreshError");
    let message = get(&error, "message").as_string().unwrap();
    assert!(message.starts_with("metadata refresh failed: every broker failed in 2 passes"), "{message}");
    assert!(get(&error, "refreshError.reason.all_failed").is_object());
    let brokers = Array::from(&get(&error, "refreshError.brokers"));
    assert_eq!(brokers.length(), 2);
    for broker in brokers.iter() {
        assert_eq!(get(&broker, "attempts").as_f64(), Some(2.0));
        let kind = get(&broker, "last_error.kind.kind").as_string().unwrap();
        assert!(kind == "io" || kind == "refused", "{kind}");
    }
    let summary = Array::from(&get(&error, "brokers"));
    let urls: Vec<String> = summary.iter().map(|b| get(&b, "url").as_string().unwrap()).collect();
    assert_eq!(urls, ["ws://127.0.0.1:9", "ws://127.0.0.2:9"]);

    // Every attempt's report and the trace come with the error.
    let attempts = Array::from(&get(&error, "refresh.attempts"));
    assert_eq!(attempts.length(), 4);
    for attempt in attempts.iter() {
        assert_eq!(get(&attempt, "outcome").as_string().unwrap(), "failed");
    }
    assert!(get(&error, "refresh.winner").is_null());
    assert!(get(&error, "trace.events").is_object(), "the refresh's trace");
    assert_eq!(get(&error, "trace.recorder").as_string().unwrap(), stagger_web::options::RECORDER);
    // The trace and the error are the core's serde form: read back by serde_json and written
    // again, they are the same.
    let trace: stagger::Trace = serde_json::from_str(&stringify(&get(&error, "trace"))).unwrap();
    assert_eq!(stringify(&get(&error, "trace")), serde_form(&trace));
    let refresh_error: stagger::RefreshError = serde_json::from_str(&stringify(&get(&error, "refreshError"))).unwrap();
    assert_eq!(stringify(&get(&error, "refreshError")), serde_form(&refresh_error));

    // The core's live events: each attempt started and failed, a real setTimeout ended the
    // backoff, and the give-up came last, with its reason.
    let kinds: Vec<String> = events.iter().map(|e| kind_of(&e)).collect();
    assert_eq!(kinds.first().map(String::as_str), Some("started"), "{kinds:?}");
    assert_eq!(kinds[kinds.len() - 2..], ["failed", "gave_up"], "{kinds:?}");
    assert_eq!(get(&events.get(events.length() - 1), "reason.all_failed.passes").as_f64(), Some(2.0));
    assert_eq!(kinds.iter().filter(|k| *k == "started").count(), 4, "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| *k == "failed").count(), 4, "{kinds:?}");
    assert!(kinds.iter().any(|k| k == "timer:backoff"), "a real setTimeout ended the backoff: {kinds:?}");
    let times: Vec<f64> = events.iter().map(|e| get(&e, "elapsed_ms").as_f64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    let started = events.iter().find(|e| kind_of(e) == "started").unwrap();
    assert_eq!(get(&started, "broker").as_string().unwrap(), "127.0.0.1:9");
    assert_eq!(get(&started, "attempt.number").as_f64(), Some(0.0));
}

#[wasm_bindgen_test]
async fn an_aborted_signal_rejects_at_once_with_its_reason() {
    let controller = AbortController::new().unwrap();
    controller.abort();
    let options = failing_options();
    set(&options, "signal", &controller.signal());
    let called = Rc::new(RefCell::new(0));
    let seen = called.clone();
    let on_event: Function =
        Closure::<dyn FnMut(JsValue)>::new(move |_| *seen.borrow_mut() += 1).into_js_value().unchecked_into();
    set(&options, "onEvent", &on_event);
    let error = settle(options).await.expect_err("aborted");
    assert_eq!(get(&error, "name").as_string().unwrap(), "AbortError");
    assert_eq!(*called.borrow(), 0, "nothing started");
}

#[wasm_bindgen_test]
async fn abort_from_inside_on_event_ends_the_refresh() {
    let controller = AbortController::new().unwrap();
    let options = failing_options();
    set(&options, "signal", &controller.signal());
    let events = Array::new();
    // A plain JS listener (a Rust closure cannot be re-entered, and abort() re-enters it).
    let make = Function::new_with_args(
        "events, controller",
        "return (e) => { events.push(e); if (e.event === 'started') controller.abort(); };",
    );
    let on_event = make.call2(&JsValue::UNDEFINED, &events, &controller).unwrap();
    set(&options, "onEvent", &on_event);
    let error = settle(options).await.expect_err("aborted");
    assert_eq!(get(&error, "name").as_string().unwrap(), "AbortError");
    let kinds: Vec<String> = events.iter().map(|e| kind_of(&e)).collect();
    // Aborted from inside the first event's listener: nothing follows it.
    assert_eq!(kinds, ["started"], "{kinds:?}");
}
