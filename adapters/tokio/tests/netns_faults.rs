//! Real network faults on the paths to real Kafka brokers: each broker is reached through a
//! host of its own in a network namespace (`stagger_kafka_fixture::netns`), whose path gets
//! a blackhole, a reject, loss with delay and jitter, or a partition that heals — the kernel
//! drops, resets and delays the packets, nothing is simulated.
//!
//! The tests share one 3-broker cluster of this binary's own and take turns (`TURN`), each
//! healing every path when it ends. Without network namespaces (not root, no iproute2) they
//! say so in one line and pass, unless `STAGGER_REQUIRE_NETNS=1` (CI) demands them.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use stagger::{ClusterConfig, ErrorKind, GiveUpReason, RefreshConfig};
use stagger_kafka_fixture::netns::{Fault, NetCluster, HOST_PORT};
use stagger_test_faults::{bounded, sockets::describe_sockets_to, sockets::sockets_to};
use stagger_tokio::{refresh_with, AttemptOutcome, Client, ClientOptions, Error, RefreshOptions};
use tokio::sync::Mutex;

fn cluster() -> Option<&'static NetCluster> {
    static CLUSTER: OnceLock<Option<NetCluster>> = OnceLock::new();
    CLUSTER
        .get_or_init(|| match NetCluster::start(3, 0) {
            Ok(cluster) => cluster,
            Err(why) => {
                assert!(std::env::var_os("STAGGER_REQUIRE_NETNS").is_none(), "network namespaces required: {why}");
                eprintln!("network-fault tests skipped: {why}");
                None
            }
        })
        .as_ref()
}

static TURN: Mutex<()> = Mutex::const_new(());

