//! Checks an adapter runs when a refresh or a long-lived client is constructed, so that
//! misuse fails there — naming the field — and never comes back later as every attempt's
//! error. They are pure (no lookup, no socket), so every adapter runs the same ones.
//!
//! The core already refuses empty seed lists and entries that are not `host:port` with a
//! valid port (and merges duplicates). What it cannot know is whether a host could ever be
//! looked up: `"[not-an-ip]:9092"` or `"kafka 1:9092"` pass its syntax check but would fail
//! every attempt with a DNS error. Likewise an exchange setting that no request or answer
//! can satisfy (a client id too long to encode, a frame limit smaller than any broker's
//! answer, a topic name Kafka cannot hold) would fail every attempt the same way.

use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::String;
use core::net::{Ipv4Addr, Ipv6Addr};

use super::{Exchange, ExchangeConfig};
use crate::brokers::BrokerBook;
use crate::error::ConfigError;

/// The smallest `max_frame_size` accepted. No real broker's ApiVersions answer fits in less
/// (Kafka 3.x sends ~600 bytes), so a smaller limit could only fail every attempt.
pub const MIN_MAX_FRAME_SIZE: usize = 1024;

/// Kafka's longest topic name.
const MAX_TOPIC_NAME: usize = 249;

/// Checks that every seed's host could be looked up: an IPv4 address, a bracketed IPv6
/// address, or a syntactically valid host name.
pub fn seeds(book: &BrokerBook) -> Result<(), ConfigError> {
    for (_, entry) in book.iter() {
        let address = &*entry.address;
        let (host, _) = address.rsplit_once(':').unwrap_or((address, ""));
        host_name(host).map_err(|why| ConfigError {
            field: "seeds",
            problem: format!("entry {address:?} has an invalid host: {why}"),
        })?;
    }
    Ok(())
}

fn host_name(host: &str) -> Result<(), String> {
    if let Some(inner) = host.strip_prefix('[') {
        let inner = inner.strip_suffix(']').unwrap_or(inner);
        return inner.parse::<Ipv6Addr>().map(drop).map_err(|_| format!("[{inner}] is not an IPv6 address"));
    }
    if host.parse::<Ipv4Addr>().is_ok() {
        return Ok(());
    }
    let name = host.strip_suffix('.').unwrap_or(host);
    if name.len() > 253 {
        return Err(format!("a host name has at most 253 characters, this one {}", name.len()));
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err(format!("{host:?} has an empty label (two dots in a row, or a leading dot)"));
        }
        if label.len() > 63 {
            return Err(format!("the label {label:?} is longer than 63 characters"));
        }
        if let Some(c) = label.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_')) {
            return Err(format!(
                "{c:?} cannot appear in a host name (letters, digits, '-', '_' and '.'; \
                 internationalised names in their ASCII form)"
            ));
        }
    }
    Ok(())
}

/// Checks that the exchange settings allow a conversation at all.
pub fn exchange(config: &ExchangeConfig) -> Result<(), ConfigError> {
    if config.max_frame_size < MIN_MAX_FRAME_SIZE {
        return Err(ConfigError {
            field: "exchange.max_frame_size",
            problem: format!(
                "({}) must be at least {MIN_MAX_FRAME_SIZE} bytes: no broker's answer fits in less",
                config.max_frame_size
            ),
        });
    }
    if let Some(topics) = &config.topics {
        for topic in topics {
            topic_name(topic).map_err(|why| ConfigError {
                field: "exchange.topics",
                problem: format!("{topic:?} is not a valid Kafka topic name: {why}"),
            })?;
        }
    }
    // The exchange is born finished exactly when its first request does not encode.
    let mut probe = Exchange::new(config);
    if probe.is_finished() {
        let why = match probe.poll_outcome() {
            Some(Err(e)) => e.detail.into_owned(),
            _ => "the first request does not encode".to_owned(),
        };
        return Err(ConfigError { field: "exchange.client_id", problem: format!("is unusable: {why}") });
    }
    Ok(())
}

/// Kafka's rule (`org.apache.kafka.common.internals.Topic`): 1 to 249 characters of
/// `[a-zA-Z0-9._-]`, and neither `.` nor `..`.
fn topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("it is empty".to_owned());
    }
    if name == "." || name == ".." {
        return Err("`.` and `..` are reserved".to_owned());
    }
    if name.len() > MAX_TOPIC_NAME {
        return Err(format!("at most {MAX_TOPIC_NAME} characters, this one has {}", name.len()));
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))) {
        return Err(format!("{c:?} is not allowed (letters, digits, '.', '_' and '-')"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_that_could_resolve_pass() {
        for host in ["localhost", "kafka-1.example.com", "kafka_1", "127.0.0.1", "[::1]", "[fe80::1]", "b1.", "10"] {
            assert_eq!(host_name(host), Ok(()), "{host}");
        }
    }

    #[test]
    fn hosts_that_never_resolve_are_refused() {
        for host in ["[not-an-ip]", "[127.0.0.1]", "kafka 1", "a..b", ".a", "kafka/1", "käfka", "a\u{0}b"] {
            assert!(host_name(host).is_err(), "{host}");
        }
        assert!(host_name(&"a".repeat(64)).is_err());
        assert!(host_name(&["a"; 128].join(".")).is_err());
    }

    #[test]
    fn topic_names_follow_kafka() {
        for ok in ["orders", "a.b_c-D9", &"t".repeat(249)] {
            assert_eq!(topic_name(ok), Ok(()), "{ok}");
        }
        for bad in ["", ".", "..", "a b", "a/b", &"t".repeat(250)] {
            assert!(topic_name(bad).is_err(), "{bad}");
        }
    }
}
