//! The chaos soak for 60 seconds with fixed counts: every bound the ten-minute run reports,
//! asserted. Skips in one line without network namespaces (unless STAGGER_REQUIRE_NETNS=1)
//! or without Kafka (unless STAGGER_REQUIRE_KAFKA=1).

use std::time::Duration;

use stagger_chaos::{Action, Report, Soak};
use stagger_kafka_fixture::netns::NetCluster;

#[test]
fn clients_keep_fresh_metadata_and_flat_resources_through_a_minute_of_chaos() {
    let cluster = match NetCluster::start(3, 0) {
        Ok(Some(cluster)) => cluster,
        Ok(None) => return,
        Err(why) => {
            assert!(std::env::var_os("STAGGER_REQUIRE_NETNS").is_none(), "network namespaces required: {why}");
            eprintln!("chaos soak skipped: {why}");
            return;
        }
    };
    let soak = Soak {
        duration: Duration::from_secs(60),
        tokio_clients: 16,
        blocking_clients: 4,
        refresh_interval: Duration::from_secs(4),
        deadline: Duration::from_secs(10),
        poll: Duration::from_millis(200),
        step: Duration::from_secs(4),
        seed: 7,
    };
    let r = stagger_chaos::run(&soak, &cluster);
    eprintln!("{r:#?}");
    assert!(r.actions.iter().any(|(_, a)| !matches!(a, Action::Net(_, _))), "the chaos stopped or killed a broker");
    assert!(r.actions.iter().any(|(_, a)| matches!(a, Action::Net(n, _) if *n > 0)), "and faulted a path");
    // One broker out of reach at a time: metadata is never older than an interval plus a
    // deadline (and a poll, the resolution of the measurement).
    assert!(r.max_age <= Report::age_bound(&soak) + soak.poll, "metadata {:?} old", r.max_age);
    assert!(r.refreshes >= (soak.duration.as_secs() / soak.refresh_interval.as_secs()) * 20 / 2, "{r:?}");
    for e in &r.give_ups {
        assert!(e.contains(':'), "a give-up names every broker's error: {e}");
    }
    // Flat: the same clients hold the same connections and tasks at the end as at the start.
    assert!(r.end.client_sockets <= r.start.client_sockets + 4, "connections grew: {} -> {}", r.start, r.end);
    assert!(r.end.fds <= r.start.fds + 16, "descriptors grew: {} -> {}", r.start, r.end);
    assert!(r.end.tasks <= r.start.tasks + 4, "tasks grew: {} -> {}", r.start, r.end);
    assert!(r.end.threads <= r.start.threads + 4, "threads grew: {} -> {}", r.start, r.end);
    assert!(r.end.rss_kib <= r.start.rss_kib * 2 + 32 * 1024, "memory grew: {} -> {}", r.start, r.end);
}
