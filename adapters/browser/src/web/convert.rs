//! Options and configs from JS, the error objects the promise rejects with, and the error of
//! the serde conversions to and from JS.

use core::fmt;

use js_sys::{Array, Function, Reflect, JSON};
use stagger::kafka::sasl::{Sasl, Secret, MECHANISMS};
use stagger::report::RefreshReport;
use stagger::{ConfigError, RefreshConfig, RefreshError, Trace};
use wasm_bindgen::{JsCast, JsValue};
use web_sys::AbortSignal;

use super::from_js::from_js;
use super::to_js::to_js;
use crate::options::{bad, broker_summaries, preset, validated, Seeds};

/// The config option: absent means the default; a string is a preset name (or JSON text); an
/// object is a complete `RefreshConfig` as `defaultConfig()` returns it. Always validated.
pub(crate) fn config_from_js(value: &JsValue) -> Result<RefreshConfig, ConfigError> {
    if value.is_undefined() || value.is_null() {
        return Ok(RefreshConfig::default());
    }
    if let Some(text) = value.as_string() {
        let text = text.trim();
        if !text.starts_with('{') {
            return validated(preset(text)?);
        }
        let parsed = JSON::parse(text).map_err(|e| bad("config", format!("is not valid JSON: {}", message(&e))))?;
        return config_from_object(&parsed);
    }
    config_from_object(value)
}

fn config_from_object(value: &JsValue) -> Result<RefreshConfig, ConfigError> {
    if !value.is_object() {
        return Err(bad("config", "must be a RefreshConfig object, a preset name or JSON text"));
    }
    let config: RefreshConfig = from_js(value.clone())
        .map_err(|e| bad("config", format!("is not a RefreshConfig (start from defaultConfig()): {e}")))?;
    validated(config)
}

/// A list of strings, or `None` when absent (`undefined` or `null`).
pub(crate) fn string_list(value: &JsValue, field: &'static str) -> Result<Option<Vec<String>>, ConfigError> {
    if value.is_undefined() || value.is_null() {
        return Ok(None);
    }
    if !Array::is_array(value) {
        return Err(bad(field, "must be an array of strings"));
    }
    let array: &Array = value.unchecked_ref();
    let mut out = Vec::with_capacity(array.length() as usize);
    for (i, item) in array.iter().enumerate() {
        out.push(item.as_string().ok_or_else(|| bad(field, format!("[{i}] is not a string")))?);
    }
    Ok(Some(out))
}

/// Reads `refresh()`'s `sasl` option: `{ mechanism, username, password }`, or
/// `{ mechanism: "OAUTHBEARER", token }` where `token` is a string or a function returning
/// one (called as the refresh starts, for tokens that expire). Absent or null: no SASL.
pub(crate) fn sasl_from_js(value: &JsValue) -> Result<Option<Sasl>, ConfigError> {
    if value.is_undefined() || value.is_null() {
        return Ok(None);
    }
    if !value.is_object() {
        return Err(bad("sasl", "must be an object like { mechanism: \"SCRAM-SHA-512\", username, password }"));
    }
    let get = |key: &str| Reflect::get(value, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED);
    let text = |key: &'static str, field: &'static str| -> Result<Option<String>, ConfigError> {
        match get(key) {
            v if v.is_undefined() || v.is_null() => Ok(None),
            v => v.as_string().map(Some).ok_or_else(|| bad(field, "must be a string")),
        }
    };
    let mechanism = text("mechanism", "sasl.mechanism")?
        .ok_or_else(|| bad("sasl.mechanism", format!("is required: one of {}", MECHANISMS.join(", "))))?;
    let secret = if mechanism.eq_ignore_ascii_case("OAUTHBEARER") {
        let token = match get("token") {
            f if f.is_function() => {
                let answer = f.unchecked_into::<Function>().call0(&JsValue::NULL);
                let answer =
                    answer.map_err(|e| bad("sasl.token", format!("the token function threw: {}", message(&e))))?;
                answer.as_string().ok_or_else(|| bad("sasl.token", "the token function must return a string"))?
            }
            t => {
                t.as_string().ok_or_else(|| bad("sasl.token", "is required for OAUTHBEARER: a string or a function"))?
            }
        };
        Secret::new(token)
    } else {
        Secret::new(text("password", "sasl.password")?.ok_or_else(|| bad("sasl.password", "is required"))?)
    };
    let username = text("username", "sasl.username")?.unwrap_or_default();
    if username.is_empty() && !mechanism.eq_ignore_ascii_case("OAUTHBEARER") {
        return Err(bad("sasl.username", "is required"));
    }
    Sasl::from_parts(&mechanism, &username, secret).map(Some).ok_or_else(|| {
        bad("sasl.mechanism", format!("{mechanism:?} is not one this client speaks: {}", MECHANISMS.join(", ")))
    })
}

