//! Arbitrary bytes into the sans-IO Kafka exchange ([`stagger::kafka::Exchange`]), split
//! anyhow and interleaved with every other call in any order — the CI-run sibling of the
//! cargo-fuzz targets in `fuzz/`.
//!
//! What must hold for every input:
//! * no panic (a panic in a property fails it, with the shrunk input);
//! * the call protocol: no outcome before `is_finished()`, exactly one outcome per exchange,
//!   EOF always finishes it, nothing to transmit once finished, every transmitted frame
//!   well formed;
//! * no single heap allocation larger than the configured maximum frame size — measured by a
//!   counting global allocator that records the largest single request of this thread, so a
//!   length prefix or an array count read off the wire can never size an allocation. The
//!   inputs here are far smaller than the maximum frame size, so anything that large could
//!   only come from trusting a number on the wire;
//! * every failure's detail names what was wrong (its request, mechanism or framing problem).
//!
//! Beyond ApiVersions and Metadata, the SASL conversation (PLAIN, SCRAM-SHA-256/512 against
//! an independent SCRAM server, OAUTHBEARER) and ApiVersions v5 (any identity; any answer)
//! are driven the same way, where no error and no `Debug` of the exchange may show a
//! credential; and broker text quoted in errors is checked at exactly the frame limit
//! (`tests/hostile_memory.rs` bounds the peak of live bytes too).

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, BrokerId, MetadataResponse, RequestHeader, TopicName};
use kafka_protocol::protocol::{Decodable, StrBytes};
use proptest::prelude::*;
use stagger::kafka::{Exchange, ExchangeConfig};
use stagger::ErrorKind;

// ---- the largest single allocation, per thread, and well-formed frames: shared with fuzz/ ----

#[path = "support/wire.rs"]
mod wire;
use wire::{api_versions, framed, largest_allocation, response};

// ---- driving an exchange ------------------------------------------------------------------------

/// One call on the exchange.
#[derive(Clone, Debug)]
enum Op {
    Bytes(Vec<u8>),
    Eof,
    Transmit,
    Outcome,
}

/// Applies `ops` to `exchange`, then hangs up, checking the call protocol throughout.
/// Returns the number of bytes fed. With `secrets`, also
/// checks after every call that no error and no `Debug` of the exchange shows any of them
/// (`Debug` formats every buffer, so this is left out of the allocation-probed runs).
fn drive_exchange(mut exchange: Exchange, ops: &[Op], secrets: &[String]) -> Result<usize, TestCaseError> {
    let mut outcomes = 0;
    let mut fed = 0;
    for op in ops {
        match op {
            Op::Bytes(bytes) => {
                fed += bytes.len();
                exchange.handle_bytes(bytes);
            }
            Op::Eof => {
                exchange.handle_eof();
                prop_assert!(exchange.is_finished(), "EOF always finishes the exchange");
            }
            Op::Transmit => {
                if let Some(frame) = exchange.poll_transmit() {
                    prop_assert!(!exchange.is_finished(), "nothing to transmit once finished");
                    prop_assert!(frame.len() >= 4);
                    let len = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
                    prop_assert_eq!(len, frame.len() - 4, "a well-formed request frame");
                    prop_assert!(exchange.poll_transmit().is_none(), "one request at a time");
                }
            }
            Op::Outcome => {
                let finished = exchange.is_finished();
                if let Some(outcome) = exchange.poll_outcome() {
                    prop_assert!(finished, "no outcome before the exchange is finished");
                    outcomes += 1;
                    if let Err(e) = outcome {
                        check_error(&e, secrets)?;
                    }
                }
            }
        }
        check_no_secret("the exchange's Debug", &format!("{exchange:?}"), secrets)?;
    }
    exchange.handle_eof();
    prop_assert!(exchange.is_finished());
    if let Some(outcome) = exchange.poll_outcome() {
        outcomes += 1;
        if let Err(e) = outcome {
            check_error(&e, secrets)?;
        }
    }
    prop_assert_eq!(outcomes, 1, "exactly one outcome per exchange");
    prop_assert!(exchange.poll_outcome().is_none() && exchange.poll_transmit().is_none());
    Ok(fed)
}

/// What every failure's detail names: the request or mechanism it is about, or the framing
/// or connection problem. An error without one of these does not say what was wrong.
const SUBJECTS: [&str; 13] = [
    "ApiVersions",
    "SaslHandshake",
    "SaslAuthenticate",
    "Metadata",
    "SCRAM",
    "PLAIN",
    "OAUTHBEARER",
    "length prefix",
    "correlation id",
    "closed",
    "cluster",
    "advertises port",
    "authenticated before",
];

/// A failure says what was wrong, and shows no secret.
fn check_error(e: &stagger::AttemptError, secrets: &[String]) -> Result<(), TestCaseError> {
    prop_assert!(!e.detail.is_empty(), "errors say why: {:?}", e);
    prop_assert!(SUBJECTS.iter().any(|s| e.detail.contains(s)), "the error names no subject: {}", e);
    check_no_secret("an error", &format!("{e} {e:?}"), secrets)
}

fn check_no_secret(what: &str, text: &str, secrets: &[String]) -> Result<(), TestCaseError> {
    for secret in secrets {
        prop_assert!(!text.contains(secret.as_str()), "{} shows the secret {:?}: {}", what, secret, text);
    }
    Ok(())
}

/// Runs [`drive`] under the allocation probe and checks the bound.
fn drive_bounded(config: &ExchangeConfig, ops: &[Op]) -> Result<(), TestCaseError> {
    bounded(|| Exchange::new(config), config.max_frame_size, ops, &[])
}

/// Drives an exchange from `make` under the allocation probe and checks the bound; with
/// `secrets`, drives a second one from `make` checking that none of them shows.
fn bounded(make: impl Fn() -> Exchange, max_frame: usize, ops: &[Op], secrets: &[String]) -> Result<(), TestCaseError> {
    let (result, largest) = largest_allocation(|| drive_exchange(make(), ops, &[]));
    let fed = result?;
    prop_assert!(
        largest <= max_frame,
        "largest single allocation {largest} B > max frame size {max_frame} B after feeding {fed} B"
    );
    if !secrets.is_empty() {
        drive_exchange(make(), ops, secrets)?;
    }
    Ok(())
}

