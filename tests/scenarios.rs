//! Table-driven scenarios: given inputs at times, expect these commands.
//!
//! Each test drives a `Refresh` (or a `Cluster`) by hand in virtual time and asserts the
//! exact commands and when they came out. Jitter is 0 unless the test is about jitter.
//! Short ones are written as [`table`]s: one row per call, with the commands it must emit.

use std::time::Duration;

use stagger::{
    AttemptError, AttemptId, BrokerBook, BrokerIndex, BrokerMetadata, CancelReason, Cluster, ClusterConfig,
    ClusterEvent, Command, ErrorKind, GiveUpReason, Growth, Input, Instant, Metadata, Refresh, RefreshConfig, Stagger,
};

#[path = "support/table.rs"]
mod table;
use table::{Call::*, Cmd::*};

fn ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

fn us(n: u64) -> Instant {
    Instant::from_micros(n)
}

fn book(n: usize) -> BrokerBook {
    BrokerBook::new(stagger::test_util::numbered_seeds(n)).unwrap()
}

fn metadata() -> Metadata {
    Metadata {
        cluster_id: Some("sim".into()),
        controller_id: 0,
        brokers: vec![BrokerMetadata { node_id: 0, host: "broker-0".into(), port: 9092, rack: None }],
        ..Metadata::default()
    }
}

/// No jitter, and the seeds tried in the order listed: the tables name brokers by position.
fn no_jitter(mut c: RefreshConfig) -> RefreshConfig {
    c.fanout.jitter = 0.0;
    c.shuffle_seeds = false;
    c
}

/// A fixed stagger, one attempt per tick (the seed discussion's policy).
fn fixed(stagger_ms: u64) -> RefreshConfig {
    let mut c = no_jitter(RefreshConfig::default());
    c.fanout.stagger = Stagger::Fixed(Duration::from_millis(stagger_ms));
    c.fanout.growth = Growth::Linear(1);
    c
}

/// Drives a refresh and keeps every command with the time of the call that produced it.
struct Run {
    refresh: Refresh,
    log: Vec<(Instant, Command)>,
}

impl Run {
    fn new(config: RefreshConfig, brokers: usize) -> Self {
        let refresh = Refresh::new(&config, &book(brokers), Instant::ZERO).unwrap();
        let mut run = Run { refresh, log: Vec::new() };
        run.drain(Instant::ZERO);
        run
    }

    fn drain(&mut self, now: Instant) -> Vec<Command> {
        let mut out = Vec::new();
        while let Some(c) = self.refresh.poll_command() {
            self.log.push((now, c.clone()));
            out.push(c);
        }
        out
    }

    fn input(&mut self, now: Instant, input: Input) -> Vec<Command> {
        self.refresh.handle_input(now, input);
        self.drain(now)
    }

    /// Advances to `until`, firing each timer at its own time; returns what came out.
    fn advance(&mut self, until: Instant) -> Vec<(Instant, Command)> {
        let mut out = Vec::new();
        while let Some(at) = self.refresh.poll_timeout() {
            if at > until {
                break;
            }
            self.refresh.handle_timeout(at);
            out.extend(self.drain(at).into_iter().map(|c| (at, c)));
        }
        out
    }

    /// (time, attempt, broker) of every Connect so far.
    fn connects(&self) -> Vec<(Instant, AttemptId, BrokerIndex)> {
        self.log
            .iter()
            .filter_map(|(t, c)| match c {
                Command::Connect { attempt, broker } => Some((*t, *attempt, *broker)),
                _ => None,
            })
            .collect()
    }

    fn attempt(&self, k: usize) -> AttemptId {
        self.connects()[k].1
    }

    fn terminals(&self) -> usize {
        self.log.iter().filter(|(_, c)| c.is_terminal()).count()
    }
}

fn failed(attempt: AttemptId, kind: ErrorKind) -> Input {
    Input::Failed { attempt, error: AttemptError::new(kind) }
}

fn response(attempt: AttemptId) -> Input {
    Input::Response { attempt, metadata: metadata() }
}

#[test]
fn all_healthy_means_exactly_one_attempt() {
    let mut run = Run::new(RefreshConfig::default(), 5);
    assert_eq!(run.connects().len(), 1);
    let a0 = run.attempt(0);
    run.input(us(300), Input::Connected { attempt: a0, tls: false });
    // A live broker answers ApiVersions one round trip later; from then on it is answering,
    // and the adaptive stagger is patient with it.
    run.input(us(600), Input::FirstFrame { attempt: a0 });
    let out = run.input(ms(2), response(a0));
    assert!(matches!(&out[..], [Command::Done { attempt, .. }] if *attempt == a0), "{out:?}");
    assert_eq!(run.connects().len(), 1);
    assert!(run.refresh.poll_timeout().is_none());
    assert_eq!(run.terminals(), 1);
}

#[test]
fn hung_first_broker_is_hedged_at_the_stagger_delay_and_cancelled_when_the_second_wins() {
    let mut r = Refresh::new(&fixed(500), &book(5), Instant::ZERO).unwrap();
    let rows = [
        (ms(0), Start, vec![Connect(0, 0)]),
        (ms(1), Connected(0), vec![]),
        (ms(499), Timeout, vec![]), // nothing before the stagger delay
        (ms(500), Timeout, vec![Connect(1, 1)]),
        (ms(505), Response(1, metadata()), vec![Cancel(0, CancelReason::Lost), Done(1, 1)]),
    ];
    table::run(&mut r, &rows);
}

#[test]
fn jitter_only_shortens_the_stagger_delay_within_its_bound() {
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..50 {
        let mut c = fixed(500);
        c.fanout.jitter = 0.2;
        c.seed = seed;
        let mut run = Run::new(c, 3);
        run.advance(ms(1000));
        let t = run.connects()[1].0;
        assert!(t >= ms(400) && t <= ms(500), "seed {seed}: second attempt at {t:?}");
        seen.insert(t);
    }
    assert!(seen.len() > 10, "jitter spreads clients: {} distinct times", seen.len());
}

/// The `Connect`s of one tick: `(time, broker)` pairs.
fn ticks(out: &[(Instant, Command)]) -> Vec<(Instant, BrokerIndex)> {
    out.iter()
        .filter_map(|(t, c)| match c {
            Command::Connect { broker, .. } => Some((*t, *broker)),
            _ => None,
        })
        .collect()
}

#[test]
fn adaptive_hedges_a_silent_broker_twice_the_silent_pace_after_a_1ms_handshake() {
    let mut run = Run::new(no_jitter(RefreshConfig::adaptive()), 5);
    let a0 = run.attempt(0);
    run.input(ms(1), Input::Connected { attempt: a0, tls: false });
    // Silent after connecting, and no first answer seen yet: the broker pace is the 12 ms
    // `silent` knob, longer than the 1 ms handshake, so the tick comes 2 × 12 ms = 24 ms
    // after the handshake. It starts two brokers (growth Linear(2)), spread: two 1 ms
    // handshakes fit well within half of those 24 ms, so the second follows 12 ms later.
    assert!(run.advance(us(24_999)).is_empty());
    let out = run.advance(ms(100));
    assert_eq!(ticks(&out)[..2], [(ms(25), BrokerIndex(1)), (ms(37), BrokerIndex(2))], "{out:?}");
}

#[test]
fn adaptive_hedges_a_silent_broker_on_a_slow_path_two_handshakes_after_it() {
    let mut run = Run::new(no_jitter(RefreshConfig::adaptive()), 5);
    let a0 = run.attempt(0);
    run.input(ms(30), Input::Connected { attempt: a0, tls: false });
    // A 30 ms handshake is longer than the 12 ms silent pace: the round trip itself counts,
    // 2 × 30 ms after the handshake. The tick starts both its brokers at once: a fresh broker
    // answers about two handshakes (60 ms) after its start, not within half the delay.
    assert!(run.advance(us(89_999)).is_empty());
    let out = run.advance(ms(100));
    assert_eq!(ticks(&out)[..2], [(ms(90), BrokerIndex(1)), (ms(90), BrokerIndex(2))], "{out:?}");
}

/// On a fast network the tick's first fresh broker answers before its partner is due:
/// getting past one silent broker costs one more connection, as in a one-at-a-time client.
#[test]
fn a_spread_tick_drops_its_partner_when_the_first_attempt_answers() {
    let mut run = Run::new(no_jitter(RefreshConfig::adaptive()), 5);
    let a0 = run.attempt(0);
    run.input(us(100), Input::Connected { attempt: a0, tls: false });
    // Silent: the tick at 24.1 ms (2 × the 12 ms silent pace after the handshake) starts
    // one broker; its partner is due half the delay later (no sooner than the 10 ms floor):
    // at 36.1 ms.
    assert!(run.advance(us(24_099)).is_empty());
    let out = run.advance(us(24_100));
    assert_eq!(ticks(&out), [(us(24_100), BrokerIndex(1))], "{out:?}");
    assert_eq!(run.refresh.next_timer(), Some((us(36_100), stagger::TimerKind::Spread)));
    let a1 = run.attempt(1);
    assert!(!run.refresh.attempt(a1).unwrap().partner, "the tick's first attempt is no partner");
    run.input(us(24_200), Input::Connected { attempt: a1, tls: false });
    run.input(us(25_000), Input::FirstFrame { attempt: a1 });
    assert_eq!(run.refresh.in_flight(), 1, "the answer overtook the silent first broker");
    // Answering, broker 1 gets patience: 16 × its 0.9 ms to the first answer, from its start.
    assert_eq!(run.refresh.next_timer(), Some((us(38_500), stagger::TimerKind::Stagger)));
    assert!(ticks(&run.advance(us(36_500))).is_empty(), "no partner once a broker answered");
    let out = run.input(us(36_600), response(a1));
    assert!(matches!(out.last(), Some(Command::Done { .. })), "{out:?}");
    assert_eq!(run.connects().len(), 2);
}

/// A healthy broker's first answer after a loopback handshake takes a few milliseconds (it
/// has to read and answer ApiVersions): within the 24 ms a silent broker is given, so it
/// costs no second connection.
#[test]
fn a_healthy_broker_answering_15ms_after_a_loopback_handshake_is_not_hedged() {
    let mut run = Run::new(no_jitter(RefreshConfig::default()), 3);
    let a0 = run.attempt(0);
    run.input(us(100), Input::Connected { attempt: a0, tls: false });
    assert!(run.advance(ms(15)).is_empty(), "suspected only at 24.1 ms");
    assert!(run.input(ms(15), Input::FirstFrame { attempt: a0 }).is_empty());
    let out = run.input(ms(16), response(a0));
    assert!(matches!(&out[..], [Command::Done { attempt, .. }] if *attempt == a0), "{out:?}");
    assert_eq!(run.connects().len(), 1);
}

