//! Misuse by the caller — an invalid policy, no seeds, duplicate seeds, addresses that cannot
//! be parsed or looked up, unusable exchange or TLS settings, no runtime — is refused when the
//! refresh or the client is *constructed*, as `Error::Config` naming the field, before any
//! broker is contacted; never later, as every attempt's error.
//!
//! "Before any broker is contacted" is checked with a fake broker that counts the
//! connections it accepts: it must see none.

use std::time::Duration;

use stagger::{ClusterConfig, ConfigError, GiveUpReason, Growth, RefreshConfig, Stagger};
use stagger_test_faults::bounded;
use stagger_test_faults::fake::{FakeBroker, Script};
use stagger_tokio::{refresh, refresh_with, Client, ClientOptions, Error, ExchangeConfig, RefreshOptions, TlsOptions};

/// The configuration error of `result`, or a panic saying what came instead.
fn config_error<T: std::fmt::Debug>(result: Result<T, Error>) -> ConfigError {
    match result {
        Err(Error::Config(e)) => e,
        other => panic!("expected a configuration error, got {other:?}"),
    }
}

/// Both entry points refuse `options` with `seeds`, naming `field`, and contact nobody.
async fn refused(options: &RefreshOptions, seeds: &[String], field: &str, broker: &FakeBroker) -> ConfigError {
    let e = config_error(refresh_with(options, seeds, |_| {}).await);
    assert_eq!(e.field, field, "{e}");
    assert!(e.to_string().contains(field), "the message names the field: {e}");
    let cluster = ClusterConfig { refresh: options.config, ..ClusterConfig::default() };
    let client_options =
        ClientOptions { exchange: options.exchange.clone(), tls: options.tls.clone(), ..ClientOptions::default() };
    let c = config_error(Client::new(cluster, seeds, client_options));
    assert_eq!(c.field, field, "Client::new agrees: {c}");
    assert_eq!(broker.accepted(), 0, "nobody was contacted");
    e
}

#[tokio::test]
async fn invalid_policies_are_refused_naming_the_field() {
    bounded(async {
        let broker = FakeBroker::start(Script::Healthy).await;
        let seeds = vec![broker.address.clone()];
        type Mutation = fn(&mut RefreshConfig);
        let cases: [(Mutation, &str); 8] = [
            (|c| c.fanout.initial = 0, "fanout.initial"),
            (|c| c.fanout.max_in_flight = 0, "fanout.max_in_flight"),
            (|c| c.fanout.jitter = f64::NAN, "fanout.jitter"),
            (|c| c.fanout.growth = Growth::Linear(0), "fanout.growth"),
            (|c| c.fanout.stagger = Stagger::Fixed(Duration::from_secs(3600)), "fanout.stagger"),
            (|c| c.attempt_timeout = Duration::ZERO, "attempt_timeout"),
            (|c| c.deadline = Duration::ZERO, "deadline"),
            (|c| c.retry.multiplier = 0.5, "retry.multiplier"),
        ];
        for (mutate, field) in cases {
            let mut config = RefreshConfig::default();
            mutate(&mut config);
            let options = RefreshOptions { config, ..RefreshOptions::default() };
            refused(&options, &seeds, field, &broker).await;
            let e = config_error(refresh(&config, &seeds).await);
            assert_eq!(e.field, field);
        }
        // The client's own knob.
        let cluster = ClusterConfig { refresh_interval: Duration::ZERO, ..ClusterConfig::default() };
        let e = config_error(Client::new(cluster, &seeds, ClientOptions::default()));
        assert_eq!(e.field, "refresh_interval", "{e}");
        assert_eq!(broker.accepted(), 0);
    })
    .await;
}

#[tokio::test]
async fn an_empty_seed_list_is_refused() {
    bounded(async {
        let broker = FakeBroker::start(Script::Healthy).await;
        let e = refused(&RefreshOptions::default(), &[], "seeds", &broker).await;
        assert!(e.problem.contains("at least one broker"), "{e}");
        // Entries that are only whitespace are empty too.
        refused(&RefreshOptions::default(), &["  ".into()], "seeds", &broker).await;
    })
    .await;
}

#[tokio::test]
async fn unparsable_addresses_are_refused_saying_why() {
    bounded(async {
        let broker = FakeBroker::start(Script::Healthy).await;
        let cases = [
            ("kafka", "no port"),
            ("kafka:", "invalid port"),
            ("kafka:0", "invalid port"),
            ("kafka:65536", "invalid port"),
            ("kafka:ninety", "invalid port"),
            (":9092", "no host"),
            ("::1:9092", "IPv6 address without brackets"),
            // Well-formed `host:port`, but no resolver could ever look the host up: refused
            // here (the adapter's check), not as a DNS error on every attempt.
            ("[not-an-ip]:9092", "not an IPv6 address"),
            ("[127.0.0.1]:9092", "not an IPv6 address"),
            ("kafka 1:9092", "cannot appear in a host name"),
            ("kafka..example:9092", "empty label"),
            ("kafka/1:9092", "cannot appear in a host name"),
        ];
        for (seed, why) in cases {
            // A bad entry anywhere in the list refuses the whole list.
            let seeds = vec![broker.address.clone(), seed.to_owned()];
            let e = refused(&RefreshOptions::default(), &seeds, "seeds", &broker).await;
            assert!(e.problem.contains(why), "{seed:?}: {e}");
            assert!(e.problem.contains(seed), "the message quotes the entry: {e}");
        }
    })
    .await;
}

