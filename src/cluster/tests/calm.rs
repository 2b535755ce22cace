//! Gentle until calm (`ClusterConfig::gentle_until_calm`): a view's refreshes run gently
//! until one ends with every first answer within the fast policy's wait and the view knows
//! what Metadata on a kept connection takes.

use super::*;

/// Three seeds tried in order, no jitter: the adaptive stagger's times read exactly.
fn adaptive() -> ClusterConfig {
    let mut refresh = RefreshConfig::adaptive();
    refresh.fanout.jitter = 0.0;
    refresh.shuffle_seeds = false;
    ClusterConfig { refresh, ..ClusterConfig::default() }
}

fn seeds() -> BrokerBook {
    BrokerBook::new(["b0:9092", "b1:9092", "b2:9092"]).unwrap()
}

/// Runs one refresh of `cause` at `at` on the broker it asks first: up at once, its first
/// answer `first_ms` later, its metadata 1 ms after that. Returns whether the refresh ran
/// gently and when its stagger would have suspected that broker (ms after `at`).
fn refresh(cluster: &mut Cluster, at: u64, cause: RefreshCause, first_ms: u64) -> (bool, u64) {
    cluster.request_refresh_because(ms(at), cause, None);
    let [(attempt, _)] = connects(&events(cluster))[..] else { panic!("one attempt") };
    cluster.handle_input(ms(at), Input::Connected { attempt, tls: true });
    let current = cluster.current().unwrap();
    let gentle = current.is_gentle();
    let (suspect_at, kind) = current.next_timer().unwrap();
    assert_eq!(kind, crate::refresh::TimerKind::Stagger);
    cluster.handle_input(ms(at + first_ms), Input::FirstFrame { attempt });
    let metadata = metadata(None, &[(0, "b0"), (1, "b1"), (2, "b2")]);
    cluster.handle_input(ms(at + first_ms + 1), Input::Response { attempt, metadata });
    assert!(events(cluster).iter().any(|e| matches!(e, ClusterEvent::Refreshed { .. })));
    (gentle, suspect_at.saturating_since(ms(at)).as_millis() as u64)
}

#[test]
fn a_view_runs_gently_until_a_refresh_meets_no_queue() {
    let mut cluster = Cluster::new(adaptive(), seeds(), ms(0)).unwrap();
    // The bootstrap knows nothing of the brokers' pace: gentle, a connected broker suspected
    // only at the ceiling (2 s). Its TLS handshake ends 300 ms after the connect, far past
    // the fast policy's 40 ms: a queue.
    assert_eq!(refresh(&mut cluster, 0, RefreshCause::Bootstrap, 300), (true, 2_000));
    // A timeout is evidence of a hung broker: fast even now, on the kept connection at
    // most the cold 40 ms. Its answer after 60 ms is another queue.
    assert_eq!(refresh(&mut cluster, 1_000, RefreshCause::RequestTimedOut, 60), (false, 40));
    // So the next plain refresh is gentle again; its answer comes within 1 ms.
    assert_eq!(refresh(&mut cluster, 2_000, RefreshCause::Requested, 1), (true, 2_000));
    // Calm: fast from now on, the kept connection suspected on the pace the calm refresh's
    // answer showed (1 ms: the kept floor, twice the 10 ms floor).
    assert_eq!(refresh(&mut cluster, 3_000, RefreshCause::Periodic, 1), (false, 20));
    assert_eq!(refresh(&mut cluster, 4_000, RefreshCause::Requested, 1), (false, 20));
    // A storm-likely cause is gentle whatever the view has seen.
    assert_eq!(refresh(&mut cluster, 5_000, RefreshCause::StaleMetadata, 1), (true, 2_000));
}

