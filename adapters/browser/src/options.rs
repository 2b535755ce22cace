//! What `refresh()` is given, checked and turned into what the core wants — plain Rust, so
//! it is tested on the host as well as in wasm.

use serde::Serialize;
use stagger::kafka::ExchangeConfig;
use stagger::session::SessionConfig;
use stagger::{BrokerBook, BrokerIndex, ClusterConfig, ConfigError, RefreshConfig, RefreshError};

/// The name written into the traces the browser records.
pub const RECORDER: &str = concat!("stagger-web ", env!("CARGO_PKG_VERSION"));

/// The session one `refresh()` runs: one refresh (no connection kept), live events for
/// `onEvent`, a trace for the result. No TLS: a `wss://` bridge's TLS is the browser's
/// business, and the bridge carries the broker's plaintext Kafka bytes.
pub fn session_config(config: RefreshConfig, exchange: ExchangeConfig) -> SessionConfig {
    SessionConfig {
        cluster: ClusterConfig { refresh: config, ..ClusterConfig::default() },
        exchange,
        one_shot: true,
        observe: true,
        recorder: Some(RECORDER.to_owned()),
        ..SessionConfig::default()
    }
}

/// The bootstrap bridges of one refresh: the core's [`BrokerBook`] (which wants `host:port`)
/// and, by broker index, the WebSocket URL each broker is reached through.
#[derive(Clone, Debug)]
pub struct Seeds {
    /// The book the core's `Refresh` is built from, one entry per distinct bridge.
    pub book: BrokerBook,
    urls: Vec<String>,
}

impl Seeds {
    /// Checks every URL (`ws://` or `wss://`, a host, an optional port) and builds the book.
    ///
    /// The book is keyed by the bridge's `host:port` (the core's address format); a URL
    /// listed twice is tried once, and two different URLs on the same `host:port` (e.g.
    /// websockify token paths) are refused, because the core could not tell them apart.
    pub fn new<S: AsRef<str>>(urls: &[S]) -> Result<Seeds, ConfigError> {
        let mut addresses: Vec<String> = Vec::with_capacity(urls.len());
        let mut kept: Vec<String> = Vec::with_capacity(urls.len());
        for url in urls {
            let url = url.as_ref().trim();
            let address = bridge_address(url)?;
            match addresses.iter().position(|a| *a == address) {
                Some(i) if kept[i] == url => {}
                Some(i) => {
                    return Err(bad(
                        "bootstrap",
                        format!("{url:?} and {:?} share the address {address}; list each bridge once", kept[i]),
                    ))
                }
                None => {
                    addresses.push(address);
                    kept.push(url.to_owned());
                }
            }
        }
        let book = BrokerBook::new(&addresses).map_err(|e| bad("bootstrap", e.problem))?;
        // BrokerBook::new keeps first-seen order and indices 0.., exactly as `kept`.
        debug_assert!(addresses.iter().enumerate().all(|(i, a)| book.find(a) == Some(BrokerIndex(i as u32))));
        Ok(Seeds { book, urls: kept })
    }

    /// The WebSocket URL of broker `index` (the book only has brokers given as URLs).
    pub fn url(&self, index: BrokerIndex) -> &str {
        self.urls.get(index.0 as usize).map_or("?", String::as_str)
    }

    /// The WebSocket URL of the bridge at `address` (`host:port`, as the session dials it).
    pub fn url_of(&self, address: &str) -> Option<&str> {
        self.book.find(address).and_then(|index| self.urls.get(index.0 as usize)).map(String::as_str)
    }

    /// Every URL, by broker index.
    pub fn urls(&self) -> &[String] {
        &self.urls
    }
}

