//! ApiVersions v5 (KIP-1242), whose request is encoded by hand: any identity a (hostile)
//! earlier Metadata answer may have given the broker — any text, any node id — must encode
//! into a request that reads back as exactly that identity; and whatever the broker answers
//! to it (accepted, UNSUPPORTED_VERSION and then anything to the v3 retry,
//! REBOOTSTRAP_REQUIRED, any error, random bytes), then Metadata naming any cluster,
//! corrupted, split anyhow, with polls and an EOF anywhere: never a panic, a broken call
//! protocol or an allocation the wire asked for.
#![no_main]

use arbitrary::Arbitrary;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, MetadataResponse, RequestHeader};
use kafka_protocol::protocol::{Decodable, StrBytes};
use libfuzzer_sys::fuzz_target;
use stagger::kafka::{Exchange, ExchangeConfig};
use stagger::BrokerIdentity;
use stagger_fuzz::{
    api_versions, config, drive_exchange_and_check, framed, interleave, read_compact_string, response, split,
    try_response,
};

#[derive(Arbitrary, Debug)]
enum Answer {
    /// Accepted (v4's layout), listing Metadata up to this version.
    Good(u8),
    /// An error code alone (35: retry with v3; 129: not that node of that cluster).
    Code(i16),
    /// Random bytes behind a good correlation id.
    Raw(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
struct Input {
    max_frame: u8,
    client_id: String,
    cluster_id: String,
    node_id: i32,
    first: Answer,
    retry: Answer,
    /// The Metadata answer's cluster id: `None` for the expected one.
    answered_cluster: Option<Option<String>>,
    edits: Vec<(u16, u8)>,
    cuts: Vec<u16>,
    polls: Vec<(u16, bool)>,
    eof_at: Option<u16>,
}

fn answer(correlation_id: i32, answer: &Answer, version: i16) -> Vec<u8> {
    match answer {
        Answer::Good(max) => response(correlation_id, version.min(4), &api_versions(i16::from(*max % 14))),
        Answer::Code(code) => response(correlation_id, 0, &ApiVersionsResponse::default().with_error_code(*code)),
        Answer::Raw(raw) => framed(&[&correlation_id.to_be_bytes()[..], raw].concat()),
    }
}

fuzz_target!(|input: Input| {
    let identity = BrokerIdentity { cluster_id: input.cluster_id.clone(), node_id: input.node_id };
    let config = ExchangeConfig { client_id: input.client_id.clone(), ..config(input.max_frame) };

    // The request: a v5 one exactly when the identity is complete, carrying it.
    let mut exchange = Exchange::with_identity(&config, Some(&identity));
    if let Some(frame) = exchange.poll_transmit() {
        let mut body = frame.slice(4..);
        let version = i16::from_be_bytes([body[2], body[3]]);
        assert_eq!(version, if identity.is_complete() { 5 } else { 3 });
        let header = RequestHeader::decode(&mut body, ApiKey::ApiVersions.request_header_version(version)).unwrap();
        assert_eq!(header.client_id.as_deref(), Some(input.client_id.as_str()));
        if version == 5 {
            let mut b = &body[..];
            assert_eq!(read_compact_string(&mut b).unwrap(), Some(&b"stagger"[..]));
            assert!(read_compact_string(&mut b).unwrap().is_some());
            assert_eq!(read_compact_string(&mut b).unwrap(), Some(identity.cluster_id.as_bytes()));
            assert_eq!(b.get(..4).map(|n| i32::from_be_bytes(n.try_into().unwrap())), Some(identity.node_id));
            assert_eq!(&b[4..], [0], "the empty tag buffer, and nothing after it");
        }
    } else {
        // Only a request that cannot be encoded (a client id over 32 KiB) finishes at once.
        assert!(exchange.is_finished() && input.client_id.len() > i16::MAX as usize);
        return;
    }

    // The answers.
    let mut stream = answer(1, &input.first, 5);
    let mut correlation_id = 2;
    if matches!(input.first, Answer::Code(35)) {
        stream.extend(answer(2, &input.retry, 3));
        correlation_id = 3;
    }
    let version = match (&input.first, &input.retry) {
        (Answer::Good(v), _) | (Answer::Code(35), Answer::Good(v)) => i16::from(*v % 14),
        _ => 0,
    };
    let cluster = match &input.answered_cluster {
        None => Some(identity.cluster_id.clone()),
        Some(other) => other.clone(),
    };
    let metadata = MetadataResponse::default().with_cluster_id(cluster.map(StrBytes::from_string));
    stream.extend(try_response(correlation_id, version, &metadata).unwrap_or_default());
    if !stream.is_empty() {
        let len = stream.len();
        for &(at, byte) in &input.edits {
            stream[at as usize % len] = byte;
        }
    }
    let ops = interleave(split(&stream, &input.cuts), &input.polls, input.eof_at);
    drive_exchange_and_check(|| Exchange::with_identity(&config, Some(&identity)), config.max_frame_size, &ops);
});
