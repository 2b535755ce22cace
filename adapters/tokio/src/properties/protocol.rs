//! `security.protocol`, the switch every other setting depends on.

/// Kafka's `security.protocol`: whether the connection is TLS and whether it authenticates
/// with SASL — the two questions every other setting depends on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    /// Plain TCP, no authentication (Kafka's default).
    #[default]
    Plaintext,
    /// TLS, no SASL (perhaps a client certificate).
    Ssl,
    /// SASL over plain TCP.
    SaslPlaintext,
    /// SASL over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Every protocol, in Kafka's spelling, for parsing and messages.
    pub const NAMES: [&'static str; 4] = ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"];

    /// Parses Kafka's name in any case (`sasl_ssl` works: librdkafka accepts it too).
    pub fn from_name(name: &str) -> Option<SecurityProtocol> {
        let all = [Self::Plaintext, Self::Ssl, Self::SaslPlaintext, Self::SaslSsl];
        all.into_iter().find(|p| p.name().eq_ignore_ascii_case(name.trim()))
    }

    /// Kafka's name (`SASL_SSL`), for messages and for writing it back as a property.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// Whether connections use TLS.
    pub fn tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    /// Whether connections authenticate with SASL.
    pub fn sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }

    /// The same protocol over TLS: what a `--tls` flag does to whatever a file said.
    pub fn with_tls(self) -> SecurityProtocol {
        if self.sasl() {
            Self::SaslSsl
        } else {
            Self::Ssl
        }
    }

    /// The same protocol with SASL: what a `--sasl-mechanism` flag does to a file's protocol.
    pub fn with_sasl(self) -> SecurityProtocol {
        if self.tls() {
            Self::SaslSsl
        } else {
            Self::SaslPlaintext
        }
    }
}
