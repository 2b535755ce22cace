//! The SASL steps against a fake broker: each mechanism's conversation, every refusal a
//! broker can give, and hostile answers.

use super::framing::{feed_and_check, split};
use super::*;
use crate::kafka::sasl::{Sasl, ScramHash, Secret};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hmac::digest::{Digest, FixedOutput, KeyInit, Update};
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};

pub(crate) const PASSWORD: &str = "correct horse";

fn config(sasl: Sasl) -> ExchangeConfig {
    ExchangeConfig { sasl: Some(sasl), ..ExchangeConfig::default() }
}

fn scram(hash: ScramHash) -> Sasl {
    Sasl::Scram { hash, username: "alice".into(), password: Secret::new(PASSWORD) }
}

fn plain() -> Sasl {
    Sasl::Plain { username: "alice".into(), password: Secret::new(PASSWORD) }
}

/// ApiVersions listing Metadata v0..=13 and the SASL APIs.
pub(crate) fn sasl_api_versions() -> ApiVersionsResponse {
    let mut response = api_versions((0, 13));
    for (key, max) in [(ApiKey::SaslHandshake, 1), (ApiKey::SaslAuthenticate, 2)] {
        response.api_keys.push(ApiVersion::default().with_api_key(key as i16).with_max_version(max));
    }
    response
}

/// Answers ApiVersions and returns the SaslHandshake request, checked.
fn to_handshake(exchange: &mut Exchange, mechanism: &str) -> RequestHeader {
    let (header, _) = take_request(exchange);
    exchange.handle_bytes(&response(header.correlation_id, 3, &sasl_api_versions()));
    let (header, mut body) = take_request(exchange);
    assert_eq!(header.request_api_key, ApiKey::SaslHandshake as i16);
    assert_eq!(header.request_api_version, 1);
    let request = SaslHandshakeRequest::decode(&mut body, 1).unwrap();
    assert_eq!(request.mechanism.as_str(), mechanism);
    header
}

/// Answers a SaslAuthenticate (v2) with `bytes` or an error; returns the next request.
fn answer(exchange: &mut Exchange, to: &RequestHeader, error: i16, bytes: &[u8]) {
    let body = SaslAuthenticateResponse::default()
        .with_error_code(error)
        .with_error_message(
            (error != 0).then(|| StrBytes::from_static_str("Authentication failed: invalid credentials")),
        )
        .with_auth_bytes(Bytes::copy_from_slice(bytes));
    exchange.handle_bytes(&response(to.correlation_id, 2, &body));
}

/// The next SaslAuthenticate request's payload.
fn authenticate_request(exchange: &mut Exchange) -> (RequestHeader, Vec<u8>) {
    let (header, mut body) = take_request(exchange);
    assert_eq!(header.request_api_key, ApiKey::SaslAuthenticate as i16);
    assert_eq!(header.request_api_version, 2);
    (header, SaslAuthenticateRequest::decode(&mut body, 2).unwrap().auth_bytes.to_vec())
}

/// Accepts the handshake; returns the first SaslAuthenticate request.
fn accept_handshake(exchange: &mut Exchange, handshake: &RequestHeader) -> (RequestHeader, Vec<u8>) {
    let ok = SaslHandshakeResponse::default().with_mechanisms(vec![s("PLAIN"), s("SCRAM-SHA-512")]);
    exchange.handle_bytes(&response(handshake.correlation_id, 1, &ok));
    authenticate_request(exchange)
}

/// Answers the Metadata request and returns the outcome.
fn finish_with_metadata(mut exchange: Exchange) -> Result<Metadata, AttemptError> {
    let (header, _) = take_request(&mut exchange);
    assert_eq!(header.request_api_key, ApiKey::Metadata as i16, "Metadata comes after authentication");
    exchange.handle_bytes(&response(header.correlation_id, 13, &cluster()));
    outcome(&mut exchange)
}

#[test]
fn plain_sends_user_and_password_then_metadata() {
    let mut exchange = Exchange::new(&config(plain()));
    let handshake = to_handshake(&mut exchange, "PLAIN");
    let (request, payload) = accept_handshake(&mut exchange, &handshake);
    assert_eq!(payload, format!("\0alice\0{PASSWORD}").into_bytes());
    answer(&mut exchange, &request, 0, b"");
    assert_eq!(finish_with_metadata(exchange).unwrap(), cluster_metadata(13));
}