/// A stopped broker's kernel still completes the handshake; only its silence gives it away,
/// 24 ms after the handshake (2 × the 12 ms silent pace). On a loopback network the next
/// broker answers before the tick's partner is due, so the stopped broker costs one more
/// connection.
#[test]
fn a_stopped_broker_first_costs_one_more_connection_24ms_after_its_handshake() {
    let mut run = Run::new(no_jitter(RefreshConfig::default()), 3);
    let a0 = run.attempt(0);
    run.input(us(100), Input::Connected { attempt: a0, tls: false });
    assert!(run.advance(us(24_099)).is_empty());
    let out = run.advance(us(24_100));
    assert_eq!(ticks(&out), [(us(24_100), BrokerIndex(1))], "{out:?}");
    // The partner (broker 2) is due half the 24 ms later: 36.1 ms.
    assert_eq!(run.refresh.next_timer(), Some((us(36_100), stagger::TimerKind::Spread)));
    let a1 = run.attempt(1);
    run.input(us(24_200), Input::Connected { attempt: a1, tls: false });
    assert_eq!(run.refresh.next_timer(), Some((us(36_100), stagger::TimerKind::Spread)));
    let out = run.input(ms(25), Input::FirstFrame { attempt: a1 });
    assert_eq!(out, [Command::Cancel { attempt: a0, reason: CancelReason::Overtaken }]);
    assert!(run.advance(ms(37)).is_empty(), "the partner was dropped");
    let out = run.input(ms(37), response(a1));
    assert!(matches!(&out[..], [Command::Done { attempt, .. }] if *attempt == a1), "{out:?}");
    assert_eq!(run.connects().len(), 2);
    assert!(run.refresh.poll_timeout().is_none());
}

/// Over TLS the broker's first answer is the end of its TLS handshake, the costliest thing it
/// does for a client: a healthy broker's takes longer than an ApiVersions answer, so until
/// one is seen a connection whose TLS handshake follows is judged by `silent_tls` (20 ms,
/// suspected 40 ms after the TCP handshake), not `silent`. A healthy broker answering its
/// TLS handshake at 30 ms is not hedged; a stopped one is, at 40.1 ms, and the tick's
/// partner waits half that for the hedge's own TLS handshake.
#[test]
fn over_tls_a_connected_broker_is_judged_by_the_tls_pace() {
    let mut run = Run::new(no_jitter(RefreshConfig::default()), 3);
    let a0 = run.attempt(0);
    run.input(us(100), Input::Connected { attempt: a0, tls: true });
    assert!(run.advance(ms(30)).is_empty(), "24.1 ms is not a suspicion over TLS");
    assert!(run.input(ms(30), Input::FirstFrame { attempt: a0 }).is_empty());
    let out = run.input(ms(45), response(a0));
    assert!(matches!(&out[..], [Command::Done { attempt, .. }] if *attempt == a0), "{out:?}");
    assert_eq!(run.connects().len(), 1);

    let mut run = Run::new(no_jitter(RefreshConfig::default()), 3);
    let a0 = run.attempt(0);
    run.input(us(100), Input::Connected { attempt: a0, tls: true });
    assert!(run.advance(us(40_099)).is_empty());
    let out = run.advance(us(40_100));
    assert_eq!(ticks(&out), [(us(40_100), BrokerIndex(1))], "{out:?}");
    assert_eq!(run.refresh.next_timer(), Some((us(60_100), stagger::TimerKind::Spread)));
    let a1 = run.attempt(1);
    run.input(us(40_200), Input::Connected { attempt: a1, tls: true });
    // Its TLS handshake takes 18 ms: within the partner's 20 ms, so no third connection.
    let out = run.input(us(58_200), Input::FirstFrame { attempt: a1 });
    assert_eq!(out, [Command::Cancel { attempt: a0, reason: CancelReason::Overtaken }]);
    assert!(run.advance(ms(61)).is_empty(), "the partner was dropped");
    assert_eq!(run.connects().len(), 2);
}

/// Six brokers, the first silent in its TLS handshake from 0.1 ms, the second started by the
/// tick at 40.1 ms and silent in its own from 40.2 ms.
fn two_silent_tls_handshakes() -> Run {
    let mut run = Run::new(no_jitter(RefreshConfig::default()), 6);
    let a0 = run.attempt(0);
    run.input(us(100), Input::Connected { attempt: a0, tls: true });
    let out = run.advance(us(40_100));
    assert_eq!(ticks(&out), [(us(40_100), BrokerIndex(1))], "{out:?}");
    let a1 = run.attempt(1);
    run.input(us(40_200), Input::Connected { attempt: a1, tls: true });
    run
}

/// A fast refresh walks past brokers silent in their TLS handshakes at its pace, as past
/// any silent broker: the tick's partner follows 20 ms on, and each later tick comes 40 ms
/// after its leader connected, in place of a silent suspect (the throttle holds 3). A fleet's burst of
/// queued handshakes is met by the gentle schedule instead
/// (`a_gentle_refresh_waits_the_ceiling_for_a_silent_tls_handshake`), which a `Cluster` runs
/// until its brokers answer within this pace (`ClusterConfig::gentle_until_calm`).
#[test]
fn a_fast_refresh_walks_past_silent_tls_handshakes_at_its_pace() {
    let mut run = two_silent_tls_handshakes();
    let out = run.advance(us(60_100));
    assert_eq!(ticks(&out), [(us(60_100), BrokerIndex(2))], "the partner follows: {out:?}");
    let (a1, a2) = (run.attempt(1), run.attempt(2));
    run.input(us(60_200), Input::Connected { attempt: a2, tls: true });
    let out = run.advance(us(100_200));
    let superseded = |attempt| Command::Cancel { attempt, reason: CancelReason::Superseded };
    let cancels: Vec<_> = out.iter().filter(|(_, c)| matches!(c, Command::Cancel { .. })).cloned().collect();
    assert_eq!(cancels, [(us(80_200), superseded(a1)), (us(100_200), superseded(a2))], "{out:?}");
    assert_eq!(ticks(&out), [(us(80_200), BrokerIndex(3)), (us(100_200), BrokerIndex(4))], "{out:?}");
    assert_eq!(run.connects().len(), 5);
}

/// Over a TLS listener a spread tick's partner does not wait for the tick's own attempt to
/// connect: it follows at its share of the delay, as over plaintext.
#[test]
fn over_tls_a_partner_follows_while_the_ticks_attempt_still_connects() {
    let mut run = Run::new(no_jitter(RefreshConfig::default()), 6);
    let a0 = run.attempt(0);
    run.input(us(100), Input::Connected { attempt: a0, tls: true });
    run.advance(us(40_100));
    let out = run.advance(us(70_000));
    assert_eq!(ticks(&out), [(us(60_100), BrokerIndex(2))], "{out:?}");
    assert_eq!(run.connects().len(), 3);
}

/// The first broker to finish its TLS handshake overtakes the others still silent in theirs.
#[test]
fn the_first_tls_handshake_done_overtakes_the_silent_ones() {
    let mut run = two_silent_tls_handshakes();
    let (a0, a1) = (run.attempt(0), run.attempt(1));
    let out = run.input(us(50_000), Input::FirstFrame { attempt: a0 });
    assert_eq!(out, [Command::Cancel { attempt: a1, reason: CancelReason::Overtaken }]);
    assert!(run.advance(ms(61)).is_empty(), "the partner was dropped");
    let out = run.input(us(55_000), response(a0));
    assert!(matches!(&out[..], [Command::Done { attempt, .. }] if *attempt == a0), "{out:?}");
    assert_eq!(run.connects().len(), 2);
}

/// Every refresh shuffles its seeds by default, one-shot or long-lived, so a fleet does not
/// all ask the first seed first; a long-lived view runs the one-shot policy unchanged.
#[test]
fn one_shot_and_long_lived_refreshes_both_shuffle_their_seeds_by_default() {
    assert!(RefreshConfig::default().shuffle_seeds);
    let cluster = stagger::ClusterConfig::default();
    assert!(cluster.gentle_until_calm);
    assert_eq!(cluster.refresh, RefreshConfig::default());
}

/// When the tick's first broker is silent too, the partner follows; the next tick still
/// counts from the tick's first attempt, and a partner that started a moment ago is not
/// yet a suspect the throttle may supersede.
#[test]
fn a_spread_partner_follows_a_silent_first_attempt_and_is_spared_until_suspected() {
    // A silent pace of 500 µs and a 1 ms floor: ticks 1 ms after a loopback handshake.
    let mut c = no_jitter(RefreshConfig::adaptive());
    let (silent, floor) = (Duration::from_micros(500), Duration::from_millis(1));
    c.fanout.stagger = Stagger::Adaptive(stagger::Adaptive { silent, floor, ..Default::default() });
    let mut run = Run::new(c, 6);
    let a0 = run.attempt(0);
    run.input(us(100), Input::Connected { attempt: a0, tls: false });
    // Silent: 2 × the 500 µs pace (longer than the 100 µs handshake) = 1 ms: the tick at
    // 1.1 ms starts one broker.
    run.advance(us(1_100));
    let a1 = run.attempt(1);
    run.input(us(1_150), Input::Connected { attempt: a1, tls: false });
    // Its partner is due half the 1 ms later, but no sooner than the floor: at 2.1 ms.
    assert!(run.advance(us(2_099)).is_empty());
    let out = run.advance(us(2_100));
    assert_eq!(ticks(&out), [(us(2_100), BrokerIndex(2))], "{out:?}");
    let a2 = run.attempt(2);
    let info = run.refresh.attempt(a2).unwrap();
    assert!(info.partner && info.hedge, "{info:?}");
    // The next tick: 1 ms after the tick's first attempt connected (not after the partner).
    assert!(run.advance(us(2_149)).is_empty());
    let out = run.advance(us(2_150));
    // The throttle is full (3): it supersedes #1, whose delay ran out, not the partner #2
    // (started 50 µs ago, still connecting), and starts the fourth broker.
    let a1_cancelled = Command::Cancel { attempt: a1, reason: CancelReason::Superseded };
    assert_eq!(out.first(), Some(&(us(2_150), a1_cancelled)), "{out:?}");
    assert_eq!(ticks(&out), [(us(2_150), BrokerIndex(3))], "{out:?}");
    assert_eq!(run.refresh.attempt(a2).unwrap().state, stagger::AttemptState::InFlight);
    assert_eq!(run.refresh.in_flight(), 3);
}

/// `fanout.tuning.spread_ticks = false`: the tick starts its attempts together, as before.
#[test]
fn without_spreading_a_tick_starts_its_attempts_together() {
    let mut c = no_jitter(RefreshConfig::adaptive());
    c.fanout.tuning.spread_ticks = false;
    let mut r = Refresh::new(&c, &book(5), Instant::ZERO).unwrap();
    let rows = [
        (ms(0), Start, vec![Connect(0, 0)]),
        (us(100), Connected(0), vec![]),
        // 2 × the 12 ms silent pace after the handshake; both of the tick's brokers at once.
        (us(24_099), Timeout, vec![]),
        (us(24_100), Timeout, vec![Connect(1, 1), Connect(2, 2)]),
    ];
    table::run(&mut r, &rows);
}

#[test]
fn adaptive_waits_the_cold_40ms_for_a_broker_that_never_connects() {
    let mut r = Refresh::new(&no_jitter(RefreshConfig::adaptive()), &book(5), Instant::ZERO).unwrap();
    // Nothing is known about this network, so the tick spreads its two attempts over the
    // 40 ms that ran out: the second follows 20 ms later, as the first is silent too.
    let rows = [
        (ms(0), Start, vec![Connect(0, 0)]),
        (us(39_999), Timeout, vec![]),
        (ms(40), Timeout, vec![Connect(1, 1)]),
        (us(59_999), Timeout, vec![]),
        (ms(60), Timeout, vec![Connect(2, 2)]),
    ];
    table::run(&mut r, &rows);
    assert!(r.attempt(table::attempt(&r, 2)).unwrap().partner);
}

