//! Real broker faults on real Apache Kafka, made with the broker processes themselves:
//! `SIGSTOP` (the kernel still accepts connections and nobody answers: a genuinely hung
//! broker), `SIGKILL` (refused), `SIGCONT` and restart (it comes back). And Kafka 4.4's
//! cluster check: a discovered broker's address re-pointed at another cluster is noticed,
//! and the client rebootstraps from its seeds.
//!
//! The fault tests share one cluster of this binary's own and take turns (`TURN`), each
//! leaving every broker running; a Kafka 3.9 broker of this binary's own serves the
//! negotiation test and the cluster check of a broker that predates it. Time bounds are a quarter of the attempt timeout: far above
//! what a refresh takes here (milliseconds), far below what waiting out a hung broker costs.

use std::time::Duration;

use stagger::{CancelReason, ClusterConfig, ErrorKind, RefreshConfig};
use stagger_kafka_fixture::{Forwarder, KafkaCluster, Options, OLDER_VERSION};
use stagger_test_faults::bounded;
use stagger_tokio::{refresh_with, AttemptOutcome, Client, ClientOptions, RefreshOptions};
use tokio::sync::Mutex;

/// The fault tests' cluster: three brokers of this binary's own (stopped when it exits).
fn cluster() -> Option<&'static KafkaCluster> {
    static CLUSTER: std::sync::OnceLock<Option<KafkaCluster>> = std::sync::OnceLock::new();
    CLUSTER.get_or_init(|| KafkaCluster::start(&Options::default())).as_ref()
}

/// A single Kafka 3.9 broker of this binary's own.
fn older() -> Option<&'static KafkaCluster> {
    static OLDER: std::sync::OnceLock<Option<KafkaCluster>> = std::sync::OnceLock::new();
    OLDER
        .get_or_init(|| {
            KafkaCluster::start(&Options { version: OLDER_VERSION.to_owned(), brokers: 1, ..Options::default() })
        })
        .as_ref()
}

/// One fault test at a time: each stops and restarts brokers the others would see.
static TURN: Mutex<()> = Mutex::const_new(());

/// The default options, the seeds asked in the order listed (the faulty ones first) instead
/// of shuffled.
fn listed() -> RefreshOptions {
    RefreshOptions {
        config: RefreshConfig { shuffle_seeds: false, ..RefreshConfig::default() },
        ..RefreshOptions::default()
    }
}

/// What "never waits out an attempt timeout" is checked against.
fn quarter_attempt_timeout() -> Duration {
    RefreshConfig::default().attempt_timeout / 4
}

#[tokio::test]
async fn a_stopped_broker_first_in_the_seeds_is_overtaken_long_before_its_attempt_timeout() {
    let Some(kafka) = cluster() else { return };
    let _turn = TURN.lock().await;
    bounded(async {
        let seeds = kafka.plaintext();
        let paused = kafka.pause(1);
        let outcome = refresh_with(&listed(), &seeds, |_| {}).await.expect("refresh");
        assert_ne!(outcome.winner, seeds[0], "the stopped broker cannot win");
        assert!(outcome.elapsed < quarter_attempt_timeout(), "took {:?}", outcome.elapsed);
        let stopped = &outcome.attempts[0];
        assert_eq!(stopped.broker, seeds[0]);
        assert!(stopped.connected.is_some(), "the kernel of a stopped broker still accepts: {stopped:?}");
        assert_eq!(stopped.answered, None, "and nobody answers: {stopped:?}");
        assert_eq!(stopped.outcome, AttemptOutcome::Cancelled(CancelReason::Overtaken), "{stopped:?}");

        // SIGCONT: the broker answers again, alone.
        drop(paused);
        let alone = refresh_with(&listed(), &seeds[..1], |_| {}).await.expect("continued broker");
        assert_eq!(alone.winner, seeds[0]);
    })
    .await;
}

#[tokio::test]
async fn a_killed_broker_is_refused_at_once_and_answers_again_after_a_restart() {
    let Some(kafka) = cluster() else { return };
    let _turn = TURN.lock().await;
    bounded(async {
        let seeds = kafka.plaintext();
        kafka.kill(1);
        let outcome = refresh_with(&listed(), &seeds, |_| {}).await.expect("refresh");
        let killed = &outcome.attempts[0];
        assert_eq!(killed.broker, seeds[0]);
        let AttemptOutcome::Failed(error) = &killed.outcome else { panic!("{killed:?}") };
        assert_eq!(error.kind, ErrorKind::Refused, "{error}");
        assert!(outcome.elapsed < quarter_attempt_timeout(), "took {:?}", outcome.elapsed);

        kafka.restart(1);
        let back = refresh_with(&listed(), &seeds[..1], |_| {}).await.expect("restarted broker");
        assert_eq!(back.winner, seeds[0]);
        assert_eq!(back.metadata.brokers.len(), 3, "{:?}", back.metadata.brokers);
    })
    .await;
}

