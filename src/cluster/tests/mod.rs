//! Tests of `Cluster`: the cluster check's identity, rebootstrap on REBOOTSTRAP_REQUIRED,
//! and inputs for attempts a timer issues in the same call; the connections it keeps are in
//! `keeping.rs`, how long a kept connection may stay silent in `kept_pace.rs`.

use super::*;
use crate::config::{RefreshConfig, Stagger};
use crate::error::{AttemptError, GiveUpReason};
use crate::metadata::BrokerMetadata;
use crate::refresh::AttemptState;
use crate::refresh::{AttemptId, InputOutcome};
use alloc::string::String;
use alloc::vec::Vec;

const REBOOTSTRAP_REQUIRED: ErrorKind = ErrorKind::BrokerError(129);

fn ms(millis: u64) -> Instant {
    Instant::from_millis(millis)
}

/// One attempt at a time, the next at once after a failure, one pass; an attempt outlives
/// the 25 s deadline, and the stagger tick (20 s) cannot add one to the full throttle.
fn config() -> ClusterConfig {
    let mut refresh = RefreshConfig::sequential();
    refresh.retry.retries = 0;
    refresh.attempt_timeout = Duration::from_secs(30);
    refresh.deadline = Duration::from_secs(25);
    refresh.fanout.stagger = Stagger::Fixed(Duration::from_secs(20));
    ClusterConfig { refresh, ..ClusterConfig::default() }
}

fn metadata(cluster_id: Option<&str>, brokers: &[(i32, &str)]) -> Metadata {
    Metadata {
        cluster_id: cluster_id.map(String::from),
        brokers: brokers
            .iter()
            .map(|&(node_id, host)| BrokerMetadata { node_id, host: host.into(), port: 9092, rack: None })
            .collect(),
        ..Metadata::default()
    }
}

fn events(cluster: &mut Cluster) -> Vec<ClusterEvent> {
    core::iter::from_fn(|| cluster.poll_event()).collect()
}

/// The attempts `events` start on a connection, new or kept.
fn connects(events: &[ClusterEvent]) -> Vec<(AttemptId, BrokerIndex)> {
    events
        .iter()
        .filter_map(|e| match *e {
            ClusterEvent::Connect { attempt, broker } | ClusterEvent::Reuse { attempt, broker } => {
                Some((attempt, broker))
            }
            _ => None,
        })
        .collect()
}

fn failed(attempt: AttemptId, kind: ErrorKind) -> Input {
    Input::Failed { attempt, error: AttemptError::new(kind) }
}

/// A cluster view over `seed:9092` whose first refresh discovered `a` (node 1) and `b`
/// (node 2) of cluster `c1`; returns it and the first refresh's attempt.
fn discovered(config: ClusterConfig) -> (Cluster, AttemptId) {
    let mut cluster = Cluster::new(config, BrokerBook::new(["seed:9092"]).unwrap(), ms(0)).unwrap();
    cluster.request_refresh(ms(0));
    let [(attempt, seed)] = connects(&events(&mut cluster))[..] else { panic!("one attempt, to the seed") };
    assert_eq!(cluster.identity(seed), None, "nothing is known of a seed");
    let metadata = metadata(Some("c1"), &[(1, "a"), (2, "b")]);
    cluster.handle_input(ms(1), Input::Response { attempt, metadata });
    assert!(matches!(events(&mut cluster)[..], [ClusterEvent::Keep { .. }, ClusterEvent::Refreshed { .. }]));
    (cluster, attempt)
}

fn broker(cluster: &Cluster, address: &str) -> BrokerIndex {
    cluster.book().find(address).unwrap()
}

#[test]
fn an_input_for_an_attempt_issued_in_the_same_call_is_ignored() {
    let mut refresh = RefreshConfig::default();
    refresh.fanout.jitter = 0.0;
    let book = BrokerBook::new(["b0:9092", "b1:9092", "b2:9092"]).unwrap();
    let mut cluster = Cluster::new(ClusterConfig { refresh, ..ClusterConfig::default() }, book, ms(0)).unwrap();
    cluster.request_refresh(ms(0));
    let [(first, _)] = connects(&events(&mut cluster))[..] else { panic!("one attempt") };
    // The gentle bootstrap's tick at the pace (100 ms) issues the attempt this input names.
    let premature = AttemptId(first.0 + 1);
    cluster.handle_input(ms(100), Input::Response { attempt: premature, metadata: metadata(Some("c1"), &[(1, "a")]) });
    let ev = events(&mut cluster);
    assert!(ev.iter().all(|e| matches!(e, ClusterEvent::Connect { .. })), "{ev:?}");
    assert!(connects(&ev).iter().any(|&(a, _)| a == premature), "{ev:?}");
    assert!(cluster.metadata().is_none());
}