#[test]
fn a_blackholed_broker_first_is_outrun_by_the_next_one_connecting() {
    let mut r = Refresh::new(&no_jitter(RefreshConfig::adaptive()), &book(5), Instant::ZERO).unwrap();
    // Broker 0's SYN vanishes. The cold tick starts broker 1, which connects in 100 µs: broker
    // 0, still connecting 40 ms on, is cancelled (one conversation, two SYNs), and broker 1
    // answers before the partner is due.
    let rows = [
        (ms(0), Start, vec![Connect(0, 0)]),
        (ms(40), Timeout, vec![Connect(1, 1)]),
        (us(40_100), Connected(1), vec![Cancel(0, CancelReason::Outrun)]),
        (us(40_300), Answered(1), vec![]),
        (us(40_600), Response(1, metadata()), vec![Done(1, 1)]),
    ];
    table::run(&mut r, &rows);
    assert_eq!(r.stats().started, 2);
}

#[test]
fn a_broker_on_a_slow_path_is_not_outrun_by_one_a_little_faster() {
    let mut c = no_jitter(RefreshConfig::adaptive());
    (c.fanout.growth, c.fanout.max_in_flight, c.fanout.tuning.replace_when_full) = (Growth::Linear(1), 2, false);
    let mut r = Refresh::new(&c, &book(5), Instant::ZERO).unwrap();
    // A network slower than the cold delay: broker 1, started by the cold tick at 40 ms,
    // connects in 45 ms. Broker 0 has been connecting for 85 ms by then — within twice that
    // handshake (90 ms) — so it may just be on a slower path, and both are kept. (Had broker 1
    // connected faster than the cold delay, broker 0 would have been connecting for more
    // than twice its handshake, and outrun.)
    let rows = [
        (ms(0), Start, vec![Connect(0, 0)]),
        (ms(40), Timeout, vec![Connect(1, 1)]),
        (ms(85), Connected(1), vec![]),
        (ms(86), Connected(0), vec![]),
    ];
    table::run(&mut r, &rows);
    assert_eq!(r.in_flight(), 2);
}

#[test]
fn past_a_long_run_of_hung_brokers_the_silent_wait_doubles_only_up_to_the_pace() {
    let mut c = no_jitter(RefreshConfig::adaptive());
    c.fanout.growth = Growth::Linear(1);
    c.fanout.max_in_flight = 1;
    let mut r = Refresh::new(&c, &book(12), Instant::ZERO).unwrap();
    // Every broker connects in 1 ms and stays silent: each tick (first 2 × the 12 ms silent
    // pace after the handshake) replaces it and doubles the next wait — 24, 48, 96 ms —
    // until the 100 ms pace.
    let mut now = Instant::ZERO;
    let mut waits = Vec::new();
    let drain = |r: &mut Refresh| while r.poll_command().is_some() {};
    drain(&mut r);
    for n in 0..10u32 {
        let connected = now.saturating_add(Duration::from_millis(1));
        r.handle_input(connected, Input::Connected { attempt: table::attempt(&r, n), tls: false });
        drain(&mut r);
        let tick = r.poll_timeout().expect("a tick is armed");
        waits.push(tick.saturating_since(connected).as_millis() as u64);
        r.handle_timeout(tick);
        drain(&mut r);
        now = tick;
    }
    assert_eq!(waits, [24, 48, 96, 100, 100, 100, 100, 100, 100, 100]);
}

#[test]
fn a_late_first_answer_stretches_the_silent_waits_that_follow() {
    let mut r = Refresh::new(&no_jitter(RefreshConfig::adaptive()), &book(5), Instant::ZERO).unwrap();
    // Broker 0 connects in 1 ms and answers ApiVersions only 30 ms later: it was queueing,
    // past its 24 ms wait (2 × the 12 ms silent pace), which started broker 1 at 25 ms. The
    // answer overtakes broker 1 before the tick's partner is due (37 ms). When broker 0's
    // Metadata then fails, broker 1 is tried again at once, and its silent wait is 2 × those
    // 30 ms, not the 24 ms of the silent pace.
    let rows = [
        (ms(0), Start, vec![Connect(0, 0)]),
        (ms(1), Connected(0), vec![]),
        (us(24_999), Timeout, vec![]),
        (ms(25), Timeout, vec![Connect(1, 1)]),
        (ms(31), Answered(0), vec![Cancel(1, CancelReason::Overtaken)]),
        (ms(32), Failed(0, ErrorKind::Protocol), vec![Connect(2, 1)]),
        (ms(33), Connected(2), vec![]),
    ];
    table::run(&mut r, &rows);
    assert_eq!(r.poll_timeout(), Some(ms(93)));
}

#[test]
fn adaptive_scales_with_a_slower_handshake() {
    let mut r = Refresh::new(&no_jitter(RefreshConfig::adaptive()), &book(5), Instant::ZERO).unwrap();
    let rows = [
        (ms(0), Start, vec![Connect(0, 0)]),
        (ms(20), Connected(0), vec![]),
        // 2 × 20 ms after the handshake. The tick starts both its attempts at once: a fresh
        // broker answers about two handshakes (40 ms) after its start, not within half the
        // delay, so spreading the tick would only delay the second.
        (us(59_999), Timeout, vec![]),
        (ms(60), Timeout, vec![Connect(1, 1), Connect(2, 2)]),
    ];
    table::run(&mut r, &rows);
}

#[test]
fn adaptive_is_patient_with_an_answering_broker() {
    let mut r = Refresh::new(&no_jitter(RefreshConfig::adaptive()), &book(5), Instant::ZERO).unwrap();
    let rows = [
        (ms(0), Start, vec![Connect(0, 0)]),
        (ms(1), Connected(0), vec![]),
        (ms(2), Answered(0), vec![]),
        // Alive and working on the request: no window yet, so patience (16) × its 2 ms to
        // the first answer, from its start — not the 25 ms a silent broker would get.
        (us(31_999), Timeout, vec![]), // no hedge while the broker is answering
        (ms(32), Timeout, vec![Connect(1, 1)]),
        // The tick's second attempt follows half the delay later (a 1 ms handshake network
        // answers well within 16 ms).
        (ms(48), Timeout, vec![Connect(2, 2)]),
    ];
    table::run(&mut r, &rows);
}

#[test]
fn adaptive_patience_follows_the_recent_window() {
    let c = no_jitter(RefreshConfig::adaptive());
    let mut r = Refresh::with_estimate(&c, &book(5), Instant::ZERO, Some(Duration::from_millis(5))).unwrap();
    let rows = [
        (ms(0), Start, vec![Connect(0, 0)]),
        (ms(1), Connected(0), vec![]),
        (ms(2), Answered(0), vec![]),
        // Answers usually take 5 ms here: 16 × 5 ms = 80 ms from the start.
        (us(79_999), Timeout, vec![]),
        (ms(80), Timeout, vec![Connect(1, 1)]),
        (ms(120), Timeout, vec![Connect(2, 2)]), // the partner, after half of 80 ms
    ];
    table::run(&mut r, &rows);
}

/// Runs `rows` after a refresh's first broker connected at 1 ms, answered at 2 ms and
/// began checking the credentials at 3 ms (`Input::Authenticating`); `rows` may say
/// `Authenticated` for it.
fn while_checking_credentials(rows: impl FnOnce(AttemptId) -> Vec<table::Row>) {
    let mut r = Refresh::new(&no_jitter(RefreshConfig::adaptive()), &book(5), Instant::ZERO).unwrap();
    let a0 = table::attempt(&r, 0);
    let mut all = vec![
        (ms(0), Start, vec![Connect(0, 0)]),
        (ms(1), Connected(0), vec![]),
        (ms(2), Answered(0), vec![]),
        (ms(3), Raw(Input::Authenticating { attempt: a0 }), vec![]),
    ];
    all.extend(rows(a0));
    table::run(&mut r, &all);
}

/// A wrong password: Kafka answers it only after a deliberate delay
/// (`connection.failed.authentication.delay.ms`), and every other broker would refuse it
/// too, so while a broker checks the credentials nothing is hedged before the ceiling.
#[test]
fn a_broker_checking_the_credentials_is_not_hedged_before_the_ceiling() {
    // Patience alone would hedge at 32 ms (16 × 2 ms).
    while_checking_credentials(|_| {
        vec![(ms(310), Failed(0, ErrorKind::BrokerError(58)), vec![GiveUp(GiveUpReason::Fatal)])]
    });
    while_checking_credentials(|_| {
        vec![
            (us(1_999_999), Timeout, vec![]),
            (ms(2_000), Timeout, vec![Connect(1, 1)]), // the ceiling: a broker stopped mid-check
        ]
    });
}

/// Once the broker accepts the credentials, the attempt is an answering one again: patience
/// from its start.
#[test]
fn accepted_credentials_bring_back_patience() {
    while_checking_credentials(|a0| {
        vec![
            (ms(10), Raw(Input::Authenticated { attempt: a0 }), vec![]),
            (us(31_999), Timeout, vec![]),
            (ms(32), Timeout, vec![Connect(1, 1)]),
        ]
    });
}

#[test]
fn an_answer_overtakes_every_silent_attempt() {
    let mut run = Run::new(no_jitter(RefreshConfig::adaptive()), 5);
    let a0 = run.attempt(0);
    run.input(ms(1), Input::Connected { attempt: a0, tls: false });
    // The tick 24 ms after the handshake starts broker 1; broker 1 connects but says nothing
    // either, so the tick's partner, broker 2, follows 12 ms later.
    run.advance(ms(25));
    let a1 = run.attempt(1);
    run.input(ms(26), Input::Connected { attempt: a1, tls: false });
    run.advance(ms(37));
    let a2 = run.attempt(2);
    assert_eq!(run.connects().iter().map(|c| c.0).collect::<Vec<_>>(), [ms(0), ms(25), ms(37)]);
    run.input(ms(38), Input::Connected { attempt: a2, tls: false });
    // Broker 1 answers first: the hung broker 0 and the still silent broker 2 are cancelled,
    // so only one metadata request is ever sent.
    let out = run.input(ms(39), Input::FirstFrame { attempt: a1 });
    assert_eq!(
        out,
        [
            Command::Cancel { attempt: a0, reason: CancelReason::Overtaken },
            Command::Cancel { attempt: a2, reason: CancelReason::Overtaken },
        ]
    );
    assert_eq!(run.refresh.in_flight(), 1);
    assert_eq!(run.refresh.attempt(a1).unwrap().first_frame_at, Some(ms(39)));
    let out = run.input(ms(40), response(a1));
    assert!(matches!(&out[..], [Command::Done { attempt, .. }] if *attempt == a1), "{out:?}");
}