#[tokio::test]
async fn a_client_keeps_fresh_metadata_while_brokers_stop_and_come_back() {
    let Some(kafka) = cluster() else { return };
    let _turn = TURN.lock().await;
    bounded(async {
        let seeds = kafka.plaintext();
        let client = Client::new(ClusterConfig::default(), &seeds, ClientOptions::default()).expect("client");
        let first = client.refresh().await.expect("healthy refresh");
        assert_eq!(first.brokers.len(), 3);
        let node_of = |address: &str| (1..=3).find(|&n| kafka.address(n) == address).expect("a broker");

        // Stop the broker the kept connection goes to: the refresh must not stall on it.
        let kept = node_of(&client.stats().kept.expect("a kept connection"));
        let paused = kafka.pause(kept);
        let started = std::time::Instant::now();
        let during = client.refresh().await.expect("refresh past the stopped, kept broker");
        assert!(started.elapsed() < quarter_attempt_timeout(), "took {:?}", started.elapsed());
        assert_eq!(during.cluster_id.as_deref(), Some(kafka.cluster_id()));
        let now_kept = node_of(&client.stats().kept.expect("a kept connection"));
        assert_ne!(now_kept, kept, "the new kept connection is to a broker that answered");
        drop(paused);

        // Kill the broker now kept: refused, the next one answers; restart it, still fresh.
        kafka.kill(now_kept);
        let started = std::time::Instant::now();
        client.refresh().await.expect("refresh past the killed, kept broker");
        assert!(started.elapsed() < quarter_attempt_timeout(), "took {:?}", started.elapsed());
        kafka.restart(now_kept);
        let after = client.refresh().await.expect("refresh after the restart");
        assert_eq!(after.brokers.len(), 3, "every broker is back: {:?}", after.brokers);
        let stats = client.stats();
        assert_eq!(stats.refreshes, 4, "{stats:?}");
        client.close().await;
    })
    .await;
}

/// Waits until `client` has noticed that its kept connection was closed.
async fn kept_closed(client: &Client) {
    while client.stats().kept.is_some() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A single-broker cluster A and a forwarder F that A's broker advertises as its address;
/// the other cluster is node 1 of the fault tests' cluster (Kafka 4.4) or the Kafka 3.9
/// broker. The client's seed is a second forwarder S in front of A (so the test can close
/// the client's kept connection to it). Once F is re-pointed at the other cluster, the
/// client's next refresh asks F for node 1 of A; a 4.4 broker answers REBOOTSTRAP_REQUIRED
/// to ApiVersions v5, and a 3.9 broker, which cannot check, is caught by the client checking
/// the Metadata answer's cluster id; the client rebootstraps, and the same refresh ends with
/// A's metadata, from the seed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discovered_address_re_pointed_at_another_cluster_makes_the_client_rebootstrap() {
    let (Some(b), Some(b_old)) = (cluster(), older()) else { return };
    let base = stagger_kafka_fixture::free_base_port(1);
    let a_plaintext = format!("127.0.0.1:{base}");
    // F must lead to A before A starts advertising it (its readiness check goes through F).
    let f = Forwarder::start(&a_plaintext).await;
    let a_options = Options {
        brokers: 1,
        base_port: Some(base),
        advertise_plaintext: Some(vec![f.address().to_owned()]),
        ..Options::default()
    };
    let Some(a) = tokio::task::block_in_place(|| KafkaCluster::start(&a_options)) else { return };
    let _turn = TURN.lock().await;
    bounded(async {
        for (other, checked_by) in [(b, "the broker (KIP-1242)"), (b_old, "the client (a Kafka 3.9 broker)")] {
            assert_ne!(other.cluster_id(), a.cluster_id());
            f.switch(&a_plaintext);
            let s = Forwarder::start(&a_plaintext).await;
            // One broker at a time, so which broker answers is not a race: with the default
            // policy a hedge to the seed may answer before F's broker answers at all, and then
            // nothing is checked (the seed wins, F is overtaken), which is fine but not this test.
            let config = ClusterConfig { refresh: RefreshConfig::sequential(), ..ClusterConfig::default() };
            let client = Client::new(config, &[s.address()], ClientOptions::default()).expect("client");

            // From the seed: A lists its broker at F.
            let first = client.refresh().await.expect("first refresh");
            assert_eq!(first.cluster_id.as_deref(), Some(a.cluster_id()));
            assert_eq!(first.brokers[0].address(), f.address());
            // Close the kept connection to the seed: the next refresh asks the discovered F,
            // with the cluster check, and A's broker passes it.
            s.switch(&a_plaintext);
            kept_closed(&client).await;
            client.refresh().await.expect("refresh from the discovered broker");
            assert_eq!(client.stats().kept.as_deref(), Some(f.address()), "{:?}", client.stats());
            assert_eq!(client.stats().rebootstraps, 0);

            // F now leads to the other cluster's node 1.
            f.switch(&other.address(1));
            kept_closed(&client).await;
            let metadata = client.refresh().await.expect("refresh after the re-pointing");
            assert_eq!(metadata.cluster_id.as_deref(), Some(a.cluster_id()), "checked by {checked_by}");
            let stats = client.stats();
            assert_eq!(stats.rebootstraps, 1, "checked by {checked_by}: {stats:?}");
            assert_eq!(stats.kept.as_deref(), Some(s.address()), "the seed answered: {stats:?}");
            client.close().await;
        }
    })
    .await;
}

#[tokio::test]
async fn metadata_negotiation_works_with_kafka_3_9() {
    let Some(kafka) = older() else { return };
    bounded(async {
        let seeds = kafka.plaintext();
        let outcome = refresh_with(&listed(), &seeds, |_| {}).await.expect("refresh");
        assert_eq!(outcome.metadata_version, Some(12), "Kafka 3.9 speaks Metadata up to v12");
        assert_eq!(outcome.metadata.cluster_id.as_deref(), Some(kafka.cluster_id()));
        let brokers: Vec<String> = outcome.metadata.brokers.iter().map(|b| b.address()).collect();
        assert_eq!(brokers, seeds);
        // A long-lived client's fresh connections to discovered brokers ask for ApiVersions
        // v5, which a 3.9 broker refuses; the client asks again at v3 and goes on.
        let client = Client::new(ClusterConfig::default(), &seeds, ClientOptions::default()).expect("client");
        client.refresh().await.expect("first refresh");
        let again = client.refresh().await.expect("second refresh");
        assert_eq!(again.cluster_id.as_deref(), Some(kafka.cluster_id()));
        client.close().await;
    })
    .await;
}
