//! SASL authentication: what the caller configures, and each mechanism's side of the
//! conversation.
//!
//! Kafka authenticates after ApiVersions and before anything else: `SaslHandshake` names
//! the mechanism (the broker answers with the ones it enables), then one or more
//! `SaslAuthenticate` round trips carry the mechanism's own messages. The [`Exchange`]
//! sends those requests; this module only knows what goes inside them:
//!
//! | mechanism | client → broker | broker → client |
//! |---|---|---|
//! | `PLAIN` (RFC 4616) | `\0user\0password` | nothing: accepted, or an error code |
//! | `SCRAM-SHA-256`, `SCRAM-SHA-512` (RFC 5802, RFC 7677) | client-first, then client-final with the proof | server-first (nonce, salt, iterations), then server-final (its signature, verified here) |
//! | `OAUTHBEARER` (RFC 7628) | `n,,\x01auth=Bearer TOKEN\x01\x01` | nothing, or an error JSON that the client acknowledges with `\x01` |
//!
//! Credentials live in [`Secret`]s, whose `Debug` prints `<redacted>` and which have no
//! `Display` and no serde: no trace, event, log line or error of a refresh can carry one.
//!
//! [`Exchange`]: super::Exchange

use alloc::borrow::Cow;
use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use core::fmt;

use super::ExchangeConfig;
use crate::error::{AttemptError, ConfigError, ErrorKind};

mod conversation;
mod scram;

pub(super) use conversation::{Conversation, Step};
pub use scram::ScramKeys;

/// A password or token. `Debug` prints `<redacted>`; there is no `Display` and no serde, so
/// the only way to the text is [`Secret::expose`], which the SASL conversation calls.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a password or token.
    pub fn new(secret: impl Into<String>) -> Secret {
        Secret(secret.into())
    }

    /// The secret itself, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Secret {
        Secret::new(s)
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Secret {
        Secret(s)
    }
}

/// SCRAM's hash function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScramHash {
    /// `SCRAM-SHA-256`.
    Sha256,
    /// `SCRAM-SHA-512`.
    Sha512,
}

/// How an attempt authenticates, with its credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sasl {
    /// `PLAIN`: user and password in one message (use it over TLS only).
    Plain {
        /// The user.
        username: String,
        /// Their password.
        password: Secret,
    },
    /// `SCRAM-SHA-256` / `SCRAM-SHA-512`: the password never crosses the wire, and the broker
    /// proves it knows it too.
    Scram {
        /// Which hash.
        hash: ScramHash,
        /// The user.
        username: String,
        /// Their password.
        password: Secret,
    },
    /// `OAUTHBEARER` with a token the caller obtained (adapters take a callback for tokens
    /// that expire, and put its answer here before each attempt).
    OAuthBearer {
        /// The bearer token (a JWT, for Kafka's own validators).
        token: Secret,
    },
}

/// Every mechanism's Kafka name, for parsing and for error messages.
pub const MECHANISMS: [&str; 4] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"];

impl Sasl {
    /// The mechanism's name as Kafka spells it (`SCRAM-SHA-512`, …).
    pub fn mechanism(&self) -> &'static str {
        match self {
            Sasl::Plain { .. } => "PLAIN",
            Sasl::Scram { hash: ScramHash::Sha256, .. } => "SCRAM-SHA-256",
            Sasl::Scram { hash: ScramHash::Sha512, .. } => "SCRAM-SHA-512",
            Sasl::OAuthBearer { .. } => "OAUTHBEARER",
        }
    }

    /// The user, for error messages (`None` for a token).
    pub fn username(&self) -> Option<&str> {
        match self {
            Sasl::Plain { username, .. } | Sasl::Scram { username, .. } => Some(username),
            Sasl::OAuthBearer { .. } => None,
        }
    }

    /// Builds the settings for `mechanism` (any case) from a user and a password, or a token
    /// for `OAUTHBEARER` (`username` ignored); `None` for a mechanism this client lacks.
    pub fn from_parts(mechanism: &str, username: &str, secret: Secret) -> Option<Sasl> {
        let username = String::from(username);
        Some(match mechanism.to_ascii_uppercase().as_str() {
            "PLAIN" => Sasl::Plain { username, password: secret },
            "SCRAM-SHA-256" => Sasl::Scram { hash: ScramHash::Sha256, username, password: secret },
            "SCRAM-SHA-512" => Sasl::Scram { hash: ScramHash::Sha512, username, password: secret },
            "OAUTHBEARER" => Sasl::OAuthBearer { token: secret },
            _ => return None,
        })
    }

    /// Who is authenticating, in words for errors: `user "alice" with SCRAM-SHA-256`.
    pub(super) fn who(&self) -> String {
        match self.username() {
            Some(user) => alloc::format!("user {user:?} with {}", self.mechanism()),
            None => alloc::format!("a bearer token with {}", self.mechanism()),
        }
    }
}

/// The SCRAM client nonce's raw bytes (base64 on the wire: 24 printable characters).
pub type Nonce = [u8; 18];

/// A callback that fetches a fresh `OAUTHBEARER` token (from an identity provider, a file a
/// sidecar rotates, …), for tokens that expire. The core never calls it: adapters do, before
/// a refresh or an attempt, and put its answer into [`ExchangeConfig::sasl`]. An `Err`
/// becomes a configuration error naming `sasl.oauthbearer.token`.
#[derive(Clone)]
pub struct TokenSource(Arc<dyn Fn() -> Result<String, String> + Send + Sync>);

impl TokenSource {
    /// Wraps the callback.
    pub fn new(fetch: impl Fn() -> Result<String, String> + Send + Sync + 'static) -> TokenSource {
        TokenSource(Arc::new(fetch))
    }

    /// A token fetched now, or the source's complaint: what a host answers a session's
    /// `NeedToken` with.
    pub fn fetch(&self) -> Result<Secret, String> {
        (self.0)().map(Secret::new)
    }

    /// `exchange` with a token fetched now.
    pub fn apply(&self, exchange: &ExchangeConfig) -> Result<ExchangeConfig, ConfigError> {
        let token = (self.0)().map_err(|problem| ConfigError::new("sasl.oauthbearer.token", problem))?;
        Ok(ExchangeConfig { sasl: Some(Sasl::OAuthBearer { token: Secret::new(token) }), ..exchange.clone() })
    }
}

impl ExchangeConfig {
    /// The settings a refresh starts with: with a token fetched now from `source`, or these
    /// as they are without one (what a one-shot refresh calls once, before any broker).
    pub fn with_token_from(&self, source: Option<&TokenSource>) -> Result<Cow<'_, ExchangeConfig>, ConfigError> {
        match source {
            Some(source) => source.apply(self).map(Cow::Owned),
            None => Ok(Cow::Borrowed(self)),
        }
    }

    /// The same for one attempt of a long-lived client, whose tokens expire between
    /// refreshes: a source that fails fails that attempt, as an authentication error.
    pub fn for_attempt(&self, source: Option<&TokenSource>) -> Result<Cow<'_, ExchangeConfig>, AttemptError> {
        self.with_token_from(source).map_err(|e| {
            AttemptError::with_detail(
                ErrorKind::Authentication,
                format!("no OAUTHBEARER token for this attempt: {}", e.problem),
            )
        })
    }
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenSource(..)")
    }
}
