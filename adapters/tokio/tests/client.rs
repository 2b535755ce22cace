//! The long-lived client: single-flight, cache, kept connection, periodic refresh, close.

use std::sync::Arc;
use std::time::Duration;

use stagger::{Adaptive, ClusterConfig, Growth, Stagger};
use stagger_test_faults::bounded;
use stagger_test_faults::fake::{FakeBroker, Script};
use stagger_test_faults::mock::Mock;
use stagger_test_faults::sockets::sockets_to;
use stagger_tokio::{Client, ClientOptions, Error};

/// Default policy, but a silent connected broker is suspected after 100 ms rather than
/// a few handshake times, so a kept connection surely answers before any hedge even on a
/// busy machine; and one broker per stagger tick and the seeds in the order listed, so which
/// broker follows the hung one is known.
fn config() -> ClusterConfig {
    let mut config = ClusterConfig::default();
    config.refresh.fanout.stagger =
        Stagger::Adaptive(Adaptive { floor: Duration::from_millis(100), ..Adaptive::default() });
    config.refresh.fanout.growth = Growth::Linear(1);
    config.refresh.shuffle_seeds = false;
    config
}

#[tokio::test]
async fn concurrent_refreshes_share_one_refresh_then_the_cache_and_the_kept_connection_serve() {
    bounded(async {
        let mock = Mock::start(5, &[("alpha", 3)]);
        mock.hang(1);
        let client = Client::new(config(), &mock.seeds(&[1, 2, 3, 4, 5]), ClientOptions::default()).unwrap();
        assert!(client.cached().is_none());
        assert_eq!(client.stats().refreshes, 0, "nothing happens before it is asked");

        // Two concurrent callers: one refresh in the core, one answer for both.
        let (a, b) = tokio::join!(client.refresh(), client.refresh());
        let (a, b) = (a.expect("refresh"), b.expect("refresh"));
        assert!(Arc::ptr_eq(&a, &b), "both callers got the same metadata");
        let stats = client.stats();
        assert_eq!(stats.refreshes, 1, "single flight: {stats:?}");
        assert_eq!(a.brokers.len(), 5);
        // The hung broker 1 was tried first and was overtaken by broker 2, whose connection
        // is kept.
        assert_eq!(stats.kept.as_deref(), Some(mock.address(2).as_str()), "{stats:?}");
        // The last refresh's attempts say why: broker 1 stayed silent, broker 2 won.
        let attempts = client.last_refresh();
        let outcomes: Vec<_> = attempts.iter().map(|a| (a.broker.as_str(), a.outcome.name())).collect();
        assert_eq!(outcomes[0], (mock.address(1).as_str(), "cancelled"), "{attempts:#?}");
        assert!(outcomes.contains(&(mock.address(2).as_str(), "won")), "{attempts:#?}");

        // Fresh metadata comes from the cache: no new refresh.
        let cached = client.metadata().await.expect("metadata");
        assert!(Arc::ptr_eq(&a, &cached));
        assert_eq!(client.stats().refreshes, 1);

        // The next refresh starts with the kept connection (the core prefers connected
        // brokers) and wins on it without opening a new one.
        let again = client.refresh().await.expect("refresh");
        let after = client.stats();
        assert_eq!(after.refreshes, 2);
        assert_eq!(after.connections_reused, stats.connections_reused + 1, "{after:?}");
        assert_eq!(after.connections_opened, stats.connections_opened, "{after:?}");
        assert_eq!(after.kept, stats.kept);
        assert_eq!(again.brokers.len(), 5);

        // The kept connection is open, and so is the hung broker 1's: the client's first
        // choice at a cold start finishes its exchange (its handshake may only be queued)
        // until `attempt_timeout`. Closing stops the task and closes every socket before it
        // returns.
        assert_eq!(sockets_to(&mock.ports()), 2, "the kept connection and the draining first choice");
        client.close().await;
        assert_eq!(sockets_to(&mock.ports()), 0);
    })
    .await;
}

