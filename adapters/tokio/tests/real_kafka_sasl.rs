//! SASL against real Apache Kafka (`scripts/kafka.sh`'s `SASL_PLAINTEXT` and `SASL_SSL`
//! listeners and its user): every mechanism authenticates, and every way of getting it
//! wrong says what is wrong — without the password anywhere a refresh writes.

use std::time::{Duration, Instant};

use stagger::kafka::sasl::{Sasl, Secret};
use stagger::kafka::ExchangeConfig;
use stagger::{ErrorKind, GiveUpReason, RefreshConfig};
use stagger_kafka_fixture::{unsecured_jwt, KafkaCluster, SASL_PASSWORD, SASL_USERNAME};
use stagger_test_faults::bounded;
use stagger_test_faults::fake::{FakeBroker, Script};
use stagger_tokio::{refresh_with, AttemptOutcome, Error, RefreshOptions, TlsOptions, TokenSource};

const PASSWORD_MECHANISMS: [&str; 3] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

fn options(sasl: Option<Sasl>, tls: Option<&KafkaCluster>) -> RefreshOptions {
    let mut config = RefreshConfig::default();
    config.retry.retries = 0;
    RefreshOptions {
        config,
        exchange: ExchangeConfig { sasl, ..ExchangeConfig::default() },
        tls: tls.map(|k| TlsOptions { ca_file: Some(k.ca()), ..TlsOptions::default() }),
        record_trace: true,
        ..RefreshOptions::default()
    }
}

fn login(mechanism: &str, password: &str) -> Sasl {
    Sasl::from_parts(mechanism, SASL_USERNAME, Secret::new(password)).expect("a mechanism we have")
}

/// Every word a refresh wrote: its error or outcome (`Display` and `Debug`), every event,
/// the trace's JSON.
fn everything_written(result: &Result<stagger_tokio::RefreshOutcome, Error>, events: &[String]) -> String {
    let mut all = events.join("\n");
    match result {
        Ok(outcome) => {
            all += &format!("{outcome:?}");
            all += &serde_json::to_string(&outcome.trace).unwrap();
            all += &serde_json::to_string(&outcome.report()).unwrap();
        }
        Err(error) => {
            all += &format!("{error}\n{error:?}");
            all += &serde_json::to_string(&error.trace()).unwrap();
            all += &serde_json::to_string(&error.report()).unwrap();
        }
    }
    all
}

async fn run(options: &RefreshOptions, seeds: &[String]) -> (Result<stagger_tokio::RefreshOutcome, Error>, String) {
    let mut events = Vec::new();
    let result =
        refresh_with(options, seeds, |e| events.push(format!("{e:?} {}", serde_json::to_string(e).unwrap()))).await;
    let written = everything_written(&result, &events);
    (result, written)
}

#[tokio::test]
async fn every_mechanism_authenticates_over_sasl_plaintext_and_sasl_ssl() {
    let Some(kafka) = KafkaCluster::shared() else { return };
    bounded(async {
        for (listener, seeds, tls) in
            [("SASL_PLAINTEXT", kafka.sasl_plaintext(), None), ("SASL_SSL", kafka.sasl_ssl(), Some(kafka))]
        {
            for mechanism in PASSWORD_MECHANISMS {
                let (result, written) = run(&options(Some(login(mechanism, SASL_PASSWORD)), tls), &seeds).await;
                let outcome = result.unwrap_or_else(|e| panic!("{mechanism} over {listener}: {e}"));
                let mut brokers: Vec<String> = outcome.metadata.brokers.iter().map(|b| b.address()).collect();
                brokers.sort();
                let mut expected = seeds.clone();
                expected.sort();
                assert_eq!(brokers, expected, "{mechanism} over {listener}: the listener advertises itself");
                assert_eq!(outcome.metadata.cluster_id.as_deref(), Some(kafka.cluster_id()));
                assert!(!written.contains(SASL_PASSWORD), "{mechanism} over {listener}: the password was written");
            }
        }
        let token = unsecured_jwt();
        let sasl = Sasl::OAuthBearer { token: Secret::new(token.clone()) };
        let (result, written) = run(&options(Some(sasl), None), &kafka.sasl_plaintext()).await;
        let outcome = result.unwrap_or_else(|e| panic!("OAUTHBEARER over SASL_PLAINTEXT: {e}"));
        assert_eq!(outcome.metadata.cluster_id.as_deref(), Some(kafka.cluster_id()));
        assert!(!written.contains(&token), "the token was written");

        // A token source is asked as the refresh starts; its failure stops it before any broker.
        let mut with_source = options(None, None);
        with_source.oauth_token = Some(TokenSource::new(|| Ok(unsecured_jwt())));
        let (result, _) = run(&with_source, &kafka.sasl_plaintext()).await;
        result.expect("a token from the source");
        with_source.oauth_token = Some(TokenSource::new(|| Err(String::from("the identity provider is down"))));
        let (result, _) = run(&with_source, &kafka.sasl_plaintext()).await;
        let error = result.expect_err("no token");
        assert!(matches!(&error, Error::Config(e) if e.field == "sasl.oauthbearer.token"), "{error}");
        assert!(error.to_string().contains("the identity provider is down"), "{error}");
    })
    .await;
}

