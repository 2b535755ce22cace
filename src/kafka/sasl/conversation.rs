//! One attempt's SASL conversation at the mechanism level: the bytes inside each
//! `SaslAuthenticate` request, and what each answer means.

use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;

use super::scram::{self, ClientFirst, ScramKeys};
use super::{Nonce, Sasl};
use crate::error::{AttemptError, ErrorKind};

/// Kafka's SASL_AUTHENTICATION_FAILED error code.
pub(in crate::kafka) const SASL_AUTHENTICATION_FAILED: i16 = 58;

/// What the conversation asks for after an answer.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::kafka) enum Step {
    /// Send these bytes in another `SaslAuthenticate` request.
    Send(Vec<u8>),
    /// Authenticated: the connection may ask for metadata.
    Done,
}

/// See the module documentation.
#[derive(Debug)]
pub(in crate::kafka) struct Conversation {
    sasl: Sasl,
    /// The SCRAM client nonce, as sent (base64 of the caller's bytes).
    nonce: String,
    state: State,
    /// SCRAM's derived keys: given by the client before server-first, or derived here.
    keys: Option<Arc<ScramKeys>>,
    /// Whether `keys` were derived here and not yet handed to the client.
    derived: bool,
}

/// Which answer the conversation waits for.
#[derive(Debug)]
enum State {
    /// Nothing sent yet.
    Start,
    /// `PLAIN` or `OAUTHBEARER` sent their only message.
    Sent,
    /// SCRAM sent client-first; server-first comes next.
    ServerFirst(ClientFirst),
    /// SCRAM sent client-final; server-final must carry this signature.
    ServerFinal(Vec<u8>),
    /// `OAUTHBEARER`: the broker sent an error JSON, acknowledged; its error code comes next.
    BearerRefused(String),
    /// Authenticated, or failed.
    Over,
}

impl core::fmt::Debug for ClientFirst {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ClientFirst").field("bare", &self.bare).finish()
    }
}

impl Conversation {
    /// A conversation for `sasl`; `nonce` is only used by SCRAM.
    pub(in crate::kafka) fn new(sasl: &Sasl, nonce: &Nonce) -> Conversation {
        Conversation {
            sasl: sasl.clone(),
            nonce: BASE64.encode(nonce),
            state: State::Start,
            keys: None,
            derived: false,
        }
    }

    /// Replaces the SCRAM nonce; ignored once the conversation has started.
    pub(in crate::kafka) fn set_nonce(&mut self, nonce: &Nonce) {
        if matches!(self.state, State::Start) {
            self.nonce = BASE64.encode(nonce);
        }
    }

    /// Replaces the `OAUTHBEARER` token (one the host fetched for this connection); ignored
    /// for other mechanisms and once the conversation has started.
    pub(in crate::kafka) fn set_token(&mut self, token: super::Secret) {
        if let (State::Start, Sasl::OAuthBearer { token: old }) = (&self.state, &mut self.sasl) {
            *old = token;
        }
    }

    /// Trades SCRAM keys with `kept`, the keys the client holds across its connections: keys
    /// derived here go to `kept`; before server-first, `kept` comes here, so the answer to it
    /// skips the derivation when the salt and iteration count are the same.
    pub(in crate::kafka) fn share_keys(&mut self, kept: &mut Option<Arc<ScramKeys>>) {
        if self.derived {
            self.derived = false;
            kept.clone_from(&self.keys);
        } else if matches!(self.state, State::Start | State::ServerFirst(_)) && kept.is_some() {
            self.keys.clone_from(kept);
        }
    }

