//! `stagger-demo`: the web demo's engine — the `stagger` core and its simulator compiled to
//! WebAssembly, behind JSON-in, JSON-out functions the page calls.
//!
//! Why JSON strings and not JS objects: every type the page needs (`RefreshConfig`,
//! `Scenario`, `Report`, `Trace`) is already serde, so one `serde_json` call per direction is
//! the whole binding, and the native tests below exercise exactly what the browser runs.
//! Every function answers with JSON, never a panic or a thrown exception: a bad input comes
//! back as `{"error": "…"}` and the page shows it.
#![warn(missing_docs)]

mod describe;
mod replay;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use stagger::RefreshConfig;
use stagger_sim::{run_refresh, Outcome, Scenario};
use wasm_bindgen::prelude::wasm_bindgen;

pub use replay::replay_trace;

/// The presets, in the core's order, as `[{"name", "config"}]`: the page starts every knob
/// from one of these, so they must be the core's own values, not a JavaScript copy.
#[wasm_bindgen]
pub fn presets() -> String {
    let list: Vec<Value> = RefreshConfig::PRESETS
        .iter()
        .filter_map(|name| RefreshConfig::preset(name).map(|c| json!({ "name": name, "config": c })))
        .collect();
    Value::Array(list).to_string()
}

/// The core's knob schema (`stagger::knobs`), `[{path, scope, kind, doc, default}]`:
/// the page builds its knob panel from it, so a new knob in the core shows up without a
/// line of JavaScript.
#[wasm_bindgen]
pub fn knobs() -> String {
    serde_json::to_string(stagger::knobs()).unwrap_or_else(|e| json!({ "error": e.to_string() }).to_string())
}

/// The core's words for the values the page shows, keyed by their serde names, so the page
/// keeps no copy of them: `{"cancel_reasons": {name: {text, help}}, "timers": {name: text}}`
/// (`text` is the core's `Display` or the timeline's label, `help` the tooltip).
#[wasm_bindgen]
pub fn vocabulary() -> String {
    let cancel: serde_json::Map<String, Value> = stagger::CancelReason::ALL
        .iter()
        .map(|r| (r.name().to_string(), json!({ "text": r.to_string(), "help": describe::cancel_help(*r) })))
        .collect();
    let timers: serde_json::Map<String, Value> =
        stagger::TimerKind::ALL.iter().map(|t| (t.name().to_string(), json!(describe::timer_name(*t)))).collect();
    json!({ "cancel_reasons": cancel, "timers": timers }).to_string()
}

/// An `AttemptError` (`{kind, detail}`), a `GiveUpReason` or a `BrokerFailure` (one
/// broker's story in a give-up) in the core's words (its `Display`, as the CLI prints it);
/// `what` is `"attempt_error"`, `"give_up_reason"` or `"broker_failure"`.
/// Answers the text as a JSON string, or `{"error"}` for anything else.
#[wasm_bindgen]
pub fn describe(what: &str, value_json: &str) -> String {
    let text = match what {
        "attempt_error" => serde_json::from_str::<stagger::AttemptError>(value_json).map(|e| e.to_string()),
        "give_up_reason" => serde_json::from_str::<stagger::GiveUpReason>(value_json).map(|r| r.to_string()),
        "broker_failure" => serde_json::from_str::<stagger::BrokerFailure>(value_json).map(|b| b.to_string()),
        other => return json!({ "error": format!("nothing called {other:?} to describe") }).to_string(),
    };
    match text {
        Ok(text) => Value::from(text).to_string(),
        Err(e) => json!({ "error": format!("{what}: {e}") }).to_string(),
    }
}