/// A broker that answers and then fails (here REBOOTSTRAP_REQUIRED to ApiVersions, as Kafka
/// 4.4 does at an address that moved to another cluster) overtook the silent attempts for
/// nothing: their brokers are tried again at once, the earliest first, in the same pass —
/// not after a backoff, and not never.
#[test]
fn brokers_overtaken_by_an_answer_that_then_fails_are_tried_again_at_once() {
    let mut run = Run::new(no_jitter(RefreshConfig::adaptive()), 5);
    let a0 = run.attempt(0);
    run.input(ms(1), Input::Connected { attempt: a0, tls: false });
    // Broker 0 is silent: the tick at 25 ms starts broker 1, which connects and is silent
    // too, and its partner broker 2 follows at 37 ms.
    run.advance(ms(25));
    let a1 = run.attempt(1);
    run.input(ms(26), Input::Connected { attempt: a1, tls: false });
    run.advance(ms(37));
    let a2 = run.attempt(2);
    assert_eq!(run.connects().iter().map(|c| c.0).collect::<Vec<_>>(), [ms(0), ms(25), ms(37)]);
    run.input(ms(38), Input::Connected { attempt: a2, tls: false });
    run.input(ms(39), Input::FirstFrame { attempt: a2 });
    assert_eq!(run.refresh.in_flight(), 1, "brokers 0 and 1 overtaken");
    let out = run.input(ms(40), failed(a2, ErrorKind::BrokerError(129)));
    let [Command::Connect { attempt: a3, broker }] = out[..] else { panic!("one retry at once: {out:?}") };
    assert_eq!(broker, run.refresh.attempt(a0).unwrap().broker, "the earliest overtaken first");
    assert_eq!(run.refresh.attempt(a3).unwrap().pass, 0, "in the same pass");
    // The other overtaken broker (1) comes next, before the untried brokers 3 and 4.
    let out = run.input(ms(41), failed(a3, ErrorKind::Refused));
    let [Command::Connect { attempt: a4, broker }] = out[..] else { panic!("{out:?}") };
    assert_eq!(broker, run.refresh.attempt(a1).unwrap().broker);

    // Once per pass: overtaken again by a broker that fails again, broker 1 is not retried a
    // second time; the tick's other broker, overtaken for the first time, is. Broker 1 is
    // silent after its handshake at 42 ms: the tick at 66 ms starts broker 3, and its
    // partner broker 4 follows at 78 ms.
    run.input(ms(42), Input::Connected { attempt: a4, tls: false });
    run.advance(ms(78));
    let tick: Vec<_> = run.connects()[5..].iter().map(|&(t, _, b)| (t, b)).collect();
    assert_eq!(tick, [(ms(66), BrokerIndex(3)), (ms(78), BrokerIndex(4))]);
    let a5 = run.connects().last().unwrap().1;
    run.input(ms(79), Input::FirstFrame { attempt: a5 });
    assert!(run.refresh.attempt(a4).unwrap().ended_at.is_some(), "overtaken again");
    let other = run.connects()[run.connects().len() - 2];
    assert!(run.refresh.attempt(other.1).unwrap().ended_at.is_some(), "the tick's other attempt, overtaken too");
    let out = run.input(ms(80), failed(a5, ErrorKind::BrokerError(129)));
    let [Command::Connect { broker, .. }] = out[..] else { panic!("{out:?}") };
    assert_eq!(broker, other.2, "not broker 1 again");
}

/// An input names an attempt that a timer due in the same call is about to issue: nobody has
/// contacted that broker yet, so the input is ignored — the timer still fires, and the win
/// is not credited to it.
#[test]
fn an_input_for_an_attempt_issued_in_the_same_call_is_ignored() {
    let mut run = Run::new(no_jitter(RefreshConfig::default()), 3);
    let a0 = run.attempt(0);
    let premature = AttemptId(a0.0 + 1);
    let out = run.input(ms(250), response(premature));
    assert!(
        out.iter().all(|c| matches!(c, Command::Connect { .. })),
        "the cold stagger's tick only starts attempts: {out:?}"
    );
    assert!(out.iter().any(|c| matches!(c, Command::Connect { attempt, .. } if *attempt == premature)), "{out:?}");
    assert_eq!(run.terminals(), 0);
    // Its real answer, in a later call, wins.
    let out = run.input(ms(251), response(premature));
    assert!(matches!(&out[..], [.., Command::Done { attempt, .. }] if *attempt == premature), "{out:?}");
}

#[test]
fn without_cancel_silent_on_answer_silent_attempts_keep_running() {
    let mut c = no_jitter(RefreshConfig::adaptive());
    c.fanout.tuning.cancel_silent_on_answer = false;
    let mut run = Run::new(c, 5);
    let a0 = run.attempt(0);
    run.input(ms(1), Input::Connected { attempt: a0, tls: false });
    // Broker 0 is silent: the tick at 25 ms starts broker 1, and its partner broker 2 at 37 ms.
    run.advance(ms(37));
    assert_eq!(run.connects().iter().map(|c| c.0).collect::<Vec<_>>(), [ms(0), ms(25), ms(37)]);
    let a1 = run.attempt(1);
    assert!(run.input(ms(38), Input::FirstFrame { attempt: a1 }).is_empty());
    assert_eq!(run.refresh.in_flight(), 3);
    let out = run.input(ms(39), response(a1));
    assert_eq!(out.iter().filter(|c| matches!(c, Command::Cancel { reason: CancelReason::Lost, .. })).count(), 2);
}

#[test]
fn answers_for_unknown_or_finished_attempts_are_ignored() {
    let mut run = Run::new(no_jitter(RefreshConfig::adaptive()), 3);
    let a0 = run.attempt(0);
    assert!(run.input(ms(1), Input::FirstFrame { attempt: AttemptId(a0.0 + 7) }).is_empty());
    run.input(ms(1), failed(a0, ErrorKind::Refused));
    assert!(run.input(ms(2), Input::FirstFrame { attempt: a0 }).is_empty(), "a failed attempt stays failed");
    assert_eq!(run.refresh.attempt(a0).unwrap().first_frame_at, None);
}

#[test]
fn refused_starts_the_next_attempt_at_once() {
    let mut r = Refresh::new(&no_jitter(RefreshConfig::default()), &book(3), Instant::ZERO).unwrap();
    let rows = [
        (ms(0), Start, vec![Connect(0, 0)]),
        (ms(1), Failed(0, ErrorKind::Refused), vec![Connect(1, 1)]),
        (ms(3), Response(1, metadata()), vec![Done(1, 1)]),
    ];
    table::run(&mut r, &rows);
}

#[test]
fn without_next_on_failure_a_failure_waits_for_the_stagger_tick() {
    let mut c = fixed(100);
    c.fanout.tuning.next_on_failure = false;
    let mut r = Refresh::new(&c, &book(3), Instant::ZERO).unwrap();
    let rows = [
        (ms(0), Start, vec![Connect(0, 0)]),
        (ms(1), Failed(0, ErrorKind::Refused), vec![]),
        (ms(100), Timeout, vec![Connect(1, 1)]),
    ];
    table::run(&mut r, &rows);
}

#[test]
fn throttle_holds_with_ten_hung_brokers() {
    let mut c = fixed(100); // max_in_flight 3
    c.fanout.tuning.replace_when_full = false;
    let mut run = Run::new(c, 10);
    run.advance(ms(5_000));
    let connects = run.connects();
    assert_eq!(connects.iter().map(|c| c.0).collect::<Vec<_>>(), [ms(0), ms(100), ms(200)]);
    assert_eq!(run.refresh.in_flight(), 3);
    // At the first attempt timeout (10 s) the oldest is cancelled and one more starts.
    let out = run.advance(ms(10_000));
    assert!(matches!(out[0], (_, Command::Cancel { reason: CancelReason::TimedOut, .. })), "{out:?}");
    assert!(matches!(out[1], (t, Command::Connect { .. }) if t == ms(10_000)), "{out:?}");
    assert_eq!(run.refresh.in_flight(), 3);
}

#[test]
fn growth_exponential_doubles_each_tick_up_to_the_throttle() {
    let mut c = fixed(100);
    c.fanout.growth = stagger::Growth::Exponential(2.0);
    c.fanout.max_in_flight = 8;
    c.fanout.tuning.spread_ticks = false; // each wave at once
    let mut run = Run::new(c, 20);
    run.advance(ms(250));
    let per_time: Vec<(Instant, usize)> = {
        let mut v: Vec<(Instant, usize)> = Vec::new();
        for (t, _, _) in run.connects() {
            match v.last_mut() {
                Some((lt, n)) if *lt == t => *n += 1,
                _ => v.push((t, 1)),
            }
        }
        v
    };
    assert_eq!(per_time, [(ms(0), 1), (ms(100), 2), (ms(200), 4)]);
}

#[test]
fn every_broker_failing_runs_retries_plus_one_passes_with_backoff_then_gives_up_with_the_last_error() {
    let mut c = fixed(10_000); // no hedging: failures drive the pass
    c.retry.retries = 2;
    let mut run = Run::new(c, 2);
    let mut t = 0;
    let mut pass_starts = Vec::new();
    for _pass in 0..3 {
        pass_starts.push(run.connects().last().unwrap().0);
        for _broker in 0..2 {
            t += 1;
            let a = run.connects().last().unwrap().1;
            let kind = if t % 2 == 0 { ErrorKind::Closed } else { ErrorKind::Refused };
            run.input(ms(t), failed(a, kind));
        }
        t += 6_000; // past any backoff (cap 5 s)
        run.advance(ms(t));
    }
    assert_eq!(run.connects().len(), 6);
    assert!(pass_starts[1] > ms(2) && pass_starts[2] > pass_starts[1], "backoff between passes: {pass_starts:?}");
    let last = run.log.last().unwrap().1.clone();
    let Command::GiveUp(err) = last else { panic!("expected GiveUp, got {last:?}") };
    assert_eq!(err.reason, GiveUpReason::AllFailed { passes: 3 });
    let (_, _, last_error) = err.last_error.as_ref().unwrap();
    assert_eq!(last_error.kind, ErrorKind::Closed);
    assert_eq!(err.brokers.len(), 2);
    assert!(err.brokers.iter().all(|b| b.attempts == 3 && b.last_error.is_some()));
    let text = err.to_string();
    assert!(text.contains("every broker failed in 3 passes"), "{text}");
    assert!(text.contains("broker-0:9092") && text.contains("broker-1:9092"), "{text}");
    assert_eq!(run.terminals(), 1);
}

/// Fails each of the pass's three attempts as it comes, with `kinds` in turn.
fn one_pass_failing(kinds: [ErrorKind; 3]) -> Run {
    let mut c = fixed(10_000); // no hedging: failures drive the pass
    c.retry.retries = 3;
    let mut run = Run::new(c, 3);
    for (t, kind) in kinds.into_iter().enumerate() {
        let a = run.connects().last().unwrap().1;
        run.input(ms(t as u64 + 1), failed(a, kind));
    }
    run
}

#[test]
fn a_pass_whose_every_broker_the_tls_layer_refused_ends_the_refresh() {
    // A certificate refused at every broker would be refused again in every retry: each
    // pass would cost every broker a TLS handshake to learn nothing new.
    let run = one_pass_failing([ErrorKind::Tls; 3]);
    assert_eq!(run.connects().len(), 3, "one pass, no retry");
    let last = run.log.last().unwrap().1.clone();
    let Command::GiveUp(err) = last else { panic!("expected GiveUp, got {last:?}") };
    assert_eq!(err.reason, GiveUpReason::AllFailed { passes: 1 });
    assert!(err.brokers.iter().all(|b| b.last_error.as_ref().is_some_and(|e| e.kind == ErrorKind::Tls)));
    assert_eq!(run.terminals(), 1);
}

