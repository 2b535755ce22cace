//! Tests of the exchange against a fake broker whose answers `kafka-protocol` encodes; the
//! helpers are shared with `KafkaAttempt`'s tests.

use super::*;
use crate::metadata::{BrokerMetadata, PartitionMetadata, TopicMetadata};
use alloc::string::ToString;
use alloc::vec;
use bytes::BytesMut;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::BrokerId;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, MetadataRequest, MetadataResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::Decodable;
use kafka_protocol::protocol::{Encodable, HeaderVersion};
use proptest::prelude::*;

// ---- a fake broker, built from kafka-protocol itself ----

/// Takes the next request and decodes its header; returns the header and the body bytes.
fn take_request(exchange: &mut Exchange) -> (RequestHeader, Bytes) {
    let frame = exchange.poll_transmit().expect("a request to send");
    let mut body = frame.slice(4..);
    assert_eq!(u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize, body.len());
    let key = ApiKey::try_from(i16::from_be_bytes([body[0], body[1]])).unwrap();
    let version = i16::from_be_bytes([body[2], body[3]]);
    let header = RequestHeader::decode(&mut body, key.request_header_version(version)).unwrap();
    (header, body)
}

fn framed(message: &[u8]) -> Vec<u8> {
    let mut frame = (message.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(message);
    frame
}

/// A response frame: header (in the version `T` calls for) and body.
pub(crate) fn response<T: Encodable + HeaderVersion>(correlation_id: i32, version: i16, body: &T) -> Vec<u8> {
    response_with_header_version(correlation_id, T::header_version(version), version, body)
}

fn response_with_header_version<T: Encodable>(correlation_id: i32, hv: i16, version: i16, body: &T) -> Vec<u8> {
    let mut buf = BytesMut::new();
    ResponseHeader::default().with_correlation_id(correlation_id).encode(&mut buf, hv).unwrap();
    body.encode(&mut buf, version).unwrap();
    framed(&buf)
}

pub(crate) fn api_versions(metadata: (i16, i16)) -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(vec![
        ApiVersion::default()
            .with_api_key(ApiKey::Metadata as i16)
            .with_min_version(metadata.0)
            .with_max_version(metadata.1),
        ApiVersion::default().with_api_key(ApiKey::ApiVersions as i16).with_max_version(4),
    ])
}

fn s(text: &'static str) -> StrBytes {
    StrBytes::from_static_str(text)
}

pub(crate) fn cluster() -> MetadataResponse {
    let partition = |id, leader, replicas: &[i32]| {
        MetadataResponsePartition::default()
            .with_partition_index(id)
            .with_leader_id(BrokerId(leader))
            .with_replica_nodes(replicas.iter().copied().map(BrokerId).collect())
            .with_isr_nodes(replicas[..1].iter().copied().map(BrokerId).collect())
    };
    MetadataResponse::default()
        .with_cluster_id(Some(s("kafka-cluster-1")))
        .with_controller_id(BrokerId(2))
        .with_brokers(vec![
            MetadataResponseBroker::default().with_node_id(BrokerId(1)).with_host(s("b1")).with_port(9092),
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(2))
                .with_host(s("b2"))
                .with_port(9093)
                .with_rack(Some(s("eu-1a"))),
        ])
        .with_topics(vec![
            MetadataResponseTopic::default()
                .with_name(Some(TopicName(s("orders"))))
                .with_partitions(vec![partition(0, 1, &[1, 2]), partition(1, -1, &[2, 1])]),
            MetadataResponseTopic::default()
                .with_name(Some(TopicName(s("__consumer_offsets"))))
                .with_is_internal(true)
                .with_error_code(5),
        ])
}

/// `cluster()` as the core should see it at Metadata `version`.
fn cluster_metadata(version: i16) -> Metadata {
    let partition = |id, leader, replicas: Vec<i32>| PartitionMetadata {
        id,
        error_code: 0,
        leader,
        isr: replicas[..1].to_vec(),
        replicas,
    };
    let broker = |node_id, host: &str, port, rack: Option<&str>| BrokerMetadata {
        node_id,
        host: host.to_string(),
        port,
        rack: rack.filter(|_| version >= 1).map(String::from),
    };
    Metadata {
        cluster_id: (version >= 2).then(|| "kafka-cluster-1".to_string()),
        controller_id: if version >= 1 { 2 } else { -1 },
        error_code: 0,
        brokers: vec![broker(1, "b1", 9092, None), broker(2, "b2", 9093, Some("eu-1a"))],
        topics: vec![
            TopicMetadata {
                name: "orders".into(),
                error_code: 0,
                is_internal: false,
                partitions: vec![partition(0, 1, vec![1, 2]), partition(1, -1, vec![2, 1])],
            },
            TopicMetadata {
                name: "__consumer_offsets".into(),
                error_code: 5,
                is_internal: version >= 1,
                partitions: vec![],
            },
        ],
    }
}

