//! What a refresh is asked to do: the core's policy plus what only the adapter knows (what
//! to ask the broker, how to secure the connection).

use stagger::kafka::ExchangeConfig;
use stagger::RefreshConfig;

/// Everything [`crate::refresh_with`] needs besides the seed brokers.
///
/// Plain data with a `Default`, so a caller can fill it field by field.
#[derive(Clone, Debug, Default)]
pub struct RefreshOptions {
    /// The core's policy: fan-out, stagger, throttle, timeouts, retries, seed.
    pub config: RefreshConfig,
    /// What each attempt asks the broker (client id, topics, maximum frame size).
    pub exchange: ExchangeConfig,
    /// TLS to the brokers; `None` for plaintext.
    #[cfg(feature = "tls")]
    pub tls: Option<Tls>,
    /// Where `OAUTHBEARER` tokens come from when they expire: asked once as the refresh
    /// starts, its answer replaces `exchange.sasl` (a fixed token can go there directly).
    pub oauth_token: Option<stagger::kafka::sasl::TokenSource>,
    /// Resolve seeds given by name through the core (`BrokerBook::resolving`), so every
    /// address of a name is a candidate the fan-out staggers over, instead of one attempt
    /// that tries the addresses one after another. Lookups use `std`'s resolver
    /// (`getaddrinfo`) on a helper thread: its server and timeouts are the system's, and a
    /// lookup that hangs is bounded by the core's attempt timeout. Off by default.
    pub resolve_names: bool,
}

/// TLS to the brokers (feature `tls`).
///
/// The caller builds the [`rustls::ClientConfig`]: which roots to trust, client
/// certificates, protocol versions and the crypto provider are rustls's own API, and a
/// blocking program that speaks TLS already has it at hand. (`stagger-tokio` loads them from
/// PEM paths for its CLI; this crate keeps to I/O.)
#[cfg(feature = "tls")]
#[derive(Clone, Debug)]
pub struct Tls {
    /// The client configuration every connection uses.
    pub config: std::sync::Arc<rustls::ClientConfig>,
    /// Name to verify the broker's certificate against (and send as SNI) instead of the
    /// host part of its address: for brokers reached through an IP or a tunnel.
    pub server_name: Option<String>,
}