#[test]
fn a_pass_with_any_other_failure_beside_tls_refusals_is_retried() {
    // One broker closing during its handshake (restarting, say) may answer next pass.
    for kinds in
        [[ErrorKind::Closed, ErrorKind::Tls, ErrorKind::Tls], [ErrorKind::Tls, ErrorKind::Tls, ErrorKind::Refused]]
    {
        let mut run = one_pass_failing(kinds);
        assert_eq!(run.terminals(), 0, "{kinds:?}: backing off, not given up");
        run.advance(ms(6_000)); // past any backoff (cap 5 s)
        assert_eq!(run.connects().len(), 4, "{kinds:?}: a second pass started");
    }
}

#[test]
fn a_pass_refused_by_tls_everywhere_after_a_timeout_is_retried() {
    // A broker that timed out (cancelled, not refused) may answer in the next pass.
    let mut c = fixed(10_000);
    c.retry.retries = 3;
    c.attempt_timeout = Duration::from_millis(50);
    let mut run = Run::new(c, 2);
    run.advance(ms(50)); // the first attempt times out; the second starts
    let second = run.connects().last().unwrap().1;
    run.input(ms(51), failed(second, ErrorKind::Tls));
    assert_eq!(run.terminals(), 0, "backing off, not given up");
    run.advance(ms(60_000)); // every later pass times out
    let last = run.log.last().unwrap().1.clone();
    let Command::GiveUp(err) = last else { panic!("expected GiveUp, got {last:?}") };
    assert_eq!(err.reason, GiveUpReason::AllFailed { passes: 4 }, "every retry ran");
}

#[test]
fn deadline_mid_attempt_cancels_everything_and_gives_up() {
    let mut c = fixed(100);
    c.deadline = Duration::from_millis(250);
    let mut run = Run::new(c, 5);
    let out = run.advance(ms(1_000));
    let at_deadline: Vec<_> = out.iter().filter(|(t, _)| *t == ms(250)).map(|(_, c)| c.clone()).collect();
    assert_eq!(at_deadline.len(), 4, "{out:?}");
    assert!(at_deadline[..3].iter().all(|c| matches!(c, Command::Cancel { reason: CancelReason::Deadline, .. })));
    let Command::GiveUp(err) = &at_deadline[3] else { panic!() };
    assert_eq!(err.reason, GiveUpReason::DeadlineExceeded);
    assert!(err.to_string().contains("deadline exceeded"));
    assert!(run.refresh.poll_timeout().is_none());
}

#[test]
fn a_response_after_the_deadline_does_not_win() {
    let mut c = fixed(10);
    c.deadline = Duration::from_millis(50);
    let mut run = Run::new(c, 1);
    let a0 = run.attempt(0);
    let out = run.input(ms(60), response(a0));
    assert!(matches!(out.last(), Some(Command::GiveUp(_))), "{out:?}");
}

#[test]
fn a_response_after_done_and_stale_inputs_are_ignored() {
    let mut run = Run::new(fixed(10), 3);
    run.advance(ms(10));
    let (a0, a1) = (run.attempt(0), run.attempt(1));
    run.input(ms(11), response(a1));
    assert_eq!(run.terminals(), 1);
    assert!(run.input(ms(12), response(a0)).is_empty());
    assert!(run.input(ms(12), failed(a0, ErrorKind::Closed)).is_empty());
    assert!(run.input(ms(13), Input::Connected { attempt: AttemptId(99), tls: false }).is_empty());
    run.refresh.handle_timeout(ms(100_000));
    assert!(run.drain(ms(100_000)).is_empty());
}

#[test]
fn unknown_and_foreign_attempt_ids_are_ignored_mid_refresh() {
    let mut run = Run::new(fixed(100), 3);
    let bogus = [AttemptId(7), AttemptId(1 << 40), AttemptId(u64::MAX)];
    for a in bogus {
        assert!(run.input(ms(1), response(a)).is_empty());
        assert!(run.input(ms(1), failed(a, ErrorKind::Refused)).is_empty());
    }
    assert_eq!(run.connects().len(), 1);
}

#[test]
fn time_going_backwards_is_clamped() {
    let mut run = Run::new(fixed(100), 3);
    run.advance(ms(100));
    let a1 = run.attempt(1);
    // Reported "earlier" than the last call: treated as now, not as the past.
    run.input(ms(50), failed(a1, ErrorKind::Refused));
    let a2 = run.attempt(2);
    assert_eq!(run.refresh.attempt(a1).unwrap().ended_at, Some(ms(100)));
    assert_eq!(run.refresh.attempt(a2).unwrap().started_at, ms(100));
}

#[test]
fn authentication_failure_is_fatal_at_once() {
    let mut run = Run::new(fixed(10), 5);
    run.advance(ms(10));
    let (a0, a1) = (run.attempt(0), run.attempt(1));
    let out = run.input(ms(12), failed(a1, ErrorKind::Authentication));
    assert_eq!(out[0], Command::Cancel { attempt: a0, reason: CancelReason::Fatal });
    let Command::GiveUp(err) = &out[1] else { panic!("{out:?}") };
    assert_eq!(err.reason, GiveUpReason::Fatal);
    assert_eq!(err.last_error.as_ref().unwrap().2.kind, ErrorKind::Authentication);
    assert_eq!(run.connects().len(), 2, "no further attempts");
}

/// The give-up's words for each broker say what happened to it: the one that failed
/// fatally, one cancelled for it, one started by a tick due at that very instant and
/// cancelled in the same call, and one never contacted. None of them says a timeout ran
/// out, because none did.
#[test]
fn after_a_fatal_failure_each_broker_reads_failed_cancelled_for_it_or_not_tried() {
    let mut run = Run::new(fixed(10), 4);
    run.advance(ms(19));
    let (a0, a1) = (run.attempt(0), run.attempt(1));
    // The tick due at 20 ms starts broker 2 before the failure reported at 20 ms is applied.
    let out = run.input(ms(20), failed(a1, ErrorKind::Authentication));
    let a2 = run.attempt(2);
    assert_eq!(out.len(), 4, "{out:?}");
    assert_eq!(
        out[1..3],
        [
            Command::Cancel { attempt: a0, reason: CancelReason::Fatal },
            Command::Cancel { attempt: a2, reason: CancelReason::Fatal },
        ]
    );
    let Command::GiveUp(err) = &out[3] else { panic!("{out:?}") };
    assert_eq!(
        err.to_string(),
        "metadata refresh failed: fatal error; last error from broker-1:9092: authentication failed\n  \
         broker-0:9092: cancelled: another broker's failure was fatal (1 attempt)\n  \
         broker-1:9092: authentication failed (1 attempt)\n  \
         broker-2:9092: cancelled: another broker's failure was fatal (1 attempt)\n  \
         broker-3:9092: not tried"
    );
    assert_eq!(
        err.brokers.iter().map(|b| b.cancelled).collect::<Vec<_>>(),
        [Some(CancelReason::Fatal), None, Some(CancelReason::Fatal), None]
    );
}

/// A broker cancelled because another started answering reads as overtaken when a fatal
/// failure then ends the refresh — not as the connect timeout its recorded error's kind
/// names (the kind the property model counts), which never ran out.
#[test]
fn an_overtaken_broker_reads_overtaken_not_timed_out_when_the_refresh_then_fails_fatally() {
    let mut run = Run::new(fixed(10), 3);
    run.advance(ms(10));
    let (a0, a1) = (run.attempt(0), run.attempt(1));
    let out = run.input(ms(11), Input::FirstFrame { attempt: a1 });
    assert_eq!(out, [Command::Cancel { attempt: a0, reason: CancelReason::Overtaken }]);
    let out = run.input(ms(12), failed(a1, ErrorKind::BrokerError(58)));
    let Some(Command::GiveUp(err)) = out.last() else { panic!("{out:?}") };
    assert_eq!(err.brokers[0].last_error.as_ref().map(|e| e.kind), Some(ErrorKind::ConnectTimeout));
    assert_eq!(
        err.brokers.iter().map(|b| b.to_string()).collect::<Vec<_>>(),
        [
            "cancelled: overtaken: silent while another broker was answering",
            "broker error 58 (SASL_AUTHENTICATION_FAILED)",
            "not tried"
        ]
    );
}

/// A broker's story is its latest attempt's: overtaken, then tried again because the
/// broker that overtook it failed, and refused, it reads refused.
#[test]
fn an_overtaken_broker_tried_again_reads_as_its_latest_attempt_ended() {
    let mut c = fixed(10);
    c.retry.retries = 0;
    let mut run = Run::new(c, 2);
    run.advance(ms(10));
    let (a0, a1) = (run.attempt(0), run.attempt(1));
    assert_eq!(
        run.input(ms(11), Input::FirstFrame { attempt: a1 }),
        [Command::Cancel { attempt: a0, reason: CancelReason::Overtaken }]
    );
    // Broker 1 fails after all: overtaken broker 0 is tried again, and refuses.
    run.input(ms(12), failed(a1, ErrorKind::Closed));
    let a2 = run.attempt(2);
    assert_eq!(run.connects()[2].2, BrokerIndex(0));
    let out = run.input(ms(13), failed(a2, ErrorKind::Refused));
    let Some(Command::GiveUp(err)) = out.last() else { panic!("{out:?}") };
    assert_eq!(
        err.to_string(),
        "metadata refresh failed: every broker failed in 1 pass; last error from broker-0:9092: connection refused\n  \
         broker-0:9092: connection refused (2 attempts)\n  \
         broker-1:9092: connection closed by the broker (1 attempt)"
    );
}

#[test]
fn cluster_authorization_error_code_is_fatal_too() {
    let mut r = Refresh::new(&fixed(10), &book(3), Instant::ZERO).unwrap();
    let rows = [
        (ms(0), Start, vec![Connect(0, 0)]),
        (ms(1), Failed(0, ErrorKind::BrokerError(31)), vec![GiveUp(GiveUpReason::Fatal)]),
    ];
    table::run(&mut r, &rows);
}

#[test]
fn a_response_without_brokers_or_with_a_top_level_error_is_a_failure() {
    let mut run = Run::new(fixed(100), 3);
    let a0 = run.attempt(0);
    let out = run.input(ms(1), Input::Response { attempt: a0, metadata: Metadata::default() });
    assert_eq!(out[0], Command::Cancel { attempt: a0, reason: CancelReason::Rejected });
    assert!(matches!(out[1], Command::Connect { .. }), "next broker at once: {out:?}");
    let a1 = run.attempt(1);
    let mut bad = metadata();
    bad.error_code = 129;
    let out = run.input(ms(2), Input::Response { attempt: a1, metadata: bad });
    assert!(matches!(out[1], Command::Connect { .. }), "{out:?}");
    let info = run.refresh.attempt(a1).unwrap();
    assert_eq!(info.state, stagger::AttemptState::Failed);
}

