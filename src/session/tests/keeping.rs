//! Connections the session keeps between refreshes: the winner's, reused with no `Dial`, and
//! spares drained from losers that owed only their Metadata answer.

use super::*;

/// The second refresh of `config`'s session, asked `because`, on the connection the first
/// kept: what the broker was asked for, in order.
fn second_refresh_on_the_kept_connection(config: SessionConfig, because: RefreshCause) -> Vec<ApiKey> {
    let mut s = session(config);
    let mut broker = Broker::default();
    let (conn, _) = healthy_refresh(&mut s, &mut broker);
    assert_eq!(s.kept_connection(), Some(conn));
    let epoch = s.request_refresh_because(ms(10), because, None);
    let sends = actions(&mut s);
    assert!(dials(&sends).is_empty(), "{sends:?}");
    assert!(matches!(&sends[..], [Action::Send { conn: c, .. }] if *c == conn), "one request on the kept conn");
    let all = serve(&mut s, ms(11), conn, &mut broker, sends);
    assert_eq!(refreshed(&all), Some(epoch));
    assert_eq!((s.stats().connections_opened, s.stats().connections_reused), (1, 1));
    assert_eq!(s.kept_connection(), Some(conn), "kept again");
    broker.seen
}

/// `config()` with the adaptive stagger, fast from its bootstrap.
fn adaptive_config() -> SessionConfig {
    let mut config = config();
    config.cluster.refresh.fanout.stagger = Stagger::Adaptive(Adaptive::default());
    config.cluster.gentle_until_calm = false;
    config
}

/// The next refresh reuses the kept connection with no dial and asks it for Metadata alone,
/// at the version its broker agreed to on it (one request, one visit to the broker, as a
/// client that keeps its connections asks), whatever the policy: the fast adaptive one, a
/// gentle one, a fixed stagger.
#[test]
fn the_next_refresh_asks_the_kept_connection_for_metadata_alone() {
    for (config, cause) in [
        (adaptive_config(), RefreshCause::Requested),
        (adaptive_config(), RefreshCause::StaleMetadata),
        (config(), RefreshCause::Requested),
    ] {
        let seen = second_refresh_on_the_kept_connection(config, cause);
        assert_eq!(seen, [ApiKey::ApiVersions, ApiKey::Metadata, ApiKey::Metadata], "{cause:?}");
    }
}

#[test]
fn a_reset_kept_connection_makes_the_next_refresh_a_connection_lost_one() {
    let mut s = session(config());
    let (conn, _) = healthy_refresh(&mut s, &mut Broker::default());
    s.handle_event(ms(5), Event::Closed { conn, how: CloseKind::Reset });
    assert_eq!((actions(&mut s), s.kept_connection()), (vec![], None), "the host closed it: no Close");
    s.request_refresh(ms(10));
    assert_eq!(dials(&actions(&mut s)).len(), 1, "a new connection");
    assert_eq!(s.cluster().current().unwrap().cause(), RefreshCause::ConnectionLost);
}

/// Sends of `actions` on `conn`, in order.
fn sends_on(actions: &[Action], conn: ConnId) -> Vec<Bytes> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send { conn: c, bytes } if *c == conn => Some(bytes.clone()),
            _ => None,
        })
        .collect()
}

/// A race that `b1` wins after `b2` was hedged in and had sent its Metadata request: returns
/// the session, both conns, `b2`'s unanswered Metadata request and the actions of the win.
fn b1_wins_while_b2_owes_its_metadata(config: SessionConfig) -> (Session, ConnId, ConnId, Bytes, Vec<Action>) {
    let mut s = session(config);
    let (mut one, mut two) = (Broker::default(), Broker::default());
    s.request_refresh(ms(0));
    let [(c1, _)] = dials(&actions(&mut s))[..] else { panic!() };
    s.handle_event(ms(1), Event::Connected { conn: c1 });
    let [api_versions] = &sends_on(&actions(&mut s), c1)[..] else { panic!() };
    s.handle_event(ms(2), Event::Received { conn: c1, bytes: &one.answer(api_versions) });
    let [metadata_1] = &sends_on(&actions(&mut s), c1)[..] else { panic!("b1's Metadata request") };
    // b1 is slow to answer Metadata: the stagger hedges to b2, which gets as far as b1.
    s.handle_timeout(ms(500));
    let [(c2, _)] = dials(&actions(&mut s))[..] else { panic!("the hedge") };
    s.handle_event(ms(501), Event::Connected { conn: c2 });
    let [api_versions] = &sends_on(&actions(&mut s), c2)[..] else { panic!() };
    s.handle_event(ms(502), Event::Received { conn: c2, bytes: &two.answer(api_versions) });
    let [metadata_2] = &sends_on(&actions(&mut s), c2)[..] else { panic!("b2's Metadata request") };
    s.handle_event(ms(600), Event::Received { conn: c1, bytes: &one.answer(metadata_1) });
    let won = actions(&mut s);
    assert_eq!(refreshed(&won), Some(1), "{won:?}");
    (s, c1, c2, metadata_2.clone(), won)
}