#[test]
fn identity_is_known_for_discovered_brokers_only() {
    let (mut cluster, _) = discovered(config());
    let (seed, a, b) = (broker(&cluster, "seed:9092"), broker(&cluster, "a:9092"), broker(&cluster, "b:9092"));
    assert_eq!(cluster.identity(a), Some(BrokerIdentity { cluster_id: "c1".into(), node_id: 1 }));
    assert_eq!(cluster.identity(b), Some(BrokerIdentity { cluster_id: "c1".into(), node_id: 2 }));
    assert_eq!(cluster.identity(seed), None, "a seed the metadata does not list");
    assert_eq!(cluster.identity(BrokerIndex(99)), None);

    // Metadata without a cluster id (before Metadata v2): half an identity is none.
    cluster.request_refresh(ms(10));
    let (attempt, _) = connects(&events(&mut cluster))[0];
    let anonymous = metadata(None, &[(1, "a"), (3, "seed")]);
    cluster.handle_input(ms(11), Input::Response { attempt, metadata: anonymous });
    events(&mut cluster);
    assert!(cluster.book().get(seed).unwrap().is_discovered());
    assert_eq!(cluster.identity(a), None);
    assert_eq!(cluster.identity(seed), None);

    // A seed the metadata lists is a discovered broker like any other.
    cluster.request_refresh(ms(20));
    let (attempt, _) = connects(&events(&mut cluster))[0];
    cluster.handle_input(ms(21), Input::Response { attempt, metadata: metadata(Some("c1"), &[(3, "seed")]) });
    events(&mut cluster);
    assert_eq!(cluster.identity(seed), Some(BrokerIdentity { cluster_id: "c1".into(), node_id: 3 }));
    assert_eq!(cluster.identity(a), None, "no longer listed");
}

#[test]
fn rebootstrap_required_from_a_discovered_broker_sends_the_next_refresh_to_the_seeds() {
    // `b` stays silent until the deadline, so not every discovered broker failed: only the
    // REBOOTSTRAP_REQUIRED can make the refresh rebootstrap.
    for (kind, rebootstrap, expected) in
        [(REBOOTSTRAP_REQUIRED, true, true), (ErrorKind::Refused, true, false), (REBOOTSTRAP_REQUIRED, false, false)]
    {
        let (mut cluster, stale) = discovered(ClusterConfig { rebootstrap, ..config() });
        let epoch = cluster.request_refresh(ms(10));
        let ev = events(&mut cluster);
        let [(first, _)] = connects(&ev)[..] else { panic!("{ev:?}") };
        // A 129 from an attempt of an earlier refresh changes nothing.
        cluster.handle_input(ms(11), failed(stale, REBOOTSTRAP_REQUIRED));
        assert!(events(&mut cluster).is_empty());
        cluster.handle_input(ms(12), failed(first, kind));
        let ev = events(&mut cluster);
        let [(_, second)] = connects(&ev)[..] else { panic!("the next broker at once: {ev:?}") };
        assert!(cluster.identity(second).is_some(), "the rest of the refresh keeps its checks");
        cluster.handle_timeout(ms(10 + 25_000));
        let ev = events(&mut cluster);
        let Some(ClusterEvent::RefreshFailed { epoch: e, error }) =
            ev.iter().find(|e| !matches!(e, ClusterEvent::Cancel { .. }))
        else {
            panic!("{ev:?}")
        };
        assert_eq!((*e, error.reason), (epoch, GiveUpReason::DeadlineExceeded));
        assert_eq!(ev.last() == Some(&ClusterEvent::Rebootstrapped), expected, "{kind:?}, {rebootstrap}: {ev:?}");
        assert_eq!(!cluster.book().has_discovered(), expected);

        cluster.request_refresh(ms(30_000));
        let ev = events(&mut cluster);
        let [(_, next)] = connects(&ev)[..] else { panic!("{ev:?}") };
        if expected {
            assert_eq!(cluster.current().unwrap().candidates(), [broker(&cluster, "seed:9092")]);
            assert_eq!(cluster.book().address(next), "seed:9092");
            assert_eq!(cluster.identity(next), None, "the seeds are asked without a cluster check");
        } else {
            assert_eq!(cluster.current().unwrap().candidates().len(), 3);
        }
    }
}