#[test]
fn a_view_told_not_to_wait_for_calm_is_fast_from_its_bootstrap() {
    let config = ClusterConfig { gentle_until_calm: false, ..adaptive() };
    let mut cluster = Cluster::new(config, seeds(), ms(0)).unwrap();
    // Twice the TLS prior (20 ms) after the connect.
    assert_eq!(refresh(&mut cluster, 0, RefreshCause::Bootstrap, 300), (false, 40));
    assert_eq!(refresh(&mut cluster, 1_000, RefreshCause::Requested, 60), (false, 40));
}

/// A refresh that failed says nothing of the brokers' pace: the next one is gentle.
#[test]
fn after_a_failed_refresh_the_next_is_gentle() {
    let mut cluster = Cluster::new(adaptive(), seeds(), ms(0)).unwrap();
    assert_eq!(refresh(&mut cluster, 0, RefreshCause::Bootstrap, 1), (true, 2_000));
    // The TLS bootstrap taught no kept connection's pace: the next refresh is gentle too.
    assert_eq!(refresh(&mut cluster, 1_000, RefreshCause::Requested, 1), (true, 2_000));
    // Calm, and a kept connection answers within 1 ms: suspected at the kept floor (20 ms).
    assert_eq!(refresh(&mut cluster, 1_500, RefreshCause::Requested, 1), (false, 20));
    // Every broker refuses, pass after pass, until the refresh gives up.
    let epoch = cluster.request_refresh(ms(2_000));
    let mut now = 2_000;
    let mut ev = Vec::new();
    while cluster.current().is_some() && now < 60_000 {
        ev = events(&mut cluster);
        for (attempt, _) in connects(&ev) {
            cluster.handle_input(ms(now), failed(attempt, ErrorKind::Refused));
        }
        if cluster.current().is_some() {
            let next = cluster.poll_timeout().map_or(now, |t| t.saturating_since(ms(0)).as_millis() as u64);
            now = next.max(now + 1);
            cluster.handle_timeout(ms(now));
        }
    }
    ev.extend(events(&mut cluster));
    let failed = ev.iter().any(|e| matches!(e, ClusterEvent::RefreshFailed { epoch: e, .. } if *e == epoch));
    assert!(failed, "{ev:?}");
    assert_eq!(refresh(&mut cluster, now + 1_000, RefreshCause::Requested, 1), (true, 2_000));
}

/// A bootstrap over TLS ends on a fresh connection, whose first answer ends the handshake:
/// it shows nothing of what Metadata on a kept connection takes while the fleet that
/// bootstrapped with this client still handshakes with the same brokers. So the refresh
/// after it is gentle too, however quick the bootstrap was; the first kept answer within
/// the fast wait makes the view calm. Over plaintext the bootstrap's own Metadata answer
/// shows that pace, and the next refresh is fast.
#[test]
fn the_refresh_after_a_tls_bootstrap_is_gentle_until_a_kept_connection_answers() {
    let mut cluster = Cluster::new(adaptive(), seeds(), ms(0)).unwrap();
    assert_eq!(refresh(&mut cluster, 0, RefreshCause::Bootstrap, 1), (true, 2_000));
    assert_eq!(refresh(&mut cluster, 1_000, RefreshCause::Periodic, 1), (true, 2_000));
    assert_eq!(refresh(&mut cluster, 2_000, RefreshCause::Periodic, 1), (false, 20));

    let mut plain = Cluster::new(adaptive(), seeds(), ms(0)).unwrap();
    plain.request_refresh_because(ms(0), RefreshCause::Bootstrap, None);
    let [(attempt, _)] = connects(&events(&mut plain))[..] else { panic!("one attempt") };
    plain.handle_input(ms(0), Input::Connected { attempt, tls: false });
    plain.handle_input(ms(1), Input::FirstFrame { attempt });
    plain
        .handle_input(ms(2), Input::Response { attempt, metadata: metadata(None, &[(0, "b0"), (1, "b1"), (2, "b2")]) });
    assert!(events(&mut plain).iter().any(|e| matches!(e, ClusterEvent::Refreshed { .. })));
    plain.request_refresh(ms(1_000));
    assert!(!plain.current().unwrap().is_gentle(), "fast after a plaintext bootstrap");
}