/// `host:port` of a `ws://` or `wss://` URL (default ports 80 and 443), as the core's
/// broker book wants it. Paths and queries are allowed (websockify tokens) but not part of
/// the address.
pub fn bridge_address(url: &str) -> Result<String, ConfigError> {
    let lower = url.to_ascii_lowercase();
    let (rest, default_port) = if lower.starts_with("ws://") {
        (&url[5..], 80)
    } else if lower.starts_with("wss://") {
        (&url[6..], 443)
    } else {
        return Err(bad("bootstrap", format!("{url:?} is not a ws:// or wss:// URL of a WebSocket bridge")));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let (host, port) = match authority.rsplit_once(':') {
        // A colon inside brackets belongs to an IPv6 literal, not to a port.
        Some((host, port)) if !port.contains(']') => (host, Some(port)),
        _ => (authority, None),
    };
    let port = match port {
        None => default_port,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| bad("bootstrap", format!("{url:?} has an invalid port")))?,
    };
    if host.is_empty() || host == "[]" {
        return Err(bad("bootstrap", format!("{url:?} has no host")));
    }
    Ok(format!("{host}:{port}"))
}

/// A preset by name (see [`RefreshConfig::PRESETS`]), or an error listing the names.
pub fn preset(name: &str) -> Result<RefreshConfig, ConfigError> {
    RefreshConfig::preset(name.trim()).ok_or_else(|| {
        bad("config", format!("unknown preset {name:?} (expected one of {})", RefreshConfig::PRESETS.join(", ")))
    })
}

/// A config the core accepts, or the core's own error naming the bad field.
pub fn validated(config: RefreshConfig) -> Result<RefreshConfig, ConfigError> {
    config.validate().map(|()| config)
}

/// A [`ConfigError`] about one of `refresh()`'s options, named by its field.
pub fn bad(field: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError::new(field, problem)
}

/// One broker's story in a failed refresh, keyed by what a web page knows: the URL.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BrokerSummary {
    /// The bridge's WebSocket URL, as given in `bootstrap`.
    pub url: String,
    /// The `host:port` the core knew it by.
    pub address: String,
    /// Attempts started against it.
    pub attempts: u32,
    /// Its last error's kind (`"refused"`, `"closed"`, …), `None` if not tried or cancelled.
    pub kind: Option<String>,
    /// Its last error, as text; `None` if not tried or cancelled.
    pub error: Option<String>,
    /// Why the core cancelled its latest attempt (`"fatal"`, `"overtaken"`, …), if it did.
    pub cancelled: Option<String>,
    /// What happened to it, in the core's words (`not tried`, `cancelled: another broker's
    /// failure was fatal`, `connection refused`): what a page shows, so it words nothing
    /// itself.
    pub story: String,
}

