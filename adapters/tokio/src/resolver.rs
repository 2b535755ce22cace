//! How the adapter answers the core's `Command::Resolve`: the system's resolver by default,
//! or a DNS resolver whose name servers and timeouts can be set (feature `dns`,
//! hickory-resolver).
//!
//! Seeds given by name are resolved through the core's contract (`BrokerBook::resolving`):
//! the core asks for the name's addresses and makes each a candidate its fan-out staggers
//! over, so a name whose first address is dead no longer costs a whole attempt timeout.
//! Whatever the resolver, the core's attempt timeout bounds the lookup (a resolver that
//! never answers fails the attempt with kind `Dns`) and its deadline bounds the refresh.

use std::net::SocketAddr;
use std::time::Duration;

use stagger::{AttemptError, ConfigError, ErrorKind};

/// Which resolver answers the core's `Resolve` commands (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Resolver {
    /// The operating system's resolver (`getaddrinfo`, on a blocking thread): its name
    /// servers, search domains, `/etc/hosts` and timeouts are the system's.
    #[default]
    System,
    /// A DNS stub resolver (hickory-resolver) with these settings. Needs the `dns` feature.
    Dns(DnsOptions),
}

/// Settings of [`Resolver::Dns`].
///
/// A lookup asks for the name's `A` and `AAAA` records at once. Answers are cached for their
/// TTL (a name whose records change is followed once its TTL has passed: each refresh that
/// reaches the name looks it up again). A failed lookup is an attempt error of kind
/// [`ErrorKind::Dns`] whose detail says which failure it was: `no such name (NXDOMAIN)`,
/// `no addresses (NOERROR: …)`, `resolver failure (SERVFAIL)`, `resolver timed out (…)`, …;
/// a lookup still unanswered when the core's attempt timeout fires fails with the core's
/// `no answer from the resolver within the attempt timeout`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsOptions {
    /// Name servers to ask (UDP, and TCP for truncated answers); empty: those of the
    /// system's configuration (`/etc/resolv.conf`). Two are asked at once (the first two,
    /// then those that answered fastest), so one that never answers does not hold the
    /// lookup up while another answers.
    pub name_servers: Vec<SocketAddr>,
    /// How long to wait for one server's answer to one query.
    pub timeout: Duration,
    /// How many times to ask before giving up (the first query included): a lookup whose
    /// servers never answer fails after about `attempts × timeout`.
    pub attempts: usize,
}

impl Default for DnsOptions {
    /// The system's name servers, 2 s per query, 2 tries: well within the core's default
    /// attempt timeout, which bounds the lookup whatever these say.
    fn default() -> Self {
        DnsOptions { name_servers: Vec::new(), timeout: Duration::from_secs(2), attempts: 2 }
    }
}

/// A resolver ready to look names up, built once per refresh or client.
#[derive(Clone)]
pub(crate) enum Lookup {
    System,
    #[cfg(feature = "dns")]
    Dns(std::sync::Arc<Dns>),
}

/// A hickory resolver and the settings it was built with (for error details).
#[cfg(feature = "dns")]
pub(crate) struct Dns {
    resolver: hickory_resolver::TokioResolver,
    timeout: Duration,
    attempts: usize,
}

impl std::fmt::Debug for Lookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lookup::System => f.write_str("System"),
            #[cfg(feature = "dns")]
            Lookup::Dns(d) => f.debug_tuple("Dns").field(&d.resolver.config().name_servers()).finish(),
        }
    }
}

impl Lookup {
    /// Builds the resolver `resolver` describes; a configuration error names the field.
    pub(crate) fn new(resolver: &Resolver) -> Result<Self, ConfigError> {
        match resolver {
            Resolver::System => Ok(Lookup::System),
            Resolver::Dns(options) => dns(options),
        }
    }

    /// The addresses of `name` (`host:port`), the port being `name`'s; an error of kind
    /// [`ErrorKind::Dns`] when it does not resolve.
    pub(crate) async fn resolve(&self, name: &str) -> Result<Vec<SocketAddr>, AttemptError> {
        let dns_error = |e: &dyn std::fmt::Display| AttemptError::with_detail(ErrorKind::Dns, format!("{name}: {e}"));
        match self {
            Lookup::System => tokio::net::lookup_host(name).await.map(Iterator::collect).map_err(|e| dns_error(&e)),
            #[cfg(feature = "dns")]
            Lookup::Dns(dns) => {
                let (host, port) = split(name).ok_or_else(|| dns_error(&"not host:port"))?;
                let found = dns.resolver.lookup_ip(host).await.map_err(|e| dns_error(&dns.describe(&e)))?;
                Ok(found.iter().map(|ip| SocketAddr::new(ip, port)).collect())
            }
        }
    }
}

