//! The schema cannot drift from the structs: every knob is set through `set` and read back
//! through serde at its own path, and every leaf of the serde JSON has a knob.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::time::Duration;
use serde_json::{json, Value};

use super::*;
use crate::config::knobs;

/// A value for `knob` that differs from its default, as text and as the JSON serde writes.
fn samples(knob: &Knob) -> Vec<(&'static str, Value)> {
    let duration = |d: Duration| serde_json::to_value(d).unwrap();
    match knob.kind {
        KnobKind::Duration => {
            alloc::vec![("1.5s", duration(Duration::from_millis(1500))), ("7ms", duration(Duration::from_millis(7)))]
        }
        KnobKind::U32 => alloc::vec![("7", json!(7)), ("max", json!(u32::MAX))],
        KnobKind::U64 => alloc::vec![("12345678901", json!(12_345_678_901u64))],
        KnobKind::F64 => alloc::vec![("0.375", json!(0.375))],
        KnobKind::Bool => alloc::vec![("false", json!(false)), ("true", json!(true))],
        KnobKind::Choice { .. } if knob.path == "fanout.stagger" => alloc::vec![
            ("fixed:100ms", json!({ "fixed": duration(Duration::from_millis(100)) })),
            ("adaptive", json!({ "adaptive": serde_json::to_value(Adaptive::default()).unwrap() })),
        ],
        KnobKind::Choice { .. } if knob.path == "fanout.growth" => {
            alloc::vec![("linear:3", json!({ "linear": 3 })), ("exponential:1.5", json!({ "exponential": 1.5 }))]
        }
        KnobKind::Choice { .. } => panic!("{}: a new choice knob needs samples here", knob.path),
    }
}

fn at<'v>(json: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.').try_fold(json, |v, key| v.get(key))
}

#[test]
fn every_knob_round_trips_through_set_and_serde_at_its_own_path() {
    for knob in knobs() {
        for (text, expected) in samples(knob) {
            let mut cluster = ClusterConfig::default();
            cluster.set(knob.path, text).unwrap_or_else(|e| panic!("{}={text}: {e}", knob.path));
            let json = serde_json::to_value(cluster).unwrap();
            let in_cluster = match knob.scope() {
                KnobScope::Refresh => alloc::format!("refresh.{}", knob.path),
                KnobScope::Cluster => knob.path.to_string(),
            };
            assert_eq!(at(&json, &in_cluster), Some(&expected), "{}={text} in ClusterConfig's JSON", knob.path);
            if knob.scope() == KnobScope::Refresh {
                let mut refresh = RefreshConfig::default();
                refresh.set(knob.path, text).unwrap();
                let json = serde_json::to_value(refresh).unwrap();
                assert_eq!(at(&json, knob.path), Some(&expected), "{}={text} in RefreshConfig's JSON", knob.path);
                assert_eq!(refresh.get(knob.path), cluster.get(knob.path));
            }
            // The text `get` writes is what `set` reads, and serde agrees with the field.
            let value = cluster.get(knob.path).unwrap();
            assert_eq!(serde_json::to_value(value).unwrap(), expected, "{}: KnobValue's serde", knob.path);
            let mut again = ClusterConfig::default();
            again.set(knob.path, &value.to_string()).unwrap();
            assert_eq!(again.get(knob.path), Some(value), "{}: {value} reads back", knob.path);
        }
        assert!(knob.default_value().is_some(), "{} has a default", knob.path);
    }
}

/// Every leaf of the JSON has a knob at its path. A choice knob (`fanout.stagger`) covers
/// its variant's parameter (`fanout.stagger.fixed`), but a variant that is a struct
/// (`fanout.stagger.adaptive`) needs knobs for its own fields.
fn uncovered(json: &Value, path: &str, out: &mut Vec<String>) {
    let knob = knobs().iter().find(|k| k.path == path);
    let is_duration = json.get("secs").is_some() && json.get("nanos").is_some();
    match (knob.map(|k| k.kind), json) {
        (Some(KnobKind::Choice { choices }), Value::Object(variant)) => {
            let (name, param) = variant.iter().next().expect("an enum variant");
            let choice = choices.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("{path}: {name}"));
            if choice.param.is_none() {
                uncovered(param, &alloc::format!("{path}.{name}"), out);
            }
        }
        (Some(_), _) => {}
        (None, Value::Object(fields)) if !is_duration => {
            for (key, value) in fields {
                let child = if path.is_empty() { key.clone() } else { alloc::format!("{path}.{key}") };
                uncovered(value, &child, out);
            }
        }
        (None, _) => out.push(path.to_string()),
    }
}

