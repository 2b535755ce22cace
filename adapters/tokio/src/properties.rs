//! Client configuration the way Kafka users already write it: librdkafka / kcat `key=value`
//! files and `-X key=value` pairs, and Java `client.properties` (with `sasl.jaas.config`).
//!
//! Most people who point a tool at a cluster already have a file that connects to it; asking
//! them to translate it into our flags is where TLS and SASL settings go wrong. So
//! [`ClientProperties`] reads those files as they are, layer over layer (a later setting of
//! a key replaces an earlier one), and [`ClientProperties::resolve`] turns the keys this
//! client understands into [`ClientSettings`]: seeds, [`TlsOptions`], [`Sasl`], client id,
//! connect timeout.
//!
//! | key | becomes |
//! |---|---|
//! | `bootstrap.servers`, `metadata.broker.list` | the seeds (`host:port,…`; a `SASL_SSL://` prefix is dropped) |
//! | `security.protocol` | `PLAINTEXT`, `SSL`, `SASL_PLAINTEXT`, `SASL_SSL` (any case) |
//! | `sasl.mechanism`, `sasl.mechanisms` | `PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`, `OAUTHBEARER` |
//! | `sasl.username`, `sasl.password`, `sasl.jaas.config` | the user and password (the JAAS line's `username="…" password="…"`) |
//! | `sasl.oauthbearer.token`, `sasl.oauthbearer.token.file` | the bearer token, or a file holding it (read by `resolve`, trimmed) |
//! | `ssl.ca.location`, `ssl.truststore.location` (PEM only) | [`TlsOptions::ca_file`] (`probe`: the built-in roots) |
//! | `ssl.certificate.location`, `ssl.key.location` | [`TlsOptions::client_cert`] |
//! | `ssl.key.password`, `ssl.endpoint.identification.algorithm` | refused unless empty / `https`: encrypted keys and unverified names are unsupported |
//! | `socket.connection.setup.timeout.ms` | [`ClientSettings::connect_timeout`] (the core's `attempt_timeout`) |
//! | `client.id` | [`ExchangeConfig::client_id`](stagger::kafka::ExchangeConfig::client_id) |
//!
//! Files follow the common ground of both formats: one `key=value` (or Java's `key: value`,
//! `key value`) per line, `#` and `!` comment lines, blank lines, surrounding whitespace
//! trimmed, a trailing `\` continuing the line. Values are otherwise taken literally (Java's
//! other `\` escapes are not processed). Unknown keys are [`UnknownKey`] warnings, never
//! errors: the same file usually configures producers and consumers too. A known key with a
//! bad value is a [`PropertiesError`] naming the key, the value and where it was set — except
//! the secrets (`sasl.password`, `sasl.jaas.config`, `ssl.key.password`,
//! `sasl.oauthbearer.token`), which are held as [`Secret`]s from the moment they are read and
//! never printed, by errors or by `Debug`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use stagger::kafka::sasl::{Sasl, Secret};

use crate::options::{ClientCert, RefreshOptions, TlsOptions};

mod jaas;
mod protocol;

mod values;

use jaas::{parse_jaas, Jaas};
pub use protocol::SecurityProtocol;
use values::{parse_mechanism, parse_millis, parse_servers, read_token, split_line, truststore_file};

/// Every key this module understands, as written, and the key it is an alias of.
const KEYS: [(&str, &str); 18] = [
    ("bootstrap.servers", "bootstrap.servers"),
    ("metadata.broker.list", "bootstrap.servers"),
    ("security.protocol", "security.protocol"),
    ("sasl.mechanism", "sasl.mechanism"),
    ("sasl.mechanisms", "sasl.mechanism"),
    ("sasl.username", "sasl.username"),
    ("sasl.password", "sasl.password"),
    ("sasl.jaas.config", "sasl.jaas.config"),
    ("sasl.oauthbearer.token", "sasl.oauthbearer.token"),
    ("sasl.oauthbearer.token.file", "sasl.oauthbearer.token.file"),
    ("ssl.ca.location", "ssl.ca.location"),
    ("ssl.truststore.location", "ssl.truststore.location"),
    ("ssl.certificate.location", "ssl.certificate.location"),
    ("ssl.key.location", "ssl.key.location"),
    ("ssl.key.password", "ssl.key.password"),
    ("ssl.endpoint.identification.algorithm", "ssl.endpoint.identification.algorithm"),
    ("socket.connection.setup.timeout.ms", "socket.connection.setup.timeout.ms"),
    ("client.id", "client.id"),
];