#[test]
fn the_credential_check_runs_from_the_first_authenticate_to_the_verdict() {
    for accepted in [true, false] {
        let mut exchange = Exchange::new(&config(plain()));
        let handshake = to_handshake(&mut exchange, "PLAIN");
        assert_eq!(exchange.credentials(), Credentials::Unsent, "nothing sent for the broker to check");
        let (request, _) = accept_handshake(&mut exchange, &handshake);
        assert_eq!(exchange.credentials(), Credentials::Checking);
        answer(&mut exchange, &request, if accepted { 0 } else { 58 }, b"");
        if accepted {
            assert_eq!(exchange.credentials(), Credentials::Accepted);
            assert!(finish_with_metadata(exchange).is_ok());
        } else {
            assert_eq!(exchange.credentials(), Credentials::Checking, "a refusal is the outcome, not an acceptance");
            assert_eq!(error_of(exchange).kind, ErrorKind::BrokerError(58));
        }
    }
    let resumed = Exchange::resumed(&config(plain()));
    assert_eq!(resumed.credentials(), Credentials::Unsent, "a kept connection authenticated before");
}

/// A SCRAM server written from RFC 5802's server side: it checks the client's proof
/// against the stored key and signs with the server key.
pub(crate) struct ScramServer {
    salted: Vec<u8>,
    auth_message: String,
}

fn h_mac<D: Digest + hmac::digest::core_api::BlockSizeUser + Clone>(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = <hmac::SimpleHmac<D> as KeyInit>::new_from_slice(key).unwrap();
    Update::update(&mut mac, data);
    mac.finalize_fixed().to_vec()
}

impl ScramServer {
    pub(crate) fn new<D: Digest + hmac::digest::core_api::BlockSizeUser + Clone + Sync>(password: &str) -> Self {
        let mut salted = vec![0; <D as Digest>::output_size()];
        pbkdf2::pbkdf2::<hmac::SimpleHmac<D>>(password.as_bytes(), b"pepper", 4096, &mut salted).unwrap();
        ScramServer { salted, auth_message: String::new() }
    }

    pub(crate) fn first(&mut self, client_first: &[u8]) -> String {
        let text = core::str::from_utf8(client_first).unwrap();
        let bare = text.strip_prefix("n,,").unwrap();
        assert!(bare.starts_with("n=alice,r="), "{bare}");
        let nonce = &bare["n=alice,r=".len()..];
        let server_first = format!("r={nonce}SRV,s={},i=4096", BASE64.encode(b"pepper"));
        self.auth_message = format!("{bare},{server_first}");
        server_first
    }

    /// The server-final message, or `None` if the proof is wrong.
    pub(crate) fn last<D: Digest + hmac::digest::core_api::BlockSizeUser + Clone>(
        &mut self,
        client_final: &[u8],
    ) -> Option<String> {
        let text = core::str::from_utf8(client_final).unwrap();
        let (without_proof, proof) = text.rsplit_once(",p=").unwrap();
        self.auth_message = format!("{},{without_proof}", self.auth_message);
        let stored_key = D::digest(h_mac::<D>(&self.salted, b"Client Key")).to_vec();
        let signature = h_mac::<D>(&stored_key, self.auth_message.as_bytes());
        let client_key: Vec<u8> = BASE64.decode(proof).unwrap().iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        (D::digest(&client_key).to_vec() == stored_key).then(|| {
            let server_key = h_mac::<D>(&self.salted, b"Server Key");
            format!("v={}", BASE64.encode(h_mac::<D>(&server_key, self.auth_message.as_bytes())))
        })
    }
}

/// Runs SCRAM against a server holding `server_password`; the outcome of the exchange.
fn scram_against(hash: ScramHash, server_password: &str, forge_signature: bool) -> Result<Metadata, AttemptError> {
    let mut server = match hash {
        ScramHash::Sha256 => ScramServer::new::<sha2::Sha256>(server_password),
        ScramHash::Sha512 => ScramServer::new::<sha2::Sha512>(server_password),
    };
    let mut exchange = Exchange::new(&config(scram(hash)));
    exchange.set_sasl_nonce(&[42; 18]);
    let mechanism = if hash == ScramHash::Sha256 { "SCRAM-SHA-256" } else { "SCRAM-SHA-512" };
    let handshake = to_handshake(&mut exchange, mechanism);
    let (request, client_first) = accept_handshake(&mut exchange, &handshake);
    assert!(String::from_utf8_lossy(&client_first).ends_with(&BASE64.encode([42; 18])), "the nonce is the caller's");
    let server_first = server.first(&client_first);
    answer(&mut exchange, &request, 0, server_first.as_bytes());
    let (request, client_final) = authenticate_request(&mut exchange);
    let last = match hash {
        ScramHash::Sha256 => server.last::<sha2::Sha256>(&client_final),
        ScramHash::Sha512 => server.last::<sha2::Sha512>(&client_final),
    };
    match (last, forge_signature) {
        (None, _) => {
            answer(&mut exchange, &request, 58, b"");
            Err(error(&mut exchange))
        }
        (Some(_), true) => {
            answer(&mut exchange, &request, 0, format!("v={}", BASE64.encode([0u8; 32])).as_bytes());
            Err(error(&mut exchange))
        }
        (Some(last), false) => {
            answer(&mut exchange, &request, 0, last.as_bytes());
            finish_with_metadata(exchange)
        }
    }
}