/// Runs the ApiVersions step against a broker speaking Metadata `range`; returns the
/// Metadata request's header and body.
fn through_api_versions(exchange: &mut Exchange, range: (i16, i16)) -> (RequestHeader, Bytes) {
    let (header, _) = take_request(exchange);
    exchange.handle_bytes(&response(header.correlation_id, 3, &api_versions(range)));
    take_request(exchange)
}

fn outcome(exchange: &mut Exchange) -> Result<Metadata, AttemptError> {
    assert!(exchange.is_finished());
    let outcome = exchange.poll_outcome().expect("an outcome");
    assert_eq!(exchange.poll_outcome(), None, "the outcome is taken once");
    assert!(exchange.poll_transmit().is_none(), "nothing to send once finished");
    outcome
}

fn error(exchange: &mut Exchange) -> AttemptError {
    outcome(exchange).expect_err("an error")
}

// ---- the conversation ----

#[test]
fn happy_path_negotiates_v13_and_maps_every_field() {
    let mut exchange = Exchange::new(&ExchangeConfig::default());
    assert_eq!(exchange.metadata_version(), None);

    let (header, mut body) = take_request(&mut exchange);
    assert_eq!((header.request_api_key, header.request_api_version), (ApiKey::ApiVersions as i16, 3));
    assert_eq!(header.client_id.as_deref(), Some("stagger"));
    let request = ApiVersionsRequest::decode(&mut body, 3).unwrap();
    assert_eq!(&*request.client_software_name, "stagger");
    assert_eq!(&*request.client_software_version, env!("CARGO_PKG_VERSION"));
    assert!(exchange.poll_transmit().is_none(), "one request at a time");
    assert!(!exchange.has_answered(), "nothing arrived yet");

    let answer = response(header.correlation_id, 3, &api_versions((0, 13)));
    exchange.handle_bytes(&answer[..answer.len() - 1]);
    assert!(!exchange.has_answered(), "a partial frame is not an answer");
    exchange.handle_bytes(&answer[answer.len() - 1..]);
    assert!(exchange.has_answered(), "the ApiVersions answer proves the broker alive");
    assert_eq!(exchange.metadata_version(), Some(13));
    let (header, mut body) = take_request(&mut exchange);
    assert_eq!((header.request_api_key, header.request_api_version), (ApiKey::Metadata as i16, 13));
    let request = MetadataRequest::decode(&mut body, 13).unwrap();
    assert_eq!(request.topics, None, "all topics");
    assert!(!request.allow_auto_topic_creation);
    assert!(!request.include_topic_authorized_operations && !request.include_cluster_authorized_operations);
    assert!(!exchange.is_finished());

    exchange.handle_bytes(&response(header.correlation_id, 13, &cluster()));
    assert_eq!(outcome(&mut exchange), Ok(cluster_metadata(13)));
    assert_eq!(exchange.metadata_version(), Some(13));
}

#[test]
fn picks_the_highest_common_version_with_the_right_headers() {
    for (broker, expected) in [((0, 20), 13), ((1, 12), 12), ((0, 9), 9), ((1, 8), 8), ((0, 4), 4), ((0, 0), 0)] {
        let config = ExchangeConfig { topics: Some(vec!["orders".into()]), ..ExchangeConfig::default() };
        let mut exchange = Exchange::new(&config);
        let (header, mut body) = through_api_versions(&mut exchange, broker);
        assert_eq!(header.request_api_version, expected, "broker speaks {broker:?}");
        assert_eq!(exchange.metadata_version(), Some(expected));
        let request = MetadataRequest::decode(&mut body, expected).unwrap();
        let names: Vec<_> = request.topics.unwrap().into_iter().map(|t| t.name.unwrap().0.to_string()).collect();
        assert_eq!(names, ["orders"]);
        assert_eq!(request.allow_auto_topic_creation, expected < 4);
        exchange.handle_bytes(&response(header.correlation_id, expected, &cluster()));
        assert_eq!(outcome(&mut exchange), Ok(cluster_metadata(expected)), "v{expected}");
    }
}

#[test]
fn metadata_v0_asks_for_all_topics_with_an_empty_list() {
    let mut exchange = Exchange::new(&ExchangeConfig::default());
    let (_, mut body) = through_api_versions(&mut exchange, (0, 0));
    assert_eq!(MetadataRequest::decode(&mut body, 0).unwrap().topics, Some(vec![]));
}