/// The keys whose values are credentials: stored as [`Secret`], never printed.
pub const SECRET_KEYS: [&str; 4] = ["sasl.password", "sasl.jaas.config", "ssl.key.password", "sasl.oauthbearer.token"];

/// What the mechanism list says when there is none to be had, in one place for every message.
const MECHANISM_CHOICE: &str = "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER";

/// A key this module does not know, and where it was set: reported, then ignored, because
/// real client files also carry producer, consumer and schema-registry settings.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UnknownKey {
    /// The key as written (its value is not kept: it may be a credential).
    pub key: String,
    /// The file (or `-X`) that set it.
    pub source: String,
}

impl fmt::Display for UnknownKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: unknown key {:?} (ignored)", self.source, self.key)
    }
}

/// A known key with a value this client cannot use, or settings that contradict each other.
/// The message names the key, its value (never a secret's) and where it was set, so the
/// user knows which line of which file to fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PropertiesError {
    key: Option<String>,
    message: String,
}

impl PropertiesError {
    fn new(key: Option<&str>, message: String) -> PropertiesError {
        PropertiesError { key: key.map(String::from), message }
    }

    /// The key at fault, as written (`None` when no single key is, e.g. a missing password).
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }
}

impl fmt::Display for PropertiesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PropertiesError {}

/// A value as stored: credentials are [`Secret`]s from the start, so no `Debug` shows them.
#[derive(Clone, Debug)]
enum Value {
    Text(String),
    Secret(Secret),
}

/// One key's current setting.
#[derive(Clone, Debug)]
struct Setting {
    /// As written (an alias stays an alias in messages).
    key: String,
    value: Value,
    source: String,
    /// When it was set, to let the later of two keys that say the same thing win.
    order: u64,
}

impl Setting {
    fn text(&self) -> &str {
        match &self.value {
            Value::Text(text) => text,
            Value::Secret(secret) => secret.expose(),
        }
    }

    /// `FILE: key = "value": why` — or, for a secret, `FILE: key: why (value not shown)`.
    fn bad(&self, why: impl fmt::Display) -> PropertiesError {
        let message = match &self.value {
            Value::Text(text) => format!("{}: {} = {:?}: {why}", self.source, self.key, text),
            Value::Secret(_) => format!("{}: {}: {why} (value not shown)", self.source, self.key),
        };
        PropertiesError::new(Some(&self.key), message)
    }
}

/// Client properties read from files and `key=value` pairs, later settings replacing earlier
/// ones; [`ClientProperties::resolve`] checks them and says what they mean.
#[derive(Clone, Debug, Default)]
pub struct ClientProperties {
    settings: BTreeMap<&'static str, Setting>,
    unknown: Vec<UnknownKey>,
    /// The same keys, to report each once per source without a quadratic search.
    seen: std::collections::HashSet<UnknownKey>,
    next: u64,
}

impl ClientProperties {
    /// The properties of one file's text; `source` (its path, usually) names it in warnings
    /// and errors.
    pub fn parse_file_text(text: &str, source: &str) -> ClientProperties {
        let mut properties = ClientProperties::default();
        properties.add_file_text(text, source);
        properties
    }