#[test]
fn sequential_preset_tries_one_broker_at_a_time() {
    let mut run = Run::new(RefreshConfig::sequential(), 3);
    run.advance(ms(9_999));
    assert_eq!(run.connects().len(), 1);
    let out = run.advance(ms(10_000));
    assert!(matches!(
        &out[..],
        [(_, Command::Cancel { reason: CancelReason::TimedOut, .. }), (_, Command::Connect { .. })]
    ));
    let a1 = run.attempt(1);
    run.input(ms(10_001), failed(a1, ErrorKind::Refused));
    assert_eq!(run.connects().len(), 3);
    assert_eq!(run.refresh.in_flight(), 1);
}

#[test]
fn all_at_once_preset_starts_every_broker_immediately() {
    let run = Run::new(RefreshConfig::all_at_once(), 7);
    assert_eq!(run.connects().len(), 7);
    assert!(run.connects().iter().all(|c| c.0 == Instant::ZERO));
}

#[test]
fn same_seed_same_commands_different_seed_different_order() {
    let mut book = book(1);
    let hosts: Vec<BrokerMetadata> =
        (0..10).map(|i| BrokerMetadata { node_id: i, host: format!("h{i}"), port: 9092, rack: None }).collect();
    book.learn_from(&Metadata { brokers: hosts, ..Metadata::default() });
    let commands = |seed| {
        let mut r = Refresh::new(&RefreshConfig::all_at_once().with_seed(seed), &book, Instant::ZERO).unwrap();
        std::iter::from_fn(|| r.poll_command()).collect::<Vec<_>>()
    };
    assert_eq!(commands(1), commands(1));
    assert_ne!(commands(1), commands(2));
}

fn cluster_config() -> ClusterConfig {
    ClusterConfig { refresh: fixed(100), ..ClusterConfig::default() }
}

fn events(c: &mut Cluster) -> Vec<ClusterEvent> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

#[test]
fn cluster_coalesces_concurrent_requests_and_caches_metadata() {
    let mut cluster = Cluster::new(cluster_config(), book(3), Instant::ZERO).unwrap();
    let e1 = cluster.request_refresh(ms(0));
    let e2 = cluster.request_refresh(ms(1));
    assert_eq!(e1, e2, "single-flight");
    let ev = events(&mut cluster);
    let connects: Vec<_> = ev.iter().filter(|e| matches!(e, ClusterEvent::Connect { .. })).collect();
    assert_eq!(connects.len(), 1);
    let ClusterEvent::Connect { attempt, .. } = connects[0] else { unreachable!() };
    cluster.handle_input(ms(5), response(*attempt));
    let ev = events(&mut cluster);
    assert!(matches!(ev.last(), Some(ClusterEvent::Refreshed { epoch, .. }) if *epoch == e1), "{ev:?}");
    assert_eq!(cluster.metadata(), Some(&metadata()));
    assert_eq!(cluster.metadata_age(ms(105)), Some(Duration::from_millis(100)));
    // The next request is a new refresh, and it asks the broker that answered first, on the
    // connection kept from the win.
    let e3 = cluster.request_refresh(ms(200));
    assert_ne!(e3, e1);
    let ev = events(&mut cluster);
    assert!(matches!(ev[0], ClusterEvent::Reuse { broker, .. } if cluster.book().address(broker) == "broker-0:9092"));
}

#[test]
fn cluster_refreshes_periodically() {
    let mut config = cluster_config();
    config.refresh_interval = Duration::from_secs(60);
    let mut cluster = Cluster::new(config, book(2), Instant::ZERO).unwrap();
    assert_eq!(cluster.poll_timeout(), Some(ms(60_000)));
    cluster.handle_timeout(ms(60_000));
    assert!(matches!(events(&mut cluster)[..], [ClusterEvent::Connect { .. }]));
}

#[test]
fn cluster_with_an_empty_hedge_budget_holds_extra_attempts_back() {
    let mut config = cluster_config();
    config.hedge_budget = stagger::HedgeBudget { ratio: 0.0, burst: 0 };
    let mut cluster = Cluster::new(config, book(3), Instant::ZERO).unwrap();
    cluster.request_refresh(ms(0));
    assert_eq!(events(&mut cluster).len(), 1);
    // The tick may not add an attempt, but it replaces the silent one in place (one in
    // flight, as before), and the next tick is a fixed stagger later: a fixed stagger never
    // doubles.
    assert_eq!(cluster.poll_timeout(), Some(ms(100)));
    cluster.handle_timeout(ms(100));
    let ev = events(&mut cluster);
    assert!(
        matches!(ev[..], [ClusterEvent::Cancel { reason: CancelReason::Superseded, .. }, ClusterEvent::Connect { .. }]),
        "{ev:?}"
    );
    assert_eq!(cluster.current().unwrap().in_flight(), 1);
    assert_eq!(cluster.current().unwrap().stats().hedges, 0, "no extra attempt was paid for");
    assert_eq!(cluster.poll_timeout(), Some(ms(200)), "100 ms from the replacement's start");
}

#[test]
fn cluster_hedge_budget_allows_hedges_while_tokens_last() {
    let mut config = cluster_config();
    config.hedge_budget = stagger::HedgeBudget { ratio: 0.0, burst: 1 };
    let mut cluster = Cluster::new(config, book(3), Instant::ZERO).unwrap();
    cluster.request_refresh(ms(0));
    events(&mut cluster);
    cluster.handle_timeout(ms(100));
    let ev = events(&mut cluster);
    assert!(matches!(ev[..], [ClusterEvent::Connect { .. }]), "one hedge paid by the token: {ev:?}");
    assert_eq!(cluster.current().unwrap().in_flight(), 2);
    // Budget spent: the next tick replaces the newest silent suspect instead of adding one.
    assert_eq!(cluster.poll_timeout(), Some(ms(200)));
    cluster.handle_timeout(ms(200));
    let ev = events(&mut cluster);
    assert!(
        matches!(ev[..], [ClusterEvent::Cancel { reason: CancelReason::Superseded, .. }, ClusterEvent::Connect { .. }]),
        "{ev:?}"
    );
    assert_eq!(cluster.current().unwrap().in_flight(), 2, "no extra load without budget");
}

#[test]
fn cluster_rebootstraps_from_seeds_when_every_discovered_broker_failed() {
    let mut config = cluster_config();
    config.refresh.retry.retries = 0;
    let mut cluster = Cluster::new(config, BrokerBook::new(["seed:9092"]).unwrap(), Instant::ZERO).unwrap();
    cluster.request_refresh(ms(0));
    let ClusterEvent::Connect { attempt, .. } = events(&mut cluster)[0] else { panic!() };
    let discovered = Metadata {
        brokers: (1..=2)
            .map(|i| BrokerMetadata { node_id: i, host: format!("d{i}"), port: 9092, rack: None })
            .collect(),
        ..Metadata::default()
    };
    cluster.handle_input(ms(1), Input::Response { attempt, metadata: discovered });
    events(&mut cluster);
    assert!(cluster.book().has_discovered());
    let mut t = 10;
    cluster.request_refresh(ms(t));
    let mut rebootstrapped = false;
    for _ in 0..10 {
        for e in events(&mut cluster) {
            match e {
                ClusterEvent::Connect { attempt, .. } | ClusterEvent::Reuse { attempt, .. } => {
                    t += 1;
                    cluster.handle_input(ms(t), failed(attempt, ErrorKind::Refused));
                }
                ClusterEvent::Rebootstrapped => rebootstrapped = true,
                _ => {}
            }
        }
    }
    assert!(rebootstrapped);
    assert!(!cluster.book().has_discovered());
    cluster.request_refresh(ms(t + 1));
    let ev = events(&mut cluster);
    assert!(
        matches!(ev[0], ClusterEvent::Connect { broker, .. } if cluster.book().address(broker) == "seed:9092"),
        "{ev:?}"
    );
}

#[test]
fn a_full_throttle_replaces_the_newest_silent_suspect_at_each_tick() {
    let mut run = Run::new(fixed(100), 10); // max_in_flight 3, replace_when_full by default
    let out = run.advance(ms(300));
    let (a0, a2) = (run.attempt(0), run.attempt(2));
    assert_eq!(out.len(), 4, "{out:?}");
    // The oldest keeps its place (in a queue it is the one closest to an answer).
    assert_eq!(out[2], (ms(300), Command::Cancel { attempt: a2, reason: CancelReason::Superseded }));
    assert!(matches!(out[3], (t, Command::Connect { .. }) if t == ms(300)));
    assert_eq!(run.refresh.in_flight(), 3, "the throttle still holds");
    // A broker that has answered something is not a silent suspect: the next tick skips it.
    let a3 = run.attempt(3);
    run.input(ms(350), Input::FirstFrame { attempt: a3 });
    assert_eq!(run.refresh.in_flight(), 1, "its answer overtook the silent ones");
    let out = run.input(ms(351), response(a3));
    assert!(matches!(out.last(), Some(Command::Done { .. })), "{out:?}");
    assert_eq!(run.refresh.attempt(a0).unwrap().state, stagger::AttemptState::Cancelled);
}

#[test]
fn a_tick_never_supersedes_what_it_just_started() {
    let mut c = fixed(100);
    c.fanout.growth = Growth::Linear(2);
    c.fanout.tuning.spread_ticks = false; // both of a tick's attempts at the tick
    let mut run = Run::new(c, 10);
    run.advance(ms(200));
    // 0 ms: #0; 100 ms: #1, #2; 200 ms: the throttle is full, so the tick supersedes the
    // newest suspects (#2, then #1) — never #3, which it has just started.
    let cancelled: Vec<_> = run
        .log
        .iter()
        .filter_map(|(t, c)| match c {
            Command::Cancel { attempt, reason: CancelReason::Superseded } => Some((*t, attempt.number())),
            _ => None,
        })
        .collect();
    assert_eq!(cancelled, [(ms(200), 2), (ms(200), 1)]);
    assert_eq!(run.connects().len(), 5);
    assert_eq!(run.refresh.in_flight(), 3);
}

#[test]
fn adaptive_default_gets_past_three_silent_brokers_without_exceeding_the_throttle() {
    let mut run = Run::new(no_jitter(RefreshConfig::default()), 6);
    // Every attempt connects after 100 µs and then stays silent, except the fourth broker's.
    let mut t = Instant::ZERO;
    for _ in 0..40 {
        let connects = run.connects();
        for (started, attempt, _) in &connects {
            let connected = started.saturating_add(Duration::from_micros(100));
            if run.refresh.attempt(*attempt).unwrap().connected_at.is_none() && connected <= t.max(connected) {
                run.input(connected, Input::Connected { attempt: *attempt, tls: false });
            }
        }
        if connects.len() >= 4 {
            let (started, a3, _) = connects[3];
            let out = run.input(started.saturating_add(Duration::from_millis(1)), response(a3));
            assert!(matches!(out.last(), Some(Command::Done { .. })), "{out:?}");
            // The first broker was silent 24 ms after its 0.1 ms handshake (2 × the 12 ms
            // silent pace): at 24.1 ms the tick started the second, and its partner the third
            // at 36.1 ms (half the delay later: on this fast network a healthy broker would
            // have answered by then); the next tick counts from the tick's first attempt, 24 ms
            // after its handshake at 24.2 ms, so at 48.2 ms it started the fourth broker.
            let times: Vec<_> = connects.iter().map(|c| c.0).collect();
            assert_eq!(times, [us(0), us(24_100), us(36_100), us(48_200)]);
            assert_eq!(started, us(48_200));
            return;
        }
        t = run.refresh.poll_timeout().unwrap();
        run.advance(t);
        assert!(run.refresh.in_flight() <= 3);
    }
    panic!("the fourth attempt never started: {:?}", run.connects());
}