/// The maximum frame size of every property: far above any input generated here, so the
/// bound fails only if a number read off the wire sized an allocation.
const MAX_FRAME: usize = 64 * 1024;

fn config() -> ExchangeConfig {
    ExchangeConfig { max_frame_size: MAX_FRAME, ..ExchangeConfig::default() }
}

// ---- well-formed pieces, encoded by kafka-protocol itself -----------------------------------------

/// The correlation id of the request the exchange has ready (it numbers from 1).
fn next_correlation_id(exchange: &mut Exchange) -> i32 {
    let frame = exchange.poll_transmit().expect("a request");
    let mut body = frame.slice(4..);
    let key = ApiKey::try_from(i16::from_be_bytes([body[0], body[1]])).unwrap();
    let version = i16::from_be_bytes([body[2], body[3]]);
    RequestHeader::decode(&mut body, key.request_header_version(version)).unwrap().correlation_id
}

/// The first bytes of a good conversation up to the Metadata response: the ApiVersions
/// answer agreeing on Metadata `version`. (Correlation ids are deterministic: 1, then 2.)
fn through_api_versions(version: i16) -> Vec<u8> {
    let mut probe = Exchange::new(&ExchangeConfig::default());
    response(next_correlation_id(&mut probe), 3, &api_versions(version))
}

/// A small but complete cluster.
fn cluster() -> MetadataResponse {
    let s = StrBytes::from_static_str;
    MetadataResponse::default()
        .with_cluster_id(Some(s("c")))
        .with_controller_id(BrokerId(1))
        .with_brokers(vec![MetadataResponseBroker::default()
            .with_node_id(BrokerId(1))
            .with_host(s("b1"))
            .with_port(9092)])
        .with_topics(vec![MetadataResponseTopic::default().with_name(Some(TopicName(s("orders")))).with_partitions(
            vec![MetadataResponsePartition::default()
                .with_leader_id(BrokerId(1))
                .with_replica_nodes(vec![BrokerId(1)])
                .with_isr_nodes(vec![BrokerId(1)])],
        )])
}

/// The whole good conversation at Metadata `version`.
fn conversation(version: i16) -> Vec<u8> {
    let mut stream = through_api_versions(version);
    stream.extend(response(2, version, &cluster()));
    stream
}

/// Splits `stream` at `cuts` (taken modulo its length) into byte ops.
fn split(stream: &[u8], cuts: &[usize]) -> Vec<Op> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
    cuts.sort_unstable();
    let mut ops = Vec::new();
    let mut start = 0;
    for cut in cuts.into_iter().chain([stream.len()]) {
        ops.push(Op::Bytes(stream[start..cut].to_vec()));
        start = cut;
    }
    ops
}

/// Interleaves `ops` with transmit/outcome polls and (maybe) an EOF at `eof_at`.
fn interleave(mut ops: Vec<Op>, polls: &[(usize, bool)], eof_at: Option<usize>) -> Vec<Op> {
    for &(at, transmit) in polls {
        let at = at % (ops.len() + 1);
        ops.insert(at, if transmit { Op::Transmit } else { Op::Outcome });
    }
    if let Some(at) = eof_at {
        let at = at % (ops.len() + 1);
        ops.insert(at, Op::Eof);
    }
    ops
}

// ---- strategies ---------------------------------------------------------------------------------

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => prop::collection::vec(any::<u8>(), 0..96).prop_map(Op::Bytes),
        // Bytes that look like the start of a frame: a small length prefix, then junk.
        2 => (0u32..512, prop::collection::vec(any::<u8>(), 0..64)).prop_map(|(len, junk)| {
            let mut bytes = len.to_be_bytes().to_vec();
            bytes.extend(junk);
            Op::Bytes(bytes)
        }),
        1 => Just(Op::Eof),
        2 => Just(Op::Transmit),
        2 => Just(Op::Outcome),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Pure noise, any split, any call order.
    #[test]
    fn arbitrary_calls_and_bytes(ops in prop::collection::vec(op(), 0..24)) {
        drive_bounded(&config(), &ops)?;
    }

    /// A good ApiVersions answer first (so the bytes reach the Metadata decoder at every
    /// version), then a well-framed Metadata response with the right correlation id and a
    /// random body, split anyhow.
    #[test]
    fn random_metadata_bodies(
        version in 0i16..=13,
        body in prop::collection::vec(any::<u8>(), 0..256),
        cuts in prop::collection::vec(any::<usize>(), 0..5),
        polls in prop::collection::vec((any::<usize>(), any::<bool>()), 0..4),
    ) {
        let mut stream = through_api_versions(version);
        let mut message = 2i32.to_be_bytes().to_vec();
        if version >= 9 {
            message.push(0); // response header v1: empty tagged fields
        }
        message.extend(body);
        stream.extend(framed(&message));
        drive_bounded(&config(), &interleave(split(&stream, &cuts), &polls, None))?;
    }

    /// A random ApiVersions body (v3 and, after a downgrade, v0), split anyhow.
    #[test]
    fn random_api_versions_bodies(
        downgrade: bool,
        body in prop::collection::vec(any::<u8>(), 0..128),
        cuts in prop::collection::vec(any::<usize>(), 0..5),
    ) {
        let mut stream = Vec::new();
        let mut correlation_id = 1;
        if downgrade {
            let refusal = ApiVersionsResponse::default().with_error_code(35);
            stream.extend(response(correlation_id, 0, &refusal));
            correlation_id += 1;
        }
        let mut message = correlation_id.to_be_bytes().to_vec();
        message.extend(body);
        stream.extend(framed(&message));
        drive_bounded(&config(), &split(&stream, &cuts))?;
    }

    /// A good conversation with a few bytes overwritten (lengths, counts, versions, ids),
    /// split anyhow, with polls and maybe an early EOF anywhere.
    #[test]
    fn corrupted_conversations(
        version in 0i16..=13,
        edits in prop::collection::vec((any::<usize>(), any::<u8>()), 0..6),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
        polls in prop::collection::vec((any::<usize>(), any::<bool>()), 0..6),
        eof_at in prop::option::of(any::<usize>()),
    ) {
        let mut stream = conversation(version);
        let len = stream.len();
        for (at, byte) in edits {
            stream[at % len] = byte;
        }
        drive_bounded(&config(), &interleave(split(&stream, &cuts), &polls, eof_at))?;
    }

    /// Without corruption every split gives the metadata (the fuzz harness is not vacuous).
    #[test]
    fn good_conversations_in_any_split_succeed(version in 0i16..=13, cuts in prop::collection::vec(any::<usize>(), 0..12)) {
        let mut exchange = Exchange::new(&config());
        for op in split(&conversation(version), &cuts) {
            if let Op::Bytes(bytes) = op {
                exchange.handle_bytes(&bytes);
            }
        }
        let metadata = exchange.poll_outcome().expect("an outcome").expect("metadata");
        prop_assert_eq!(metadata.brokers.len(), 1);
        prop_assert_eq!(&metadata.topics[0].name, "orders");
    }
}