#[test]
fn every_field_of_the_json_has_a_knob() {
    let fixed = ClusterConfig { refresh: RefreshConfig::staggered(), ..ClusterConfig::default() };
    for config in [ClusterConfig::default(), fixed] {
        let mut json = serde_json::to_value(config).unwrap();
        // Refresh knobs are listed by their path in RefreshConfig.
        let refresh = json.as_object_mut().unwrap().remove("refresh").unwrap();
        let mut missing = Vec::new();
        uncovered(&refresh, "", &mut missing);
        uncovered(&json, "", &mut missing);
        assert!(missing.is_empty(), "fields without a knob in table.rs's KNOBS: {missing:?}");
    }
    let mut paths: Vec<_> = knobs().iter().map(|k| k.path).collect();
    paths.sort_unstable();
    paths.dedup();
    assert_eq!(paths.len(), knobs().len(), "paths are unique");
}

#[test]
fn set_names_the_knob_it_refuses() {
    let mut c = RefreshConfig::default();
    let e = c.set("fanout.max_in_flight", "three").unwrap_err();
    assert_eq!(e.field, "fanout.max_in_flight");
    assert!(e.to_string().contains("\"three\""), "{e}");
    assert_eq!(c.set("fanout.bogus", "1").unwrap_err().field, "knob");
    assert!(c.set("fanout.bogus", "1").unwrap_err().to_string().contains("fanout.bogus"));
    assert_eq!(c.set("hedge_budget.burst", "1").unwrap_err().field, "hedge_budget.burst", "a cluster knob");
    c.set("fanout.stagger", "fixed:100ms").unwrap();
    let e = c.set("fanout.stagger.adaptive.patience", "4").unwrap_err();
    assert!(e.to_string().contains("adaptive"), "{e}");
    assert_eq!(c.get("fanout.stagger.adaptive.patience"), None);
    assert_eq!(c.set("fanout.growth", "quadratic:2").unwrap_err().field, "fanout.growth");
    // `adaptive` keeps the adaptive parameters already set.
    let mut c = RefreshConfig::default();
    c.set("fanout.stagger.adaptive.patience", "4").unwrap();
    c.set("fanout.stagger", "adaptive").unwrap();
    assert_eq!(c.get("fanout.stagger.adaptive.patience"), Some(KnobValue::U32(4)));
    // A cluster view takes refresh knobs with or without `refresh.`.
    let mut k = ClusterConfig::default();
    k.set("refresh.fanout.jitter", "0").unwrap();
    k.set("fanout.initial", "2").unwrap();
    assert_eq!((k.refresh.fanout.jitter, k.refresh.fanout.initial), (0.0, 2));
}

#[test]
fn durations_parse_exactly_and_print_in_the_largest_exact_unit() {
    let cases = [
        ("250ms", Duration::from_millis(250)),
        ("1.5s", Duration::from_millis(1500)),
        ("10s", Duration::from_secs(10)),
        ("1m30s", Duration::from_secs(90)),
        ("0.1s", Duration::from_millis(100)),
        ("100us", Duration::from_micros(100)),
        ("100µs", Duration::from_micros(100)),
        ("2h", Duration::from_secs(7200)),
        ("0", Duration::ZERO),
        (".5ms", Duration::from_micros(500)),
    ];
    for (text, d) in cases {
        assert_eq!(parse_duration(text), Some(d), "{text}");
    }
    for bad in ["", "10", "ms", "1.2.3s", "5 s", "-1s", "1d", "s5"] {
        assert_eq!(parse_duration(bad), None, "{bad:?}");
    }
    let print = |d| KnobValue::Duration(d).to_string();
    assert_eq!(print(Duration::from_millis(1500)), "1500ms");
    assert_eq!(print(Duration::from_secs(60)), "60s");
    assert_eq!(print(Duration::from_nanos(7)), "7ns");
    assert_eq!(print(Duration::ZERO), "0s");
}

#[test]
fn the_schema_serialises_with_defaults_as_text() {
    let json = serde_json::to_value(knobs()).unwrap();
    let spread = json.as_array().unwrap().iter().find(|k| k["path"] == "fanout.tuning.spread_ticks").unwrap();
    assert_eq!(spread["kind"], json!({ "kind": "bool" }));
    assert_eq!(spread["default"], "true");
    assert_eq!(spread["scope"], "refresh");
    let stagger = json.as_array().unwrap().iter().find(|k| k["path"] == "fanout.stagger").unwrap();
    assert_eq!(stagger["default"], "adaptive");
    assert_eq!(stagger["kind"]["choices"][1], json!({ "name": "fixed", "param": { "kind": "duration" } }));
    let quantile = json.as_array().unwrap().iter().find(|k| k["path"] == "window_quantile").unwrap();
    assert_eq!((quantile["scope"].as_str(), quantile["default"].as_str()), (Some("cluster"), Some("0.99")));
    assert_eq!(knobs()[1].kind.syntax(), "adaptive|fixed:DURATION");
}
