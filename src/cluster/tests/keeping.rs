//! The connections a `Cluster` keeps: the winner's, reused by the next refresh, released when
//! it no longer helps, and the spares taken from losers.

use super::*;

/// The keep/reuse/release policy lives here, not in each adapter: the winner's connection
/// is kept, the next refresh asks that broker first on it, and the counters say so.
#[test]
fn the_winners_connection_is_kept_reused_and_counted() {
    let (mut cluster, first) = discovered(config());
    let seed = broker(&cluster, "seed:9092");
    assert_eq!(cluster.kept(), Some(seed));
    let stats = cluster.stats();
    assert_eq!((stats.refreshes, stats.attempts, stats.connections_opened, stats.connections_reused), (1, 1, 0, 0));
    assert_eq!(stats.kept.as_deref(), Some("seed:9092"));
    // Only a connection that came up counts as opened (a bare Response above never said
    // Connected): this one does.
    let epoch = cluster.request_refresh(ms(10));
    let ev = events(&mut cluster);
    // Discovered brokers come before the seeds: the kept seed connection is not first, so
    // it stays kept while a discovered broker (`a`) is asked on a new connection.
    let [ClusterEvent::Connect { attempt, broker: a }] = ev[..] else { panic!("{ev:?}") };
    assert!(cluster.book().get(a).unwrap().is_discovered());
    assert_ne!(attempt, first);
    cluster.handle_input(ms(11), Input::Connected { attempt, tls: false });
    cluster.handle_input(ms(12), Input::Response { attempt, metadata: metadata(Some("c1"), &[(1, "a"), (2, "b")]) });
    let ev = events(&mut cluster);
    assert_eq!(
        ev[..3],
        [
            ClusterEvent::Release { broker: seed },
            ClusterEvent::Keep { attempt, broker: a },
            ClusterEvent::Refreshed { epoch, attempt, broker: a, stats: cluster.last_refresh().unwrap().stats() },
        ],
        "the new winner's connection replaces the seed's"
    );
    // The next refresh asks `a` first, on the kept connection.
    cluster.request_refresh(ms(20));
    let ev = events(&mut cluster);
    let [ClusterEvent::Reuse { attempt, broker }] = ev[..] else { panic!("{ev:?}") };
    assert_eq!(broker, a);
    assert!(cluster.current().unwrap().attempt(attempt).unwrap().reused_connection);
    assert_eq!(cluster.kept(), None, "the connection belongs to the attempt now");
    cluster.handle_input(ms(20), Input::Connected { attempt, tls: false });
    cluster.handle_input(ms(21), Input::Response { attempt, metadata: metadata(Some("c1"), &[(1, "a"), (2, "b")]) });
    let ev = events(&mut cluster);
    assert!(
        matches!(ev[..], [ClusterEvent::Keep { broker: k, .. }, ClusterEvent::Refreshed { .. }] if k == a),
        "{ev:?}"
    );
    let stats = cluster.stats();
    assert_eq!((stats.refreshes, stats.attempts, stats.connections_opened, stats.connections_reused), (3, 3, 1, 1));
    assert_eq!(stats.kept.as_deref(), Some(cluster.book().address(a)));
}

/// A reused connection that fails is gone: the retry of that broker, and the next refresh,
/// open new ones.
#[test]
fn a_failed_reuse_is_not_reused_again() {
    let mut c = config();
    c.refresh.retry.retries = 1;
    let (mut cluster, _) = discovered(c);
    let seed = broker(&cluster, "seed:9092");
    // Every attempt fails, in both passes; the seed's first runs on its kept connection.
    cluster.request_refresh(ms(10));
    let mut t = 10;
    let mut reuses = Vec::new();
    while cluster.current().is_some() {
        let ev = events(&mut cluster);
        if ev.is_empty() {
            // Waiting out the retry backoff.
            cluster.handle_timeout(cluster.poll_timeout().unwrap());
        }
        for ev in ev {
            match ev {
                ClusterEvent::Reuse { attempt, broker } => {
                    reuses.push(broker);
                    t += 1;
                    cluster.handle_input(ms(t), failed(attempt, ErrorKind::Closed));
                }
                ClusterEvent::Connect { attempt, .. } => {
                    t += 1;
                    cluster.handle_input(ms(t), failed(attempt, ErrorKind::Refused));
                }
                _ => {}
            }
        }
    }
    assert_eq!(reuses, [seed], "the kept connection is used once, by the seed's first attempt");
    assert_eq!(cluster.kept(), None);
    let stats = cluster.last_refresh().unwrap().stats();
    assert_eq!(stats.started, 6, "three brokers, two passes: {stats:?}");
}