#[test]
fn every_discovered_broker_answering_rebootstrap_required_still_reaches_the_seed() {
    let (mut cluster, _) = discovered(config());
    cluster.request_refresh(ms(10));
    let (first, _) = connects(&events(&mut cluster))[0];
    // One refuses the ApiVersions v5 check, the other answers Metadata with error 129.
    cluster.handle_input(ms(11), failed(first, REBOOTSTRAP_REQUIRED));
    let (second, _) = connects(&events(&mut cluster))[0];
    let mut refusal = metadata(Some("c1"), &[(1, "a")]);
    refusal.error_code = 129;
    cluster.handle_input(ms(12), Input::Response { attempt: second, metadata: refusal });
    let ev = events(&mut cluster);
    let [(last, seed)] = connects(&ev)[..] else { panic!("the seed, in the same refresh: {ev:?}") };
    assert_eq!(cluster.book().address(seed), "seed:9092");
    assert_eq!(cluster.identity(seed), None);

    // The seed now fronts another cluster: its answer wins and rebuilds the view.
    cluster.handle_input(ms(13), Input::Response { attempt: last, metadata: metadata(Some("c2"), &[(7, "x")]) });
    let ev = events(&mut cluster);
    assert!(
        matches!(ev[..], [ClusterEvent::Keep { .. }, ClusterEvent::Refreshed { .. }, ClusterEvent::Rebootstrapped]),
        "{ev:?}"
    );
    let x = broker(&cluster, "x:9092");
    assert_eq!(cluster.identity(x), Some(BrokerIdentity { cluster_id: "c2".into(), node_id: 7 }));
    assert_eq!(cluster.identity(broker(&cluster, "a:9092")), None);

    // A refresh whose every broker, seed included, met the same fails, then rebootstraps.
    let (mut cluster, _) = discovered(config());
    cluster.request_refresh(ms(10));
    let mut t = 10;
    let mut ev = events(&mut cluster);
    while let Some(&(attempt, _)) = connects(&ev).first() {
        t += 1;
        cluster.handle_input(ms(t), failed(attempt, REBOOTSTRAP_REQUIRED));
        ev = events(&mut cluster);
    }
    let [ClusterEvent::RefreshFailed { error, .. }, ClusterEvent::Rebootstrapped] = &ev[..] else { panic!("{ev:?}") };
    assert_eq!(error.brokers.len(), 3, "both discovered brokers and the seed were tried");
    assert!(error.brokers.iter().all(|b| b.last_error.as_ref().map(|e| e.kind) == Some(REBOOTSTRAP_REQUIRED)));
}

#[test]
fn a_discovered_winner_after_rebootstrap_required_needs_no_rebootstrap() {
    let (mut cluster, _) = discovered(config());
    cluster.request_refresh(ms(10));
    let (first, _) = connects(&events(&mut cluster))[0];
    cluster.handle_input(ms(11), failed(first, REBOOTSTRAP_REQUIRED));
    let [(second, other)] = connects(&events(&mut cluster))[..] else { panic!() };
    assert!(cluster.identity(other).is_some(), "asked with the cluster check");
    let answer = metadata(Some("c1"), &[(1, "a"), (2, "b")]);
    cluster.handle_input(ms(12), Input::Response { attempt: second, metadata: answer });
    let ev = events(&mut cluster);
    assert!(
        matches!(ev[..], [ClusterEvent::Release { .. }, ClusterEvent::Keep { .. }, ClusterEvent::Refreshed { .. }]),
        "the winner's connection replaces the seed's: {ev:?}"
    );
    assert!(cluster.book().has_discovered());
}

