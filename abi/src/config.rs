//! The session config a host passes as JSON, read into the core's [`SessionConfig`] and
//! [`BrokerBook`], with errors that name the field by its dotted path in that JSON.
//!
//! The JSON is read as a tree first and then field by field, rather than straight into
//! structs, for two reasons: an error says which field and what was wrong with it in our
//! words, and no message ever quotes a value — a password given as a number, say, would
//! otherwise come back in serde's `invalid type` text. Policy knobs are not repeated here:
//! `settings` is a map of knob paths (`stagger::knobs()`) to their text, set through
//! [`ClusterConfig::set`], so the ABI takes every knob the core has, with its syntax.

use serde_json::{Map, Value};
use stagger::kafka::sasl::{Sasl, Secret, MECHANISMS};
use stagger::kafka::{validate, ExchangeConfig};
use stagger::session::SessionConfig;
use stagger::{BrokerBook, ClusterConfig, ConfigError, RefreshConfig};

use crate::error::AbiError;

/// The default maximum frame size of an ABI session: 32 MiB (the core's own default is
/// Kafka's 100 MiB). A wasm host's linear memory never shrinks and is at most 4 GiB, and a
/// session may buffer a whole frame per attempt in flight and decode one beside it (the limit
/// is also the decode budget); 32 MiB still takes the Metadata of about 200 000 partitions
/// (`docs/abi.md` has the measurements).
pub const DEFAULT_MAX_FRAME_SIZE: usize = crate::codes::STAGGER_DEFAULT_MAX_FRAME_SIZE as usize;

/// The top-level fields of the config JSON, for the message about an unknown one.
const FIELDS: [&str; 11] = [
    "seeds",
    "resolve_names",
    "preset",
    "settings",
    "client_id",
    "topics",
    "max_frame_size",
    "tls",
    "sasl",
    "fresh_tokens",
    "one_shot",
];

/// A session's settings and seeds, read from the config JSON.
#[derive(Debug)]
pub struct Config {
    /// What [`stagger::session::Session::new`] takes.
    pub session: SessionConfig,
    /// The seeds.
    pub book: BrokerBook,
}

/// What JSON type `v` is, for messages (never its value: it may be a secret).
fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `obj[key]`, with `null` read as absent.
fn get<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

fn string<'a>(obj: &'a Map<String, Value>, key: &str, path: &str) -> Result<Option<&'a str>, AbiError> {
    match get(obj, key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(AbiError::config(path, format!("must be a string, not {}", type_of(other)))),
    }
}

fn boolean(obj: &Map<String, Value>, key: &str) -> Result<bool, AbiError> {
    match get(obj, key) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(AbiError::config(key, format!("must be true or false, not {}", type_of(other)))),
    }
}