/// Every refresh knob of a config as text (`{"fanout.jitter": "0.2", …}`), `null` where one
/// does not apply (an adaptive parameter under a fixed stagger): what the panel shows.
#[wasm_bindgen]
pub fn knob_values(config_json: &str) -> String {
    match serde_json::from_str::<RefreshConfig>(config_json) {
        Err(e) => json!({ "error": format!("config: {e}") }).to_string(),
        Ok(config) => {
            let values: serde_json::Map<String, Value> = stagger::knobs()
                .iter()
                .filter(|k| k.scope() == stagger::KnobScope::Refresh)
                .map(|k| (k.path.to_string(), config.get(k.path).map_or(Value::Null, |v| Value::from(v.to_string()))))
                .collect();
            Value::Object(values).to_string()
        }
    }
}

/// Sets knobs from text over `base_json` (a `RefreshConfig`), in the schema's order (the
/// stagger before its adaptive parameters), skipping `null`s and parameters that do not
/// apply; answers `{"config": …}` or `{"error", "field"}` naming the first bad knob. Not
/// validated as a whole: see [`validate`].
#[wasm_bindgen]
pub fn set_knobs(base_json: &str, values_json: &str) -> String {
    let parsed = serde_json::from_str::<RefreshConfig>(base_json).map_err(|e| format!("config: {e}")).and_then(|c| {
        Ok((c, serde_json::from_str::<serde_json::Map<String, Value>>(values_json).map_err(|e| format!("knobs: {e}"))?))
    });
    let (mut config, values) = match parsed {
        Ok(x) => x,
        Err(e) => return json!({ "error": e }).to_string(),
    };
    for knob in stagger::knobs() {
        let Some(Value::String(text)) = values.get(knob.path) else { continue };
        if knob.scope() != stagger::KnobScope::Refresh || config.get(knob.path).is_none() {
            continue;
        }
        if let Err(e) = config.set(knob.path, text) {
            return json!({ "error": e.to_string(), "field": e.field }).to_string();
        }
    }
    json!({ "config": config }).to_string()
}

/// Checks a config; answers `{"ok": true}` or `{"error": "…", "field": "…"}`.
#[wasm_bindgen]
pub fn validate(config_json: &str) -> String {
    match serde_json::from_str::<RefreshConfig>(config_json) {
        Err(e) => json!({ "error": format!("config: {e}") }).to_string(),
        Ok(config) => match config.validate() {
            Ok(()) => json!({ "ok": true }).to_string(),
            Err(e) => json!({ "error": e.to_string(), "field": e.field }).to_string(),
        },
    }
}

/// The core's events (`stagger::report::Event`, as JSON: a simulation's or a replay's
/// `report.events`, or the browser adapter's live ones) in words, one line each, for the
/// event log; `addresses_json` lists the lanes' addresses, which name the brokers. Answers a
/// JSON array of strings, or `{"error"}`.
///
/// Why one function for every mode: Simulate, Replay and Live read the same events, so they
/// word them the same.
#[wasm_bindgen]
pub fn describe_events(events_json: &str, addresses_json: &str) -> String {
    let events = serde_json::from_str::<Vec<stagger::report::Event>>(events_json).map_err(|e| format!("events: {e}"));
    let addresses = serde_json::from_str::<Vec<String>>(addresses_json).map_err(|e| format!("addresses: {e}"));
    match events.and_then(|events| Ok((events, addresses?))) {
        Ok((events, addresses)) => json!(describe::events(&events, &addresses)).to_string(),
        Err(e) => json!({ "error": e }).to_string(),
    }
}

/// Runs one refresh with `config` against `scenario` in virtual time.
///
/// Answers `{"report": Report, "summary", "timeline", "give_up"}`: the core's report (lanes,
/// spans, the core's events, trace) plus the human text the page shows next to it (the
/// core's own `summary()`/`render_timeline()` and `RefreshError`'s `Display`, so the page and
/// the CLI word things identically; the events' words come from [`describe_events`]).
#[wasm_bindgen]
pub fn simulate(scenario_json: &str, config_json: &str) -> String {
    let (scenario, config) = match parse_inputs(scenario_json, config_json) {
        Ok(x) => x,
        Err(e) => return json!({ "error": e }).to_string(),
    };
    let report = run_refresh(&config, &scenario);
    let give_up = match &report.outcome {
        Outcome::GiveUp { error, .. } => Some(error.to_string()),
        Outcome::Aborted { error, .. } => Some(error.to_string()),
        Outcome::Done { .. } => None,
    };
    json!({
        "report": report,
        "summary": report.summary(),
        "timeline": report.render_timeline(),
        "give_up": give_up,
    })
    .to_string()
}