#[test]
fn scram_proves_the_password_and_checks_the_brokers_signature() {
    for hash in [ScramHash::Sha256, ScramHash::Sha512] {
        assert_eq!(scram_against(hash, PASSWORD, false).unwrap(), cluster_metadata(13), "{hash:?}");
        let forged = scram_against(hash, PASSWORD, true).unwrap_err();
        assert_eq!(forged.kind, ErrorKind::Authentication, "{forged}");
        assert!(forged.detail.contains("server signature"), "{forged}");
    }
}

#[test]
fn a_wrong_password_is_fatal_and_names_mechanism_and_user_but_not_the_password() {
    let error = scram_against(ScramHash::Sha512, "another password", false).unwrap_err();
    assert_eq!(error.kind, ErrorKind::BrokerError(58));
    assert!(error.kind.is_fatal());
    let text = error.to_string();
    assert!(text.contains("SASL_AUTHENTICATION_FAILED") && text.contains("SCRAM-SHA-512"), "{text}");
    assert!(text.contains("\"alice\"") && text.contains("invalid credentials"), "{text}");
    assert!(!text.contains(PASSWORD) && !format!("{error:?}").contains(PASSWORD));
}

#[test]
fn an_unknown_mechanism_lists_the_enabled_ones() {
    let mut exchange = Exchange::new(&config(scram(ScramHash::Sha256)));
    let handshake = to_handshake(&mut exchange, "SCRAM-SHA-256");
    let refusal =
        SaslHandshakeResponse::default().with_error_code(33).with_mechanisms(vec![s("PLAIN"), s("SCRAM-SHA-512")]);
    exchange.handle_bytes(&response(handshake.correlation_id, 1, &refusal));
    let error = error(&mut exchange);
    assert_eq!(error.kind, ErrorKind::BrokerError(33));
    assert!(error.detail.contains("does not enable SCRAM-SHA-256; it enables: PLAIN, SCRAM-SHA-512"), "{error}");
}

#[test]
fn sasl_to_a_listener_without_sasl_says_so() {
    let mut exchange = Exchange::new(&config(plain()));
    let handshake = to_handshake(&mut exchange, "PLAIN");
    let refusal = SaslHandshakeResponse::default().with_error_code(34);
    exchange.handle_bytes(&response(handshake.correlation_id, 1, &refusal));
    let error = error(&mut exchange);
    assert_eq!(error.kind, ErrorKind::BrokerError(34));
    assert!(error.detail.contains("this listener does not use SASL"), "{error}");
}

#[test]
fn no_sasl_to_a_listener_that_hangs_up_on_metadata_suggests_sasl() {
    let mut exchange = Exchange::new(&ExchangeConfig::default());
    let _metadata = through_api_versions(&mut exchange, (0, 13));
    exchange.handle_eof();
    let error = error(&mut exchange);
    assert_eq!(error.kind, ErrorKind::Closed);
    assert!(error.detail.contains("requires SASL"), "{error}");
    // With SASL configured, a close is just a close.
    let mut exchange = Exchange::new(&config(plain()));
    let _ = to_handshake(&mut exchange, "PLAIN");
    exchange.handle_eof();
    assert!(!error_of(exchange).detail.contains("requires SASL"));
}

fn error_of(mut exchange: Exchange) -> AttemptError {
    error(&mut exchange)
}

