//! SASL through the blocking adapter against real Apache Kafka: the exchange is the core's,
//! so this checks the adapter carries the settings and a fresh nonce per attempt.

use stagger::kafka::sasl::{Sasl, Secret};
use stagger::kafka::ExchangeConfig;
use stagger::{ErrorKind, GiveUpReason, RefreshConfig};
use stagger_blocking::{refresh_with, Error, RefreshOptions};
use stagger_kafka_fixture::{unsecured_jwt, KafkaCluster, SASL_PASSWORD, SASL_USERNAME};
use stagger_test_faults::bounded_blocking;

fn options(mechanism: &str, password: &str) -> RefreshOptions {
    let mut config = RefreshConfig::default();
    config.retry.retries = 0;
    let sasl = Sasl::from_parts(mechanism, SASL_USERNAME, Secret::new(password));
    RefreshOptions {
        config,
        exchange: ExchangeConfig { sasl, ..ExchangeConfig::default() },
        ..RefreshOptions::default()
    }
}

#[test]
fn scram_and_plain_authenticate_and_a_wrong_password_is_fatal() {
    let Some(kafka) = KafkaCluster::shared() else { return };
    let seeds = kafka.sasl_plaintext();
    let cluster_id = kafka.cluster_id().to_string();
    bounded_blocking(move || {
        for mechanism in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] {
            let outcome =
                refresh_with(&options(mechanism, SASL_PASSWORD), &seeds).unwrap_or_else(|e| panic!("{mechanism}: {e}"));
            assert_eq!(outcome.metadata.cluster_id.as_deref(), Some(cluster_id.as_str()), "{mechanism}");
        }
        let error =
            refresh_with(&options("SCRAM-SHA-512", "not-the-stagger-secret"), &seeds).expect_err("a wrong password");
        let Error::Refresh { error: refresh, .. } = &error else { panic!("{error}") };
        assert_eq!(refresh.reason, GiveUpReason::Fatal);
        assert!(
            matches!(refresh.last_error.as_ref().map(|(_, _, e)| e.kind), Some(ErrorKind::BrokerError(58))),
            "{error}"
        );
        assert!(
            !format!("{error} {error:?}").contains("not-the-stagger-secret"),
            "the password is not written: {error}"
        );
    });
}

#[test]
fn a_client_and_a_refresh_take_oauthbearer_tokens_from_a_token_source() {
    let Some(kafka) = KafkaCluster::shared() else { return };
    let seeds = kafka.sasl_plaintext();
    bounded_blocking(move || {
        let source = stagger_blocking::TokenSource::new(|| Ok(unsecured_jwt()));
        let options = RefreshOptions { oauth_token: Some(source.clone()), ..RefreshOptions::default() };
        refresh_with(&options, &seeds).expect("a refresh with a token from the source");
        let client_options = stagger_blocking::ClientOptions { oauth_token: Some(source), ..Default::default() };
        let client = stagger_blocking::Client::new(stagger::ClusterConfig::default(), &seeds, client_options).unwrap();
        client.refresh().expect("a client refresh with a token from the source");
        let failing = stagger_blocking::TokenSource::new(|| Err(String::from("no token today")));
        let client_options = stagger_blocking::ClientOptions { oauth_token: Some(failing), ..Default::default() };
        let client = stagger_blocking::Client::new(stagger::ClusterConfig::default(), &seeds, client_options).unwrap();
        let error = client.refresh().expect_err("no token");
        assert!(error.to_string().contains("no token today"), "{error}");
    });
}

/// A long-lived client over SASL SCRAM keeps its authenticated connection and reuses it:
/// later refreshes go straight to Metadata (a second SaslHandshake on an authenticated
/// connection would be refused by the broker, failing every reuse).
#[test]
fn a_client_reuses_its_authenticated_connection() {
    let Some(kafka) = KafkaCluster::shared() else { return };
    let seeds = kafka.sasl_plaintext()[..1].to_vec();
    bounded_blocking(move || {
        let exchange = options("SCRAM-SHA-512", SASL_PASSWORD).exchange;
        let client_options = stagger_blocking::ClientOptions { exchange, ..Default::default() };
        let client = stagger_blocking::Client::new(stagger::ClusterConfig::default(), &seeds, client_options).unwrap();
        client.refresh().expect("refresh 0");
        let home = client.stats().kept;
        assert!(home.is_some(), "the winner's connection is kept");
        for n in 1..3 {
            client.refresh().unwrap_or_else(|e| panic!("refresh {n}: {e}"));
            assert_eq!(client.stats().kept, home, "refresh {n} answered on the kept connection");
        }
        let stats = client.stats();
        // One connection in all: no reuse failed over to a new one. A loaded machine may still
        // start a hedge that is cancelled before it connects (an attempt, not a connection).
        assert_eq!((stats.connections_opened, stats.connections_reused), (1, 2), "{stats:?}");
    });
}
