//! Against real Apache Kafka (KRaft brokers from Maven, `scripts/kafka.sh`): `refresh` and
//! `Client` return what librdkafka's own client sees of the same cluster; TLS with the
//! cluster's CA works and a wrong CA fails that attempt with a certificate error. Broker
//! faults, the cluster check and Kafka 3.9 are in `real_kafka_faults.rs`.

use std::time::Duration;

use stagger::{ClusterConfig, ErrorKind, GiveUpReason, Metadata, RefreshConfig};
use stagger_kafka_fixture::librdkafka::{create_topic, librdkafka_cluster_id, librdkafka_view, stagger_view, FullView};
use stagger_kafka_fixture::KafkaCluster;
use stagger_test_faults::bounded;
use stagger_test_faults::tls::TestPki;
use stagger_tokio::{refresh_with, AttemptOutcome, Client, ClientOptions, Error, RefreshOptions, TlsOptions};

const TOPIC: &str = "stagger-real-orders";

/// Our view and librdkafka's, taken one after the other until they agree (a partition's
/// leader may move between the two reads; five disagreeing reads in a row is a bug).
async fn agree_with_librdkafka(bootstrap: &str, mut ours: impl AsyncFnMut() -> Metadata) -> (Metadata, FullView) {
    let mut last = None;
    for _ in 0..5 {
        let metadata = ours().await;
        let reference = librdkafka_view(bootstrap, &[TOPIC]);
        if stagger_view(&metadata, &[TOPIC]) == reference {
            return (metadata, reference);
        }
        last = Some((stagger_view(&metadata, &[TOPIC]), reference));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (ours, reference) = last.expect("five reads");
    panic!("stagger and librdkafka disagree:\n stagger:    {ours:?}\n librdkafka: {reference:?}");
}

fn assert_is_the_cluster(kafka: &KafkaCluster, metadata: &Metadata, view: &FullView) {
    let mut expected: Vec<(i32, String)> = (1..=kafka.brokers()).map(|n| (n as i32, kafka.address(n))).collect();
    expected.sort();
    assert_eq!(view.brokers, expected, "every broker, at its PLAINTEXT address");
    assert_eq!(metadata.cluster_id.as_deref(), Some(kafka.cluster_id()), "the id the storage was formatted with");
    assert!((1..=kafka.brokers() as i32).contains(&metadata.controller_id), "{metadata:?}");
    let (_, partitions) = view.topics.iter().find(|(t, _)| t == TOPIC).expect("the test topic is listed");
    assert_eq!(partitions.len(), 6);
    for (id, leader, replicas, isr) in partitions {
        assert_eq!(replicas.len(), 3, "partition {id}: three replicas");
        assert!(isr.contains(leader), "partition {id}: leader {leader} in sync");
    }
}

#[tokio::test]
async fn refresh_returns_the_real_clusters_brokers_topics_leaders_and_id_as_librdkafka_sees_them() {
    let Some(kafka) = KafkaCluster::shared() else { return };
    bounded(async {
        let seeds = kafka.plaintext();
        create_topic(&seeds.join(","), TOPIC, 6, 3).await;
        let options = RefreshOptions::default();
        let mut versions = Vec::new();
        let (metadata, view) = agree_with_librdkafka(&seeds.join(","), async || {
            let outcome = refresh_with(&options, &seeds, |_| {}).await.expect("refresh");
            versions.push(outcome.metadata_version);
            outcome.metadata
        })
        .await;
        assert_is_the_cluster(kafka, &metadata, &view);
        assert_eq!(metadata.cluster_id.as_deref(), Some(librdkafka_cluster_id(&seeds.join(",")).as_str()));
        assert!(versions.iter().all(|v| *v == Some(13)), "Kafka 4.4 speaks Metadata v13: {versions:?}");
    })
    .await;
}

#[tokio::test]
async fn a_client_returns_the_real_clusters_metadata_as_librdkafka_sees_it_and_keeps_one_connection() {
    let Some(kafka) = KafkaCluster::shared() else { return };
    bounded(async {
        let seeds = kafka.plaintext();
        create_topic(&seeds.join(","), TOPIC, 6, 3).await;
        let client = Client::new(ClusterConfig::default(), &seeds, ClientOptions::default()).expect("client");
        let (metadata, view) =
            agree_with_librdkafka(&seeds.join(","), async || (*client.refresh().await.expect("refresh")).clone()).await;
        assert_is_the_cluster(kafka, &metadata, &view);
        let stats = client.stats();
        let kept = stats.kept.clone().expect("the winning connection is kept");
        assert!(seeds.contains(&kept), "kept {kept}, one of {seeds:?}");
        // The next refresh asks the broker on the kept connection, and opens nothing new.
        client.refresh().await.expect("refresh on the kept connection");
        let after = client.stats();
        assert_eq!(after.connections_reused, stats.connections_reused + 1, "{after:?}");
        client.close().await;
    })
    .await;
}

fn tls(ca_file: std::path::PathBuf) -> RefreshOptions {
    let mut config = RefreshConfig::default();
    config.retry.retries = 0;
    RefreshOptions {
        config,
        tls: Some(TlsOptions { ca_file: Some(ca_file), ..TlsOptions::default() }),
        ..Default::default()
    }
}

#[tokio::test]
async fn tls_to_the_ssl_listener_with_the_clusters_ca_lists_the_ssl_addresses() {
    let Some(kafka) = KafkaCluster::shared() else { return };
    bounded(async {
        let seeds = kafka.ssl();
        let outcome = refresh_with(&tls(kafka.ca()), &seeds, |_| {}).await.expect("TLS refresh");
        let mut brokers: Vec<String> = outcome.metadata.brokers.iter().map(|b| b.address()).collect();
        brokers.sort();
        let mut expected = seeds.clone();
        expected.sort();
        assert_eq!(brokers, expected, "an SSL listener advertises the SSL addresses");
        assert_eq!(outcome.metadata.cluster_id.as_deref(), Some(kafka.cluster_id()));
    })
    .await;
}

/// With the default retries: every broker refuses the certificate in the first pass, and
/// that ends the refresh (a next pass would cost each broker a TLS handshake to be refused
/// again).
#[tokio::test]
async fn tls_with_a_wrong_ca_fails_each_attempt_with_a_certificate_error_in_one_pass() {
    let Some(kafka) = KafkaCluster::shared() else { return };
    bounded(async {
        let other = TestPki::new();
        let seeds = kafka.ssl();
        let mut options = tls(other.ca_file.clone());
        options.config.retry = RefreshConfig::default().retry;
        assert!(options.config.retry.retries > 0);
        let error = refresh_with(&options, &seeds, |_| {}).await.expect_err("a wrong CA");
        let Error::Refresh { error: core, attempts, .. } = &error else { panic!("{error}") };
        assert_eq!(core.reason, GiveUpReason::AllFailed { passes: 1 }, "{error}");
        assert_eq!(attempts.len(), seeds.len(), "one handshake per broker: {attempts:?}");
        for attempt in attempts {
            let AttemptOutcome::Failed(e) = &attempt.outcome else { panic!("{attempt:?}") };
            assert_eq!(e.kind, ErrorKind::Tls, "{e}");
            assert!(e.detail.contains("certificate"), "the error names the certificate: {e}");
        }
    })
    .await;
}