fn strings(obj: &Map<String, Value>, key: &str) -> Result<Option<Vec<String>>, AbiError> {
    let Some(v) = get(obj, key) else { return Ok(None) };
    let Value::Array(items) = v else {
        return Err(AbiError::config(key, format!("must be an array of strings, not {}", type_of(v))));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::String(s) => Ok(s.clone()),
            other => Err(AbiError::config(format!("{key}[{i}]"), format!("must be a string, not {}", type_of(other)))),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// The config JSON field a core [`ConfigError`] is about.
fn field_of(e: &ConfigError) -> String {
    match e.field {
        "seeds" => "seeds".to_owned(),
        f => match f.strip_prefix("exchange.") {
            Some(exchange) => exchange.to_owned(),
            None => format!("settings.{f}"),
        },
    }
}

/// Turns a core [`ConfigError`] into the ABI's, naming the JSON field.
pub fn from_core(e: &ConfigError) -> AbiError {
    AbiError::config(field_of(e), e.problem.clone())
}

/// Reads the config JSON; `seed` seeds the core's PRNG (jitter, shuffled seeds).
pub fn parse(bytes: &[u8], seed: u64) -> Result<Config, AbiError> {
    // serde_json's syntax errors say where (line, column), never what: safe to pass on.
    let root: Value = serde_json::from_slice(bytes)
        .map_err(|e| AbiError::config("", format!("the config is not valid JSON: {e}")))?;
    let Value::Object(obj) = root else {
        return Err(AbiError::config("", format!("the config must be a JSON object, not {}", type_of(&root))));
    };
    if let Some(unknown) = obj.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(AbiError::config(
            unknown.clone(),
            format!("is not a config field (the fields: {})", FIELDS.join(", ")),
        ));
    }

    let seeds = strings(&obj, "seeds")?.unwrap_or_default();
    if seeds.is_empty() {
        return Err(AbiError::config("seeds", "must list at least one broker as host:port"));
    }
    let resolve_names = boolean(&obj, "resolve_names")?;
    let book = if resolve_names { BrokerBook::resolving(&seeds) } else { BrokerBook::new(&seeds) };
    let book = book.map_err(|e| AbiError::config("seeds", e.problem))?;
    validate::seeds(&book).map_err(|e| from_core(&e))?;

    let one_shot = boolean(&obj, "one_shot")?;
    let cluster = policy(&obj, seed)?;

    let mut exchange = ExchangeConfig { max_frame_size: DEFAULT_MAX_FRAME_SIZE, ..ExchangeConfig::default() };
    if let Some(id) = string(&obj, "client_id", "client_id")? {
        exchange.client_id = id.to_owned();
    }
    exchange.topics = strings(&obj, "topics")?;
    if let Some(v) = get(&obj, "max_frame_size") {
        let size = v.as_u64().and_then(|n| usize::try_from(n).ok()).ok_or_else(|| {
            AbiError::config("max_frame_size", format!("must be a whole number of bytes, not {}", type_of(v)))
        })?;
        exchange.max_frame_size = size;
    }
    let fresh_tokens = boolean(&obj, "fresh_tokens")?;
    exchange.sasl = match get(&obj, "sasl") {
        None => None,
        Some(Value::Object(sasl)) => Some(self::sasl(sasl, fresh_tokens)?),
        Some(other) => return Err(AbiError::config("sasl", format!("must be an object, not {}", type_of(other)))),
    };
    if fresh_tokens && !matches!(exchange.sasl, Some(Sasl::OAuthBearer { .. })) {
        return Err(AbiError::config("fresh_tokens", "applies to sasl.mechanism OAUTHBEARER only"));
    }
    validate::exchange(&exchange).map_err(|e| from_core(&e))?;

    let tls = boolean(&obj, "tls")?;
    Ok(Config {
        session: SessionConfig { cluster, exchange, tls, fresh_tokens, one_shot, ..SessionConfig::default() },
        book,
    })
}

/// The policy: a `Client`'s defaults (one-shot and long-lived alike: seeds shuffled by
/// `seed`), a preset's refresh policy on that base, every setting, the seed.
fn policy(obj: &Map<String, Value>, seed: u64) -> Result<ClusterConfig, AbiError> {
    let mut cluster = ClusterConfig::default();
    if let Some(name) = string(obj, "preset", "preset")? {
        let preset = RefreshConfig::preset(name).ok_or_else(|| {
            AbiError::config(
                "preset",
                format!("unknown preset {name:?} (one of {})", RefreshConfig::PRESETS.join(", ")),
            )
        })?;
        cluster.refresh = preset;
    }
    match get(obj, "settings") {
        None => {}
        Some(Value::Object(settings)) => {
            for (path, value) in settings {
                let field = format!("settings.{path}");
                if path == "seed" || path == "refresh.seed" {
                    return Err(AbiError::config(field, "the PRNG seed is stagger_session_new's `seed` argument"));
                }
                let text = match value {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    other => {
                        return Err(AbiError::config(
                            field,
                            format!("must be the knob's text (a string), not {}", type_of(other)),
                        ))
                    }
                };
                cluster.set(path, &text).map_err(|e| AbiError::config(field, e.problem))?;
            }
        }
        Some(other) => {
            return Err(AbiError::config(
                "settings",
                format!("must be an object of knob paths, not {}", type_of(other)),
            ))
        }
    }
    cluster.refresh.seed = seed;
    cluster.validate().map_err(|e| from_core(&e))?;
    Ok(cluster)
}

/// The SASL settings; messages never quote a password or token.
fn sasl(obj: &Map<String, Value>, fresh_tokens: bool) -> Result<Sasl, AbiError> {
    const SASL_FIELDS: [&str; 4] = ["mechanism", "username", "password", "token"];
    if let Some(unknown) = obj.keys().find(|k| !SASL_FIELDS.contains(&k.as_str())) {
        return Err(AbiError::config(
            format!("sasl.{unknown}"),
            format!("is not a SASL field (the fields: {})", SASL_FIELDS.join(", ")),
        ));
    }
    let mechanism = string(obj, "mechanism", "sasl.mechanism")?
        .ok_or_else(|| AbiError::config("sasl.mechanism", format!("is missing (one of {})", MECHANISMS.join(", "))))?;
    if !MECHANISMS.iter().any(|m| m.eq_ignore_ascii_case(mechanism)) {
        let known = MECHANISMS.join(", ");
        return Err(AbiError::config("sasl.mechanism", format!("unknown mechanism {mechanism:?} (one of {known})")));
    }
    let secret = |key: &str| -> Result<Option<Secret>, AbiError> {
        Ok(string(obj, key, &format!("sasl.{key}"))?.map(Secret::new))
    };
    let (username, password, token) =
        (string(obj, "username", "sasl.username")?, secret("password")?, secret("token")?);
    let bearer = mechanism.eq_ignore_ascii_case("OAUTHBEARER");
    let secret = if bearer {
        if username.is_some() || password.is_some() {
            return Err(AbiError::config("sasl", "OAUTHBEARER takes a token, not a username and password"));
        }
        match token {
            Some(token) => token,
            // Every connection asks for its own token (NEED_TOKEN); none serves them all.
            None if fresh_tokens => Secret::new(""),
            None => {
                return Err(AbiError::config("sasl.token", "is missing (or set fresh_tokens to answer NEED_TOKEN)"))
            }
        }
    } else {
        if token.is_some() {
            return Err(AbiError::config("sasl.token", format!("applies to OAUTHBEARER only, not {mechanism}")));
        }
        if username.is_none_or(str::is_empty) {
            return Err(AbiError::config("sasl.username", format!("is missing ({mechanism} needs one)")));
        }
        password.ok_or_else(|| AbiError::config("sasl.password", format!("is missing ({mechanism} needs one)")))?
    };
    Sasl::from_parts(mechanism, username.unwrap_or(""), secret).ok_or_else(|| {
        AbiError::config(
            "sasl.mechanism",
            format!("unknown mechanism {mechanism:?} (one of {})", MECHANISMS.join(", ")),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A preset replaces the refresh policy (seeds shuffled, as every default), a setting
    /// then changes one knob of it, and the seed is always the argument.
    #[test]
    fn a_preset_replaces_the_policy_settings_change_it_and_the_seed_is_the_argument() {
        let preset = serde_json::json!({"preset": "sequential"}).as_object().cloned().unwrap();
        let refresh = policy(&preset, 7).unwrap().refresh;
        assert_eq!((refresh.fanout.max_in_flight, refresh.shuffle_seeds, refresh.seed), (1, true, 7));
        let listed = serde_json::json!({"preset": "sequential", "settings": {"shuffle_seeds": "false"}});
        let refresh = policy(listed.as_object().unwrap(), 9).unwrap().refresh;
        assert_eq!((refresh.fanout.max_in_flight, refresh.shuffle_seeds, refresh.seed), (1, false, 9));
    }
}