// ---- hostile sizes, deterministically ------------------------------------------------------------

/// Feeds `stream` one byte at a time, then EOF; returns the error and the largest allocation.
fn feed_error(config: &ExchangeConfig, stream: &[u8]) -> (stagger::AttemptError, usize) {
    largest_allocation(|| {
        let mut exchange = Exchange::new(config);
        for byte in stream {
            exchange.handle_bytes(std::slice::from_ref(byte));
        }
        exchange.handle_eof();
        exchange.poll_outcome().expect("an outcome").expect_err("an error")
    })
}

#[test]
fn a_2_gib_length_prefix_costs_four_bytes() {
    for prefix in [0x7fff_ffffu32, 0xffff_ffff, 0x8000_0000, MAX_FRAME as u32 + 1] {
        let (error, largest) = feed_error(&config(), &prefix.to_be_bytes());
        assert_eq!(error.kind, ErrorKind::FrameTooLarge, "{prefix:#x}: {error}");
        assert!(largest < 1024, "{prefix:#x}: largest allocation {largest} B");
    }
}

#[test]
fn array_counts_of_2_pow_31_are_refused_before_decoding() {
    // Metadata v0: zero brokers... then a topics count of i32::MAX in a 12-byte body.
    let mut stream = through_api_versions(0);
    let mut message = 2i32.to_be_bytes().to_vec();
    message.extend([0, 0, 0, 0]); // brokers: 0
    message.extend(i32::MAX.to_be_bytes()); // topics: 2^31 - 1
    stream.extend(framed(&message));
    let (error, largest) = feed_error(&config(), &stream);
    assert_eq!(error.kind, ErrorKind::Protocol, "{error}");
    assert!(error.detail.contains("2147483647"), "{error}");
    assert!(largest < 4096, "largest allocation {largest} B");
}

/// A Metadata response packed with the smallest possible elements of one array, with the
/// maximum frame size set to exactly its size: the tightest configuration that accepts it.
fn packed(version: i16, what: &str, n: usize) -> (ExchangeConfig, Vec<u8>) {
    let broker = MetadataResponseBroker::default().with_node_id(BrokerId(1)).with_port(1);
    let mut body = MetadataResponse::default().with_brokers(vec![broker.clone()]);
    match what {
        "brokers" => body.brokers = vec![broker; n],
        "topics" => body.topics = vec![MetadataResponseTopic::default().with_name(None); n],
        "partitions" => {
            body.topics = vec![MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
                .with_partitions(vec![MetadataResponsePartition::default(); n])]
        }
        other => unreachable!("{other}"),
    }
    let mut stream = through_api_versions(version);
    let frame = response(2, version, &body);
    let config = ExchangeConfig { max_frame_size: frame.len() - 4, ..ExchangeConfig::default() };
    stream.extend(frame);
    (config, stream)
}

/// `kafka-protocol` pre-sizes each array as `count × size_of::<Element>()`, and an element
/// that takes 8 bytes on the wire (a v0 topic with a null name and no partitions) is 104
/// bytes in memory, so "the count fits in the bytes" alone would let a frame ask for ~13× its
/// size. The guard (`src/kafka/guard.rs`) also charges what every array will reserve against
/// the maximum frame size, so no single allocation exceeds it (the frame buffer itself holds
/// the 4-byte length prefix and a little read slack on top: 64 bytes are allowed for that).
#[test]
fn decoding_never_allocates_more_than_the_max_frame_size() {
    for version in [0, 9, 13] {
        for what in ["brokers", "topics", "partitions"] {
            let (config, stream) = packed(version, what, 2000);
            let ((), largest) = largest_allocation(|| {
                let mut exchange = Exchange::new(&config);
                exchange.handle_bytes(&stream);
                let _ = exchange.poll_outcome().expect("an outcome");
            });
            assert!(
                largest <= config.max_frame_size + 64,
                "v{version} {what}: one allocation of {largest} B for a frame of {} B ({:.1}x)",
                config.max_frame_size,
                largest as f64 / config.max_frame_size as f64
            );
        }
    }
}

/// A body whose arrays would need more memory than the limit allows is refused with a clear
/// protocol error; with room for them (a limit 16× the frame), the same bytes decode.
#[test]
fn arrays_over_the_memory_limit_are_refused_and_fit_when_allowed() {
    for version in [0, 9, 13] {
        for what in ["brokers", "topics", "partitions"] {
            for n in [10, 2000] {
                let (tight, stream) = packed(version, what, n);
                let mut exchange = Exchange::new(&tight);
                exchange.handle_bytes(&stream);
                match exchange.poll_outcome().expect("an outcome") {
                    Ok(metadata) => {
                        let partitions: usize = metadata.topics.iter().map(|t| t.partitions.len()).sum();
                        assert!(metadata.brokers.len() + metadata.topics.len() + partitions >= n);
                    }
                    Err(e) => {
                        assert_eq!(e.kind, ErrorKind::Protocol, "{e}");
                        assert!(e.detail.contains("in memory"), "v{version} {what} ×{n}: {e}");
                    }
                }
                let roomy = ExchangeConfig { max_frame_size: tight.max_frame_size * 16, ..tight.clone() };
                let mut exchange = Exchange::new(&roomy);
                exchange.handle_bytes(&stream);
                let metadata = exchange.poll_outcome().expect("an outcome").expect("valid metadata");
                let partitions: usize = metadata.topics.iter().map(|t| t.partitions.len()).sum();
                assert!(metadata.brokers.len() + metadata.topics.len() + partitions >= n);
            }
        }
    }
}

