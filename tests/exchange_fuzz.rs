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
//!   only come from trusting a number on the wire.

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

/// Applies `ops` to a fresh exchange, then hangs up, checking the call protocol throughout.
/// Returns the number of bytes fed.
fn drive(config: &ExchangeConfig, ops: &[Op]) -> Result<usize, TestCaseError> {
    let mut exchange = Exchange::new(config);
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
                        prop_assert!(!e.detail.is_empty() || e.kind == ErrorKind::Closed, "errors say why: {e}");
                    }
                }
            }
        }
    }
    exchange.handle_eof();
    prop_assert!(exchange.is_finished());
    outcomes += usize::from(exchange.poll_outcome().is_some());
    prop_assert_eq!(outcomes, 1, "exactly one outcome per exchange");
    prop_assert!(exchange.poll_outcome().is_none() && exchange.poll_transmit().is_none());
    Ok(fed)
}

/// Runs [`drive`] under the allocation probe and checks the bound.
fn drive_bounded(config: &ExchangeConfig, ops: &[Op]) -> Result<(), TestCaseError> {
    let (result, largest) = largest_allocation(|| drive(config, ops));
    let fed = result?;
    prop_assert!(
        largest <= config.max_frame_size,
        "largest single allocation {largest} B > max frame size {} B after feeding {fed} B",
        config.max_frame_size
    );
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