/// Every broker of a failed refresh, in the core's attempt order, with its URL.
pub fn broker_summaries(error: &RefreshError, seeds: &Seeds) -> Vec<BrokerSummary> {
    error
        .brokers
        .iter()
        .map(|b| {
            // A cancel records an error of the timeout it pre-empted, for the core's
            // counting; it is not the broker's error, so a cancelled broker has none.
            let failed = b.last_error.as_ref().filter(|_| b.cancelled.is_none() && b.attempts > 0);
            BrokerSummary {
                url: seeds.url(b.broker).to_owned(),
                address: b.address.to_string(),
                attempts: b.attempts,
                kind: failed.map(|e| e.kind.name().to_owned()),
                error: failed.map(|e| e.to_string()),
                cancelled: b.cancelled.map(|r| r.name().to_owned()),
                story: b.to_string(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use stagger::{AttemptError, ErrorKind, GiveUpReason};

    #[test]
    fn bridge_urls_become_host_port() {
        assert_eq!(bridge_address("ws://127.0.0.1:9000").unwrap(), "127.0.0.1:9000");
        assert_eq!(bridge_address("WS://Example.com/kafka?token=b1").unwrap(), "Example.com:80");
        assert_eq!(bridge_address("wss://bridge.example").unwrap(), "bridge.example:443");
        assert_eq!(bridge_address("ws://[::1]:9001/").unwrap(), "[::1]:9001");
        assert_eq!(bridge_address("wss://[::1]").unwrap(), "[::1]:443");
        assert_eq!(bridge_address("ws://user:pw@h:7").unwrap(), "h:7");
        for bad in ["127.0.0.1:9092", "http://h:1", "ws://", "ws://:9", "ws://h:0", "ws://h:99999", "ws://h:x"] {
            let err = bridge_address(bad).unwrap_err();
            assert_eq!(err.field, "bootstrap", "{bad}");
        }
    }

    #[test]
    fn seeds_keep_order_merge_duplicates_and_refuse_clashes() {
        let seeds = Seeds::new(&["ws://a:1", "ws://b:2", "ws://a:1", " ws://c:3 "]).unwrap();
        assert_eq!(seeds.book.len(), 3);
        assert_eq!(seeds.urls(), ["ws://a:1", "ws://b:2", "ws://c:3"]);
        assert_eq!(seeds.url(BrokerIndex(1)), "ws://b:2");
        assert_eq!(seeds.url_of("c:3"), Some("ws://c:3"));
        assert_eq!(seeds.url_of("d:4"), None);
        assert_eq!(seeds.book.address(BrokerIndex(2)), "c:3");
        assert_eq!(Seeds::new(&["ws://a:1/x", "ws://a:1/y"]).unwrap_err().field, "bootstrap");
        assert_eq!(Seeds::new::<&str>(&[]).unwrap_err().field, "bootstrap");
    }

    #[test]
    fn presets_by_name_and_validation_name_the_field() {
        for name in RefreshConfig::PRESETS {
            assert!(validated(preset(name).unwrap()).is_ok());
        }
        let err = preset("fastest").unwrap_err();
        assert!(err.problem.contains("adaptive"), "{err}");
        let mut c = RefreshConfig::default();
        c.fanout.jitter = 2.0;
        assert_eq!(validated(c).unwrap_err().field, "fanout.jitter");
    }

    #[test]
    fn failed_brokers_are_summarised_by_url() {
        let seeds = Seeds::new(&["ws://a:1", "ws://b:2"]).unwrap();
        let error = RefreshError {
            reason: GiveUpReason::AllFailed { passes: 1 },
            last_error: None,
            brokers: vec![
                stagger::BrokerFailure {
                    broker: BrokerIndex(1),
                    address: "b:2".into(),
                    attempts: 2,
                    last_error: Some(AttemptError::with_detail(ErrorKind::Refused, "502")),
                    cancelled: None,
                },
                stagger::BrokerFailure {
                    broker: BrokerIndex(0),
                    address: "a:1".into(),
                    attempts: 0,
                    last_error: None,
                    cancelled: None,
                },
            ],
        };
        let summary = broker_summaries(&error, &seeds);
        assert_eq!(summary[0].url, "ws://b:2");
        assert_eq!(summary[0].kind.as_deref(), Some("refused"));
        assert_eq!(summary[0].error.as_deref(), Some("connection refused: 502"));
        assert_eq!(summary[0].story, "connection refused: 502");
        assert_eq!(
            summary[1],
            BrokerSummary {
                url: "ws://a:1".into(),
                address: "a:1".into(),
                attempts: 0,
                kind: None,
                error: None,
                cancelled: None,
                story: "not tried".into()
            }
        );
    }

    #[test]
    fn a_cancelled_broker_has_no_error_of_its_own_and_says_why_it_was_cancelled() {
        let seeds = Seeds::new(&["ws://a:1"]).unwrap();
        let error = RefreshError {
            reason: GiveUpReason::Fatal,
            last_error: None,
            brokers: vec![stagger::BrokerFailure {
                broker: BrokerIndex(0),
                address: "a:1".into(),
                attempts: 1,
                // What the core records for an overtaken attempt that had not connected.
                last_error: Some(AttemptError::with_detail(ErrorKind::ConnectTimeout, "overtaken: …")),
                cancelled: Some(stagger::CancelReason::Overtaken),
            }],
        };
        let summary = &broker_summaries(&error, &seeds)[0];
        assert_eq!((summary.kind.as_deref(), summary.error.as_deref()), (None, None));
        assert_eq!(summary.cancelled.as_deref(), Some("overtaken"));
        assert_eq!(summary.story, "cancelled: overtaken: silent while another broker was answering");
    }

    #[test]
    fn kind_names_are_the_cores_serde_names() {
        use ErrorKind::*;
        let kinds = [
            Dns,
            Refused,
            ConnectTimeout,
            ResponseTimeout,
            Closed,
            Protocol,
            FrameTooLarge,
            BrokerError(3),
            NoBrokers,
            Tls,
            Authentication,
            Authorization,
            Io,
        ];
        for kind in kinds {
            assert_eq!(serde_json::to_value(kind).unwrap()["kind"], kind.name(), "{kind:?}");
        }
    }
}
