//! Structure-aware SASL: ApiVersions listing the SASL APIs, then a SaslHandshake answer and
//! SaslAuthenticate answers whose bodies and payloads the fuzzer picks (hostile SCRAM
//! server messages, bad base64, wrong nonces, huge iteration counts, error JSON), for every
//! mechanism, split anyhow with polls and an EOF anywhere. Must never panic, break the call
//! protocol, allocate what the wire says, or run unbounded work. A SCRAM exchange may also
//! be answered with a server-first that extends its (known) nonce, so the fuzzer reaches the
//! proof and the server-final checks, not only the refusal of a foreign nonce.
#![no_main]

use arbitrary::Arbitrary;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, SaslAuthenticateResponse, SaslHandshakeResponse};
use kafka_protocol::protocol::StrBytes;
use libfuzzer_sys::fuzz_target;
use stagger::kafka::sasl::{Sasl, ScramHash, Secret};
use stagger::kafka::Exchange;
use stagger_fuzz::{api_versions, config, drive_exchange_and_check, framed, interleave, response, split};

/// The SCRAM client nonce the exchange is given.
const NONCE: [u8; 18] = *b"fuzz-scram-nonce!!";

#[derive(Arbitrary, Debug)]
struct Input {
    max_frame: u8,
    mechanism: u8,
    handshake_error: i16,
    mechanisms: Vec<String>,
    /// Replaces the SaslHandshake body (after the correlation id).
    handshake_body: Option<Vec<u8>>,
    /// Each SaslAuthenticate answer: an error code and the payload (e.g. a SCRAM message).
    answers: Vec<(i16, Vec<u8>)>,
    /// Replaces the first payload with a SCRAM server-first for our nonce: the server's
    /// part of the nonce, the salt, the iteration count (1 to 8).
    scram_first: Option<(String, Vec<u8>, u8)>,
    cuts: Vec<u16>,
    polls: Vec<(u16, bool)>,
    eof_at: Option<u16>,
}

fn sasl(selector: u8) -> Sasl {
    let (username, password) = (String::from("fuzz"), Secret::new("fuzz-password"));
    match selector % 4 {
        0 => Sasl::Plain { username, password },
        1 => Sasl::Scram { hash: ScramHash::Sha256, username, password },
        2 => Sasl::Scram { hash: ScramHash::Sha512, username, password },
        _ => Sasl::OAuthBearer { token: password },
    }
}

fuzz_target!(|input: Input| {
    let mut versions = api_versions(13);
    for (key, max) in [(ApiKey::SaslHandshake, 1), (ApiKey::SaslAuthenticate, 2)] {
        versions.api_keys.push(ApiVersion::default().with_api_key(key as i16).with_max_version(max));
    }
    let mut stream = response(1, 3, &versions);
    match &input.handshake_body {
        Some(body) => {
            let mut message = 2i32.to_be_bytes().to_vec();
            message.extend(body);
            stream.extend(framed(&message));
        }
        None => {
            let mechanisms = input.mechanisms.iter().take(8).map(|m| StrBytes::from_string(m.clone())).collect();
            let body =
                SaslHandshakeResponse::default().with_error_code(input.handshake_error).with_mechanisms(mechanisms);
            stream.extend(response(2, 1, &body));
        }
    }
    for (i, (error_code, payload)) in input.answers.iter().take(4).enumerate() {
        let payload = match (&input.scram_first, i) {
            (Some((server, salt, iterations)), 0) => {
                let server: String = server.chars().filter(|c| c.is_ascii_graphic() && *c != ',').collect();
                let salt = BASE64.encode(salt);
                format!("r={}{server}x,s={salt},i={}", BASE64.encode(NONCE), 1 + iterations % 8).into_bytes()
            }
            _ => payload.clone(),
        };
        let body =
            SaslAuthenticateResponse::default().with_error_code(*error_code).with_auth_bytes(Bytes::from(payload));
        stream.extend(response(3 + i as i32, 2, &body));
    }
    let ops = interleave(split(&stream, &input.cuts), &input.polls, input.eof_at);
    let mut config = config(input.max_frame);
    config.sasl = Some(sasl(input.mechanism));
    let make = || {
        let mut exchange = Exchange::new(&config);
        exchange.set_sasl_nonce(&NONCE);
        exchange
    };
    drive_exchange_and_check(make, config.max_frame_size, &ops);
});
