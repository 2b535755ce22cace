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
use kafka_protocol::messages::{MetadataResponse, ResponseHeader};
use kafka_protocol::protocol::Decodable;
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

// ---- Kafka 4.4's cluster check (KIP-1242) ----

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

#[test]
fn an_identity_sends_api_versions_v5_with_both_fields() {
    let mut exchange = Exchange::with_identity(&ExchangeConfig::default(), Some(&node_2()));
    let (header, body) = take_request(&mut exchange);
    assert_eq!((header.request_api_key, header.request_api_version), (ApiKey::ApiVersions as i16, 5));
    assert_eq!(header.client_id.as_deref(), Some("stagger"), "request header v2, as for v3");
    let mut expected = BytesMut::new();
    api_versions_v5::Request {
        software_name: "stagger",
        software_version: env!("CARGO_PKG_VERSION"),
        cluster_id: Some("kafka-cluster-1"),
        node_id: 2,
    }
    .encode(&mut expected)
    .unwrap();
    assert_eq!(body, expected, "software name and version, cluster id, node id, no tags");
    assert!(body.ends_with(b"\x10kafka-cluster-1\0\0\0\x02\0"));

    // The broker checked and agrees: the conversation goes on as with v3.
    exchange.handle_bytes(&api_versions_response(header.correlation_id, 5, &api_versions((0, 13))));
    assert!(exchange.has_answered());
    let (header, _) = take_request(&mut exchange);
    assert_eq!((header.request_api_key, header.request_api_version), (ApiKey::Metadata as i16, 13));
    exchange.handle_bytes(&response(header.correlation_id, 13, &cluster()));
    assert_eq!(outcome(&mut exchange), Ok(cluster_metadata(13)));
}

#[test]
fn an_incomplete_identity_is_not_sent() {
    let incomplete = [
        BrokerIdentity { cluster_id: String::new(), node_id: 2 },
        BrokerIdentity { cluster_id: "kafka-cluster-1".into(), node_id: -1 },
    ];
    for identity in incomplete {
        let mut exchange = Exchange::with_identity(&ExchangeConfig::default(), Some(&identity));
        let (header, mut body) = take_request(&mut exchange);
        assert_eq!(header.request_api_version, 3, "{identity:?}");
        ApiVersionsRequest::decode(&mut body, 3).unwrap();
    }
    let (header, _) = take_request(&mut Exchange::with_identity(&ExchangeConfig::default(), None));
    assert_eq!(header.request_api_version, 3);
}

#[test]
fn rebootstrap_required_to_v5_fails_the_attempt_naming_the_expectation() {
    let mut exchange = Exchange::with_identity(&ExchangeConfig::default(), Some(&node_2()));
    let (header, _) = take_request(&mut exchange);
    let refusal = ApiVersionsResponse::default().with_error_code(129);
    exchange.handle_bytes(&api_versions_response(header.correlation_id, 5, &refusal));
    assert!(exchange.has_answered(), "a refusal is an answer: the broker is alive");
    let err = error(&mut exchange);
    assert_eq!(err.kind, ErrorKind::BrokerError(129));
    assert!(!err.kind.is_fatal(), "another broker, or a seed, may still answer");
    assert!(err.detail.contains("no longer belongs to cluster kafka-cluster-1 as node 2"), "{err}");
    assert!(err.detail.contains("REBOOTSTRAP_REQUIRED to ApiVersions v5 (KIP-1242)"), "{err}");
    assert!(err.detail.contains("rebootstrap from the seeds"), "{err}");

    // Decided from the error code alone, however the rest of the body is shaped.
    let mut exchange = Exchange::with_identity(&ExchangeConfig::default(), Some(&node_2()));
    let (header, _) = take_request(&mut exchange);
    exchange.handle_bytes(&response(header.correlation_id, 0, &refusal));
    assert_eq!(error(&mut exchange).kind, ErrorKind::BrokerError(129));
}