/// A broker named as the trouble's source, or whose kept connection the broker closed, is
/// not asked on that connection: the first is released, the second just forgotten.
#[test]
fn a_named_or_closed_kept_connection_is_not_reused() {
    let (mut cluster, _) = discovered(config());
    let seed = broker(&cluster, "seed:9092");
    cluster.request_refresh_because(ms(10), RefreshCause::RequestTimedOut, Some(seed));
    let ev = events(&mut cluster);
    assert_eq!(ev[0], ClusterEvent::Release { broker: seed }, "{ev:?}");
    assert!(ev[1..].iter().all(|e| matches!(e, ClusterEvent::Connect { .. })), "{ev:?}");
    assert_eq!(cluster.kept(), None);

    let (mut cluster, _) = discovered(config());
    cluster.connection_closed(seed);
    assert_eq!(cluster.kept(), None);
    assert_eq!(cluster.stats().kept, None);
    cluster.request_refresh(ms(10));
    let ev = events(&mut cluster);
    assert!(ev.iter().all(|e| matches!(e, ClusterEvent::Connect { .. })), "nothing to release or reuse: {ev:?}");
}

/// A rebootstrap forgets the discovered brokers: a connection kept to one was taken by the
/// refresh that failed (a kept discovered broker is asked first), and a connection kept to a
/// seed stays, for the next refresh asks the seeds.
#[test]
fn a_rebootstrap_keeps_a_connection_kept_to_a_seed() {
    for keep_discovered in [true, false] {
        let (mut cluster, _) = discovered(config());
        let seed = broker(&cluster, "seed:9092");
        if keep_discovered {
            // `a` wins the second refresh and is kept instead of the seed.
            cluster.request_refresh(ms(10));
            let [(attempt, _)] = connects(&events(&mut cluster))[..] else { panic!("one attempt") };
            let answer = metadata(Some("c1"), &[(1, "a"), (2, "b")]);
            cluster.handle_input(ms(11), Input::Response { attempt, metadata: answer });
            events(&mut cluster);
        }
        let kept = cluster.kept().unwrap();
        assert_eq!(kept == seed, !keep_discovered);
        // The next refresh's first attempt goes to a discovered broker (on the kept
        // connection, if that is one): a fatal answer ends the refresh with every discovered
        // broker it tried failed.
        cluster.request_refresh(ms(20));
        let ev = events(&mut cluster);
        let (attempt, broker) = match ev[..] {
            [ClusterEvent::Reuse { attempt, broker }] if keep_discovered => (attempt, broker),
            [ClusterEvent::Connect { attempt, broker }] if !keep_discovered => (attempt, broker),
            _ => panic!("{ev:?}"),
        };
        assert!(cluster.book().get(broker).unwrap().is_discovered(), "{ev:?}");
        cluster.handle_input(ms(21), failed(attempt, ErrorKind::Authentication));
        let ev = events(&mut cluster);
        assert!(matches!(ev.last(), Some(ClusterEvent::Rebootstrapped)), "{ev:?}");
        assert!(!ev.iter().any(|e| matches!(e, ClusterEvent::Release { .. })), "{ev:?}");
        assert_eq!(cluster.kept(), (!keep_discovered).then_some(seed));
        assert_eq!(cluster.stats().rebootstraps, 1);
    }
}

