//! What a refresh is asked to do: the core's policy plus what only the adapter knows
//! (what to ask the broker, how to secure the connection, whether to record a trace).

use std::path::PathBuf;

pub use stagger::kafka::sasl::TokenSource;
use stagger::kafka::ExchangeConfig;
use stagger::RefreshConfig;

/// Everything [`crate::refresh_with`] needs besides the seed brokers.
///
/// Kept as plain data with a `Default` so a CLI can fill it from flags field by field.
#[derive(Clone, Debug, Default)]
pub struct RefreshOptions {
    /// The core's policy: fan-out, stagger, throttle, timeouts, retries, seed.
    pub config: RefreshConfig,
    /// What each attempt asks the broker (client id, topics, maximum frame size).
    pub exchange: ExchangeConfig,
    /// TLS to the brokers; `None` for plaintext. Needs the `tls` feature.
    pub tls: Option<TlsOptions>,
    /// Record the core's inputs and commands as a replayable [`stagger::Trace`]
    /// (what the CLI's `--trace FILE` writes and the web demo replays).
    pub record_trace: bool,
    /// Where `OAUTHBEARER` tokens come from when they expire: asked once as each refresh
    /// starts, its answer replaces `exchange.sasl` (a fixed token can go there directly).
    pub oauth_token: Option<TokenSource>,
    /// Which resolver answers the core's lookups of seeds given by name (each address a
    /// candidate of its own): the system's by default, or DNS with set name servers and
    /// timeouts ([`crate::Resolver::Dns`], feature `dns`).
    pub resolver: crate::Resolver,
}

/// TLS settings, as plain paths so they can come straight from a command line or a file.
///
/// They are loaded once when a refresh (or a [`crate::Client`]) starts, so a missing or
/// unreadable file is reported as a configuration error before any broker is contacted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// PEM file of CA certificates to trust. `None` trusts the Mozilla root set
    /// (`webpki-roots`), which suits brokers with publicly issued certificates.
    pub ca_file: Option<PathBuf>,
    /// Name to verify the broker's certificate against (and send as SNI) instead of the
    /// host part of its address: for brokers reached through an IP or a tunnel.
    pub server_name: Option<String>,
    /// Client certificate for mutual TLS, when the brokers require one.
    pub client_cert: Option<ClientCert>,
}

/// A client certificate chain and its private key, both PEM files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientCert {
    /// PEM file with the certificate chain, leaf first.
    pub cert_file: PathBuf,
    /// PEM file with the private key (PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
}
