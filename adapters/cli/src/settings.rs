//! Where `stagger metadata` gets its connection from: the client config files Kafka users
//! already have (librdkafka / kcat, Java `client.properties`), `-X key=value` like kcat, and
//! the flags, layered lowest to highest as
//!
//! 1. `$STAGGER_CONFIG`, or else the default file `$XDG_CONFIG_HOME/stagger/stagger.conf`
//!    (`~/.config/stagger/stagger.conf`) when it exists;
//! 2. each `-F FILE`, in order;
//! 3. each `-X key=value`, in order;
//! 4. the flags (`-b`, `--tls`, `--ca`, `--cert`, `--key`, `--sasl-*`).
//!
//! The parsing and the meaning of each key are `stagger_tokio::properties`'; this module
//! only finds the files and turns flags into the same properties, so one set of rules
//! (and one set of error messages) covers all four layers.

use std::path::{Path, PathBuf};

use clap::Args;
use stagger_tokio::properties::{ClientProperties, ClientSettings, SecurityProtocol};

use crate::policy::PolicyArgs;

/// The connection flags of `stagger metadata`.
#[derive(Args, Clone, Debug, Default)]
pub struct ConnectionArgs {
    /// Bootstrap brokers, host:port, comma-separated (repeatable); overrides bootstrap.servers.
    #[arg(short = 'b', long = "brokers", value_name = "HOST:PORT,…", value_delimiter = ',')]
    pub brokers: Vec<String>,
    /// Set a client property, like kcat (repeatable, applied in order after the files), e.g.
    /// `-X security.protocol=SASL_SSL -X sasl.mechanism=SCRAM-SHA-512`.
    #[arg(short = 'X', value_name = "KEY=VALUE")]
    pub properties: Vec<String>,
    /// Read client properties from FILE: a librdkafka/kcat file or a Java client.properties
    /// (repeatable; later files override earlier ones, and the default config file).
    #[arg(short = 'F', value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Connect with TLS (security.protocol SSL, or SASL_SSL with SASL).
    #[arg(long)]
    pub tls: bool,
    /// CA certificate (PEM) to verify brokers with (ssl.ca.location; implies --tls).
    #[arg(long, value_name = "FILE")]
    pub ca: Option<PathBuf>,
    /// Client certificate chain (PEM) for mutual TLS (ssl.certificate.location; needs a key:
    /// --key or ssl.key.location; implies --tls).
    #[arg(long, value_name = "FILE")]
    pub cert: Option<PathBuf>,
    /// Private key (PEM, unencrypted) of the client certificate (ssl.key.location; implies
    /// --tls).
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Verify the brokers' certificates against NAME (and send it as SNI) instead of the host
    /// of their addresses: for brokers reached by IP or through a tunnel (implies --tls).
    #[arg(long, value_name = "NAME")]
    pub server_name: Option<String>,
    /// SASL mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (sasl.mechanism;
    /// makes the protocol SASL_PLAINTEXT, or SASL_SSL with TLS).
    #[arg(long, value_name = "MECHANISM")]
    pub sasl_mechanism: Option<String>,
    /// SASL user (sasl.username).
    #[arg(long, value_name = "USER")]
    pub sasl_username: Option<String>,
    /// File holding the SASL password (sasl.password; one trailing newline is dropped), so
    /// the password stays out of the command line and the shell history.
    #[arg(long, value_name = "FILE")]
    pub sasl_password_file: Option<PathBuf>,
}

impl ConnectionArgs {
    /// Reads every layer, prints a warning line on stderr for each unknown key, and resolves
    /// the result. Errors are one paragraph naming the key and the value (never a secret).
    pub fn resolve(&self) -> Result<ClientSettings, String> {
        let mut properties = ClientProperties::default();
        if let Some(path) = config_file()? {
            properties.add_file(&path).map_err(|e| e.to_string())?;
        }
        for file in &self.files {
            properties.add_file(file).map_err(|e| format!("-F: {e}"))?;
        }
        for pair in &self.properties {
            properties.set_pair(pair).map_err(|e| e.to_string())?;
        }
        self.apply_flags(&mut properties)?;
        for warning in properties.warnings() {
            eprintln!("stagger: warning: {warning}");
        }
        let mut settings = properties.resolve().map_err(|e| e.to_string())?;
        if settings.seeds.is_empty() {
            return Err("no brokers: give -b HOST:PORT,… or set bootstrap.servers (with -X, -F FILE, \
                        $STAGGER_CONFIG or ~/.config/stagger/stagger.conf)"
                .into());
        }
        if let (Some(name), Some(tls)) = (&self.server_name, settings.tls.as_mut()) {
            tls.server_name = Some(name.clone());
        }
        Ok(settings)
    }