// ---- SASL: every mechanism against a hostile broker ------------------------------------------

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use hmac::digest::core_api::BlockSizeUser;
use hmac::digest::{Digest, FixedOutput, KeyInit, Update};
use hmac::SimpleHmac;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{SaslAuthenticateResponse, SaslHandshakeResponse};
use stagger::kafka::sasl::{Sasl, ScramHash, Secret};

const USER: &str = "fuzz-user";
const PASSWORD: &str = "hunter2-fuzz-secret";
/// The SCRAM client nonce every SASL exchange here is given, so a script can answer it.
const NONCE: [u8; 18] = *b"fuzz-client-nonce!";

const MECHANISM_NAMES: [&str; 4] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"];

fn sasl(mechanism: usize) -> Sasl {
    Sasl::from_parts(MECHANISM_NAMES[mechanism % 4], USER, Secret::new(PASSWORD)).unwrap()
}

fn sasl_config(mechanism: usize, max_frame: usize) -> ExchangeConfig {
    ExchangeConfig { max_frame_size: max_frame, sasl: Some(sasl(mechanism)), ..ExchangeConfig::default() }
}

fn sasl_exchange(config: &ExchangeConfig) -> Exchange {
    let mut exchange = Exchange::new(config);
    exchange.set_sasl_nonce(&NONCE);
    exchange
}

fn client_nonce() -> String {
    BASE64.encode(NONCE)
}

fn hmac<D: Digest + BlockSizeUser + Clone>(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = <SimpleHmac<D> as KeyInit>::new_from_slice(key).unwrap();
    Update::update(&mut mac, data);
    mac.finalize_fixed().to_vec()
}

/// The broker's side of SCRAM, independently of the core: the client proof the client must
/// send and the server signature that proves the broker knows the password.
fn scram_keys<D: Digest + BlockSizeUser + Clone + Sync>(
    salt: &[u8],
    iterations: u32,
    auth: &str,
) -> (Vec<u8>, Vec<u8>) {
    let mut salted = vec![0u8; <D as Digest>::output_size()];
    pbkdf2::pbkdf2::<SimpleHmac<D>>(PASSWORD.as_bytes(), salt, iterations, &mut salted).unwrap();
    let client_key = hmac::<D>(&salted, b"Client Key");
    let client_signature = hmac::<D>(&D::digest(&client_key), auth.as_bytes());
    let proof = client_key.iter().zip(&client_signature).map(|(k, s)| k ^ s).collect();
    (proof, hmac::<D>(&hmac::<D>(&salted, b"Server Key"), auth.as_bytes()))
}

/// A SCRAM server-first for the client's nonce, and (proof, server signature) for it.
fn scram_server_first(hash: ScramHash, server_nonce: &str, salt: &[u8], iterations: u32) -> (String, Vec<u8>, Vec<u8>) {
    let combined = format!("{}{server_nonce}", client_nonce());
    let first = format!("r={combined},s={},i={iterations}", BASE64.encode(salt));
    let auth = format!("n={USER},r={},{first},c=biws,r={combined}", client_nonce());
    let (proof, signature) = match hash {
        ScramHash::Sha256 => scram_keys::<sha2::Sha256>(salt, iterations, &auth),
        ScramHash::Sha512 => scram_keys::<sha2::Sha512>(salt, iterations, &auth),
    };
    (first, proof, signature)
}

/// What must never appear in an error or a `Debug` of a SASL exchange: the password, its
/// base64, PLAIN's message (also in base64), and every SCRAM client proof a script made.
fn secrets(proofs: &[Vec<u8>]) -> Vec<String> {
    let mut secrets =
        vec![PASSWORD.to_string(), BASE64.encode(PASSWORD), BASE64.encode(format!("\0{USER}\0{PASSWORD}"))];
    secrets.extend(proofs.iter().map(|p| BASE64.encode(p)));
    secrets
}

/// One `SaslAuthenticate` answer.
#[derive(Clone, Debug)]
enum Answer {
    /// Encoded by `kafka-protocol`: error code, error message, payload.
    Encoded(i16, Option<String>, Vec<u8>),
    /// A body of random bytes behind a good header.
    Raw(Vec<u8>),
}

/// How the broker's SCRAM answers are made.
#[derive(Clone, Debug)]
enum ScramScript {
    /// A server-first for our nonce, then a server-final: the right signature (`None`) or
    /// these bytes (a forged `v=`, an `e=`, junk).
    Valid { server_nonce: String, salt: Vec<u8>, iterations: u32, last: Option<Vec<u8>> },
    /// Hostile server-first payloads.
    Payloads(Vec<Vec<u8>>),
}

/// A broker's whole SASL conversation, before corruption.
#[derive(Clone, Debug)]
struct SaslScript {
    mechanism: usize,
    /// Metadata max version listed; the SaslAuthenticate (min, max) listed, if at all.
    metadata: i16,
    authenticate: Option<(i16, i16)>,
    /// `None`: the handshake succeeds listing the mechanism; else (error code, mechanisms).
    handshake: Option<(i16, Vec<String>)>,
    handshake_raw: Option<Vec<u8>>,
    scram: ScramScript,
    /// Answers for PLAIN and OAUTHBEARER (and anything after SCRAM's two).
    answers: Vec<Answer>,
    /// Error codes replacing the answers' own 0 (mostly none).
    codes: Vec<(usize, i16)>,
}

impl SaslScript {
    fn hash(&self) -> Option<ScramHash> {
        match self.mechanism % 4 {
            1 => Some(ScramHash::Sha256),
            2 => Some(ScramHash::Sha512),
            _ => None,
        }
    }