#[test]
fn a_broker_predating_v5_is_asked_v3_then_v0() {
    let mut exchange = Exchange::with_identity(&ExchangeConfig::default(), Some(&node_2()));
    let (first, _) = take_request(&mut exchange);
    exchange.handle_bytes(&unsupported(first.correlation_id));
    let (second, mut body) = take_request(&mut exchange);
    assert_eq!((second.request_api_key, second.request_api_version), (ApiKey::ApiVersions as i16, 3));
    assert_eq!(&*ApiVersionsRequest::decode(&mut body, 3).unwrap().client_software_name, "stagger");
    exchange.handle_bytes(&unsupported(second.correlation_id));
    let (third, body) = take_request(&mut exchange);
    assert_eq!(third.request_api_version, 0);
    assert!(body.is_empty());
    exchange.handle_bytes(&unsupported(third.correlation_id));
    assert_eq!(error(&mut exchange).kind, ErrorKind::BrokerError(35), "v0 refused too: out of options");
}

/// A broker that predates v5, speaking Metadata v13 and answering with `metadata`.
fn predating_v5(expected: Option<&BrokerIdentity>, metadata: &MetadataResponse) -> Result<Metadata, AttemptError> {
    let mut exchange = Exchange::with_identity(&ExchangeConfig::default(), expected);
    let (first, _) = take_request(&mut exchange);
    if expected.is_some() {
        assert_eq!(first.request_api_version, 5);
        exchange.handle_bytes(&unsupported(first.correlation_id));
        let (second, _) = take_request(&mut exchange);
        assert_eq!(second.request_api_version, 3);
        exchange.handle_bytes(&response(second.correlation_id, 3, &api_versions((0, 13))));
    } else {
        exchange.handle_bytes(&response(first.correlation_id, 3, &api_versions((0, 13))));
    }
    let (header, _) = take_request(&mut exchange);
    exchange.handle_bytes(&response(header.correlation_id, 13, metadata));
    outcome(&mut exchange)
}

#[test]
fn a_broker_predating_v5_is_checked_by_its_metadata_cluster_id() {
    // The right cluster: the answer stands.
    assert_eq!(predating_v5(Some(&node_2()), &cluster()), Ok(cluster_metadata(13)));

    // Another cluster: refused as the broker would have, had it known v5.
    let other = cluster().with_cluster_id(Some(s("another-cluster")));
    let err = predating_v5(Some(&node_2()), &other).unwrap_err();
    assert_eq!(err.kind, ErrorKind::BrokerError(129));
    assert!(err.detail.contains("no longer belongs to cluster kafka-cluster-1 as node 2"), "{err}");
    assert!(
        err.detail.contains("answered Metadata for cluster another-cluster while cluster kafka-cluster-1 was expected"),
        "{err}"
    );
    assert!(err.detail.contains("checked by the client because the broker predates KIP-1242"), "{err}");

    // No cluster id to compare (a broker that sends none): nothing to refuse it on.
    let anonymous = cluster().with_cluster_id(None);
    assert_eq!(predating_v5(Some(&node_2()), &anonymous).unwrap().cluster_id, None);

    // Without an expectation, any cluster's answer is taken, as before.
    assert_eq!(predating_v5(None, &other).unwrap().cluster_id.as_deref(), Some("another-cluster"));
}

#[test]
fn a_v5_broker_that_then_names_another_cluster_is_still_refused() {
    let mut exchange = Exchange::with_identity(&ExchangeConfig::default(), Some(&node_2()));
    let (header, _) = take_request(&mut exchange);
    exchange.handle_bytes(&api_versions_response(header.correlation_id, 5, &api_versions((0, 13))));
    let (header, _) = take_request(&mut exchange);
    let other = cluster().with_cluster_id(Some(s("another-cluster")));
    exchange.handle_bytes(&response(header.correlation_id, 13, &other));
    let err = error(&mut exchange);
    assert_eq!(err.kind, ErrorKind::BrokerError(129));
    assert!(err.detail.contains("although the broker accepted the ApiVersions v5 check"), "{err}");
}

#[test]
fn topic_ids_stand_in_for_null_names() {
    let mut exchange = Exchange::new(&ExchangeConfig::default());
    let (header, _) = through_api_versions(&mut exchange, (0, 12));
    let mut topic = MetadataResponseTopic::default().with_name(None);
    topic.topic_id = "00000000-0000-0000-0000-00000000002a".parse().unwrap();
    let response_body = cluster().with_topics(vec![topic]);
    exchange.handle_bytes(&response(header.correlation_id, 12, &response_body));
    assert_eq!(outcome(&mut exchange).unwrap().topics[0].name, "00000000-0000-0000-0000-00000000002a");
}

