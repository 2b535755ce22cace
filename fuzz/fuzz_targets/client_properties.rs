//! The client configuration parser behind `stagger metadata -F FILE`, `-X key=value` and
//! the default config file (`stagger_tokio::properties`): any text — the fuzzer's, or lines
//! of known keys with its values — layered with any `-X` pairs, then resolved, must never
//! panic; every error must be a sentence naming the key at fault; and a secret (planted as
//! the value of every secret key) must not show in any error or `Debug`, unless the
//! fuzzer's own text also puts it somewhere that is not secret.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use stagger_tokio::properties::{ClientProperties, SECRET_KEYS};

/// Every key the parser knows.
const KEYS: [&str; 18] = [
    "bootstrap.servers",
    "metadata.broker.list",
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "sasl.jaas.config",
    "sasl.oauthbearer.token",
    "sasl.oauthbearer.token.file",
    "ssl.ca.location",
    "ssl.truststore.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "socket.connection.setup.timeout.ms",
    "client.id",
];

const MARKER: &str = "Fz7-planted-Secret";

#[derive(Arbitrary, Debug)]
enum Line {
    /// Raw text (may hold separators, backslashes, comments, line ends).
    Text(String),
    /// A known key, a separator, a value; a secret key's value embeds the marker.
    Set { key: u8, separator: u8, value: String, ending: u8 },
}

#[derive(Arbitrary, Debug)]
struct Input {
    lines: Vec<Line>,
    pairs: Vec<String>,
}

fuzz_target!(|input: Input| {
    let mut text = String::new();
    for line in &input.lines {
        match line {
            Line::Text(raw) => text.push_str(raw),
            Line::Set { key, separator, value, ending } => {
                let key = KEYS[*key as usize % KEYS.len()];
                text.push_str(key);
                text.push_str(["=", " = ", ":", " ", "\t"][*separator as usize % 5]);
                if SECRET_KEYS.contains(&key) {
                    text.push_str(&format!("x required password=\"{MARKER}{value}\";"));
                } else {
                    text.push_str(value);
                }
                text.push_str(["\n", "\r\n", "\\\n"][*ending as usize % 3]);
            }
        }
    }
    let mut properties = ClientProperties::parse_file_text(&text, "fuzz.properties");
    let mut errors = Vec::new();
    for pair in &input.pairs {
        errors.extend(properties.set_pair(pair).err());
    }
    // `resolve` reads the token file: never let fuzzer text name a real file (/dev/zero).
    if properties.get("sasl.oauthbearer.token.file").is_some() {
        properties.set("sasl.oauthbearer.token.file", "/nonexistent/stagger-fuzz/token");
    }
    let resolved = properties.resolve();
    let mut shown = format!("{properties:?}");
    if let Ok(settings) = &resolved {
        shown += &format!("{settings:?}");
    }
    errors.extend(resolved.err());
    for error in &errors {
        let message = error.to_string();
        assert!(!message.trim().is_empty(), "an empty error");
        if let Some(key) = error.key() {
            assert!(message.contains(key), "{message:?} does not name {key:?}");
        }
        assert!(KEYS.iter().any(|k| message.contains(k)) || message.contains("-X"), "{message:?} names no key");
        shown += &format!("{message} {error:?}");
    }
    let elsewhere = input.pairs.iter().any(|p| p.contains(MARKER))
        || KEYS.iter().any(|k| properties.get(k).is_some_and(|v| v.contains(MARKER)))
        || properties.warnings().iter().any(|w| w.key.contains(MARKER))
        || input.lines.iter().any(|l| matches!(l, Line::Text(t) if t.contains(MARKER)));
    if !elsewhere {
        assert!(!shown.contains(MARKER), "a secret is shown: {shown}");
    }
});
