//! The long-lived client: single-flight, cache, kept connection (and the broker closing it),
//! patience with a busy broker, periodic refresh, close and drop leaving no socket behind.

use std::sync::Arc;
use std::time::Duration;

use stagger::{Adaptive, ClusterConfig, Growth, Stagger};
use stagger_blocking::{Client, ClientOptions, Error};
use stagger_test_faults::fake::{FakeBroker, Script};
use stagger_test_faults::mock::Mock;
use stagger_test_faults::sockets::sockets_to;
use stagger_test_faults::{background, bounded_blocking};

/// Default policy, but a silent connected broker is suspected after 100 ms (so a kept
/// connection surely answers before any hedge on a busy machine), one broker per tick.
fn config() -> ClusterConfig {
    let mut config = ClusterConfig::default();
    config.refresh.fanout.stagger =
        Stagger::Adaptive(Adaptive { floor: Duration::from_millis(100), ..Adaptive::default() });
    config.refresh.fanout.growth = Growth::Linear(1);
    config.refresh.shuffle_seeds = false;
    config
}

/// Waits (bounded by the test's own bound) until `done` holds.
fn until(mut done: impl FnMut() -> bool) {
    while !done() {
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn concurrent_refreshes_share_one_refresh_then_the_cache_and_the_kept_connection_serve() {
    bounded_blocking(|| {
        let mock = Mock::start(5, &[("alpha", 3)]);
        mock.hang(1);
        let client = Client::new(config(), &mock.seeds(&[1, 2, 3, 4, 5]), ClientOptions::default()).unwrap();
        assert!(client.cached().is_none());
        assert_eq!(client.stats().refreshes, 0, "nothing happens before it is asked");

        // Two callers on two threads at once: one refresh in the core, one answer for both
        // (the second joins unless the first is already over, which the count tells).
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| client.refresh().expect("refresh"));
            let b = s.spawn(|| client.refresh().expect("refresh"));
            (a.join().unwrap(), b.join().unwrap())
        });
        let stats = client.stats();
        assert!(Arc::ptr_eq(&a, &b) == (stats.refreshes == 1), "{stats:?}");
        assert_eq!(a.brokers.len(), 5);
        let kept = stats.kept.clone().expect("a kept connection");
        assert_ne!(kept, mock.address(1), "not the hung broker: {stats:?}");
        // The last refresh's attempts say why: the hung broker 1 did not win, the kept one did.
        let attempts = client.last_refresh();
        assert!(attempts.iter().any(|a| a.broker == kept && a.outcome.name() == "won"), "{attempts:#?}");
        assert!(attempts.iter().all(|a| a.broker != mock.address(1) || a.outcome.name() != "won"));

        // Fresh metadata comes from the cache: no new refresh.
        let cached = client.metadata().expect("metadata");
        assert!(Arc::ptr_eq(&b, &cached) || Arc::ptr_eq(&a, &cached));
        assert_eq!(client.stats().refreshes, stats.refreshes);

        // The next refresh starts with the kept connection and wins on it.
        client.refresh().expect("refresh");
        let after = client.stats();
        assert_eq!(after.refreshes, stats.refreshes + 1);
        assert_eq!(after.connections_reused, stats.connections_reused + 1, "{after:?}");
        assert_eq!(after.connections_opened, stats.connections_opened, "{after:?}");
        assert_eq!(after.kept, stats.kept);

        // The kept connection is open, and so is the hung broker 1's: the client's first
        // choice at a cold start finishes its exchange (its handshake may only be queued)
        // until `attempt_timeout`.
        assert_eq!(sockets_to(&mock.ports()), 2, "the kept connection and the draining first choice");
        client.close();
        assert_eq!(sockets_to(&mock.ports()), 0, "close returns once every socket is closed");
    });
}

#[test]
fn a_kept_connection_the_broker_closes_is_forgotten_and_the_next_refresh_goes_elsewhere() {
    bounded_blocking(|| {
        let mock = Mock::start(3, &[("alpha", 1)]);
        let client = Client::new(config(), &mock.seeds(&[1, 2, 3]), ClientOptions::default()).unwrap();
        client.refresh().expect("refresh");
        let kept = client.stats().kept.expect("a kept connection");
        let id = (1..=3).find(|&id| mock.address(id) == kept).unwrap();
        // The broker goes down: it closes its connections and refuses new ones.
        mock.down(id);
        until(|| client.stats().kept.is_none());
        let before = client.stats();
        client.refresh().expect("another broker answers");
        let after = client.stats();
        assert_eq!(after.connections_reused, before.connections_reused, "{after:?}");
        assert_ne!(after.kept.as_deref(), Some(kept.as_str()), "{after:?}");
        drop(client);
        assert_eq!(sockets_to(&mock.ports()), 0, "drop returns once every socket is closed");
    });
}