    /// Layers a file's text over what is already set (a later file overrides an earlier one).
    pub fn add_file_text(&mut self, text: &str, source: &str) {
        let mut lines = text.strip_prefix('\u{feff}').unwrap_or(text).lines();
        while let Some(line) = lines.next() {
            let mut logical = line.trim_start().to_string();
            if logical.is_empty() || logical.starts_with('#') || logical.starts_with('!') {
                continue;
            }
            // Java's continuation: an odd number of trailing backslashes joins the next line.
            while (logical.len() - logical.trim_end_matches('\\').len()) % 2 == 1 {
                logical.pop();
                match lines.next() {
                    Some(next) => logical.push_str(next.trim_start()),
                    None => break,
                }
            }
            let (key, value) = split_line(&logical);
            self.set_from(source, key, value);
        }
    }

    /// Reads and layers a file; an unreadable file is an error naming it.
    pub fn add_file(&mut self, path: &Path) -> Result<(), PropertiesError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| PropertiesError::new(None, format!("could not read {}: {e}", path.display())))?;
        self.add_file_text(&text, &path.display().to_string());
        Ok(())
    }

    /// Sets one key as kcat's `-X key=value` does (messages name the source `-X`).
    pub fn set(&mut self, key: &str, value: &str) {
        self.set_from("-X", key, value);
    }

    /// Splits a `key=value` argument and sets it. The error never repeats the argument: a
    /// malformed one may be a password typed in the wrong place.
    pub fn set_pair(&mut self, pair: &str) -> Result<(), PropertiesError> {
        let (key, value) = pair.split_once('=').ok_or_else(|| {
            let why = "-X expects key=value (e.g. -X security.protocol=SASL_SSL); one argument has no `=`";
            PropertiesError::new(None, why.to_string())
        })?;
        self.set(key.trim(), value.trim());
        Ok(())
    }

    /// Sets one key, naming where it came from (a file, `-X`, a command-line flag).
    pub fn set_from(&mut self, source: &str, key: &str, value: &str) {
        let Some(&(_, canonical)) = KEYS.iter().find(|(written, _)| *written == key) else {
            let unknown = UnknownKey { key: key.to_string(), source: source.to_string() };
            if self.seen.insert(unknown.clone()) {
                self.unknown.push(unknown);
            }
            return;
        };
        let value = match SECRET_KEYS.contains(&canonical) {
            true => Value::Secret(Secret::new(value)),
            false => Value::Text(value.to_string()),
        };
        let setting = Setting { key: key.to_string(), value, source: source.to_string(), order: self.next };
        self.next += 1;
        self.settings.insert(canonical, setting);
    }

    /// The current value of a known key (aliases resolved), so a caller can build on it (a
    /// `--tls` flag upgrading the file's protocol). Secrets are never returned.
    pub fn get(&self, key: &str) -> Option<&str> {
        let &(_, canonical) = KEYS.iter().find(|(written, _)| *written == key)?;
        match &self.settings.get(canonical)?.value {
            Value::Text(text) => Some(text),
            Value::Secret(_) => None,
        }
    }

    /// The keys that were not understood, each once per source, in the order they were set.
    pub fn warnings(&self) -> &[UnknownKey] {
        &self.unknown
    }

    fn setting(&self, key: &str) -> Option<&Setting> {
        self.settings.get(key)
    }

    /// Checks every understood key and says what the settings mean together. Reads
    /// `sasl.oauthbearer.token.file` (only when OAUTHBEARER is used).
    pub fn resolve(&self) -> Result<ClientSettings, PropertiesError> {
        let seeds = match self.setting("bootstrap.servers") {
            Some(s) => parse_servers(s)?,
            None => Vec::new(),
        };
        let protocol = match self.setting("security.protocol") {
            Some(s) => SecurityProtocol::from_name(s.text())
                .ok_or_else(|| s.bad("expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"))?,
            None => SecurityProtocol::Plaintext,
        };
        let mechanism = self.setting("sasl.mechanism").map(|s| parse_mechanism(s).map(|m| (m, s))).transpose()?;
        let connect_timeout = self.setting("socket.connection.setup.timeout.ms").map(parse_millis).transpose()?;
        let jaas =
            self.setting("sasl.jaas.config").map(|s| parse_jaas(s.text()).map_err(|why| s.bad(why))).transpose()?;
        let tls = self.tls_options()?;
        let sasl = match (protocol.sasl(), mechanism) {
            (false, Some((mechanism, s))) => {
                let how = protocol.name();
                let from =
                    self.setting("security.protocol").map_or("the default".into(), |p| format!("set in {}", p.source));
                return Err(PropertiesError::new(
                    Some(&s.key),
                    format!(
                        "{}: {} is {mechanism} but security.protocol is {how} ({from}), which does not use SASL: \
                         set security.protocol=SASL_SSL (or SASL_PLAINTEXT), or remove {}",
                        s.source, s.key, s.key
                    ),
                ));
            }
            (false, None) => None,
            (true, None) => {
                return Err(PropertiesError::new(
                    Some("sasl.mechanism"),
                    format!(
                        "security.protocol is {} but no SASL mechanism is set: set sasl.mechanism \
                         ({MECHANISM_CHOICE}); GSSAPI, Kafka's default, is not supported",
                        protocol.name()
                    ),
                ))
            }
            (true, Some((mechanism, _))) => Some(self.sasl(protocol, mechanism, jaas)?),
        };
        Ok(ClientSettings {
            seeds,
            protocol,
            tls: protocol.tls().then_some(tls),
            sasl,
            client_id: self.setting("client.id").map(|s| s.text().to_string()),
            connect_timeout,
        })
    }

    /// The credentials for `mechanism`: of two keys giving the same thing (`sasl.username`
    /// and the JAAS line's `username`), the one set later wins.
    fn sasl(&self, protocol: SecurityProtocol, mechanism: &str, jaas: Option<Jaas>) -> Result<Sasl, PropertiesError> {
        let jaas_order = self.setting("sasl.jaas.config").map_or(0, |s| s.order);
        let pick = |key: &str, from_jaas: Option<String>| {
            let own = self.setting(key).filter(|s| !s.text().is_empty());
            match (own, from_jaas) {
                (Some(s), Some(j)) if jaas_order > s.order => Some(j),
                (Some(s), _) => Some(s.text().to_string()),
                (None, j) => j,
            }
        };
        let jaas = jaas.unwrap_or_default();
        let needs = |what: &str, how: &str| {
            PropertiesError::new(
                None,
                format!("security.protocol {} with {mechanism} needs {what}: set {how}", protocol.name()),
            )
        };
        let username = match mechanism {
            "OAUTHBEARER" => String::new(),
            _ => pick("sasl.username", jaas.username)
                .ok_or_else(|| needs("a user", "sasl.username, or username=\"…\" in sasl.jaas.config"))?,
        };
        let secret = match mechanism {
            "OAUTHBEARER" => self.token()?.ok_or_else(|| {
                needs(
                    "a token",
                    "sasl.oauthbearer.token or sasl.oauthbearer.token.file (this client does not make unsecured \
                     tokens from sasl.jaas.config)",
                )
            })?,
            _ => Secret::new(
                pick("sasl.password", jaas.password)
                    .ok_or_else(|| needs("a password", "sasl.password, or password=\"…\" in sasl.jaas.config"))?,
            ),
        };
        // Checked against MECHANISMS already; `from_parts` knows each of them.
        Sasl::from_parts(mechanism, &username, secret)
            .ok_or_else(|| PropertiesError::new(Some("sasl.mechanism"), format!("{mechanism} is not supported")))
    }

    /// The bearer token: `sasl.oauthbearer.token`, or the trimmed content of
    /// `sasl.oauthbearer.token.file`, whichever was set later.
    fn token(&self) -> Result<Option<Secret>, PropertiesError> {
        let inline = self.setting("sasl.oauthbearer.token");
        let file = self.setting("sasl.oauthbearer.token.file");
        match (inline, file) {
            (Some(t), Some(f)) if f.order > t.order => read_token(f).map(Some),
            (Some(t), _) => Ok(Some(Secret::new(t.text().trim()))),
            (None, Some(f)) => read_token(f).map(Some),
            (None, None) => Ok(None),
        }
    }

    /// The TLS settings, checked whether or not the protocol uses TLS (a bad value is bad).
    fn tls_options(&self) -> Result<TlsOptions, PropertiesError> {
        if let Some(s) = self.setting("ssl.key.password").filter(|s| !s.text().is_empty()) {
            return Err(s.bad(
                "encrypted private keys are not supported by this client's TLS stack (rustls): decrypt the key \
                 (openssl pkey -in KEY -out key.pem) and leave ssl.key.password empty",
            ));
        }
        if let Some(s) = self.setting("ssl.endpoint.identification.algorithm") {
            if !s.text().eq_ignore_ascii_case("https") {
                return Err(s.bad(
                    "this client always verifies the broker's certificate and its name; remove this setting, and to \
                     verify against another name than the broker's address (an IP, a tunnel), set the TLS server \
                     name (TlsOptions::server_name)",
                ));
            }
        }
        let ca = self.setting("ssl.ca.location");
        let truststore = self.setting("ssl.truststore.location");
        let ca_file = match (ca, truststore) {
            (Some(c), Some(t)) if t.order > c.order => truststore_file(t)?,
            (Some(c), _) => match c.text() {
                "" | "probe" => None,
                path => Some(PathBuf::from(path)),
            },
            (None, Some(t)) => truststore_file(t)?,
            (None, None) => None,
        };
        let cert = self.setting("ssl.certificate.location").filter(|s| !s.text().is_empty());
        let key = self.setting("ssl.key.location").filter(|s| !s.text().is_empty());
        let client_cert = match (cert, key) {
            (Some(cert), Some(key)) => {
                Some(ClientCert { cert_file: PathBuf::from(cert.text()), key_file: PathBuf::from(key.text()) })
            }
            (None, None) => None,
            (Some(one), None) | (None, Some(one)) => {
                let other = if one.key == "ssl.key.location" { "ssl.certificate.location" } else { "ssl.key.location" };
                return Err(one.bad(format!("a client certificate needs both; set {other} too")));
            }
        };
        Ok(TlsOptions { ca_file, server_name: None, client_cert })
    }
}