// ---- framing and splitting ----

/// The whole broker side of a v13 conversation, as one byte stream, given the ids used.
fn whole_conversation(first_correlation_id: i32) -> Vec<u8> {
    let mut stream = response(first_correlation_id, 3, &api_versions((0, 13)));
    stream.extend(response(first_correlation_id + 1, 13, &cluster()));
    stream
}

#[test]
fn one_byte_at_a_time() {
    let mut exchange = Exchange::new(&ExchangeConfig::default());
    let (first, _) = take_request(&mut exchange);
    let stream = whole_conversation(first.correlation_id);
    let api_versions_len = response(first.correlation_id, 3, &api_versions((0, 13))).len();
    for (i, byte) in stream.iter().enumerate() {
        assert!(!exchange.is_finished(), "finished early at byte {i}");
        exchange.handle_bytes(&[*byte]);
        if i + 1 == api_versions_len {
            assert_eq!(take_request(&mut exchange).0.correlation_id, first.correlation_id + 1);
        }
    }
    assert_eq!(outcome(&mut exchange), Ok(cluster_metadata(13)));
}

#[test]
fn two_frames_in_one_chunk() {
    let mut exchange = Exchange::new(&ExchangeConfig::default());
    let (first, _) = take_request(&mut exchange);
    exchange.handle_bytes(&whole_conversation(first.correlation_id));
    assert_eq!(outcome(&mut exchange), Ok(cluster_metadata(13)));
}

#[test]
fn a_frame_and_a_half() {
    let mut exchange = Exchange::new(&ExchangeConfig::default());
    let (first, _) = take_request(&mut exchange);
    let stream = whole_conversation(first.correlation_id);
    let cut = response(first.correlation_id, 3, &api_versions((0, 13))).len() + 7;
    exchange.handle_bytes(&stream[..cut]);
    assert!(exchange.poll_transmit().is_some() && !exchange.is_finished());
    exchange.handle_bytes(&stream[cut..]);
    assert_eq!(outcome(&mut exchange), Ok(cluster_metadata(13)));
}

#[test]
fn correlation_id_mismatch_is_a_protocol_error() {
    let mut exchange = Exchange::new(&ExchangeConfig::default());
    let (header, _) = take_request(&mut exchange);
    exchange.handle_bytes(&response(header.correlation_id + 100, 3, &api_versions((0, 13))));
    let err = error(&mut exchange);
    assert_eq!(err.kind, ErrorKind::Protocol);
    assert!(err.detail.contains("correlation id mismatch"), "{err}");

    let mut exchange = Exchange::new(&ExchangeConfig::default());
    let (header, _) = through_api_versions(&mut exchange, (0, 13));
    exchange.handle_bytes(&response(header.correlation_id - 1, 13, &cluster()));
    assert!(error(&mut exchange).detail.contains("the Metadata request carried"));
}

#[test]
fn a_v1_header_on_api_versions_is_misread_as_a_body() {
    // The ApiVersions response header is v0 even for v3; a (wrong) tagged-field byte
    // after the correlation id must not go unnoticed.
    let mut exchange = Exchange::new(&ExchangeConfig::default());
    let (header, _) = take_request(&mut exchange);
    exchange.handle_bytes(&response_with_header_version(header.correlation_id, 1, 3, &api_versions((0, 13))));
    assert_eq!(error(&mut exchange).kind, ErrorKind::Protocol);
}

#[test]
fn garbage_is_a_protocol_error() {
    let mut exchange = Exchange::new(&ExchangeConfig::default());
    let (header, _) = take_request(&mut exchange);
    let mut junk = header.correlation_id.to_be_bytes().to_vec();
    junk.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef, 0xff, 0xff, 0xff]);
    exchange.handle_bytes(&framed(&junk));
    let err = error(&mut exchange);
    assert_eq!(err.kind, ErrorKind::Protocol);
    assert!(err.detail.starts_with("ApiVersions v3 response: "), "{err}");

    // An empty frame has not even a header.
    let mut exchange = Exchange::new(&ExchangeConfig::default());
    exchange.handle_bytes(&[0, 0, 0, 0]);
    assert!(error(&mut exchange).detail.contains("header"));
}