/// A broker that answers ApiVersions at once but Metadata only after 600 ms is alive and
/// busy: the core, told of its first answer, waits for it instead of hedging — on a fresh
/// connection and on the kept one alike — and the idle broker is never contacted.
#[test]
fn a_busy_broker_that_answered_gets_patience_on_fresh_and_kept_connections() {
    bounded_blocking(|| {
        let fixtures = background();
        let busy = fixtures.block_on(FakeBroker::start(Script::SlowMetadata(Duration::from_millis(600))));
        let idle = fixtures.block_on(FakeBroker::start(Script::Healthy));
        // Silent brokers are suspected 300 ms after their handshake; answering ones only at
        // the ceiling (30 s), whatever an answer normally takes.
        let config = stagger_test_faults::patient_cluster_config();
        let client =
            Client::new(config, &[busy.address.clone(), idle.address.clone()], ClientOptions::default()).unwrap();
        client.refresh().expect("refresh");
        let first = client.stats();
        assert_eq!((first.refreshes, first.attempts, first.connections_opened), (1, 1, 1), "{first:?}");
        assert_eq!(first.kept.as_deref(), Some(busy.address.as_str()), "{first:?}");
        client.refresh().expect("refresh");
        let second = client.stats();
        assert_eq!((second.refreshes, second.attempts), (2, 2), "{second:?}");
        assert_eq!((second.connections_opened, second.connections_reused), (1, 1), "{second:?}");
        assert_eq!((busy.accepted(), idle.accepted()), (1, 0), "the idle broker was never contacted");
        client.close();
    });
}

#[test]
fn the_background_thread_refreshes_periodically() {
    bounded_blocking(|| {
        let mock = Mock::start(3, &[("alpha", 1)]);
        let mut config = config();
        config.refresh_interval = Duration::from_millis(200);
        let client = Client::new(config, &mock.seeds(&[1, 2, 3]), ClientOptions::default()).unwrap();
        // Nobody asks: the core's periodic timer starts refreshes on its own.
        until(|| client.stats().refreshes >= 2);
        assert!(client.cached().is_some());
        drop(client);
        assert_eq!(sockets_to(&mock.ports()), 0);
    });
}

#[test]
fn a_client_with_only_dead_brokers_names_every_brokers_error() {
    bounded_blocking(|| {
        let mock = Mock::start(2, &[("alpha", 1)]);
        mock.down(1);
        mock.down(2);
        let mut config = config();
        config.refresh.retry.retries = 0;
        let client = Client::new(config, &mock.seeds(&[1, 2]), ClientOptions::default()).unwrap();
        let error = client.metadata().expect_err("every broker is down");
        let Error::Refresh { error: core, attempts, .. } = &error else { panic!("{error}") };
        assert_eq!(core.brokers.len(), 2);
        // Every attempt of the refresh, read from the core's record of it.
        assert_eq!(attempts.len(), 2, "one pass, one attempt per broker: {attempts:#?}");
        assert!(attempts.iter().all(|a| a.error().is_some()), "{attempts:#?}");
        for broker in &core.brokers {
            let last = attempts.iter().rev().find(|a| a.broker == *broker.address).expect("an attempt per broker");
            assert_eq!(last.error().map(|e| e.kind), Some(stagger::ErrorKind::Refused), "{last:?}");
        }
        assert!(core
            .brokers
            .iter()
            .all(|b| b.last_error.as_ref().is_some_and(|e| e.kind == stagger::ErrorKind::Refused)));
        assert!(error.to_string().contains("connection refused"), "{error}");
    });
}

#[test]
fn bad_seeds_are_refused_up_front() {
    let error = Client::new(ClusterConfig::default(), &["no-port"], ClientOptions::default()).unwrap_err();
    assert!(matches!(error, Error::Config(ref e) if e.field == "seeds"), "{error}");
}

#[test]
fn a_client_can_be_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Client>();
}

#[test]
fn a_refresh_because_a_request_timed_out_on_the_kept_broker_asks_another_broker_afresh() {
    bounded_blocking(|| {
        let mock = Mock::start(3, &[("alpha", 1)]);
        let client = Client::new(config(), &mock.seeds(&[1, 2, 3]), ClientOptions::default()).unwrap();
        client.refresh().expect("refresh");
        let before = client.stats();
        let hung = before.kept.clone().expect("the winner's connection is kept");
        client.refresh_because(stagger::RefreshCause::RequestTimedOut, Some(&hung)).expect("refresh");
        let after = client.stats();
        assert_eq!(after.refreshes, 2);
        assert_ne!(after.kept.as_deref(), Some(hung.as_str()), "the suspect is tried last: {after:?}");
        assert_eq!(after.connections_reused, before.connections_reused, "its kept connection is not reused");
        assert_eq!(after.connections_opened, before.connections_opened + 1, "{after:?}");
        client.refresh_because(stagger::RefreshCause::StaleMetadata, None).expect("refresh");
        assert_eq!(client.stats().connections_reused, before.connections_reused + 1);
    });
}