#[tokio::test]
async fn a_wrong_password_is_fatal_at_once_asks_one_broker_and_names_mechanism_and_user_but_not_the_password() {
    let Some(kafka) = KafkaCluster::shared() else { return };
    bounded(async {
        for mechanism in PASSWORD_MECHANISMS {
            let wrong = "not-the-stagger-secret";
            let (result, written) = run(&options(Some(login(mechanism, wrong)), None), &kafka.sasl_plaintext()).await;
            let error = result.expect_err("a wrong password");
            let Error::Refresh { error: refresh, attempts, .. } = &error else { panic!("{error}") };
            assert_eq!(refresh.reason, GiveUpReason::Fatal, "{mechanism}: {error}");
            let failed: Vec<_> = attempts
                .iter()
                .filter_map(|a| if let AttemptOutcome::Failed(e) = &a.outcome { Some(e) } else { None })
                .collect();
            assert_eq!(failed.len(), 1, "{mechanism}: the first refusal stops the refresh: {attempts:?}");
            // The broker holds a refusal back (connection.failed.authentication.delay.ms):
            // while it checks, no other broker is asked, to be refused too.
            assert_eq!(attempts.len(), 1, "{mechanism}: one broker asked: {attempts:?}");
            assert_eq!(failed[0].kind, ErrorKind::BrokerError(58), "{mechanism}: {}", failed[0]);
            let text = error.to_string();
            assert!(text.contains("SASL_AUTHENTICATION_FAILED") && text.contains(mechanism), "{text}");
            assert!(text.contains(&format!("{SASL_USERNAME:?}")), "the user is named: {text}");
            assert!(
                !written.contains(wrong) && !written.contains(SASL_PASSWORD),
                "{mechanism}: a password was written"
            );
        }
        let bad_token = Sasl::OAuthBearer { token: Secret::new("bm90.YQ.") };
        let (result, written) = run(&options(Some(bad_token), None), &kafka.sasl_plaintext()).await;
        let error = result.expect_err("a bad token");
        assert!(error.to_string().contains("OAUTHBEARER") && error.to_string().contains("invalid_token"), "{error}");
        assert!(!written.contains("bm90.YQ."));
    })
    .await;
}

#[tokio::test]
async fn a_mechanism_the_listener_does_not_enable_lists_the_ones_it_does() {
    let Some(kafka) = KafkaCluster::shared() else { return };
    bounded(async {
        // OAUTHBEARER is enabled on SASL_PLAINTEXT only.
        let sasl = Sasl::OAuthBearer { token: Secret::new(unsecured_jwt()) };
        let (result, _) = run(&options(Some(sasl), Some(kafka)), &kafka.sasl_ssl()).await;
        let error = result.expect_err("OAUTHBEARER is not enabled on SASL_SSL");
        let text = error.to_string();
        assert!(text.contains("UNSUPPORTED_SASL_MECHANISM"), "{text}");
        assert!(text.contains("does not enable OAUTHBEARER; it enables: "), "{text}");
        let enabled = text.split("it enables: ").nth(1).unwrap().lines().next().unwrap();
        for mechanism in PASSWORD_MECHANISMS {
            assert!(enabled.contains(mechanism), "{mechanism} is listed: {text}");
        }
    })
    .await;
}

#[tokio::test]
async fn sasl_and_plaintext_on_the_wrong_listeners_say_which_side_expects_what() {
    let Some(kafka) = KafkaCluster::shared() else { return };
    bounded(async {
        let (result, _) = run(&options(Some(login("SCRAM-SHA-256", SASL_PASSWORD)), None), &kafka.plaintext()).await;
        let text = result.expect_err("SASL to PLAINTEXT").to_string();
        assert!(text.contains("this listener does not use SASL"), "{text}");

        let (result, _) = run(&options(None, None), &kafka.sasl_plaintext()).await;
        let text = result.expect_err("no SASL to SASL_PLAINTEXT").to_string();
        assert!(text.contains("requires SASL"), "{text}");
    })
    .await;
}