/// A broker that answers ApiVersions at once but takes its time over Metadata is alive and
/// busy. The client reports its first answer to the core — on a fresh connection and on
/// the kept one alike — so the core waits for it patiently instead of hedging to another
/// broker: each refresh is one attempt, the idle broker is never contacted, and the busy
/// broker's connection is kept and reused.
///
/// Were the answer not reported, the busy broker would look hung: it would be suspected
/// `floor` after its handshake (300 ms, before its 600 ms Metadata answer) and the idle
/// broker asked, and win.
#[tokio::test]
async fn a_busy_broker_that_answered_gets_patience_on_fresh_and_kept_connections() {
    bounded(async {
        let busy = FakeBroker::start(Script::SlowMetadata(Duration::from_millis(600))).await;
        let idle = FakeBroker::start(Script::Healthy).await;
        // Silent brokers are suspected 300 ms after their handshake; answering ones only at
        // the ceiling (30 s), whatever an answer normally takes.
        let config = stagger_test_faults::patient_cluster_config();
        let seeds = [busy.address.clone(), idle.address.clone()];
        let client = Client::new(config, &seeds, ClientOptions::default()).unwrap();

        // A fresh connection: one attempt, to the busy broker, which wins and is kept.
        client.refresh().await.expect("refresh");
        let first = client.stats();
        assert_eq!((first.refreshes, first.attempts, first.connections_opened), (1, 1, 1), "{first:?}");
        assert_eq!(first.kept.as_deref(), Some(busy.address.as_str()), "{first:?}");

        // The kept connection: one attempt on it, no new connection, no hedge.
        client.refresh().await.expect("refresh");
        let second = client.stats();
        assert_eq!((second.refreshes, second.attempts), (2, 2), "{second:?}");
        assert_eq!((second.connections_opened, second.connections_reused), (1, 1), "{second:?}");
        assert_eq!(second.kept, first.kept, "{second:?}");
        assert_eq!((busy.accepted(), idle.accepted()), (1, 0), "the idle broker was never contacted");
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn the_background_task_refreshes_periodically_and_drop_closes_everything() {
    bounded(async {
        let mock = Mock::start(3, &[("alpha", 1)]);
        let mut config = config();
        config.refresh_interval = Duration::from_millis(200);
        let client = Client::new(config, &mock.seeds(&[1, 2, 3]), ClientOptions::default()).unwrap();
        // Nobody asks: the core's periodic timer starts refreshes on its own.
        while client.stats().refreshes < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(client.cached().is_some());
        drop(client);
        // The task is aborted on drop; its sockets close as soon as the runtime drops it.
        while sockets_to(&mock.ports()) > 0 {
            tokio::task::yield_now().await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_client_with_only_dead_brokers_reports_every_attempt() {
    bounded(async {
        let mock = Mock::start(2, &[("alpha", 1)]);
        mock.down(1);
        mock.down(2);
        let mut config = config();
        config.refresh.retry.retries = 0;
        let client = Client::new(config, &mock.seeds(&[1, 2]), ClientOptions::default()).unwrap();
        let error = client.metadata().await.expect_err("every broker is down");
        let Error::Refresh { error: core, attempts, .. } = &error else { panic!("{error}") };
        assert_eq!(core.brokers.len(), 2);
        assert_eq!(attempts.len(), 2);
        assert!(error.to_string().contains("connection refused"), "{error}");
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn bad_seeds_are_refused_up_front() {
    let error = Client::new(ClusterConfig::default(), &["no-port"], ClientOptions::default()).unwrap_err();
    assert!(matches!(error, Error::Config(ref e) if e.field == "seeds"), "{error}");
    let error = stagger_tokio::refresh(&stagger::RefreshConfig::default(), &Vec::<String>::new()).await.unwrap_err();
    assert!(matches!(error, Error::Config(_)), "{error}");
}

#[tokio::test]
async fn a_refresh_because_a_request_timed_out_on_the_kept_broker_asks_another_broker_afresh() {
    bounded(async {
        let mock = Mock::start(3, &[("alpha", 1)]);
        let client = Client::new(config(), &mock.seeds(&[1, 2, 3]), ClientOptions::default()).unwrap();
        client.refresh().await.expect("refresh");
        let before = client.stats();
        let hung = before.kept.clone().expect("the winner's connection is kept");
        client.refresh_because(stagger::RefreshCause::RequestTimedOut, Some(&hung)).await.expect("refresh");
        let after = client.stats();
        assert_eq!(after.refreshes, 2);
        assert_ne!(after.kept.as_deref(), Some(hung.as_str()), "the suspect is tried last: {after:?}");
        assert_eq!(after.connections_reused, before.connections_reused, "its kept connection is not reused");
        assert_eq!(after.connections_opened, before.connections_opened + 1, "{after:?}");
        // A plain refresh after it prefers the new kept connection again.
        client.refresh_because(stagger::RefreshCause::StaleMetadata, None).await.expect("refresh");
        assert_eq!(client.stats().connections_reused, before.connections_reused + 1);
        client.close().await;
    })
    .await;
}
