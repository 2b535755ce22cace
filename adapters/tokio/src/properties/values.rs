//! Each understood key's value, checked: the parsers `resolve` runs, every error naming the
//! key, its value (unless secret) and where it was set.

use std::path::{Path, PathBuf};
use std::time::Duration;

use stagger::kafka::sasl::{Secret, MECHANISMS};

use super::{PropertiesError, Setting, MECHANISM_CHOICE};

/// Splits a logical line at Java's key terminator: the first `=`, `:` or whitespace, with
/// whitespace around an `=`/`:` ignored.
pub(super) fn split_line(line: &str) -> (&str, &str) {
    let end = line.find(|c: char| c == '=' || c == ':' || c.is_whitespace()).unwrap_or(line.len());
    let (key, rest) = line.split_at(end);
    let rest = rest.trim_start();
    let rest = rest.strip_prefix(['=', ':']).unwrap_or(rest);
    (key, rest.trim())
}

/// `host:port,…`; an empty list when the key is set is an error (no broker to ask).
pub(super) fn parse_servers(s: &Setting) -> Result<Vec<String>, PropertiesError> {
    let seeds: Vec<String> = s
        .text()
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        // librdkafka's `[proto://]host:port`: the protocol is security.protocol's business.
        .map(|a| a.split_once("://").map_or(a, |(_, rest)| rest).to_string())
        .collect();
    match seeds.is_empty() {
        true => Err(s.bad("expected host:port, comma-separated")),
        false => Ok(seeds),
    }
}

pub(super) fn parse_mechanism(s: &Setting) -> Result<&'static str, PropertiesError> {
    let name = s.text().trim();
    if let Some(m) = MECHANISMS.iter().find(|m| m.eq_ignore_ascii_case(name)) {
        return Ok(m);
    }
    Err(match name.eq_ignore_ascii_case("GSSAPI") {
        true => s.bad(format!("GSSAPI (Kerberos) is not supported; use {MECHANISM_CHOICE}")),
        false => s.bad(format!("expected {MECHANISM_CHOICE}")),
    })
}

pub(super) fn parse_millis(s: &Setting) -> Result<Duration, PropertiesError> {
    match s.text().trim().parse::<u32>() {
        Ok(ms) if ms > 0 => Ok(Duration::from_millis(u64::from(ms))),
        _ => Err(s.bad("expected milliseconds, a whole number from 1 (e.g. 10000)")),
    }
}

/// Java's trust store, accepted when it is PEM (what rustls reads).
pub(super) fn truststore_file(s: &Setting) -> Result<Option<PathBuf>, PropertiesError> {
    let path = Path::new(s.text());
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    match ext.as_str() {
        "pem" | "crt" => Ok(Some(path.to_path_buf())),
        _ => Err(s.bad(
            "only PEM trust stores (.pem, .crt) are supported, not JKS or PKCS12: convert it (keytool -exportcert \
             -rfc -keystore FILE -alias ALIAS -file ca.pem) and set ssl.ca.location",
        )),
    }
}

pub(super) fn read_token(s: &Setting) -> Result<Secret, PropertiesError> {
    let text = std::fs::read_to_string(s.text()).map_err(|e| s.bad(format!("could not read it: {e}")))?;
    match text.trim() {
        "" => Err(s.bad("the file is empty")),
        token => Ok(Secret::new(token)),
    }
}