/// What a set of client properties means for a refresh.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientSettings {
    /// The bootstrap brokers, `host:port` (empty when no key named them).
    pub seeds: Vec<String>,
    /// The protocol they were resolved under.
    pub protocol: SecurityProtocol,
    /// TLS, when the protocol is `SSL` or `SASL_SSL`.
    pub tls: Option<TlsOptions>,
    /// How to authenticate, when the protocol is `SASL_*`.
    pub sasl: Option<Sasl>,
    /// `client.id`, when set.
    pub client_id: Option<String>,
    /// `socket.connection.setup.timeout.ms`, when set. The core has no separate connect
    /// timeout: its `attempt_timeout` bounds connect, TLS, SASL and both requests, so that is
    /// where [`ClientSettings::apply`] puts it.
    pub connect_timeout: Option<Duration>,
}

impl ClientSettings {
    /// Puts everything but the seeds into `options` (client id, SASL, TLS, and the connect
    /// timeout as the policy's `attempt_timeout`, through the knob schema).
    pub fn apply(&self, options: &mut RefreshOptions) -> Result<(), PropertiesError> {
        if let Some(id) = &self.client_id {
            options.exchange.client_id.clone_from(id);
        }
        options.exchange.sasl.clone_from(&self.sasl);
        options.tls.clone_from(&self.tls);
        if let Some(timeout) = self.connect_timeout {
            let value = format!("{}ms", timeout.as_millis());
            options.config.set("attempt_timeout", &value).map_err(|e| {
                PropertiesError::new(Some("socket.connection.setup.timeout.ms"), format!("attempt_timeout: {e}"))
            })?;
        }
        Ok(())
    }
}
