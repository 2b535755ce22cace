//! Kafka 4.4's cluster check (KIP-1242): ApiVersions v5 with the expected identity, the
//! downgrade for older brokers, and the client-side check of the cluster id.

use super::*;

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