    /// The mechanism's name, for `SaslHandshake`.
    pub(in crate::kafka) fn mechanism(&self) -> &'static str {
        self.sasl.mechanism()
    }

    /// Who authenticates, for errors (never the secret).
    pub(in crate::kafka) fn who(&self) -> String {
        self.sasl.who()
    }

    /// The first `SaslAuthenticate` payload.
    pub(in crate::kafka) fn start(&mut self) -> Vec<u8> {
        let (message, state) = match &self.sasl {
            Sasl::Plain { username, password } => {
                (format!("\0{username}\0{}", password.expose()).into_bytes(), State::Sent)
            }
            Sasl::Scram { username, .. } => {
                let first = scram::client_first(username, &self.nonce);
                (first.message.clone().into_bytes(), State::ServerFirst(first))
            }
            Sasl::OAuthBearer { token } => {
                (format!("n,,\x01auth=Bearer {}\x01\x01", token.expose()).into_bytes(), State::Sent)
            }
        };
        self.state = state;
        message
    }

    /// The broker accepted the last message (error code 0) and answered `bytes`.
    pub(in crate::kafka) fn handle_answer(&mut self, bytes: &[u8]) -> Result<Step, AttemptError> {
        match core::mem::replace(&mut self.state, State::Over) {
            State::Sent if matches!(self.sasl, Sasl::OAuthBearer { .. }) && !bytes.is_empty() => {
                // RFC 7628: an error JSON, which the client acknowledges before the broker
                // fails the authentication with its error code.
                self.state = State::BearerRefused(crate::kafka::excerpt_lossy(bytes));
                Ok(Step::Send(alloc::vec![0x01]))
            }
            State::Sent => Ok(Step::Done),
            State::ServerFirst(first) => {
                let Sasl::Scram { hash, password, .. } = &self.sasl else {
                    return Err(self.out_of_order());
                };
                let last = scram::client_final(*hash, password.expose(), &first, &self.nonce, bytes, &mut self.keys)?;
                self.derived = last.derived;
                self.state = State::ServerFinal(last.server_signature);
                Ok(Step::Send(last.message.into_bytes()))
            }
            State::ServerFinal(signature) => {
                scram::verify_server_final(bytes, &signature).map_err(|e| self.named(e))?;
                Ok(Step::Done)
            }
            State::BearerRefused(json) => {
                Err(AttemptError::with_detail(ErrorKind::Authentication, format!("{} was refused: {json}", self.who())))
            }
            State::Start | State::Over => Err(self.out_of_order()),
        }
    }

    /// The broker answered a `SaslAuthenticate` with error `code` (and maybe a message).
    pub(in crate::kafka) fn refused(&mut self, code: i16, message: Option<&str>) -> AttemptError {
        let message = message.map(crate::kafka::excerpt);
        let said = match (message, core::mem::replace(&mut self.state, State::Over)) {
            (Some(m), State::BearerRefused(json)) => format!(": {m} ({json})"),
            (None, State::BearerRefused(json)) => format!(": {json}"),
            (Some(m), _) => format!(": {m}"),
            (None, _) => String::new(),
        };
        let what = if code == SASL_AUTHENTICATION_FAILED { "authentication failed" } else { "SaslAuthenticate failed" };
        AttemptError::with_detail(ErrorKind::BrokerError(code), format!("{what} for {}{said}", self.who()))
    }

    fn named(&self, error: AttemptError) -> AttemptError {
        AttemptError::with_detail(error.kind, format!("{} for {}", error.detail, self.who()))
    }

    fn out_of_order(&self) -> AttemptError {
        AttemptError::with_detail(
            ErrorKind::Protocol,
            format!("{}: an answer the conversation did not ask for", self.who()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::sasl::{ScramHash, Secret};

    fn scram() -> Conversation {
        let sasl = Sasl::Scram { hash: ScramHash::Sha256, username: "user".into(), password: Secret::new("pencil") };
        Conversation::new(&sasl, &[7; 18])
    }

    #[test]
    fn plain_is_one_message_and_done() {
        let sasl = Sasl::Plain { username: "u".into(), password: Secret::new("p") };
        let mut c = Conversation::new(&sasl, &[0; 18]);
        assert_eq!(c.start(), b"\0u\0p");
        assert_eq!(c.handle_answer(b"").unwrap(), Step::Done);
        assert!(c.handle_answer(b"").is_err(), "nothing after the end");
    }

    #[test]
    fn scram_sends_first_then_final_then_checks_the_signature() {
        let mut c = scram();
        let first = String::from_utf8(c.start()).unwrap();
        assert!(first.starts_with("n,,n=user,r=") && first.len() == "n,,n=user,r=".len() + 24, "{first}");
        let nonce = &first["n,,n=user,r=".len()..];
        let server_first = format!("r={nonce}SERVER,s={},i=4096", BASE64.encode(b"salt"));
        let Step::Send(last) = c.handle_answer(server_first.as_bytes()).unwrap() else { panic!() };
        assert!(String::from_utf8(last).unwrap().starts_with(&format!("c=biws,r={nonce}SERVER,p=")));
        let error = c.handle_answer(b"v=AAAA").unwrap_err();
        assert_eq!(error.kind, ErrorKind::Authentication);
        assert!(error.detail.contains("user \"user\" with SCRAM-SHA-256"), "{error}");
        assert!(!format!("{error} {c:?}").contains("pencil"));
    }

    #[test]
    fn an_oauthbearer_error_json_is_acknowledged_and_named_in_the_failure() {
        let sasl = Sasl::OAuthBearer { token: Secret::new("tok.en.") };
        let mut c = Conversation::new(&sasl, &[0; 18]);
        assert_eq!(c.start(), b"n,,\x01auth=Bearer tok.en.\x01\x01");
        let json = br#"{"status":"invalid_token"}"#;
        assert_eq!(c.handle_answer(json).unwrap(), Step::Send(alloc::vec![1]));
        let error = c.refused(SASL_AUTHENTICATION_FAILED, Some("Authentication failed"));
        assert_eq!(error.kind, ErrorKind::BrokerError(58));
        assert!(error.detail.contains("invalid_token") && error.detail.contains("OAUTHBEARER"), "{error}");
        assert!(!format!("{error}").contains("tok.en."));
    }
}