/// A kept broker that the metadata stops listing is no longer asked: its connection goes
/// when the next refresh starts, before that refresh's first attempt.
#[test]
fn a_kept_broker_the_metadata_no_longer_lists_is_released() {
    let (mut cluster, _) = discovered(config());
    cluster.request_refresh(ms(10));
    let [(attempt, a)] = connects(&events(&mut cluster))[..] else { panic!("one attempt") };
    let other = if cluster.book().address(a) == "a:9092" { (2, "b") } else { (1, "a") };
    // The winner answers with metadata that lists only the other discovered broker.
    cluster.handle_input(ms(11), Input::Response { attempt, metadata: metadata(Some("c1"), &[other]) });
    events(&mut cluster);
    assert_eq!(cluster.kept(), Some(a));
    cluster.request_refresh(ms(20));
    let ev = events(&mut cluster);
    assert_eq!(ev[0], ClusterEvent::Release { broker: a }, "{ev:?}");
    assert!(ev[1..].iter().all(|e| matches!(e, ClusterEvent::Connect { broker, .. } if *broker != a)), "{ev:?}");
    assert_eq!(cluster.kept(), None);
}

/// A spare is taken only where it helps: between refreshes, to a broker the metadata lists
/// that has no kept connection and has not failed recently, while there is room; a kept
/// connection to a seed's name goes when a listed broker wins.
#[test]
fn spares_are_taken_only_where_they_help() {
    let (mut cluster, _) = discovered(config());
    let (seed, a, b) = (broker(&cluster, "seed:9092"), broker(&cluster, "a:9092"), broker(&cluster, "b:9092"));
    assert!(!cluster.wants_spare(seed), "a seed's name is not a broker the metadata lists");
    assert!(cluster.wants_spare(a) && cluster.wants_spare(b));
    cluster.request_refresh(ms(10));
    assert!(!cluster.wants_spare(b), "not while a refresh runs");
    let [(attempt, first)] = connects(&events(&mut cluster))[..] else { panic!("one attempt") };
    cluster.handle_input(ms(11), failed(attempt, ErrorKind::Refused));
    let [(attempt, second)] = connects(&events(&mut cluster))[..] else { panic!("the next broker") };
    let answer = metadata(Some("c1"), &[(1, "a"), (2, "b")]);
    cluster.handle_input(ms(12), Input::Response { attempt, metadata: answer });
    events(&mut cluster);
    assert_eq!(cluster.kept(), Some(second), "the seed's connection went with the new winner");
    assert!(!cluster.wants_spare(first), "it failed just now");
    assert!(!cluster.wants_spare(second), "its connection is kept already");

    let (mut cluster, _) = discovered(ClusterConfig { spare_connections: 1, ..config() });
    assert!(cluster.keep_spare(a));
    assert!(!cluster.keep_spare(b), "room for one spare only");
    assert_eq!(cluster.kept_brokers(), [seed, a]);
    assert_eq!(cluster.stats().spares_kept, 1);
    // The next refresh asks the spare's broker first, on its connection (a discovered
    // broker with a connection comes before the rest); `b` wins on a new one.
    cluster.request_refresh(ms(20));
    let ev = events(&mut cluster);
    let [ClusterEvent::Reuse { attempt, broker: reused }] = ev[..] else { panic!("{ev:?}") };
    assert_eq!(reused, a);
    assert_eq!(cluster.kept_brokers(), [seed], "the spare belongs to the attempt now");
    cluster.handle_input(ms(21), failed(attempt, ErrorKind::Closed));
    let [(attempt, next)] = connects(&events(&mut cluster))[..] else { panic!("the next broker") };
    assert_eq!(next, b);
    cluster.handle_input(ms(22), Input::Response { attempt, metadata: metadata(Some("c1"), &[(1, "a"), (2, "b")]) });
    let ev = events(&mut cluster);
    assert_eq!(ev[0], ClusterEvent::Release { broker: seed }, "a seed's name is no spare: {ev:?}");
    assert_eq!(cluster.kept_brokers(), [b]);
    assert!(ClusterConfig { spare_connections: 4, ..config() }.validate().is_err());
}