#[test]
fn oauthbearer_sends_the_token_and_reports_the_brokers_error_json() {
    let sasl = Sasl::OAuthBearer { token: Secret::new("e30.e30.") };
    let mut exchange = Exchange::new(&config(sasl.clone()));
    let handshake = to_handshake(&mut exchange, "OAUTHBEARER");
    let (request, payload) = accept_handshake(&mut exchange, &handshake);
    assert_eq!(payload, b"n,,\x01auth=Bearer e30.e30.\x01\x01");
    answer(&mut exchange, &request, 0, b"");
    assert!(finish_with_metadata(exchange).is_ok(), "an empty answer accepts the token");

    let mut exchange = Exchange::new(&config(sasl));
    let handshake = to_handshake(&mut exchange, "OAUTHBEARER");
    let (request, _) = accept_handshake(&mut exchange, &handshake);
    answer(&mut exchange, &request, 0, br#"{"status":"invalid_token"}"#);
    let (request, ack) = authenticate_request(&mut exchange);
    assert_eq!(ack, [1], "the error JSON is acknowledged");
    answer(&mut exchange, &request, 58, b"");
    let error = error(&mut exchange);
    assert!(error.kind.is_fatal() && error.detail.contains("invalid_token"), "{error}");
    assert!(!error.to_string().contains("e30.e30."));
}

#[test]
fn a_hostile_mechanism_count_is_refused_before_decoding() {
    let mut exchange = Exchange::new(&config(plain()));
    let handshake = to_handshake(&mut exchange, "PLAIN");
    let mut message = handshake.correlation_id.to_be_bytes().to_vec();
    message.extend_from_slice(&[0, 33, 0x7f, 0xff, 0xff, 0xff]); // error 33, 2^31-1 mechanisms
    exchange.handle_bytes(&framed(&message));
    let error = error(&mut exchange);
    assert_eq!(error.kind, ErrorKind::Protocol);
    assert!(error.detail.contains("mechanisms"), "{error}");
}

proptest! {
    /// Arbitrary SaslHandshake / SaslAuthenticate answers (right frame, right correlation id)
    /// for every mechanism give an outcome or a wait, never a panic.
    #[test]
    fn arbitrary_sasl_answers_never_panic(
        mechanism in 0usize..4,
        at_authenticate: bool,
        body in prop::collection::vec(any::<u8>(), 0..96),
        cuts in prop::collection::vec(any::<usize>(), 0..4),
    ) {
        let sasl = match mechanism {
            0 => plain(),
            1 => scram(ScramHash::Sha256),
            2 => scram(ScramHash::Sha512),
            _ => Sasl::OAuthBearer { token: Secret::new("t") },
        };
        let mut exchange = Exchange::new(&config(sasl.clone()));
        let mut header = to_handshake(&mut exchange, sasl.mechanism());
        if at_authenticate {
            header = accept_handshake(&mut exchange, &header).0;
        }
        let mut message = header.correlation_id.to_be_bytes().to_vec();
        message.extend_from_slice(&body);
        feed_and_check(exchange, &split(&framed(&message), &cuts))?;
    }

    /// Arbitrary SCRAM server-first and server-final payloads in well-formed frames.
    #[test]
    fn arbitrary_scram_payloads_are_typed_errors(first in ".{0,80}", last in prop::collection::vec(any::<u8>(), 0..64)) {
        let mut exchange = Exchange::new(&config(scram(ScramHash::Sha512)));
        let handshake = to_handshake(&mut exchange, "SCRAM-SHA-512");
        let (request, _) = accept_handshake(&mut exchange, &handshake);
        answer(&mut exchange, &request, 0, first.as_bytes());
        if let Some(frame) = exchange.poll_transmit() {
            let _ = frame;
            let request = RequestHeader::default().with_correlation_id(request.correlation_id + 1);
            answer(&mut exchange, &request, 0, &last);
        }
        let error = exchange.poll_outcome().expect("ends").expect_err("never authenticates");
        prop_assert!(matches!(error.kind, ErrorKind::Protocol | ErrorKind::Authentication), "{}", error);
    }
}

/// A kept connection authenticated already: the resumed exchange asks ApiVersions (the
/// broker's first answer, the liveness signal) and then Metadata, and never repeats SASL
/// (a SaslHandshake on an authenticated connection is refused by the broker).
#[test]
fn a_resumed_exchange_skips_sasl() {
    let mut exchange = Exchange::resumed(&config(scram(ScramHash::Sha512)));
    let (header, _) = take_request(&mut exchange);
    assert_eq!(header.request_api_key, ApiKey::ApiVersions as i16);
    exchange.handle_bytes(&response(header.correlation_id, 3, &sasl_api_versions()));
    assert!(exchange.has_answered());
    let (header, _) = take_request(&mut exchange);
    assert_eq!((header.request_api_key, header.request_api_version), (ApiKey::Metadata as i16, 13));
    exchange.handle_bytes(&response(header.correlation_id, 13, &cluster()));
    assert_eq!(outcome(&mut exchange), Ok(cluster_metadata(13)));
}

/// A kept connection whose broker agreed on Metadata v12 earlier, resumed where nothing
/// reads an earlier sign of life: Metadata alone at v12, no ApiVersions and no SASL; its
/// answer is the broker's first.
#[test]
fn a_resumed_exchange_at_a_known_version_asks_for_metadata_alone() {
    let mut exchange = Exchange::resumed_at(&config(scram(ScramHash::Sha512)), 12);
    assert_eq!(exchange.metadata_version(), Some(12));
    let (header, _) = take_request(&mut exchange);
    assert_eq!((header.request_api_key, header.request_api_version), (ApiKey::Metadata as i16, 12));
    assert!(exchange.poll_transmit().is_none(), "one request");
    assert!(!exchange.has_answered());
    exchange.handle_bytes(&response(header.correlation_id, 12, &cluster()));
    assert!(exchange.has_answered());
    assert_eq!(outcome(&mut exchange), Ok(cluster_metadata(12)));
}
