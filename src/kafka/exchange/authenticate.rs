//! The exchange's SASL steps: SaslHandshake names the mechanism, SaslAuthenticate carries
//! the mechanism's messages (see [`crate::kafka::sasl`]) until it is done, then Metadata.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::{Awaiting, Credentials, Exchange};
use crate::error::{AttemptError, ErrorKind};
use crate::kafka::sasl::Step;

/// SaslHandshake v1 (Kafka 1.0+): authentication bytes then travel in SaslAuthenticate.
const SASL_HANDSHAKE_VERSION: i16 = 1;
/// The newest SaslAuthenticate this client speaks (v2 is the flexible one).
const SASL_AUTHENTICATE_MAX: i16 = 2;
/// Kafka's UNSUPPORTED_SASL_MECHANISM error code.
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
/// Kafka's ILLEGAL_SASL_STATE: what a listener without SASL answers to SaslHandshake.
const ILLEGAL_SASL_STATE: i16 = 34;

/// The highest SaslAuthenticate version both sides speak.
pub(super) fn negotiate_sasl_authenticate_version(response: &ApiVersionsResponse) -> Result<i16, AttemptError> {
    let theirs = response.api_keys.iter().find(|api| api.api_key == ApiKey::SaslAuthenticate as i16);
    match theirs {
        Some(api) if api.min_version <= SASL_AUTHENTICATE_MAX && api.max_version >= 0 => {
            Ok(api.max_version.min(SASL_AUTHENTICATE_MAX))
        }
        _ => Err(AttemptError::with_detail(
            ErrorKind::BrokerError(35),
            "the broker does not list SaslAuthenticate v0..=v2 (Kafka 1.0 or newer is needed for SASL)",
        )),
    }
}

impl Exchange {
    pub(super) fn send_sasl_handshake(&mut self) {
        let Some(sasl) = &self.sasl else { return };
        let request = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(sasl.mechanism()));
        let version = SASL_HANDSHAKE_VERSION;
        self.send(ApiKey::SaslHandshake, version, &request, Awaiting::SaslHandshake { version });
    }

    pub(super) fn on_sasl_handshake(&mut self, response: &SaslHandshakeResponse) -> Result<(), AttemptError> {
        let Some(sasl) = &mut self.sasl else { return Ok(()) };
        let mechanism = sasl.mechanism();
        match response.error_code {
            0 => {
                let first = sasl.start();
                self.send_sasl_authenticate(first);
                Ok(())
            }
            UNSUPPORTED_SASL_MECHANISM => {
                let enabled: Vec<&str> = response.mechanisms.iter().map(|m| m.as_str()).collect();
                let enabled = if enabled.is_empty() { String::from("none") } else { enabled.join(", ") };
                let enabled = crate::kafka::excerpt(&enabled);
                Err(AttemptError::with_detail(
                    ErrorKind::BrokerError(UNSUPPORTED_SASL_MECHANISM),
                    format!("the broker does not enable {mechanism}; it enables: {enabled}"),
                ))
            }
            ILLEGAL_SASL_STATE => Err(AttemptError::with_detail(
                ErrorKind::BrokerError(ILLEGAL_SASL_STATE),
                format!(
                    "this listener does not use SASL (it answered SaslHandshake with ILLEGAL_SASL_STATE), and this \
                     client is configured for {mechanism}: connect without SASL (security.protocol=PLAINTEXT or SSL), \
                     or to the broker's SASL listener"
                ),
            )),
            code => Err(AttemptError::with_detail(
                ErrorKind::BrokerError(code),
                format!("SaslHandshake for {mechanism} answered with error {code}"),
            )),
        }
    }

    pub(super) fn on_sasl_authenticate(&mut self, response: &SaslAuthenticateResponse) -> Result<(), AttemptError> {
        let Some(sasl) = &mut self.sasl else { return Ok(()) };
        if response.error_code != 0 {
            return Err(sasl.refused(response.error_code, response.error_message.as_deref()));
        }
        match sasl.handle_answer(&response.auth_bytes)? {
            Step::Send(message) => self.send_sasl_authenticate(message),
            Step::Done => match self.metadata_version {
                Some(version) => {
                    self.credentials = Credentials::Accepted;
                    self.send_metadata(version)
                }
                None => return Err(AttemptError::with_detail(ErrorKind::Protocol, "authenticated before ApiVersions")),
            },
        }
        Ok(())
    }

    fn send_sasl_authenticate(&mut self, message: Vec<u8>) {
        if self.credentials == Credentials::Unsent {
            self.credentials = Credentials::Checking;
        }
        let version = self.sasl_authenticate_version;
        let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(message));
        self.send(ApiKey::SaslAuthenticate, version, &request, Awaiting::SaslAuthenticate { version });
    }
}