#[test]
fn unsupported_api_versions_downgrades_to_v0_once() {
    let mut exchange = Exchange::new(&ExchangeConfig::default());
    let (first, _) = take_request(&mut exchange);
    // What real brokers send: header v0, v0-shaped body, error 35, their ApiVersions range.
    let refusal = ApiVersionsResponse::default()
        .with_error_code(35)
        .with_api_keys(vec![ApiVersion::default().with_api_key(ApiKey::ApiVersions as i16).with_max_version(2)]);
    exchange.handle_bytes(&response(first.correlation_id, 0, &refusal));

    let (retry, body) = take_request(&mut exchange);
    assert_eq!((retry.request_api_key, retry.request_api_version), (ApiKey::ApiVersions as i16, 0));
    assert_ne!(retry.correlation_id, first.correlation_id);
    assert!(body.is_empty(), "ApiVersions v0 has an empty body");
    assert_eq!(exchange.metadata_version(), None);

    exchange.handle_bytes(&response(retry.correlation_id, 0, &api_versions((0, 7))));
    let (header, _) = take_request(&mut exchange);
    assert_eq!(header.request_api_version, 7);
    exchange.handle_bytes(&response(header.correlation_id, 7, &cluster()));
    assert_eq!(outcome(&mut exchange), Ok(cluster_metadata(7)));

    // A broker refusing v0 too is out of options.
    let mut exchange = Exchange::new(&ExchangeConfig::default());
    let (first, _) = take_request(&mut exchange);
    exchange.handle_bytes(&response(first.correlation_id, 0, &refusal));
    let (retry, _) = take_request(&mut exchange);
    exchange.handle_bytes(&response(retry.correlation_id, 0, &refusal));
    assert_eq!(error(&mut exchange).kind, ErrorKind::BrokerError(35));
}

#[test]
fn api_versions_errors_are_broker_errors() {
    for code in [-1, 58] {
        let mut exchange = Exchange::new(&ExchangeConfig::default());
        let (header, _) = take_request(&mut exchange);
        let refusal = ApiVersionsResponse::default().with_error_code(code);
        exchange.handle_bytes(&response(header.correlation_id, 3, &refusal));
        let err = error(&mut exchange);
        assert_eq!(err.kind, ErrorKind::BrokerError(code));
        assert_eq!(err.kind.is_fatal(), code == 58);
    }
}

#[test]
fn no_common_metadata_version_is_unsupported_version() {
    for keys in [api_versions((14, 20)), ApiVersionsResponse::default()] {
        let mut exchange = Exchange::new(&ExchangeConfig::default());
        let (header, _) = take_request(&mut exchange);
        exchange.handle_bytes(&response(header.correlation_id, 3, &keys));
        let err = error(&mut exchange);
        assert_eq!(err.kind, ErrorKind::BrokerError(35));
        assert!(err.detail.contains("Metadata"), "{err}");
    }
}

#[test]
fn top_level_metadata_error_is_reported_not_hidden() {
    let mut exchange = Exchange::new(&ExchangeConfig::default());
    let (header, _) = through_api_versions(&mut exchange, (0, 13));
    exchange.handle_bytes(&response(header.correlation_id, 13, &cluster().with_error_code(129)));
    let metadata = outcome(&mut exchange).unwrap();
    assert_eq!(metadata.error_code, 129);
    let rejection = metadata.rejection().expect("a top-level error cannot win");
    assert_eq!(rejection.kind, ErrorKind::BrokerError(129));
    assert!(rejection.detail.contains("no longer belongs to the cluster"), "{rejection}");
    assert!(rejection.to_string().contains("REBOOTSTRAP_REQUIRED"), "{rejection}");
}

// ---- answers of Kafka 4.4's cluster check ----

/// The identity `cluster()` describes its node 2 with.
fn node_2() -> BrokerIdentity {
    BrokerIdentity { cluster_id: "kafka-cluster-1".into(), node_id: 2 }
}

/// ApiVersions v5 answers have v4's layout, the newest `kafka-protocol` encodes.
fn api_versions_response(correlation_id: i32, request_version: i16, body: &ApiVersionsResponse) -> Vec<u8> {
    response(correlation_id, request_version.min(4), body)
}

/// What a broker that predates v5 (or v3) answers: UNSUPPORTED_VERSION, v0-shaped.
fn unsupported(correlation_id: i32) -> Vec<u8> {
    let refusal = ApiVersionsResponse::default()
        .with_error_code(35)
        .with_api_keys(vec![ApiVersion::default().with_api_key(ApiKey::ApiVersions as i16).with_max_version(3)]);
    response(correlation_id, 0, &refusal)
}

mod cluster_check;
mod framing;
pub(crate) mod sasl;