#[test]
fn something_that_is_not_kafka_is_refused_by_its_length() {
    // An HTTP server on the port: "HTTP" read as a length is 1.2 GB.
    let mut exchange = Exchange::new(&ExchangeConfig::default());
    exchange.handle_bytes(b"HTTP/1.1 400 Bad Request\r\n\r\n");
    assert_eq!(error(&mut exchange).kind, ErrorKind::FrameTooLarge);
}

#[test]
fn trailing_bytes_after_a_complete_body_are_tolerated() {
    let mut exchange = Exchange::new(&ExchangeConfig::default());
    let (header, _) = through_api_versions(&mut exchange, (0, 13));
    let mut frame = response(header.correlation_id, 13, &cluster());
    frame.extend_from_slice(b"xyz");
    let len = (frame.len() - 4) as u32;
    frame[..4].copy_from_slice(&len.to_be_bytes());
    exchange.handle_bytes(&frame);
    let metadata = exchange.poll_outcome().expect("finished").expect("tolerated");
    assert!(!metadata.brokers.is_empty());
}

#[test]
fn truncated_frame_then_eof_is_closed_mid_frame() {
    let mut exchange = Exchange::new(&ExchangeConfig::default());
    let (header, _) = through_api_versions(&mut exchange, (0, 13));
    let frame = response(header.correlation_id, 13, &cluster());
    exchange.handle_bytes(&frame[..frame.len() / 2]);
    exchange.handle_eof();
    let err = error(&mut exchange);
    assert_eq!(err.kind, ErrorKind::Closed);
    assert!(err.detail.contains("mid-frame") && err.detail.contains("Metadata"), "{err}");
}

#[test]
fn eof_between_frames_is_closed() {
    let mut exchange = Exchange::new(&ExchangeConfig::default());
    exchange.handle_eof();
    let err = error(&mut exchange);
    assert_eq!(err.kind, ErrorKind::Closed);
    assert!(!err.detail.contains("mid-frame") && err.detail.contains("ApiVersions"), "{err}");
}

#[test]
fn oversize_and_negative_length_prefixes() {
    for (prefix, needle) in [(0x7fff_ffffu32, "exceeds"), (0x8000_0000, "negative"), (u32::MAX, "negative")] {
        let mut exchange = Exchange::new(&ExchangeConfig::default());
        exchange.handle_bytes(&prefix.to_be_bytes());
        let err = error(&mut exchange);
        assert_eq!(err.kind, ErrorKind::FrameTooLarge);
        assert!(err.detail.contains(needle), "{err}");
    }
}

#[test]
fn max_frame_size_is_configurable() {
    let config = ExchangeConfig { max_frame_size: 64, ..ExchangeConfig::default() };
    let mut exchange = Exchange::new(&config);
    let (header, _) = through_api_versions(&mut exchange, (0, 13));
    exchange.handle_bytes(&response(header.correlation_id, 13, &cluster())[..4]);
    assert_eq!(error(&mut exchange).kind, ErrorKind::FrameTooLarge);
}

#[test]
fn hostile_array_counts_fail_without_allocating() {
    // Metadata v4: throttle, brokers = [], cluster_id = null, controller, topics = 2^31 - 1.
    let mut exchange = Exchange::new(&ExchangeConfig::default());
    let (header, _) = through_api_versions(&mut exchange, (0, 4));
    let mut body = header.correlation_id.to_be_bytes().to_vec();
    body.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff]);
    exchange.handle_bytes(&framed(&body));
    let err = error(&mut exchange);
    assert_eq!(err.kind, ErrorKind::Protocol);
    assert!(err.detail.contains("topics: array claims 2147483647 elements"), "{err}");
}

#[test]
fn bytes_after_the_outcome_are_ignored() {
    let mut exchange = Exchange::new(&ExchangeConfig::default());
    let (first, _) = take_request(&mut exchange);
    let mut stream = whole_conversation(first.correlation_id);
    stream.extend_from_slice(&[0xff; 16]);
    exchange.handle_bytes(&stream);
    exchange.handle_bytes(b"more junk");
    exchange.handle_eof();
    assert_eq!(outcome(&mut exchange), Ok(cluster_metadata(13)));
    exchange.handle_bytes(&whole_conversation(first.correlation_id));
    assert!(exchange.is_finished() && exchange.poll_outcome().is_none());
}