/// Heals every path when a test ends, passed or failed.
struct Healed(&'static NetCluster);

impl Drop for Healed {
    fn drop(&mut self) {
        self.0.heal();
    }
}

/// The default options, the seeds asked in the order listed (the faulty ones first) instead
/// of shuffled.
fn listed() -> RefreshOptions {
    RefreshOptions {
        config: RefreshConfig { shuffle_seeds: false, ..RefreshConfig::default() },
        ..RefreshOptions::default()
    }
}

fn quarter_attempt_timeout() -> Duration {
    RefreshConfig::default().attempt_timeout / 4
}

/// No connection to any host is left open.
fn assert_no_sockets_left() {
    assert_eq!(sockets_to(&[HOST_PORT]), 0, "sockets left: {}", describe_sockets_to(&[HOST_PORT]));
}

#[tokio::test]
async fn slow_lossy_paths_to_every_broker_still_refresh_well_within_an_attempt_timeout() {
    let Some(net) = cluster() else { return };
    let _turn = TURN.lock().await;
    let _healed = Healed(net);
    bounded(async {
        let seeds = net.seeds();
        let slow = Fault::Path { delay: Duration::from_millis(30), jitter: Duration::from_millis(10), loss_percent: 5 };
        for node in 1..=3 {
            net.set(node, slow);
        }
        let mut took = Vec::new();
        for _ in 0..8 {
            let outcome = refresh_with(&listed(), &seeds, |_| {}).await.expect("refresh over a lossy path");
            // Every broker is listed at its host's address: the metadata came across the path.
            let mut listed: Vec<String> =
                outcome.metadata.brokers.iter().map(|b| format!("{}:{}", b.host, b.port)).collect();
            listed.sort();
            let mut expected = seeds.clone();
            expected.sort();
            assert_eq!(listed, expected);
            // A round trip costs at least 30 - 10 ms each way of the request path.
            assert!(outcome.elapsed >= Duration::from_millis(20), "{:?}", outcome.elapsed);
            assert!(outcome.elapsed < RefreshConfig::default().attempt_timeout / 2, "{:?}", outcome.attempts);
            took.push(outcome.elapsed);
            assert_no_sockets_left();
        }
        eprintln!("30 ± 10 ms, 5 % loss on every path: refreshes took {took:?}");
    })
    .await;
}

#[tokio::test]
async fn a_blackholed_broker_first_is_passed_over_without_waiting_out_its_attempt_timeout() {
    let Some(net) = cluster() else { return };
    let _turn = TURN.lock().await;
    let _healed = Healed(net);
    bounded(async {
        let seeds = net.seeds();
        net.set(1, Fault::Blackhole);
        let outcome = refresh_with(&listed(), &seeds, |_| {}).await.expect("refresh");
        assert_ne!(outcome.winner, seeds[0]);
        assert!(outcome.elapsed < quarter_attempt_timeout(), "took {:?}", outcome.elapsed);
        let first = &outcome.attempts[0];
        assert_eq!(first.broker, seeds[0]);
        assert_eq!(first.connected, None, "its SYNs vanish: {first:?}");
        assert!(matches!(first.outcome, AttemptOutcome::Cancelled(_)), "{first:?}");
        assert_no_sockets_left();
    })
    .await;
}

#[tokio::test]
async fn a_rejecting_broker_first_is_refused_at_once() {
    let Some(net) = cluster() else { return };
    let _turn = TURN.lock().await;
    let _healed = Healed(net);
    bounded(async {
        let seeds = net.seeds();
        net.set(1, Fault::Reject);
        let outcome = refresh_with(&listed(), &seeds, |_| {}).await.expect("refresh");
        let first = &outcome.attempts[0];
        let AttemptOutcome::Failed(error) = &first.outcome else { panic!("{first:?}") };
        assert_eq!(error.kind, ErrorKind::Refused, "{error}");
        assert_ne!(outcome.winner, seeds[0]);
        assert!(outcome.elapsed < quarter_attempt_timeout(), "took {:?}", outcome.elapsed);
        assert_no_sockets_left();
    })
    .await;
}

#[tokio::test]
async fn a_partition_from_every_broker_gives_up_by_the_deadline_with_every_brokers_error_then_heals() {
    let Some(net) = cluster() else { return };
    let _turn = TURN.lock().await;
    let _healed = Healed(net);
    bounded(async {
        let seeds = net.seeds();
        let config = ClusterConfig::default();
        let client = Client::new(config, &seeds, ClientOptions::default()).expect("client");
        client.metadata().await.expect("metadata before the partition");

        for node in 1..=3 {
            net.set(node, Fault::Blackhole);
        }
        let mut options = listed();
        options.config.attempt_timeout = Duration::from_secs(1);
        options.config.deadline = Duration::from_secs(4);
        let start = Instant::now();
        let err = refresh_with(&options, &seeds, |_| {}).await.expect_err("nothing is reachable");
        let took = start.elapsed();
        assert!(took <= options.config.deadline + Duration::from_secs(1), "gave up after {took:?}");
        let Error::Refresh { error, .. } = &err else { panic!("{err}") };
        assert!(matches!(error.reason, GiveUpReason::AllFailed { .. } | GiveUpReason::DeadlineExceeded), "{error}");
        assert_eq!(error.brokers.len(), 3, "{error}");
        for broker in &error.brokers {
            assert!(broker.attempts >= 1, "{error}");
            let last = broker.last_error.as_ref().unwrap_or_else(|| panic!("no error for {}: {error}", broker.address));
            // Blackholed: the SYN is never answered (or, for a connection made before the
            // partition, the answer never comes).
            assert!(matches!(last.kind, ErrorKind::ConnectTimeout | ErrorKind::ResponseTimeout), "{error}");
        }
        // (The client's kept connection is still open; it is checked after `close`.)
        // The long-lived client's refresh gives up too, by its own deadline.
        client.refresh().await.expect_err("the client cannot reach anyone either");

        net.heal();
        refresh_with(&listed(), &seeds, |_| {}).await.expect("healed");
        client.refresh().await.expect("the client recovers once the partition heals");
        client.close().await;
        assert_no_sockets_left();
    })
    .await;
}

#[tokio::test]
async fn a_partition_that_heals_during_a_refresh_ends_it_with_metadata() {
    let Some(net) = cluster() else { return };
    let _turn = TURN.lock().await;
    let _healed = Healed(net);
    bounded(async {
        let seeds = net.seeds();
        for node in 1..=3 {
            net.set(node, Fault::Blackhole);
        }
        let heal_after = Duration::from_millis(1500);
        let healer = tokio::spawn(async move {
            tokio::time::sleep(heal_after).await;
            net.heal();
        });
        let mut options = listed();
        options.config.deadline = Duration::from_secs(20);
        let outcome = refresh_with(&options, &seeds, |_| {}).await.expect("metadata once the partition heals");
        healer.await.unwrap();
        assert!(outcome.elapsed >= heal_after, "answered during the partition? {:?}", outcome.attempts);
        assert!(outcome.elapsed < options.config.deadline, "{:?}", outcome.elapsed);
        eprintln!("partition healed after {heal_after:?}: metadata after {:?}", outcome.elapsed);
        assert_no_sockets_left();
    })
    .await;
}