    /// The bytes the broker sends, and the SCRAM proofs the client will compute.
    fn stream(&self) -> (Vec<u8>, Vec<Vec<u8>>) {
        let mut api = api_versions(self.metadata);
        api.api_keys.push(ApiVersion::default().with_api_key(ApiKey::SaslHandshake as i16).with_max_version(1));
        if let Some((min, max)) = self.authenticate {
            let key = ApiKey::SaslAuthenticate as i16;
            api.api_keys.push(ApiVersion::default().with_api_key(key).with_min_version(min).with_max_version(max));
        }
        let version = self.authenticate.map_or(0, |(_, max)| max.clamp(0, 2));
        let mut stream = response(1, 3, &api);
        match (&self.handshake_raw, &self.handshake) {
            (Some(raw), _) => stream.extend(framed(&[&2i32.to_be_bytes()[..], raw].concat())),
            (None, None) => {
                let listed = vec![StrBytes::from_static_str(MECHANISM_NAMES[self.mechanism % 4])];
                stream.extend(response(2, 1, &SaslHandshakeResponse::default().with_mechanisms(listed)));
            }
            (None, Some((code, names))) => {
                let names = names.iter().map(|n| StrBytes::from_string(n.clone())).collect();
                let body = SaslHandshakeResponse::default().with_error_code(*code).with_mechanisms(names);
                stream.extend(response(2, 1, &body));
            }
        }
        let mut answers = Vec::new();
        let mut proofs = Vec::new();
        if let Some(hash) = self.hash() {
            match &self.scram {
                ScramScript::Valid { server_nonce, salt, iterations, last } => {
                    let (first, proof, signature) = scram_server_first(hash, server_nonce, salt, *iterations);
                    proofs.push(proof);
                    answers.push(Answer::Encoded(0, None, first.into_bytes()));
                    let last = last.clone().unwrap_or_else(|| format!("v={}", BASE64.encode(signature)).into_bytes());
                    answers.push(Answer::Encoded(0, None, last));
                }
                ScramScript::Payloads(payloads) => {
                    answers.extend(payloads.iter().map(|p| Answer::Encoded(0, None, p.clone())));
                }
            }
        }
        answers.extend(self.answers.iter().cloned());
        let count = answers.len().max(1);
        for &(at, code) in &self.codes {
            if let Some(Answer::Encoded(error_code, ..)) = answers.get_mut(at % count) {
                *error_code = code;
            }
        }
        let mut correlation_id = 3;
        for answer in &answers {
            match answer {
                Answer::Encoded(code, message, payload) => {
                    let body = SaslAuthenticateResponse::default()
                        .with_error_code(*code)
                        .with_error_message(message.clone().map(StrBytes::from_string))
                        .with_auth_bytes(Bytes::copy_from_slice(payload));
                    stream.extend(wire::try_response(correlation_id, version, &body).unwrap_or_default());
                }
                Answer::Raw(raw) => {
                    let mut message = correlation_id.to_be_bytes().to_vec();
                    if version >= 2 {
                        message.push(0); // response header v1: no tagged fields
                    }
                    message.extend(raw);
                    stream.extend(framed(&message));
                }
            }
            correlation_id += 1;
        }
        stream.extend(response(correlation_id, self.metadata.clamp(0, 13), &cluster()));
        (stream, proofs)
    }
}

/// Printable, comma-free text: what a SCRAM nonce may be.
fn nonce_text() -> impl Strategy<Value = String> {
    "[!-+--~]{1,24}"
}

/// Server-first messages a hostile broker might send.
fn hostile_server_first() -> impl Strategy<Value = Vec<u8>> {
    let n = client_nonce();
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        (nonce_text(), prop::collection::vec(any::<u8>(), 0..12), "[0-9a-z+-]{0,12}").prop_map(
            move |(server, salt, iterations)| format!("r={n}{server},s={},i={iterations}", BASE64.encode(salt))
                .into_bytes()
        ),
        prop::sample::select(vec![
            "r=,s=,i=".to_string(),
            format!("r={},s=c2FsdA==,i=1", client_nonce()),
            format!("r={}x,s=!!!,i=1", client_nonce()),
            format!("r={}x,s=c2FsdA==,i=99999999999999999999", client_nonce()),
            format!("r={}x\u{1},s=c2FsdA==,i=1", client_nonce()),
            format!("m=ext,r={}x,s=c2FsdA==,i=1", client_nonce()),
            "\u{1}\u{2}\u{3}".to_string(),
        ])
        .prop_map(String::into_bytes),
    ]
}