#[tokio::test]
async fn a_hung_broker_first_with_sasl_on_costs_no_attempt_timeout() {
    let Some(kafka) = KafkaCluster::shared() else { return };
    bounded(async {
        let hung = FakeBroker::start(Script::Silent).await;
        let mut seeds = vec![hung.address.clone()];
        seeds.extend(kafka.sasl_plaintext());
        let mut options = options(Some(login("SCRAM-SHA-512", SASL_PASSWORD)), None);
        options.config.attempt_timeout = Duration::from_secs(20);
        options.config.shuffle_seeds = false;
        let started = Instant::now();
        let (result, _) = run(&options, &seeds).await;
        let outcome = result.expect("past the hung broker");
        assert_ne!(outcome.winner, hung.address);
        assert!(started.elapsed() < options.config.attempt_timeout / 2, "took {:?}", started.elapsed());
        for attempt in &outcome.attempts {
            if let AttemptOutcome::Failed(e) = &attempt.outcome {
                assert_ne!(e.kind, ErrorKind::ResponseTimeout, "{attempt:?}");
            }
        }
    })
    .await;
}

#[tokio::test]
async fn a_client_asks_its_token_source_for_each_attempt_so_expired_tokens_are_replaced() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let Some(kafka) = KafkaCluster::shared() else { return };
    bounded(async {
        let asked = Arc::new(AtomicUsize::new(0));
        let counter = asked.clone();
        let options = stagger_tokio::ClientOptions {
            oauth_token: Some(TokenSource::new(move || {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(unsecured_jwt())
            })),
            ..Default::default()
        };
        let seeds = &kafka.sasl_plaintext()[..1];
        let client = stagger_tokio::Client::new(stagger::ClusterConfig::default(), seeds, options).expect("client");
        client.refresh().await.expect("first refresh");
        let after_first = asked.load(Ordering::SeqCst);
        assert!(after_first >= 1, "the source was asked");
        // A kept connection is already authenticated; a fresh one asks again.
        drop(client);
        let options = stagger_tokio::ClientOptions {
            oauth_token: Some(TokenSource::new(|| Err(String::from("token expired and the provider is down")))),
            ..Default::default()
        };
        let client = stagger_tokio::Client::new(stagger::ClusterConfig::default(), seeds, options).expect("client");
        let error = client.refresh().await.expect_err("no token");
        assert!(error.to_string().contains("token expired and the provider is down"), "{error}");
    })
    .await;
}

/// A long-lived client over SASL_SSL SCRAM keeps its authenticated connection and reuses it:
/// later refreshes go straight to Metadata on it (no new TLS handshake, no second SASL
/// exchange — a SaslHandshake on an authenticated connection is refused by the broker).
#[tokio::test]
async fn a_client_reuses_its_authenticated_sasl_ssl_connection() {
    let Some(kafka) = KafkaCluster::shared() else { return };
    bounded(async {
        let options = stagger_tokio::ClientOptions {
            exchange: ExchangeConfig { sasl: Some(login("SCRAM-SHA-512", SASL_PASSWORD)), ..ExchangeConfig::default() },
            tls: Some(TlsOptions { ca_file: Some(kafka.ca()), ..TlsOptions::default() }),
            ..Default::default()
        };
        let seeds = &kafka.sasl_ssl()[..1];
        let client = stagger_tokio::Client::new(stagger::ClusterConfig::default(), seeds, options).expect("client");
        client.refresh().await.expect("refresh 0");
        let home = client.stats().kept;
        assert!(home.is_some(), "the winner's connection is kept");
        for n in 1..3 {
            client.refresh().await.unwrap_or_else(|e| panic!("refresh {n}: {e}"));
            assert_eq!(client.stats().kept, home, "refresh {n} answered on the kept connection");
        }
        let stats = client.stats();
        assert_eq!(stats.refreshes, 3, "{stats:?}");
        // One connection in all: no reuse failed over to a new one. A loaded machine may still
        // start a hedge that is cancelled before it connects (an attempt, not a connection).
        assert_eq!((stats.connections_opened, stats.connections_reused), (1, 2), "{stats:?}");
        client.close().await;
    })
    .await;
}