/// One line of a comparison: a name and the config to run under every seed.
#[derive(Deserialize)]
struct Series {
    name: String,
    config: RefreshConfig,
}

/// What one series did over every seed, in seed order.
#[derive(Serialize)]
struct SeriesResult {
    name: String,
    /// The config's validation error; the arrays are empty then.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// Time to metadata in µs, `null` where the refresh gave up.
    ttm_us: Vec<Option<u64>>,
    /// `Connect` commands per refresh (load on the client side).
    started: Vec<u32>,
    /// Attempts that reached a broker per refresh (load the brokers felt).
    reached: Vec<u32>,
}

/// Runs `seeds` refreshes per series against `scenario`, seed `base_seed + i` for both the
/// config's PRNG (jitter, order) and the simulator's (slow and flaky brokers).
///
/// Why only numbers come back: the comparison panel plots distributions, and 2 500 full
/// reports would cost more to serialise than to simulate.
#[wasm_bindgen]
pub fn compare(scenario_json: &str, series_json: &str, seeds: u32, base_seed: f64) -> String {
    let scenario: Scenario = match serde_json::from_str(scenario_json) {
        Ok(s) => s,
        Err(e) => return json!({ "error": format!("scenario: {e}") }).to_string(),
    };
    let series: Vec<Series> = match serde_json::from_str(series_json) {
        Ok(s) => s,
        Err(e) => return json!({ "error": format!("series: {e}") }).to_string(),
    };
    // f64 because JavaScript numbers are; seeds in the page stay far below 2^53.
    let base = if base_seed.is_finite() && base_seed >= 0.0 { base_seed as u64 } else { 0 };
    let results: Vec<SeriesResult> = series.iter().map(|s| run_series(&scenario, s, seeds, base)).collect();
    json!({ "seeds": seeds, "base_seed": base, "series": results }).to_string()
}

fn run_series(scenario: &Scenario, series: &Series, seeds: u32, base: u64) -> SeriesResult {
    let mut result = SeriesResult {
        name: series.name.clone(),
        error: None,
        ttm_us: Vec::with_capacity(seeds as usize),
        started: Vec::with_capacity(seeds as usize),
        reached: Vec::with_capacity(seeds as usize),
    };
    if let Err(e) = series.config.validate() {
        result.error = Some(e.to_string());
        return result;
    }
    let mut scenario = scenario.clone();
    for i in 0..seeds as u64 {
        let seed = base.wrapping_add(i);
        scenario.seed = seed;
        let report = run_refresh(&series.config.with_seed(seed), &scenario);
        result.ttm_us.push(report.time_to_metadata().map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX)));
        result.started.push(report.attempts_started);
        result.reached.push(report.requests_reached);
    }
    result
}

/// Replays a trace (as written by `stagger metadata --trace FILE`) through the core.
///
/// Answers `{"verdict": "match" | "diverges" | "invalid", …}` with the divergence (if any)
/// and a report-shaped view (lanes, spans, the core's events) the page draws like a
/// simulation.
#[wasm_bindgen]
pub fn replay(trace_json: &str) -> String {
    replay_trace(trace_json).to_string()
}

fn parse_inputs(scenario_json: &str, config_json: &str) -> Result<(Scenario, RefreshConfig), String> {
    let scenario = serde_json::from_str(scenario_json).map_err(|e| format!("scenario: {e}"))?;
    let config = serde_json::from_str(config_json).map_err(|e| format!("config: {e}"))?;
    Ok((scenario, config))
}

#[cfg(test)]
mod tests;