fn answer() -> impl Strategy<Value = Answer> {
    prop_oneof![
        4 => prop::collection::vec(any::<u8>(), 0..48).prop_map(|p| Answer::Encoded(0, None, p)),
        1 => (any::<i16>(), prop::option::of(".{0,24}"), prop::collection::vec(any::<u8>(), 0..16))
            .prop_map(|(c, m, p)| Answer::Encoded(c, m, p)),
        1 => Just(Answer::Encoded(0, None, br#"{"status":"invalid_token"}"#.to_vec())),
        1 => prop::collection::vec(any::<u8>(), 0..48).prop_map(Answer::Raw),
    ]
}

fn sasl_script() -> impl Strategy<Value = SaslScript> {
    let scram = prop_oneof![
        3 => (nonce_text(), prop::collection::vec(any::<u8>(), 1..16), 1u32..=4, prop::option::of(prop_oneof![
            prop::collection::vec(any::<u8>(), 0..40),
            Just(b"v=AAAA".to_vec()),
            "e=[a-z-]{0,20}".prop_map(String::into_bytes),
        ]))
            .prop_map(|(server_nonce, salt, iterations, last)| ScramScript::Valid { server_nonce, salt, iterations, last }),
        1 => prop::collection::vec(hostile_server_first(), 1..3).prop_map(ScramScript::Payloads),
    ];
    let authenticate = prop_oneof![
        16 => (Just(0i16), 0i16..=2).prop_map(Some),
        1 => Just(None),
        1 => any::<(i16, i16)>().prop_map(Some),
    ];
    let handshake = prop_oneof![
        6 => Just(None),
        1 => (any::<i16>(), prop::collection::vec("[A-Z0-9-]{0,16}", 0..4)).prop_map(Some),
    ];
    (
        0usize..4,
        0i16..=13,
        authenticate,
        handshake,
        prop::option::weighted(0.1, prop::collection::vec(any::<u8>(), 0..32)),
        scram,
        prop::collection::vec(answer(), 0..3),
        prop::collection::vec((any::<usize>(), prop_oneof![Just(58i16), any::<i16>()]), 0..2),
    )
        .prop_map(|(mechanism, metadata, authenticate, handshake, handshake_raw, scram, answers, codes)| {
            SaslScript { mechanism, metadata, authenticate, handshake, handshake_raw, scram, answers, codes }
        })
}

/// The script with nothing hostile: what an honest broker answers for `mechanism`.
fn honest(
    mechanism: usize,
    metadata: i16,
    version: i16,
    server_nonce: String,
    salt: Vec<u8>,
    iterations: u32,
) -> SaslScript {
    SaslScript {
        mechanism,
        metadata,
        authenticate: Some((0, version)),
        handshake: None,
        handshake_raw: None,
        scram: ScramScript::Valid { server_nonce, salt, iterations, last: None },
        // PLAIN and OAUTHBEARER: one empty answer; SCRAM: its two, from `scram`.
        answers: if matches!(mechanism % 4, 0 | 3) { vec![Answer::Encoded(0, None, Vec::new())] } else { Vec::new() },
        codes: Vec::new(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    /// Every mechanism against a broker whose ApiVersions, SaslHandshake and SaslAuthenticate
    /// answers (SCRAM messages for our nonce, hostile ones, error JSON, error codes, random
    /// bodies) are generated, then corrupted, split anyhow, with polls and maybe an EOF: no
    /// panic, the call protocol, no allocation past the frame limit, errors that name what
    /// was wrong, and no password, PLAIN message or SCRAM proof in any error or `Debug`.
    #[test]
    fn hostile_sasl_conversations(
        script in sasl_script(),
        edits in prop::collection::vec((any::<usize>(), any::<u8>()), 0..3),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
        polls in prop::collection::vec((any::<usize>(), any::<bool>()), 0..6),
        eof_at in prop::option::weighted(0.2, any::<usize>()),
    ) {
        let (mut stream, proofs) = script.stream();
        let len = stream.len();
        for (at, byte) in edits {
            stream[at % len] = byte;
        }
        let config = sasl_config(script.mechanism, MAX_FRAME);
        let ops = interleave(split(&stream, &cuts), &polls, eof_at);
        bounded(|| sasl_exchange(&config), MAX_FRAME, &ops, &secrets(&proofs))?;
    }

    /// An honest broker, every mechanism and SaslAuthenticate version, any split: metadata
    /// (so the hostile property starts from conversations that really authenticate), and
    /// the client's SCRAM proof is the one the broker computes.
    #[test]
    fn honest_sasl_conversations_in_any_split_succeed(
        mechanism in 0usize..4,
        metadata in 0i16..=13,
        version in 0i16..=2,
        server_nonce in nonce_text(),
        salt in prop::collection::vec(any::<u8>(), 1..16),
        iterations in 1u32..=4,
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let script = honest(mechanism, metadata, version, server_nonce, salt, iterations);
        let (stream, proofs) = script.stream();
        let mut exchange = sasl_exchange(&sasl_config(mechanism, MAX_FRAME));
        for op in split(&stream, &cuts) {
            if let Op::Bytes(bytes) = op {
                exchange.handle_bytes(&bytes);
            }
        }
        let metadata = exchange.poll_outcome().expect("an outcome");
        prop_assert!(metadata.is_ok(), "{:?}", metadata);
        prop_assert_eq!(&metadata.unwrap().topics[0].name, "orders");
        // A broker answers only what it was sent: one frame at a time, taking each request.
        let mut exchange = sasl_exchange(&sasl_config(mechanism, MAX_FRAME));
        let mut sent = Vec::new();
        let mut rest = &stream[..];
        while rest.len() >= 4 {
            sent.extend(exchange.poll_transmit().map(|f| f.to_vec()));
            let end = 4 + u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
            exchange.handle_bytes(&rest[..end]);
            rest = &rest[end..];
        }
        prop_assert!(matches!(exchange.poll_outcome(), Some(Ok(_))));
        let sent = sent.concat();
        for proof in &proofs {
            let proof = format!("p={}", BASE64.encode(proof));
            prop_assert!(sent.windows(proof.len()).any(|w| w == proof.as_bytes()), "the client sent {}", proof);
        }
    }
}

// ---- ApiVersions v5: any identity, hostile answers -------------------------------------------------

use stagger::BrokerIdentity;

/// The fields of an ApiVersions v5 request body, read back by hand (`kafka-protocol` stops at v4).
fn read_v5_body(body: &[u8]) -> Option<(String, String, Option<String>, i32, usize)> {
    let string = |b: &mut &[u8]| -> Option<Option<String>> {
        match wire::read_compact_string(b)? {
            None => Some(None),
            Some(text) => Some(Some(String::from_utf8(text.to_vec()).ok()?)),
        }
    };
    let mut b = body;
    let name = string(&mut b)??;
    let version = string(&mut b)??;
    let cluster = string(&mut b)?;
    let node = i32::from_be_bytes(b.get(..4)?.try_into().ok()?);
    b = &b[4..];
    let tags = wire::read_uvarint(&mut b)? as usize;
    Some((name, version, cluster, node, tags + b.len()))
}

/// The broker's first answer to ApiVersions v5.
#[derive(Clone, Debug)]
enum V5Answer {
    /// Accepted (v4 layout), listing Metadata up to this version.
    Good(i16),
    /// An error code alone: 35 makes the client retry with v3, 129 refuses the identity.
    Code(i16),
    /// Random bytes behind a good header.
    Raw(Vec<u8>),
}

fn v5_answer() -> impl Strategy<Value = V5Answer> {
    prop_oneof![
        3 => (0i16..=13).prop_map(V5Answer::Good),
        2 => Just(V5Answer::Code(35)),
        2 => Just(V5Answer::Code(129)),
        1 => any::<i16>().prop_map(V5Answer::Code),
        2 => prop::collection::vec(any::<u8>(), 0..64).prop_map(V5Answer::Raw),
    ]
}

fn identity() -> impl Strategy<Value = BrokerIdentity> {
    (prop_oneof![".{1,40}", "[a-zA-Z0-9_-]{22}"], 0i32..=i32::MAX)
        .prop_map(|(cluster_id, node_id)| BrokerIdentity { cluster_id, node_id })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// Whatever identity a (hostile) earlier Metadata answer gave a broker — any text, any
    /// node id — the hand-encoded v5 request carries exactly it, behind a header
    /// `kafka-protocol` decodes, and nothing else.
    #[test]
    fn api_versions_v5_requests_carry_any_identity(identity in identity(), client_id in "[ -~]{0,24}") {
        let config = ExchangeConfig { client_id: client_id.clone(), ..config() };
        let mut exchange = Exchange::with_identity(&config, Some(&identity));
        let frame = exchange.poll_transmit().expect("the v5 request");
        let mut body = frame.slice(4..);
        let header = RequestHeader::decode(&mut body, 2).expect("a request header v2");
        prop_assert_eq!(header.request_api_key, ApiKey::ApiVersions as i16);
        prop_assert_eq!(header.request_api_version, 5);
        prop_assert_eq!(header.client_id.as_deref(), Some(client_id.as_str()));
        let (name, version, cluster, node, rest) = read_v5_body(&body).expect("a v5 body");
        prop_assert_eq!((name.as_str(), version.as_str()), ("stagger", env!("CARGO_PKG_VERSION")));
        prop_assert_eq!(cluster.as_deref(), Some(identity.cluster_id.as_str()));
        prop_assert_eq!(node, identity.node_id);
        prop_assert_eq!(rest, 0, "an empty tag buffer ends the body");
    }

    /// A broker asked with v5 answers anything: accepted, UNSUPPORTED_VERSION (then the v3
    /// retry is answered too), REBOOTSTRAP_REQUIRED, another error, random bytes; then
    /// Metadata for the expected cluster, another one or none — corrupted, split anyhow.
    /// Besides the usual properties, an uncorrupted script ends as it must, and its errors
    /// name the cluster and node expected.
    #[test]
    fn hostile_answers_to_api_versions_v5(
        identity in identity(),
        first in v5_answer(),
        retry in v5_answer(),
        cluster_answer in prop_oneof![Just(None), Just(Some(None)), ".{0,16}".prop_map(|c| Some(Some(c)))],
        edits in prop::collection::vec((any::<usize>(), any::<u8>()), 0..3),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
        polls in prop::collection::vec((any::<usize>(), any::<bool>()), 0..4),
    ) {
        let answer_frame = |correlation_id: i32, answer: &V5Answer, version: i16| match answer {
            V5Answer::Good(max) => response(correlation_id, version.min(4), &api_versions(*max)),
            V5Answer::Code(code) => response(correlation_id, 0, &ApiVersionsResponse::default().with_error_code(*code)),
            V5Answer::Raw(raw) => framed(&[&correlation_id.to_be_bytes()[..], raw].concat()),
        };
        let mut stream = answer_frame(1, &first, 5);
        let mut correlation_id = 2;
        if matches!(first, V5Answer::Code(35)) {
            stream.extend(answer_frame(2, &retry, 3));
            correlation_id = 3;
        }
        let accepted = match (&first, &retry) {
            (V5Answer::Good(v), _) | (V5Answer::Code(35), V5Answer::Good(v)) => Some(*v),
            _ => None,
        };
        // The cluster the Metadata answer names: the expected one (None), none, or another.
        let mut metadata = cluster();
        metadata.cluster_id = match &cluster_answer {
            None => Some(StrBytes::from_string(identity.cluster_id.clone())),
            Some(other) => other.clone().map(StrBytes::from_string),
        };
        let version = accepted.unwrap_or(0);
        stream.extend(wire::try_response(correlation_id, version, &metadata).unwrap_or_default());
        let untouched = edits.is_empty();
        let len = stream.len();
        for (at, byte) in edits {
            stream[at % len] = byte;
        }
        let ops = interleave(split(&stream, &cuts), &polls, None);
        bounded(|| Exchange::with_identity(&config(), Some(&identity)), MAX_FRAME, &ops, &[])?;

        if untouched {
            let mut exchange = Exchange::with_identity(&config(), Some(&identity));
            exchange.handle_bytes(&stream);
            exchange.handle_eof();
            let outcome = exchange.poll_outcome().expect("an outcome");
            let refused = matches!(first, V5Answer::Code(129)) || matches!((&first, &retry), (V5Answer::Code(35), V5Answer::Code(129)));
            // Metadata v2 is the first to carry a cluster id: before it, nothing to check.
            let other_cluster =
                version >= 2 && matches!(&cluster_answer, Some(Some(c)) if *c != identity.cluster_id);
            let node = format!("node {}", identity.node_id);
            match (accepted, outcome) {
                (Some(_), Ok(m)) => prop_assert!(!other_cluster, "metadata of another cluster won: {:?}", m.cluster_id),
                (Some(_), Err(e)) => {
                    prop_assert!(other_cluster, "{}", e);
                    prop_assert_eq!(e.kind, ErrorKind::BrokerError(129));
                    prop_assert!(e.detail.contains(&identity.cluster_id) && e.detail.contains(&node), "{}", e);
                }
                (None, Err(e)) if refused => {
                    prop_assert_eq!(e.kind, ErrorKind::BrokerError(129));
                    prop_assert!(e.detail.contains(&identity.cluster_id) && e.detail.contains(&node), "{}", e);
                    prop_assert!(e.detail.contains("ApiVersions v"), "{}", e);
                }
                (None, Err(e)) => prop_assert!(e.detail.contains("ApiVersions"), "{}", e),
                (None, Ok(m)) => prop_assert!(false, "metadata without an accepted ApiVersions: {:?}", m),
            }
        }
    }
}

/// Feeds `stream` one frame at a time (as a broker answers each request) to an exchange
/// `make` builds from `config` with the maximum frame size set to the stream's largest frame:
/// the tightest limit that accepts it. Returns that limit, the error and the largest single
/// allocation.
fn feed_frames_tightly(
    mut config: ExchangeConfig,
    make: impl Fn(&ExchangeConfig) -> Exchange,
    stream: &[u8],
) -> (usize, stagger::AttemptError, usize) {
    let mut frames = Vec::new();
    let mut rest = stream;
    while rest.len() >= 4 {
        let end = 4 + u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        frames.push(&rest[..end]);
        rest = &rest[end..];
    }
    config.max_frame_size = frames.iter().map(|f| f.len() - 4).max().unwrap();
    let (error, largest) = largest_allocation(|| {
        let mut exchange = make(&config);
        for frame in frames {
            exchange.handle_bytes(frame);
        }
        exchange.handle_eof();
        exchange.poll_outcome().expect("an outcome").expect_err("a failure")
    });
    (config.max_frame_size, error, largest)
}

/// The start of a long error, for a failure message.
fn head(text: &str) -> String {
    text.chars().take(200).collect()
}

/// Words around what a broker said in an error (`authentication failed for user … : `):
/// the only allowance, on top of the frame limit, for one allocation holding the error.
const ERROR_WORDING: usize = 256;

/// Text a broker sends inside SASL answers ends up in errors, which must not cost more than
/// the frame that carried it: an OAUTHBEARER error "JSON" of invalid UTF-8 (each byte would
/// become a 3-byte U+FFFD), SCRAM attributes and iteration counts of control characters
/// (each would be quoted as a 6-byte `\u{1}`), a SCRAM `e=` error, a refusal's message, a
/// handshake's mechanism list. Each fills a frame of ~8 KiB with the limit set to exactly
/// that frame: no single allocation above the limit plus the error's own wording, and the
/// error still says what was wrong.
#[test]
fn sasl_texts_from_the_broker_cost_no_more_than_their_frame() {
    const P: usize = 8 * 1024;
    let controls = "\u{1}".repeat(P);
    let nonce = client_nonce();
    let cases: Vec<(&str, SaslScript, &str)> = vec![
        (
            "an OAUTHBEARER error JSON of invalid UTF-8",
            SaslScript {
                answers: vec![
                    Answer::Encoded(0, None, vec![0xff; P]),
                    Answer::Encoded(58, Some("denied".into()), Vec::new()),
                ],
                ..honest(3, 13, 2, String::new(), Vec::new(), 1)
            },
            "OAUTHBEARER",
        ),
        (
            "a SCRAM attribute of control characters",
            SaslScript {
                scram: ScramScript::Payloads(vec![controls.clone().into_bytes()]),
                ..honest(1, 13, 2, String::new(), Vec::new(), 1)
            },
            "bad attribute",
        ),
        (
            "a SCRAM iteration count of control characters",
            SaslScript {
                scram: ScramScript::Payloads(vec![format!("r={nonce}x,s=c2FsdA==,i={controls}").into_bytes()]),
                ..honest(2, 13, 2, String::new(), Vec::new(), 1)
            },
            "iterations",
        ),
        (
            "a SCRAM server nonce filling the frame",
            SaslScript {
                scram: ScramScript::Valid {
                    server_nonce: "x".repeat(P),
                    salt: b"salt".to_vec(),
                    iterations: 1,
                    last: Some(b"v=AAAA".to_vec()),
                },
                ..honest(1, 13, 2, String::new(), Vec::new(), 1)
            },
            "signature does not match",
        ),
        (
            "a SCRAM e= error of control characters",
            SaslScript {
                scram: ScramScript::Valid {
                    server_nonce: "x".into(),
                    salt: b"salt".to_vec(),
                    iterations: 1,
                    last: Some(format!("e={controls}").into_bytes()),
                },
                ..honest(1, 13, 2, String::new(), Vec::new(), 1)
            },
            "refused the proof",
        ),
        (
            "a refusal whose message is control characters",
            SaslScript {
                answers: vec![Answer::Encoded(58, Some(controls.clone()), Vec::new())],
                ..honest(0, 13, 2, String::new(), Vec::new(), 1)
            },
            "authentication failed",
        ),
        (
            // Cut where no character ends: the excerpt must step back to a boundary.
            "a refusal message of three-byte characters",
            SaslScript {
                answers: vec![Answer::Encoded(58, Some("€".repeat(P / 3)), Vec::new())],
                ..honest(0, 13, 2, String::new(), Vec::new(), 1)
            },
            "€€€…",
        ),
        (
            "a handshake refusal listing thousands of mechanisms",
            SaslScript {
                handshake: Some((33, vec!["M".to_string(); P / 4])),
                ..honest(0, 13, 2, String::new(), Vec::new(), 1)
            },
            "SaslHandshake",
        ),
    ];
    let mut runs: Vec<(&str, (usize, stagger::AttemptError, usize), &str)> = cases
        .into_iter()
        .map(|(what, script, says)| {
            let config = sasl_config(script.mechanism, 0);
            (what, feed_frames_tightly(config, sasl_exchange, &script.stream().0), says)
        })
        .collect();
    // And the cluster check: a Metadata answer naming another cluster, whose id fills the frame.
    let identity = BrokerIdentity { cluster_id: "expected-cluster".into(), node_id: 1 };
    let mut stream = response(1, 4, &api_versions(13));
    let other = cluster().with_cluster_id(Some(StrBytes::from_string("\u{1}".repeat(P))));
    stream.extend(response(2, 13, &other));
    let with_identity = |config: &ExchangeConfig| Exchange::with_identity(config, Some(&identity));
    runs.push((
        "another cluster's id filling the frame",
        feed_frames_tightly(config(), with_identity, &stream),
        "cluster",
    ));
    let mut failures = Vec::new();
    for (what, (max_frame, error, largest), says) in runs {
        assert!(max_frame >= P / 2, "{what}: the hostile frame is the largest ({max_frame} B)");
        if largest > max_frame + ERROR_WORDING {
            failures.push(format!(
                "{what}: one allocation of {largest} B for a frame limit of {max_frame} B ({:.1}x): {}",
                largest as f64 / max_frame as f64,
                head(&error.detail)
            ));
        }
        if !error.detail.contains(says) {
            failures.push(format!("{what}: the error does not say {says:?}: {}", head(&error.detail)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The request an exchange holds for the caller is credentials when it is a
/// `SaslAuthenticate` (PLAIN's password, OAUTHBEARER's token, SCRAM's proof): an `Exchange`
/// (or the `KafkaAttempt` around it) printed with `{:?}` while one waits shows its length only.
#[test]
fn a_waiting_sasl_request_is_not_in_the_exchanges_debug() {
    for (mechanism, name) in MECHANISM_NAMES.iter().enumerate() {
        let script = honest(mechanism, 13, 2, "server".into(), b"salt".to_vec(), 2);
        let (stream, proofs) = script.stream();
        let mut exchange = sasl_exchange(&sasl_config(mechanism, MAX_FRAME));
        let mut rest = &stream[..];
        let mut waiting = 0;
        while rest.len() >= 4 {
            let end = 4 + u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
            exchange.handle_bytes(&rest[..end]);
            rest = &rest[end..];
            let shown = format!("{exchange:?}");
            if shown.contains("transmit: Some(") {
                waiting += 1;
                assert!(shown.contains(" bytes>"), "{shown}");
            }
            for secret in secrets(&proofs) {
                assert!(!shown.contains(&secret), "{}: {secret:?} in {shown}", name);
            }
            let _ = exchange.poll_transmit();
        }
        assert!(waiting >= 2, "{}: requests waited to be taken", name);
        assert!(matches!(exchange.poll_outcome(), Some(Ok(_))));
    }
}