/// A cold start: the client's first choice connected but stayed silent (its handshake queued
/// behind other clients'), a hedge won elsewhere. Drained to its answer and kept, the first
/// choice leads the next refresh, ahead of the winner's connection, and its failure record
/// is cleared. (A spare that started after the winner goes behind it:
/// `spares_are_taken_only_where_they_help`.)
#[test]
fn a_bootstraps_first_choice_kept_late_leads_the_next_refresh() {
    let mut refresh = RefreshConfig::sequential();
    refresh.fanout.stagger = Stagger::Fixed(Duration::from_millis(40));
    refresh.fanout.max_in_flight = 2;
    refresh.attempt_timeout = Duration::from_secs(10);
    refresh.shuffle_seeds = true;
    // A refresh seed whose shuffle tries `b` first: then the book's order (`a` first) and the
    // client's choice differ, and only the lead makes the next refresh ask `b`.
    let (mut cluster, first, home) = (0..64)
        .find_map(|seed| {
            let config = ClusterConfig { refresh: refresh.with_seed(seed), ..ClusterConfig::default() };
            let mut cluster = Cluster::new(config, BrokerBook::new(["a:9092", "b:9092"]).unwrap(), ms(0)).unwrap();
            cluster.request_refresh(ms(0));
            let [(first, home)] = connects(&events(&mut cluster))[..] else { panic!("one attempt") };
            (home == broker(&cluster, "b:9092")).then_some((cluster, first, home))
        })
        .expect("some seed tries b first");
    cluster.handle_input(ms(1), Input::Connected { attempt: first, tls: true });
    cluster.handle_timeout(ms(40));
    let [(hedge, other)] = connects(&events(&mut cluster))[..] else { panic!("the hedge") };
    cluster.handle_input(ms(41), Input::Connected { attempt: hedge, tls: true });
    let answer = metadata(Some("c1"), &[(1, "a"), (2, "b")]);
    cluster.handle_input(ms(60), Input::Response { attempt: hedge, metadata: answer });
    let ev = events(&mut cluster);
    assert!(
        ev.contains(&ClusterEvent::Cancel { attempt: first, reason: crate::refresh::CancelReason::Lost }),
        "{ev:?}"
    );
    assert_eq!(cluster.kept(), Some(other));
    assert!(cluster.book().recently_failed(home, ms(60)), "slower, though it started first");
    assert!(!cluster.wants_spare(home), "not as a plain spare: it failed just now");
    // The host drains it (one place for it beside the winner's), owing more than Metadata.
    let lost = crate::refresh::CancelReason::Lost;
    assert_eq!(cluster.drain_on_cancel(first, lost, false, 0), Some(Drain::FirstChoice));
    assert_eq!(cluster.drain_on_cancel(first, lost, false, 1), None, "spare_connections (1) drain already");
    assert_eq!(cluster.drain_on_cancel(first, crate::refresh::CancelReason::TimedOut, false, 0), None, "not outrun");
    assert!(!cluster.keep_first_choice(other), "kept already");
    assert!(cluster.keep_drained(home, Drain::FirstChoice));
    assert_eq!(cluster.kept_brokers(), [home, other], "the first choice leads");
    assert!(!cluster.book().recently_failed(home, ms(61)), "it answered");
    cluster.request_refresh(ms(1_000));
    let ev = events(&mut cluster);
    let [ClusterEvent::Reuse { attempt, broker }] = ev[..] else { panic!("{ev:?}") };
    assert_eq!(broker, home);
    // It stays home: when another broker wins (here, past a home that stopped answering), the
    // home still leads the refresh after.
    cluster.handle_input(ms(1_001), failed(attempt, ErrorKind::Closed));
    let [(attempt, _)] = connects(&events(&mut cluster))[..] else { panic!("the next broker") };
    let (lost, overtaken) = (crate::refresh::CancelReason::Lost, crate::refresh::CancelReason::Overtaken);
    assert_eq!(cluster.drain_on_cancel(attempt, overtaken, false, 0), None, "a later refresh has no first choice");
    assert_eq!(cluster.drain_on_cancel(attempt, lost, true, 0), None, "no spare while a refresh runs");
    let answer = metadata(Some("c1"), &[(1, "a"), (2, "b")]);
    cluster.handle_input(ms(1_002), Input::Response { attempt, metadata: answer });
    events(&mut cluster);
    assert!(cluster.keep_first_choice(home), "kept again once it answers");
    assert_eq!(cluster.kept(), Some(home));
    cluster.request_refresh(ms(2_000));
    let ev = events(&mut cluster);
    assert!(matches!(ev[..], [ClusterEvent::Reuse { broker, .. }] if broker == home), "{ev:?}");
}