/// Duplicate seeds are not an error: the broker book merges them at construction (after
/// trimming), as Kafka's clients do with `bootstrap.servers`, so they can never cause two
/// attempts at one broker or twice the load later.
#[tokio::test]
async fn duplicate_seeds_are_merged_at_construction() {
    bounded(async {
        let refusing = stagger_test_faults::sockets::Refusing::new();
        let a = refusing.address.clone();
        let seeds = vec![a.clone(), format!(" {a} "), a.clone(), format!("{a}\t")];
        let mut config = RefreshConfig::all_at_once();
        config.retry.retries = 1;
        config.retry.initial = Duration::from_millis(1);
        let options = RefreshOptions { config, ..RefreshOptions::default() };
        let error = refresh_with(&options, &seeds, |_| {}).await.expect_err("refused");
        let Error::Refresh { error: core, attempts, .. } = &error else { panic!("{error}") };
        assert_eq!(core.reason, GiveUpReason::AllFailed { passes: 2 });
        assert_eq!(core.brokers.len(), 1, "one broker, not four: {error}");
        assert_eq!(core.brokers[0].attempts, 2, "one attempt per pass");
        assert_eq!(attempts.len(), 2);
        assert!(attempts.iter().all(|r| r.broker == a));

        // The long-lived client merges them the same way.
        let broker = FakeBroker::start(Script::Healthy).await;
        let b = broker.address.clone();
        let client = Client::new(ClusterConfig::default(), &[b.clone(), format!(" {b}"), b], ClientOptions::default())
            .expect("duplicates are fine");
        client.refresh().await.expect("refresh");
        let stats = client.stats();
        assert_eq!((stats.refreshes, stats.attempts), (1, 1), "{stats:?}");
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn unusable_exchange_settings_are_refused() {
    bounded(async {
        let broker = FakeBroker::start(Script::Healthy).await;
        let seeds = vec![broker.address.clone()];
        let with = |exchange: ExchangeConfig| RefreshOptions { exchange, ..RefreshOptions::default() };

        let e = refused(
            &with(ExchangeConfig { max_frame_size: 0, ..ExchangeConfig::default() }),
            &seeds,
            "exchange.max_frame_size",
            &broker,
        )
        .await;
        assert!(e.problem.contains("at least 1024"), "{e}");
        // A client id Kafka's request header cannot carry (an i16 length).
        let e = refused(
            &with(ExchangeConfig { client_id: "x".repeat(40_000), ..ExchangeConfig::default() }),
            &seeds,
            "exchange.client_id",
            &broker,
        )
        .await;
        assert!(e.problem.contains("cannot encode"), "{e}");
        for topic in ["", "a b", "orders/1", &"t".repeat(250)] {
            let topics = Some(vec!["ok".to_owned(), topic.to_owned()]);
            let e = refused(
                &with(ExchangeConfig { topics, ..ExchangeConfig::default() }),
                &seeds,
                "exchange.topics",
                &broker,
            )
            .await;
            assert!(e.problem.contains("not a valid Kafka topic name"), "{topic:?}: {e}");
        }
        // The limits themselves are usable.
        let smallest =
            ExchangeConfig { max_frame_size: 1024, topics: Some(vec!["alpha".into()]), ..ExchangeConfig::default() };
        let outcome = refresh_with(&with(smallest), &seeds, |_| {}).await.expect("a 1 KiB limit is enough here");
        assert_eq!(outcome.metadata.topics[0].name, "alpha");
    })
    .await;
}

#[tokio::test]
async fn unusable_tls_settings_are_refused() {
    bounded(async {
        let broker = FakeBroker::start(Script::Healthy).await;
        let seeds = vec![broker.address.clone()];
        let with = |tls: TlsOptions| RefreshOptions { tls: Some(tls), ..RefreshOptions::default() };
        let not_pem = std::env::temp_dir().join(format!("stagger-misuse-{}.pem", std::process::id()));
        std::fs::write(&not_pem, "not a certificate").unwrap();
        let cases = [
            (TlsOptions { ca_file: Some("/nonexistent/ca.pem".into()), ..TlsOptions::default() }, "tls.ca_file"),
            (TlsOptions { ca_file: Some(not_pem.clone()), ..TlsOptions::default() }, "tls.ca_file"),
            (TlsOptions { server_name: Some("not a name!".into()), ..TlsOptions::default() }, "tls.server_name"),
            (
                TlsOptions {
                    client_cert: Some(stagger_tokio::ClientCert {
                        cert_file: "/nonexistent/client.pem".into(),
                        key_file: "/nonexistent/client.key".into(),
                    }),
                    ..TlsOptions::default()
                },
                "tls.client_cert.cert_file",
            ),
        ];
        for (tls, field) in cases {
            refused(&with(tls), &seeds, field, &broker).await;
        }
        let _ = std::fs::remove_file(&not_pem);
    })
    .await;
}

/// `Client::new` spawns its task on the current runtime; outside one it says so instead of
/// panicking.
#[test]
fn a_client_outside_a_runtime_is_refused() {
    let e = config_error(Client::new(ClusterConfig::default(), &["127.0.0.1:9092"], ClientOptions::default()));
    assert_eq!(e.field, "runtime", "{e}");
}