/// Point of a spare: a loser that owed only its Metadata answer (authenticated, not slow: it
/// started after the winner) is read to the end and kept, and the next refresh's hedge runs
/// on it with no `Dial`, so no broker accepts a new connection for it.
#[test]
fn a_loser_owing_its_metadata_is_kept_as_a_spare_and_the_next_hedge_runs_on_it() {
    let (mut s, c1, c2, metadata_2, won) = b1_wins_while_b2_owes_its_metadata(config());
    assert!(closes(&won).is_empty(), "b2 drains instead of closing: {won:?}");
    assert_eq!(s.kept_connection(), Some(c1));
    assert_eq!(s.kept_connections().count(), 1, "b2 is not kept before its answer is read");
    let until = ms(10_600);
    assert_eq!(s.poll_timeout(), Some(until.min(s.cluster().poll_timeout().unwrap())));
    // b2's answer comes: the connection is now a spare.
    s.handle_event(ms(610), Event::Received { conn: c2, bytes: &Broker::default().answer(&metadata_2) });
    assert_eq!(actions(&mut s), [], "nothing to do: the answer is read, not reported");
    let mut kept: Vec<ConnId> = s.kept_connections().collect();
    kept.sort_by_key(|c| c.0);
    assert_eq!(kept, [c1, c2]);
    assert_eq!(s.stats().spares_kept, 1);
    assert_eq!(s.cluster().kept_brokers().len(), 2);

    // The next refresh: b1, first, hangs on its kept connection; the hedge reuses b2's.
    let epoch = s.request_refresh(ms(1_000));
    let first = actions(&mut s);
    assert!(dials(&first).is_empty() && sends_on(&first, c1).len() == 1, "b1 first, kept: {first:?}");
    s.handle_timeout(ms(1_500));
    let hedge = actions(&mut s);
    assert!(dials(&hedge).is_empty(), "the hedge opens no connection: {hedge:?}");
    let sends = sends_on(&hedge, c2);
    assert_eq!(sends.len(), 1, "Metadata alone on the spare: {hedge:?}");
    let mut two = Broker::default();
    let all = serve(&mut s, ms(1_501), c2, &mut two, hedge);
    assert_eq!(refreshed(&all), Some(epoch), "{all:?}");
    assert_eq!(two.seen, [ApiKey::Metadata], "no SASL, handshake or ApiVersions to pay again");
    // b1 is home (its bootstrap's first choice won): its connection drains rather than
    // closing, and, silent to the end of the drain's time, is then closed.
    assert!(closes(&all).is_empty(), "b1, home, drains: {all:?}");
    let stats = s.stats();
    assert_eq!((stats.connections_opened, stats.connections_reused), (2, 2));
    assert_eq!(s.kept_connection(), Some(c2));
    s.handle_timeout(ms(11_500));
    assert_eq!(actions(&mut s), []);
    s.handle_timeout(ms(11_501));
    assert_eq!(actions(&mut s), [Action::Close { conn: c1 }], "b1 never answered");
    assert_eq!(s.kept_connection(), Some(c2));
}

/// A home (the first winner) outrun in a later refresh (its broker busy, as every broker is
/// while a fleet's handshakes queue) drains, and its late answer brings the client back: the
/// next refresh asks it first again, so the client does not drift to whichever broker
/// answered fastest.
#[test]
fn a_home_outrun_later_answers_and_leads_again() {
    let (mut s, c1, c2, metadata_2, _) = b1_wins_while_b2_owes_its_metadata(config());
    s.handle_event(ms(610), Event::Received { conn: c2, bytes: &Broker::default().answer(&metadata_2) });
    assert_eq!(s.kept_connections().count(), 2, "b1 home, b2 a spare");
    // b1 is slow; the hedge on b2's spare wins.
    let epoch = s.request_refresh(ms(1_000));
    let on_home = actions(&mut s);
    s.handle_timeout(ms(1_500));
    let hedge = actions(&mut s);
    let all = serve(&mut s, ms(1_501), c2, &mut Broker::default(), hedge);
    assert_eq!(refreshed(&all), Some(epoch));
    assert!(closes(&all).is_empty(), "b1 drains: {all:?}");
    assert_eq!(s.kept_connection(), Some(c2), "b2 leads while b1 drains");
    // b1 answers, late: kept, and home again.
    let late = serve(&mut s, ms(1_800), c1, &mut Broker::default(), on_home);
    assert!(closes(&late).is_empty() && refreshed(&late).is_none(), "{late:?}");
    assert_eq!(s.kept_connection(), Some(c1));
    s.request_refresh(ms(3_000));
    let next = actions(&mut s);
    assert!(dials(&next).is_empty() && sends_on(&next, c1).len() == 1, "home first: {next:?}");

    // Whatever attempt won first is home until a first choice kept late takes its place:
    // here the first choice was refused, so the next broker is home and drains when outrun.
    let mut s = session(config());
    s.request_refresh(ms(0));
    let [(first, _)] = dials(&actions(&mut s))[..] else { panic!() };
    s.handle_event(ms(1), Event::IoError { conn: first, error: AttemptError::new(ErrorKind::Refused) });
    let [(kept, _)] = dials(&actions(&mut s))[..] else { panic!("the next broker") };
    let start = actions(&mut s);
    s.handle_event(ms(2), Event::Connected { conn: kept });
    let mut start = start;
    start.extend(actions(&mut s));
    serve(&mut s, ms(3), kept, &mut Broker::default(), start);
    assert_eq!(s.kept_connection(), Some(kept));
    s.request_refresh(ms(1_000));
    let _silent = actions(&mut s);
    s.handle_timeout(ms(1_500));
    let hedge = actions(&mut s);
    let [(other, _)] = dials(&hedge)[..] else { panic!("the hedge: {hedge:?}") };
    s.handle_event(ms(1_501), Event::Connected { conn: other });
    let sends = actions(&mut s);
    let won = serve(&mut s, ms(1_502), other, &mut Broker::default(), sends);
    assert!(!closes(&won).contains(&kept), "home drains: {won:?}");
    assert_eq!(s.kept_connection(), Some(other));
}