#[test]
fn inputs_say_what_became_of_them_and_the_finished_refresh_stays_readable() {
    let (mut cluster, won) = discovered(config());
    let last = cluster.last_refresh().expect("the first refresh finished");
    assert_eq!(last.attempt(won).map(|a| a.state), Some(AttemptState::Won));
    // An input about the finished refresh, and one about a refresh that never was.
    assert_eq!(cluster.handle_input(ms(2), failed(won, ErrorKind::Refused)), InputOutcome::RefreshFinished);
    assert_eq!(cluster.handle_input(ms(2), failed(AttemptId(9 << 32), ErrorKind::Refused)), InputOutcome::OtherRefresh);
    let epoch = cluster.request_refresh(ms(3));
    let [(attempt, _)] = connects(&events(&mut cluster))[..] else { panic!("one attempt") };
    assert_eq!(attempt.epoch(), epoch);
    assert_eq!(cluster.handle_input(ms(4), Input::Connected { attempt, tls: false }), InputOutcome::Applied);
    assert_eq!(cluster.handle_input(ms(4), Input::Connected { attempt, tls: false }), InputOutcome::Repeated);
    assert_eq!(cluster.handle_input(ms(5), failed(attempt, REBOOTSTRAP_REQUIRED)), InputOutcome::Applied);
}

#[test]
fn a_discovered_book_larger_than_a_refresh_holds_is_fitted_not_refused() {
    let mut refresh = RefreshConfig::sequential();
    refresh.retry.retries = 1000;
    // 32 brokers × 1001 passes × 2 > 65,536: only the seeds count at construction.
    let mut cluster = Cluster::new(
        ClusterConfig { refresh, ..ClusterConfig::default() },
        BrokerBook::new(["seed:9092"]).unwrap(),
        ms(0),
    )
    .unwrap();
    cluster.request_refresh(ms(0));
    let [(attempt, _)] = connects(&events(&mut cluster))[..] else { panic!("one attempt") };
    let hosts: Vec<String> = (0..40).map(|i| alloc::format!("b{i}")).collect();
    let brokers: Vec<(i32, &str)> = hosts.iter().enumerate().map(|(i, h)| (i as i32, h.as_str())).collect();
    cluster.handle_input(ms(1), Input::Response { attempt, metadata: metadata(Some("c1"), &brokers) });
    assert!(matches!(events(&mut cluster)[..], [ClusterEvent::Keep { .. }, ClusterEvent::Refreshed { .. }]));
    assert_eq!(cluster.book().len(), 41);
    let epoch = cluster.request_refresh(ms(2));
    // The seed that won is kept, but the fitted candidates are discovered brokers only: its
    // connection would not be asked, so it goes.
    let ev = events(&mut cluster);
    assert!(
        matches!(ev[..], [ClusterEvent::Release { broker: BrokerIndex(0) }, ClusterEvent::Connect { .. }]),
        "the next refresh runs: {ev:?}"
    );
    let current = cluster.current().expect("running");
    assert_eq!(current.epoch(), epoch);
    assert_eq!(current.candidates().len(), crate::refresh::MAX_ATTEMPTS / 2 / 1001);
}

/// A default cluster over `a:9092` whose bootstrap over TLS took a 30 ms handshake (a cold
/// start's queue) and discovered `a`, `b` and `c`; returns it and that metadata.
fn slow_cold_start() -> (Cluster, Metadata) {
    let mut cluster = Cluster::new(ClusterConfig::default(), BrokerBook::new(["a:9092"]).unwrap(), ms(0)).unwrap();
    cluster.request_refresh(ms(0));
    let [(attempt, _)] = connects(&events(&mut cluster))[..] else { panic!("one attempt") };
    cluster.handle_input(ms(30), Input::Connected { attempt, tls: true });
    cluster.handle_input(ms(31), Input::FirstFrame { attempt });
    let answer = metadata(Some("c1"), &[(1, "a"), (2, "b"), (3, "c")]);
    cluster.handle_input(ms(32), Input::Response { attempt, metadata: answer.clone() });
    events(&mut cluster);
    (cluster, answer)
}

mod calm;
mod keeping;
mod kept_pace;