#[test]
fn an_unencodable_request_finishes_at_once() {
    let config = ExchangeConfig { client_id: "x".repeat(40_000), ..ExchangeConfig::default() };
    let mut exchange = Exchange::new(&config);
    assert!(exchange.poll_transmit().is_none());
    let err = error(&mut exchange);
    assert_eq!(err.kind, ErrorKind::Protocol);
    assert!(err.detail.contains("cannot encode the ApiVersions v3 request"), "{err}");
}

#[test]
fn exchange_can_move_between_threads() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<Exchange>();
}

// ---- no input makes it panic ----

/// Feeds `chunks`, then checks the exchange is either finished with one outcome or still
/// waiting with none, and that EOF always finishes it.
fn feed_and_check(mut exchange: Exchange, chunks: &[Vec<u8>]) -> Result<(), TestCaseError> {
    for chunk in chunks {
        exchange.handle_bytes(chunk);
    }
    if exchange.is_finished() {
        prop_assert!(exchange.poll_outcome().is_some());
    } else {
        prop_assert!(exchange.poll_outcome().is_none());
        exchange.handle_eof();
        prop_assert!(exchange.is_finished());
        prop_assert_eq!(exchange.poll_outcome().map(|o| o.unwrap_err().kind), Some(ErrorKind::Closed));
    }
    prop_assert!(exchange.poll_outcome().is_none());
    Ok(())
}

/// Splits `stream` at the given (unsorted, possibly out-of-range) points.
fn split(stream: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
    cuts.sort_unstable();
    let mut chunks = Vec::new();
    let mut start = 0;
    for cut in cuts.into_iter().chain([stream.len()]) {
        chunks.push(stream[start..cut].to_vec());
        start = cut;
    }
    chunks
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 0..8),
        identity: bool,
    ) {
        let mut exchange = Exchange::with_identity(&ExchangeConfig::default(), identity.then(node_2).as_ref());
        let _request = exchange.poll_transmit();
        feed_and_check(exchange, &chunks)?;
    }

    /// Plausible frames (right length, right correlation id, random body) reach the decoders.
    #[test]
    fn arbitrary_frames_never_panic(
        metadata_stage: bool,
        identity: bool,
        version in 0i16..=13,
        body in prop::collection::vec(any::<u8>(), 0..128),
        cuts in prop::collection::vec(any::<usize>(), 0..4),
    ) {
        let mut exchange = Exchange::with_identity(&ExchangeConfig::default(), identity.then(node_2).as_ref());
        let (mut header, _) = take_request(&mut exchange);
        if metadata_stage {
            let answer = api_versions_response(header.correlation_id, header.request_api_version, &api_versions((0, version)));
            exchange.handle_bytes(&answer);
            header = take_request(&mut exchange).0;
        }
        let mut message = header.correlation_id.to_be_bytes().to_vec();
        message.extend_from_slice(&body);
        feed_and_check(exchange, &split(&framed(&message), &cuts))?;
    }

    /// A real conversation with a few bytes overwritten, split anywhere.
    #[test]
    fn corrupted_conversations_never_panic(
        edits in prop::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
        identity: bool,
    ) {
        // With an identity the first request is v5, whose answer has the v3/v4 layout
        // `whole_conversation` encodes; corrupted cluster ids reach the client's check.
        let mut exchange = Exchange::with_identity(&ExchangeConfig::default(), identity.then(node_2).as_ref());
        let (first, _) = take_request(&mut exchange);
        let mut stream = whole_conversation(first.correlation_id);
        let len = stream.len();
        for (at, byte) in edits {
            stream[at % len] = byte;
        }
        feed_and_check(exchange, &split(&stream, &cuts))?;
    }

    /// Any split of a good conversation gives the same answer.
    #[test]
    fn any_split_gives_the_same_metadata(cuts in prop::collection::vec(any::<usize>(), 0..10)) {
        let mut exchange = Exchange::new(&ExchangeConfig::default());
        let (first, _) = take_request(&mut exchange);
        for chunk in split(&whole_conversation(first.correlation_id), &cuts) {
            exchange.handle_bytes(&chunk);
        }
        prop_assert_eq!(exchange.poll_outcome(), Some(Ok(cluster_metadata(13))));
    }
}