/// A draining loser whose answer does not come within `attempt_timeout` is closed; a one-shot
/// session and `spare_connections = 0` drain nothing.
#[test]
fn a_drain_is_bounded_and_spares_can_be_turned_off() {
    let (mut s, _, c2, _, _) = b1_wins_while_b2_owes_its_metadata(config());
    let until = ms(10_600);
    s.handle_timeout(ms(10_599));
    assert_eq!(actions(&mut s), []);
    s.handle_timeout(until);
    assert_eq!(actions(&mut s), [Action::Close { conn: c2 }]);
    assert_eq!((s.kept_connections().count(), s.stats().spares_kept), (1, 0));
    s.handle_event(until, Event::Received { conn: c2, bytes: b"late" });
    assert_eq!(s.ignored_events(), 1, "a closed drain's bytes are ignored");

    let (_, _, c2, _, won) = b1_wins_while_b2_owes_its_metadata(SessionConfig { one_shot: true, ..config() });
    assert!(closes(&won).contains(&c2), "one shot: {won:?}");
    let mut none = config();
    none.cluster.spare_connections = 0;
    let (s, _, c2, _, won) = b1_wins_while_b2_owes_its_metadata(none);
    assert!(closes(&won).contains(&c2), "no spares: {won:?}");
    assert_eq!(s.kept_connections().count(), 1);
}

/// A cold start's first choice whose broker accepted the connection but stayed silent (its
/// handshake queued behind other clients') is not closed when a hedge wins elsewhere: it
/// finishes its exchange, is kept, and leads the next refresh, so the client stays on the
/// broker it chose. A later refresh's silent loser is closed as before.
#[test]
fn a_cold_starts_silent_first_choice_finishes_and_leads_the_next_refresh() {
    let mut s = session(config());
    s.request_refresh(ms(0));
    let [(home, _)] = dials(&actions(&mut s))[..] else { panic!() };
    s.handle_event(ms(1), Event::Connected { conn: home });
    let [api_versions] = &sends_on(&actions(&mut s), home)[..] else { panic!() };
    s.handle_timeout(ms(500));
    let [(other, _)] = dials(&actions(&mut s))[..] else { panic!("the hedge") };
    s.handle_event(ms(501), Event::Connected { conn: other });
    let sends = actions(&mut s);
    let won = serve(&mut s, ms(502), other, &mut Broker::default(), sends);
    assert_eq!(refreshed(&won), Some(1));
    assert!(closes(&won).is_empty(), "the first choice drains: {won:?}");
    // Its broker gets to it: ApiVersions, then the Metadata request it owes.
    let mut queued = Broker::default();
    s.handle_event(ms(900), Event::Received { conn: home, bytes: &queued.answer(api_versions) });
    let rest = actions(&mut s);
    assert_eq!(serve(&mut s, ms(901), home, &mut queued, rest).len(), 1, "only the Metadata request");
    assert_eq!(queued.seen, [ApiKey::ApiVersions, ApiKey::Metadata]);
    assert_eq!(s.stats().spares_kept, 1);
    // The next refresh runs on the first choice's connection.
    s.request_refresh(ms(1_000));
    let next = actions(&mut s);
    assert!(dials(&next).is_empty() && sends_on(&next, home).len() == 1, "{next:?}");

    // Not a cold start: a silent loser is closed when the hedge wins.
    let mut s = session(config());
    let (kept, _) = healthy_refresh(&mut s, &mut Broker::default());
    s.handle_event(ms(5), Event::Closed { conn: kept, how: CloseKind::Clean });
    s.request_refresh(ms(10));
    let [(silent, _)] = dials(&actions(&mut s))[..] else { panic!() };
    s.handle_event(ms(11), Event::Connected { conn: silent });
    let _api_versions = actions(&mut s);
    s.handle_timeout(ms(510));
    let [(other, _)] = dials(&actions(&mut s))[..] else { panic!("the hedge") };
    s.handle_event(ms(511), Event::Connected { conn: other });
    let sends = actions(&mut s);
    let won = serve(&mut s, ms(512), other, &mut Broker::default(), sends);
    assert_eq!(refreshed(&won), Some(2));
    assert_eq!(closes(&won), [silent], "{won:?}");
}