#[test]
fn partial_configs_deserialize_over_the_defaults() {
    let c: RefreshConfig = serde_json::from_str(r#"{"fanout":{"max_in_flight":2},"seed":9}"#).unwrap();
    assert_eq!(c.fanout.max_in_flight, 2);
    assert_eq!(c.seed, 9);
    assert_eq!(c.attempt_timeout, RefreshConfig::default().attempt_timeout);
    assert_eq!(c.fanout.stagger, RefreshConfig::default().fanout.stagger);
}

#[test]
fn error_kind_names_match_their_serde_tags() {
    for kind in [ErrorKind::Refused, ErrorKind::ConnectTimeout, ErrorKind::BrokerError(3), ErrorKind::NoBrokers] {
        let json = serde_json::to_value(kind).unwrap();
        assert_eq!(json["kind"], kind.name());
    }
}

/// A kept connection is asked for Metadata alone. The first time, before any kept connection
/// has answered, it is suspected on the pace of the Metadata answer the bootstrap saw after
/// its broker's first answer, not on that first answer's.
#[test]
fn a_kept_connection_reads_the_metadata_pace_its_bootstrap_showed() {
    // The bootstrap's handshake takes 8 ms, its ApiVersions answer comes 1 ms after it and
    // its Metadata 13 ms after that: the kept connection is suspected 2 × 13 ms after it
    // comes up, not at the kept floor (20 ms; 2 × the 1 ms first answer would be less).
    assert_eq!(kept_wait_after_a_bootstrap(false, 22), Duration::from_millis(26));
    // Metadata 300 ms after the first answer: patience for twice that.
    assert_eq!(kept_wait_after_a_bootstrap(false, 309), Duration::from_millis(600));
}

/// Over TLS a fresh connection's first answer ends its handshake, and what follows (a SASL
/// exchange, ApiVersions, Metadata) may queue behind a cold start's other handshakes: it does
/// not teach what a kept connection's Metadata takes. So the refresh after a TLS bootstrap is
/// gentle (the view is not calm before it has seen a kept connection's pace: the connected
/// kept broker waits the ceiling, 2 s), and the fast policy (`gentle_until_calm` off)
/// suspects the kept connection as if the bootstrap had shown no Metadata pace (2 × its
/// 8 ms handshake, raised to the kept floor, 20 ms), not after twice the 300 ms that followed.
#[test]
fn what_follows_a_tls_handshake_does_not_teach_the_kept_pace() {
    assert_eq!(kept_wait_after_a_bootstrap(true, 309), Duration::from_secs(2));
    assert_eq!(fast_kept_wait_after_a_bootstrap(true, 309), Duration::from_millis(20));
}

/// How long the kept connection may stay silent in the refresh after an unjittered adaptive
/// bootstrap whose fresh connection came up at 8 ms (over TLS if `tls`), first answered at
/// 9 ms and brought Metadata at `metadata_at` ms.
fn kept_wait_after_a_bootstrap(tls: bool, metadata_at: u64) -> Duration {
    kept_wait_after(
        ClusterConfig { refresh: no_jitter(RefreshConfig::adaptive()), ..ClusterConfig::default() },
        tls,
        metadata_at,
    )
}

/// The same under the fast policy from the start (`gentle_until_calm` off).
fn fast_kept_wait_after_a_bootstrap(tls: bool, metadata_at: u64) -> Duration {
    let config = ClusterConfig {
        refresh: no_jitter(RefreshConfig::adaptive()),
        gentle_until_calm: false,
        ..ClusterConfig::default()
    };
    kept_wait_after(config, tls, metadata_at)
}

fn kept_wait_after(config: ClusterConfig, tls: bool, metadata_at: u64) -> Duration {
    let mut cluster = Cluster::new(config, book(3), Instant::ZERO).unwrap();
    cluster.request_refresh(ms(0));
    let ClusterEvent::Connect { attempt, .. } = events(&mut cluster)[0] else { panic!("a Connect first") };
    cluster.handle_input(ms(8), Input::Connected { attempt, tls });
    cluster.handle_input(ms(9), Input::FirstFrame { attempt });
    cluster.handle_input(ms(metadata_at), response(attempt));
    assert!(events(&mut cluster).iter().any(|e| matches!(e, ClusterEvent::Refreshed { .. })));
    let start = ms(1_000);
    cluster.request_refresh(start);
    let ClusterEvent::Reuse { attempt, .. } = events(&mut cluster)[0] else { panic!("the kept connection first") };
    assert!(cluster.current().unwrap().attempt(attempt).unwrap().reused_connection);
    cluster.handle_input(start, Input::Connected { attempt, tls: false });
    cluster.poll_timeout().expect("the stagger timer").saturating_since(start)
}

/// A fresh connection's first answer may end a TLS handshake queued behind a burst of
/// others; a kept connection's is one Metadata request. Once the cluster has seen a kept
/// connection answer, a silent kept connection is suspected at that pace, not at the
/// handshakes'; before, at most `cold` after it came up: a stopped broker behind a kept
/// connection costs milliseconds, not twice a burst's handshake.
#[test]
fn a_kept_connection_waits_at_most_the_cold_delay_and_then_the_pace_of_kept_connections() {
    // The fast policy after a queued bootstrap, which `gentle_until_calm` would follow with
    // a gentle refresh (`a_view_runs_gently_until_a_refresh_meets_no_queue`).
    let config = ClusterConfig {
        refresh: no_jitter(RefreshConfig::adaptive()),
        gentle_until_calm: false,
        ..ClusterConfig::default()
    };
    let mut cluster = Cluster::new(config, book(3), Instant::ZERO).unwrap();
    // A fresh connection: TCP up after 1 ms, the TLS handshake done 300 ms later.
    cluster.request_refresh(ms(0));
    let ClusterEvent::Connect { attempt, .. } = events(&mut cluster)[0] else { panic!("a Connect first") };
    cluster.handle_input(ms(1), Input::Connected { attempt, tls: false });
    cluster.handle_input(ms(301), Input::FirstFrame { attempt });
    cluster.handle_input(ms(305), response(attempt));
    assert!(events(&mut cluster).iter().any(|e| matches!(e, ClusterEvent::Refreshed { .. })));
    // The first reuse knows only fresh connections' pace, 2 × 300 ms: capped at the 40 ms
    // cold delay.
    cluster.request_refresh(ms(1_000));
    let ClusterEvent::Reuse { attempt, .. } = events(&mut cluster)[0] else { panic!("the kept connection first") };
    cluster.handle_input(ms(1_000), Input::Connected { attempt, tls: false });
    assert_eq!(cluster.poll_timeout(), Some(ms(1_040)));
    cluster.handle_input(ms(1_001), Input::FirstFrame { attempt });
    cluster.handle_input(ms(1_002), response(attempt));
    assert!(events(&mut cluster).iter().any(|e| matches!(e, ClusterEvent::Refreshed { .. })));
    // The next knows a kept connection answers after 1 ms: suspected at the kept floor
    // (2 × the 10 ms floor).
    cluster.request_refresh(ms(2_000));
    let ClusterEvent::Reuse { attempt, .. } = events(&mut cluster)[0] else { panic!("the kept connection first") };
    cluster.handle_input(ms(2_000), Input::Connected { attempt, tls: false });
    assert_eq!(cluster.poll_timeout(), Some(ms(2_020)));
}

/// A long-lived cluster learns its brokers' pace from the first answers on fresh
/// connections: where they answer 3 ms after the handshake, a connected, silent broker is
/// suspected 2 × 3 ms after its handshake — up to the 10 ms floor — instead of the 24 ms a
/// one-shot refresh, which has seen no first answer, allows.
#[test]
fn a_cluster_that_has_seen_fast_first_answers_suspects_sooner_than_a_one_shot_refresh() {
    let refresh = no_jitter(RefreshConfig::adaptive());
    let mut one_shot = Run::new(refresh, 3);
    let a0 = one_shot.attempt(0);
    one_shot.input(us(100), Input::Connected { attempt: a0, tls: false });
    assert_eq!(one_shot.refresh.poll_timeout(), Some(us(24_100)), "2 × the 12 ms silent pace");

    let config = ClusterConfig { refresh, ..ClusterConfig::default() };
    let mut cluster = Cluster::new(config, book(3), Instant::ZERO).unwrap();
    // First refresh: a fresh connection, up in 100 µs; its broker answers 3 ms later.
    cluster.request_refresh(ms(0));
    let [ClusterEvent::Connect { attempt, broker }] = events(&mut cluster)[..] else { panic!("one Connect") };
    cluster.handle_input(us(100), Input::Connected { attempt, tls: false });
    cluster.handle_input(us(3_100), Input::FirstFrame { attempt });
    cluster.handle_input(us(3_500), response(attempt));
    assert!(events(&mut cluster).iter().any(|e| matches!(e, ClusterEvent::Refreshed { .. })));
    // Its connection is closed: the next refresh connects afresh.
    cluster.connection_closed(broker);
    cluster.request_refresh(ms(1_000));
    let [ClusterEvent::Connect { attempt, broker: first }] = events(&mut cluster)[..] else { panic!("one Connect") };
    cluster.handle_input(us(1_000_100), Input::Connected { attempt, tls: false });
    assert!(!cluster.current().unwrap().attempt(attempt).unwrap().reused_connection);
    // Silent: suspected 10 ms after its handshake, and the next broker starts.
    let next = cluster.current().unwrap().next_timer();
    assert_eq!(next, Some((us(1_010_100), stagger::TimerKind::Stagger)));
    cluster.handle_timeout(us(1_010_099));
    assert!(events(&mut cluster).is_empty());
    cluster.handle_timeout(us(1_010_100));
    let [ClusterEvent::Connect { broker: next, .. }] = events(&mut cluster)[..] else { panic!("one Connect") };
    assert_ne!(next, first);
}

#[test]
fn out_of_budget_a_silent_suspect_is_replaced_not_waited_out() {
    let refresh = no_jitter(RefreshConfig::adaptive());
    let hedge_budget = stagger::HedgeBudget { ratio: 0.0, burst: 0 };
    // The fast policy's replacements, from the first refresh on.
    let config = ClusterConfig { refresh, hedge_budget, gentle_until_calm: false, ..ClusterConfig::default() };
    let mut cluster = Cluster::new(config, book(5), Instant::ZERO).unwrap();
    cluster.request_refresh(ms(0));
    let connect = |ev: &[ClusterEvent]| match ev {
        [.., ClusterEvent::Connect { attempt, .. }] => *attempt,
        other => panic!("expected a Connect last: {other:?}"),
    };
    let mut attempt = connect(&events(&mut cluster));
    // Each silent broker connects 1 ms after its start; with no budget the tick replaces it
    // (in flight stays 1) instead of adding a hedge, and each replacement doubles the next
    // wait: 24 ms after the first handshake (2 × the 12 ms silent pace), then 48 ms, then
    // 96 ms. Each tick's spread partner is due half the delay that ran out after it (12 ms
    // after the 25 ms tick, 24 ms after the 74 ms one), and out of budget starts nothing: a
    // partner never replaces in place.
    let mut start = 0;
    for (k, (wait, partner)) in [(24, None), (48, Some(37)), (96, Some(98))].into_iter().enumerate() {
        cluster.handle_input(ms(start + 1), Input::Connected { attempt, tls: false });
        let tick = start + 1 + wait;
        if let Some(partner) = partner {
            let next = cluster.current().unwrap().next_timer();
            assert_eq!(next, Some((ms(partner), stagger::TimerKind::Spread)), "replacement {k}");
            cluster.handle_timeout(ms(partner));
            assert!(events(&mut cluster).is_empty(), "replacement {k}: no partner without budget");
        }
        assert_eq!(cluster.poll_timeout(), Some(ms(tick)), "replacement {k}");
        cluster.handle_timeout(ms(tick));
        let ev = events(&mut cluster);
        assert!(
            matches!(ev[0], ClusterEvent::Cancel { attempt: a, reason: CancelReason::Superseded } if a == attempt),
            "{ev:?}"
        );
        attempt = connect(&ev);
        assert_eq!(cluster.current().unwrap().in_flight(), 1, "no extra load without budget");
        start = tick;
    }
    assert_eq!(cluster.current().unwrap().stats().hedges, 0);
    // Once a broker answers, nothing is replaced any more: it is busy, not hung.
    cluster.handle_input(ms(start + 1), Input::Connected { attempt, tls: false });
    cluster.handle_input(ms(start + 2), Input::FirstFrame { attempt });
    assert_eq!(cluster.current().unwrap().next_timer().map(|(_, k)| k), Some(stagger::TimerKind::AttemptTimeout));
    cluster.handle_input(ms(start + 3), response(attempt));
    assert!(events(&mut cluster).iter().any(|e| matches!(e, ClusterEvent::Refreshed { .. })));
}

/// A `Cluster` with one refresh behind it, won on a fresh connection whose broker answered
/// 3 ms after a 100 µs handshake; returns the broker its metadata listed (the discovered one,
/// tried first by the next refresh unless a cause moves it).
fn warmed_cluster(brokers: usize) -> (Cluster, BrokerIndex) {
    let refresh = no_jitter(RefreshConfig::adaptive());
    let mut cluster =
        Cluster::new(ClusterConfig { refresh, ..ClusterConfig::default() }, book(brokers), Instant::ZERO).unwrap();
    cluster.request_refresh(ms(0));
    assert_eq!(cluster.current().unwrap().cause(), stagger::RefreshCause::Bootstrap, "no metadata yet");
    let [ClusterEvent::Connect { attempt, broker }] = events(&mut cluster)[..] else { panic!("one Connect") };
    cluster.handle_input(us(100), Input::Connected { attempt, tls: false });
    cluster.handle_input(us(3_100), Input::FirstFrame { attempt });
    cluster.handle_input(us(3_500), response(attempt));
    assert!(events(&mut cluster).iter().any(|e| matches!(e, ClusterEvent::Refreshed { .. })));
    cluster.connection_closed(broker);
    let discovered = cluster.book().iter().find(|(_, e)| e.is_discovered()).map(|(i, _)| i).unwrap();
    (cluster, discovered)
}

#[test]
fn after_a_lost_connection_a_broker_still_connecting_is_suspected_after_the_pace_and_a_connected_one_at_the_ceiling() {
    let (mut cluster, lost) = warmed_cluster(4);
    let cause = stagger::RefreshCause::ConnectionLost;
    cluster.request_refresh_because(ms(1_000), cause, Some(lost));
    assert_eq!(cluster.current().unwrap().cause(), cause);
    let [ClusterEvent::Connect { attempt, broker: first }] = events(&mut cluster)[..] else { panic!("one Connect") };
    assert_ne!(first, lost, "the broker that was lost is tried last");
    // A failover: every client of the lost broker refreshes now, and the brokers left are
    // queued. A connect still pending is suspected after the 100 ms pace (not the 10 ms the
    // 3.5 ms response time would give), then one broker starts.
    let next = cluster.current().unwrap().next_timer();
    assert_eq!(next, Some((ms(1_100), stagger::TimerKind::Stagger)));
    cluster.handle_timeout(us(1_099_999));
    assert!(events(&mut cluster).is_empty());
    cluster.handle_timeout(ms(1_100));
    let [ClusterEvent::Connect { attempt: second_attempt, broker: second }] = events(&mut cluster)[..] else {
        panic!("one Connect")
    };
    assert!(second != first && second != lost);
    let next = cluster.current().unwrap().next_timer();
    assert!(!matches!(next, Some((_, stagger::TimerKind::Spread))), "no partner: {next:?}");
    // A broker that accepted the connection is alive or stopped, and in a failover far more
    // likely queued: a new connection to a third broker would only lengthen its queue, so it
    // is suspected only at the ceiling (2 s) after its handshake.
    cluster.handle_input(us(1_100_100), Input::Connected { attempt: second_attempt, tls: false });
    // The first, still connecting long after this one connected, is outrun.
    let ev = events(&mut cluster);
    assert!(
        matches!(ev[..], [ClusterEvent::Cancel { attempt: a, reason: stagger::CancelReason::Outrun }] if a == attempt),
        "{ev:?}"
    );
    let next = cluster.current().unwrap().next_timer();
    assert_eq!(next, Some((us(3_100_100), stagger::TimerKind::Stagger)));
    cluster.handle_timeout(us(3_100_099));
    let ev = events(&mut cluster);
    assert!(ev.is_empty(), "{ev:?}");
}

#[test]
fn stale_metadata_is_gentle_too_but_a_request_timeout_keeps_the_refresh_quick_and_skips_its_broker() {
    let (mut cluster, _) = warmed_cluster(4);
    cluster.request_refresh_because(ms(1_000), stagger::RefreshCause::StaleMetadata, None);
    let [ClusterEvent::Connect { attempt, .. }] = events(&mut cluster)[..] else { panic!("one Connect") };
    cluster.handle_input(us(1_000_100), Input::Connected { attempt, tls: false });
    assert_eq!(cluster.current().unwrap().next_timer(), Some((us(3_000_100), stagger::TimerKind::Stagger)));

    let (mut cluster, hung) = warmed_cluster(4);
    cluster.request_refresh_because(ms(1_000), stagger::RefreshCause::RequestTimedOut, Some(hung));
    let [ClusterEvent::Connect { attempt, broker }] = events(&mut cluster)[..] else { panic!("one Connect") };
    assert_ne!(broker, hung, "the broker that timed out is tried last");
    cluster.handle_input(us(1_000_100), Input::Connected { attempt, tls: false });
    // One client's evidence of a hung broker: as quick as ever (2 × the 3 ms pace, floored).
    assert_eq!(cluster.current().unwrap().next_timer(), Some((us(1_010_100), stagger::TimerKind::Stagger)));
}

#[test]
fn a_periodic_refresh_says_so_and_a_cause_joining_a_running_refresh_still_marks_its_broker() {
    let (mut cluster, discovered) = warmed_cluster(3);
    let interval = cluster.config().refresh_interval;
    let due = Instant::from_micros(3_500 + interval.as_micros() as u64);
    cluster.handle_timeout(due);
    assert_eq!(cluster.current().unwrap().cause(), stagger::RefreshCause::Periodic);
    let epoch = cluster.current().unwrap().epoch();
    let joined = cluster.request_refresh_because(due, stagger::RefreshCause::RequestTimedOut, Some(discovered));
    assert_eq!(joined, epoch, "single-flight");
    assert!(!cluster.book().get(discovered).unwrap().connected);
    let order = cluster.book().candidates(due, 0);
    assert_eq!(order.last(), Some(&discovered), "tried last from now on: {order:?}");
}

/// A fleet starting at once queues every broker's TLS handshake, so each client's first
/// broker sits silent in its handshake as a stopped one would. A `Cluster`'s bootstrap is
/// gentle (`ClusterConfig::gentle_until_calm`): it suspects that broker only at the 2 s
/// ceiling, where the fast policy would start a second handshake within 40 ms.
#[test]
fn a_gentle_refresh_waits_the_ceiling_for_a_silent_tls_handshake() {
    for (gentle_until_calm, want) in [(true, us(2_000_100)), (false, us(40_100))] {
        let refresh = no_jitter(RefreshConfig::adaptive());
        let config = ClusterConfig { refresh, gentle_until_calm, ..ClusterConfig::default() };
        let mut cluster = Cluster::new(config, book(4), Instant::ZERO).unwrap();
        cluster.request_refresh(ms(0));
        let [ClusterEvent::Connect { attempt, .. }] = events(&mut cluster)[..] else { panic!("one Connect") };
        cluster.handle_input(us(100), Input::Connected { attempt, tls: true });
        let next = cluster.current().unwrap().next_timer();
        assert_eq!(next, Some((want, stagger::TimerKind::Stagger)), "gentle_until_calm {gentle_until_calm}");
    }
}

#[test]
fn in_a_gentle_refresh_an_answering_broker_gets_the_ceiling() {
    for (cause, want) in [
        // 16 × the 3.5 ms response time the first refresh taught the cluster.
        (stagger::RefreshCause::Requested, us(1_056_000)),
        // A failover: the broker left is alive and queued behind everyone's refresh.
        (stagger::RefreshCause::StaleMetadata, us(3_000_000)),
    ] {
        let (mut cluster, _) = warmed_cluster(4);
        cluster.request_refresh_because(ms(1_000), cause, None);
        let [ClusterEvent::Connect { attempt, .. }] = events(&mut cluster)[..] else { panic!("one Connect") };
        cluster.handle_input(us(1_000_100), Input::Connected { attempt, tls: false });
        cluster.handle_input(us(1_001_000), Input::FirstFrame { attempt });
        let next = cluster.current().unwrap().next_timer();
        assert_eq!(next, Some((want, stagger::TimerKind::Stagger)), "{cause:?}");
    }
}

#[test]
fn a_plain_request_after_a_reset_kept_connection_is_a_refresh_because_of_it() {
    let (mut cluster, discovered) = warmed_cluster(3);
    cluster.connection_lost(discovered);
    cluster.request_refresh(ms(1_000));
    assert_eq!(cluster.current().unwrap().cause(), stagger::RefreshCause::ConnectionLost);
    assert_eq!(cluster.book().candidates(ms(1_000), 0).last(), Some(&discovered), "tried last");
    // Said once: the refresh after it is plain again.
    let [.., ClusterEvent::Connect { attempt, .. }] = events(&mut cluster)[..] else { panic!("a Connect") };
    cluster.handle_input(ms(1_001), Input::Connected { attempt, tls: false });
    cluster.handle_input(ms(1_002), Input::FirstFrame { attempt });
    cluster.handle_input(ms(1_003), response(attempt));
    cluster.request_refresh(ms(2_000));
    assert_eq!(cluster.current().unwrap().cause(), stagger::RefreshCause::Requested);
}
