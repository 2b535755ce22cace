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
//! (and one set of error messages) covers all four layers. It hands a file over one logical
//! line at a time, so that every warning and error names the line (`FILE:LINE: key …`).
//!
//! Secrets at rest: a file that holds a password, a token or another secret (a `-F` file,
//! the default one, the `--sasl-password-file`, an OAUTHBEARER token file) gets a warning on
//! stderr when its group or others can read it, as ssh warns of a readable private key
//! (Unix only).

use std::path::{Path, PathBuf};

use clap::Args;
use stagger::kafka::sasl::Sasl;
use stagger_tokio::properties::{ClientProperties, ClientSettings, SecurityProtocol, SECRET_KEYS};

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
    /// Reads every layer, prints a warning line on stderr for each file holding a secret that
    /// others can read and for each unknown key, and resolves the result. Errors are one
    /// paragraph naming the key and the value (never a secret), and for a file the line.
    pub fn resolve(&self) -> Result<ClientSettings, String> {
        let mut properties = ClientProperties::default();
        let mut exposed = Vec::new();
        if let Some(path) = config_file()? {
            add_file(&mut properties, &path, &mut exposed)?;
        }
        for file in &self.files {
            add_file(&mut properties, file, &mut exposed).map_err(|e| format!("-F: {e}"))?;
        }
        for pair in &self.properties {
            properties.set_pair(pair).map_err(|e| e.to_string())?;
        }
        self.apply_flags(&mut properties, &mut exposed)?;
        let resolved = properties.resolve();
        if let (Ok(ClientSettings { sasl: Some(Sasl::OAuthBearer { .. }), .. }), Some(path)) =
            (&resolved, properties.get("sasl.oauthbearer.token.file"))
        {
            exposed.extend(exposed_secret(Path::new(path), "a token (sasl.oauthbearer.token.file)"));
        }
        for warning in &exposed {
            eprintln!("stagger: warning: {warning}");
        }
        for warning in properties.warnings() {
            eprintln!("stagger: warning: {warning}");
        }
        let mut settings = resolved.map_err(|e| e.to_string())?;
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
    fn apply_flags(&self, properties: &mut ClientProperties, exposed: &mut Vec<String>) -> Result<(), String> {
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
            let text = read_small(path)
                .and_then(|bytes| String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8 text", path.display())))
                .map_err(|e| format!("--sasl-password-file: {e}"))?;
            exposed.extend(exposed_secret(path, "a password (--sasl-password-file)"));
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

/// Reads a client properties file and layers it over `properties`, one logical line at a
/// time with `FILE:LINE` as its source, so that every warning and error names the line; a
/// file holding a secret that others can read adds a warning to `exposed`.
fn add_file(properties: &mut ClientProperties, path: &Path, exposed: &mut Vec<String>) -> Result<(), String> {
    let bytes = read_small(path)?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = 1 + e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count();
        format!(
            "{}:{line}: not UTF-8 (byte {at} of the file): a client properties file must be UTF-8 text",
            path.display()
        )
    })?;
    let mut secret = None;
    for (line, chunk) in logical_lines(&text) {
        properties.add_file_text(chunk, &format!("{}:{line}", path.display()));
        if secret.is_none() {
            secret = secret_in(chunk).map(|(what, key)| format!("{what} ({key} on line {line})"));
        }
    }
    if let Some(what) = secret {
        exposed.extend(exposed_secret(path, &what));
    }
    Ok(())
}

/// The most a client properties file or a password file may hold: a few lines are typical;
/// this keeps `-F /dev/zero` (or a file named by mistake) from reading without end.
const MAX_FILE: u64 = 1024 * 1024;

/// A file's bytes, refused past [`MAX_FILE`]; errors name the file.
fn read_small(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(MAX_FILE + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("could not read {}: {e}", path.display()))?;
    match bytes.len() as u64 > MAX_FILE {
        true => Err(format!(
            "{} is larger than {} KiB, which no client file is: is it the right file?",
            path.display(),
            MAX_FILE / 1024
        )),
        false => Ok(bytes),
    }
}

/// The logical lines of a properties file, with the number of the line each starts on, as
/// `ClientProperties::add_file_text` reads them: blank and comment (`#`, `!`) lines left
/// out, and a line ending in an odd number of backslashes joined with the next. Each is the
/// file's own text (its physical lines, line ends and all), for `add_file_text` to read.
fn logical_lines(text: &str) -> Vec<(usize, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    // Physical lines with their start offsets, their ends stripped as `str::lines` does.
    let mut physical = Vec::new();
    let mut at = 0;
    for raw in text.split_inclusive('\n') {
        let line = raw.strip_suffix('\n').map_or(raw, |l| l.strip_suffix('\r').unwrap_or(l));
        physical.push((at, line));
        at += raw.len();
    }
    let continues = |line: &str| (line.len() - line.trim_end_matches('\\').len()) % 2 == 1;
    let mut logical = Vec::new();
    let mut i = 0;
    while i < physical.len() {
        let (start, line) = physical[i];
        let first = i;
        i += 1;
        let head = line.trim_start();
        if head.is_empty() || head.starts_with('#') || head.starts_with('!') {
            continue;
        }
        let mut last = line;
        while continues(last) && i < physical.len() {
            last = physical[i].1;
            i += 1;
        }
        let end = physical.get(i).map_or(text.len(), |&(next, _)| next);
        logical.push((first + 1, &text[start..end]));
    }
    logical
}

/// Whether a logical line (as [`logical_lines`] gives it) sets a secret: `(what, key)`, e.g.
/// `("a password", "sasl.password")`. Secrets are the keys whose values this client keeps
/// secret (a `sasl.jaas.config` when it has a password), and any other key of the Kafka
/// clients' that holds one (`ssl.keystore.password`, `…client.secret`, the schema registry's
/// `basic.auth.user.info`); an empty value is no secret.
fn secret_in(chunk: &str) -> Option<(&'static str, String)> {
    let mut line = String::new();
    for next in chunk.lines() {
        line.push_str(next.trim_start());
        if (line.len() - line.trim_end_matches('\\').len()).is_multiple_of(2) {
            break;
        }
        line.pop();
    }
    // Java's key terminator: the first `=`, `:` or whitespace.
    let end = line.find(|c: char| c == '=' || c == ':' || c.is_whitespace()).unwrap_or(line.len());
    let (key, rest) = line.split_at(end);
    let rest = rest.trim_start();
    let value = rest.strip_prefix(['=', ':']).unwrap_or(rest).trim();
    if value.is_empty() {
        return None;
    }
    let what = match key {
        "sasl.jaas.config" if !value.to_ascii_lowercase().contains("password") => return None,
        "sasl.oauthbearer.token" => "a token",
        "basic.auth.user.info" => "a password",
        _ if SECRET_KEYS.contains(&key) || key.ends_with(".password") => "a password",
        _ if key.ends_with(".secret") => "a secret",
        _ => return None,
    };
    Some((what, key.to_string()))
}

/// The warning for `path`, which holds `what`, when its group or others may read it.
#[cfg(unix)]
fn exposed_secret(path: &Path, what: &str) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o7777;
    let by = match (mode & 0o040 != 0, mode & 0o004 != 0) {
        (_, true) => "others",
        (true, false) => "its group",
        (false, false) => return None,
    };
    let path = path.display();
    Some(format!("{path} holds {what} and is readable by {by} (mode {mode:04o}); chmod 600 {path}"))
}

/// File modes say nothing of who may read a file here.
#[cfg(not(unix))]
fn exposed_secret(_path: &Path, _what: &str) -> Option<String> {
    None
}