/// A first choice kept late takes the place of a plain spare when there is no room, never of
/// the winner's connection; with `spare_connections` 0 it is not kept.
#[test]
fn a_first_choice_displaces_a_plain_spare_not_the_winner() {
    let (mut cluster, _) = discovered(ClusterConfig { spare_connections: 1, ..config() });
    let (seed, a, b) = (broker(&cluster, "seed:9092"), broker(&cluster, "a:9092"), broker(&cluster, "b:9092"));
    assert!(cluster.keep_spare(a));
    assert_eq!(cluster.kept_brokers(), [seed, a]);
    assert!(cluster.keep_first_choice(b));
    let ev = events(&mut cluster);
    assert_eq!(ev, [ClusterEvent::Release { broker: a }], "the spare goes");
    assert_eq!(cluster.kept_brokers(), [b, seed], "the winner's stays");
    assert_eq!(cluster.kept(), Some(b));

    let (mut cluster, _) = discovered(ClusterConfig { spare_connections: 0, ..config() });
    assert!(!cluster.keep_first_choice(broker(&cluster, "b:9092")), "no room for any spare");
}

/// A hedge past a silent kept connection goes to a spare first, and a tick that would start
/// two waits on the spare's answer before it opens a new connection: an established,
/// authenticated broker answers in a kept connection's time, and over TLS a new connection
/// costs the broker a handshake (and a SASL exchange) it would pay for nothing.
#[test]
fn a_tick_that_reuses_a_spare_opens_no_connection_beside_it() {
    // A cold start's slow handshake (30 ms) is what the cluster learns of this network:
    // ticks spread only where a handshake fits twice in their share.
    let (mut cluster, answer) = slow_cold_start();
    let (a, b) = (broker(&cluster, "a:9092"), broker(&cluster, "b:9092"));
    assert!(cluster.keep_spare(b));
    assert_eq!(cluster.kept_brokers(), [a, b]);

    // `a` went silent: its kept connection is suspected, the tick reuses the spare on `b`.
    let opened = cluster.stats().connections_opened;
    cluster.request_refresh(ms(1_000));
    let [(silent, lead)] = connects(&events(&mut cluster))[..] else { panic!("the kept connection") };
    assert_eq!(lead, a);
    cluster.handle_input(ms(1_000), Input::Connected { attempt: silent, tls: false });
    let tick = cluster.poll_timeout().expect("the stagger timer");
    cluster.handle_timeout(tick);
    let ev = events(&mut cluster);
    let [ClusterEvent::Reuse { attempt: spare, broker }] = ev[..] else { panic!("only the spare: {ev:?}") };
    assert_eq!(broker, b);
    // The spare answers before the tick's partner is due: no new connection at all.
    cluster.handle_input(tick, Input::Connected { attempt: spare, tls: false });
    cluster.handle_input(tick.saturating_add(Duration::from_millis(1)), Input::FirstFrame { attempt: spare });
    cluster.handle_input(
        tick.saturating_add(Duration::from_millis(2)),
        Input::Response { attempt: spare, metadata: answer },
    );
    let ev = events(&mut cluster);
    assert!(!ev.iter().any(|e| matches!(e, ClusterEvent::Connect { .. })), "{ev:?}");
    assert!(ev.iter().any(|e| matches!(e, ClusterEvent::Refreshed { .. })), "{ev:?}");
    assert_eq!(cluster.stats().connections_opened, opened);
}