/// `Error` named `ConfigError`, with `field` and `problem`.
pub(crate) fn config_error(error: &ConfigError) -> JsValue {
    let js = js_sys::Error::new(&error.to_string());
    js.set_name("ConfigError");
    set(&js, "field", &JsValue::from_str(error.field));
    set(&js, "problem", &JsValue::from_str(&error.problem));
    js.into()
}

/// `Error` named `RefreshError` whose message is the core's `Display`, carrying the core's
/// structured error as `refreshError`, a per-broker summary keyed by URL as `brokers`, every
/// attempt's report as `refresh` and the refresh's trace as `trace`.
pub(crate) fn refresh_error(
    error: &RefreshError,
    seeds: &Seeds,
    report: &RefreshReport,
    trace: Option<&Trace>,
) -> JsValue {
    let js = js_sys::Error::new(&error.to_string());
    js.set_name("RefreshError");
    set(&js, "refreshError", &to_js(error));
    set(&js, "brokers", &to_js(&broker_summaries(error, seeds)));
    set(&js, "refresh", &to_js(report));
    set(&js, "trace", &trace.map_or(JsValue::NULL, to_js));
    js.into()
}

/// What an aborted refresh rejects with: the signal's reason, as `fetch` does (by default
/// a `DOMException` named `AbortError`), or such an exception if the signal has none.
pub(crate) fn abort_error(signal: &AbortSignal) -> JsValue {
    let reason = signal.reason();
    if !reason.is_undefined() {
        return reason;
    }
    match web_sys::DomException::new_with_message_and_name("The metadata refresh was aborted.", "AbortError") {
        Ok(exception) => exception.into(),
        Err(_) => {
            let js = js_sys::Error::new("The metadata refresh was aborted.");
            js.set_name("AbortError");
            js.into()
        }
    }
}

/// Why a value could not be converted to or from JS (`to_js`, `from_js`): serde's own wording
/// (`invalid type: string "x", expected u32`, `missing field …`) or the converter's.
#[derive(Debug)]
pub(crate) struct SerdeError(pub(crate) String);

impl fmt::Display for SerdeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SerdeError {}

impl serde::ser::Error for SerdeError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        SerdeError(message.to_string())
    }
}

impl serde::de::Error for SerdeError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        SerdeError(message.to_string())
    }
}

/// A thrown JS value's message, for error details.
pub(crate) fn message(thrown: &JsValue) -> String {
    if let Some(error) = thrown.dyn_ref::<js_sys::Error>() {
        return String::from(error.message());
    }
    thrown.as_string().unwrap_or_else(|| format!("{thrown:?}"))
}

/// Sets `key` on a fresh object. Out of line: one copy, not one in every field's serialiser.
#[inline(never)]
pub(crate) fn set(target: &JsValue, key: &str, value: &JsValue) {
    // Setting a property on a fresh object cannot fail.
    let _ = Reflect::set(target, &JsValue::from_str(key), value);
}