    /// The flags as properties, set last so they win; a TLS or SASL flag upgrades whatever
    /// protocol the files gave rather than replacing it (`--tls` on SASL_PLAINTEXT is SASL_SSL).
    fn apply_flags(&self, properties: &mut ClientProperties) -> Result<(), String> {
        if !self.brokers.is_empty() {
            properties.set_from("-b", "bootstrap.servers", &self.brokers.join(","));
        }
        let paths = [("--ca", "ssl.ca.location", &self.ca), ("--cert", "ssl.certificate.location", &self.cert)];
        for (flag, key, path) in paths.into_iter().chain([("--key", "ssl.key.location", &self.key)]) {
            if let Some(path) = path {
                properties.set_from(flag, key, utf8(flag, path)?);
            }
        }
        if let Some(mechanism) = &self.sasl_mechanism {
            properties.set_from("--sasl-mechanism", "sasl.mechanism", mechanism);
        }
        if let Some(user) = &self.sasl_username {
            properties.set_from("--sasl-username", "sasl.username", user);
        }
        if let Some(path) = &self.sasl_password_file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("--sasl-password-file: could not read {}: {e}", path.display()))?;
            let password = text.strip_suffix('\n').map_or(text.as_str(), |t| t.strip_suffix('\r').unwrap_or(t));
            properties.set_from("--sasl-password-file", "sasl.password", password);
        }
        let tls =
            self.tls || [&self.ca, &self.cert, &self.key].iter().any(|p| p.is_some()) || self.server_name.is_some();
        let sasl = self.sasl_mechanism.is_some() || self.sasl_username.is_some() || self.sasl_password_file.is_some();
        // A protocol the files got wrong is left for `resolve` to name, not papered over.
        let current = match properties.get("security.protocol") {
            Some(name) => SecurityProtocol::from_name(name),
            None => Some(SecurityProtocol::Plaintext),
        };
        if let Some(mut protocol) = current.filter(|_| tls || sasl) {
            if tls {
                protocol = protocol.with_tls();
            }
            if sasl {
                protocol = protocol.with_sasl();
            }
            let flags = match (tls, sasl) {
                (true, true) => "the TLS and SASL flags",
                (true, false) => "the TLS flags",
                _ => "the SASL flags",
            };
            properties.set_from(flags, "security.protocol", protocol.name());
        }
        Ok(())
    }
}

/// The policy flags with `socket.connection.setup.timeout.ms` as the attempt timeout — below
/// every explicit policy flag: `--attempt-timeout` and `--set` win, and so does a `--policy`
/// file (which may set it; one that does not keeps the core's default).
pub fn policy_with(policy: &PolicyArgs, settings: &ClientSettings) -> PolicyArgs {
    let mut policy = policy.clone();
    if let Some(timeout) =
        settings.connect_timeout.filter(|_| policy.attempt_timeout.is_none() && policy.policy.is_none())
    {
        policy.attempt_timeout = Some(format!("{}ms", timeout.as_millis()));
    }
    policy
}

fn utf8<'a>(flag: &str, path: &'a Path) -> Result<&'a str, String> {
    path.to_str().ok_or_else(|| format!("{flag}: {} is not valid UTF-8", path.display()))
}

/// `$STAGGER_CONFIG` (which must exist), or the default file when it exists.
fn config_file() -> Result<Option<PathBuf>, String> {
    if let Some(named) = std::env::var_os("STAGGER_CONFIG").filter(|v| !v.is_empty()) {
        let path = PathBuf::from(named);
        return match path.is_file() {
            true => Ok(Some(path)),
            false => Err(format!("STAGGER_CONFIG names {}, which is not a file", path.display())),
        };
    }
    // XDG: a relative $XDG_CONFIG_HOME is to be ignored.
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| PathBuf::from(h).join(".config")));
    Ok(base.map(|b| b.join("stagger").join("stagger.conf")).filter(|p| p.is_file()))
}