#[cfg(feature = "dns")]
impl Dns {
    /// Which DNS failure `error` is, in words that name it (the response code, or the
    /// timeout that expired), for the attempt error's detail.
    fn describe(&self, error: &hickory_resolver::ResolveError) -> String {
        use hickory_resolver::proto::op::ResponseCode;
        use hickory_resolver::proto::ProtoErrorKind;
        let Some(proto) = error.proto() else { return error.to_string() };
        match proto.kind() {
            ProtoErrorKind::NoRecordsFound { response_code, .. } => match *response_code {
                ResponseCode::NXDomain => "no such name (NXDOMAIN)".into(),
                ResponseCode::NoError => "no addresses (NOERROR: the name has no A or AAAA record)".into(),
                ResponseCode::ServFail => "resolver failure (SERVFAIL)".into(),
                ResponseCode::Refused => "resolver refused the query (REFUSED)".into(),
                code => format!("resolver error ({code}, rcode {})", u16::from(code)),
            },
            ProtoErrorKind::Timeout => format!(
                "resolver timed out (no answer in {} {} of {} ms)",
                self.attempts,
                if self.attempts == 1 { "try" } else { "tries" },
                self.timeout.as_millis()
            ),
            ProtoErrorKind::NoConnections => "resolver unreachable (no name server to ask)".into(),
            ProtoErrorKind::Io(e) => format!("resolver unreachable ({e})"),
            _ => error.to_string(),
        }
    }
}

/// `host` and `port` of `host:port`, the host without IPv6 brackets.
#[cfg(feature = "dns")]
fn split(address: &str) -> Option<(&str, u16)> {
    let (host, port) = address.rsplit_once(':')?;
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    Some((host, port.parse().ok()?))
}

#[cfg(feature = "dns")]
fn dns(options: &DnsOptions) -> Result<Lookup, ConfigError> {
    use hickory_resolver::config::{LookupIpStrategy, NameServerConfigGroup, ResolverConfig};
    use hickory_resolver::name_server::TokioConnectionProvider;
    use hickory_resolver::TokioResolver;

    if options.timeout.is_zero() {
        return Err(ConfigError::new("resolver.timeout", "must be more than zero"));
    }
    if options.attempts == 0 {
        return Err(ConfigError::new("resolver.attempts", "must be at least 1"));
    }
    let provider = TokioConnectionProvider::default();
    let mut builder = if options.name_servers.is_empty() {
        TokioResolver::builder(provider)
            .map_err(|e| ConfigError::new("resolver.name_servers", format!("the system's configuration: {e}")))?
    } else {
        let mut group = NameServerConfigGroup::new();
        for server in &options.name_servers {
            group.merge(NameServerConfigGroup::from_ips_clear(&[server.ip()], server.port(), true));
        }
        TokioResolver::builder_with_config(ResolverConfig::from_parts(None, Vec::new(), group), provider)
    };
    let opts = builder.options_mut();
    opts.timeout = options.timeout;
    // hickory's `attempts` counts the queries sent again after the first (its
    // `RetryDnsHandle`), ours every query: without the `- 1`, `attempts: 1` asked twice.
    opts.attempts = options.attempts - 1;
    // Two name servers asked at once (hickory's default, relied on by `name_servers`' doc).
    opts.num_concurrent_reqs = 2;
    // Every address of the name, both families: the core orders them (RFC 8305).
    opts.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
    let dns = Dns { resolver: builder.build(), timeout: options.timeout, attempts: options.attempts };
    Ok(Lookup::Dns(std::sync::Arc::new(dns)))
}

#[cfg(not(feature = "dns"))]
fn dns(_options: &DnsOptions) -> Result<Lookup, ConfigError> {
    Err(ConfigError::new("resolver", "Resolver::Dns needs stagger-tokio's `dns` feature"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_system_resolver_answers_with_the_port_of_the_name() {
        let found = Lookup::new(&Resolver::System).unwrap().resolve("localhost:9092").await.unwrap();
        assert!(!found.is_empty() && found.iter().all(|a| a.port() == 9092 && a.ip().is_loopback()), "{found:?}");
    }

    #[cfg(feature = "dns")]
    #[test]
    fn dns_settings_are_checked_naming_the_field() {
        let bad = DnsOptions { timeout: Duration::ZERO, ..DnsOptions::default() };
        assert_eq!(Lookup::new(&Resolver::Dns(bad)).unwrap_err().field, "resolver.timeout");
        let bad = DnsOptions { attempts: 0, ..DnsOptions::default() };
        assert_eq!(Lookup::new(&Resolver::Dns(bad)).unwrap_err().field, "resolver.attempts");
        assert_eq!(split("[::1]:53"), Some(("::1", 53)));
        assert_eq!(split("kafka.test:9092"), Some(("kafka.test", 9092)));
    }
}
