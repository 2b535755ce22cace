//! Unit and property tests of the two mechanisms the fleet simulation tunes: the adaptive
//! estimator window and the hedge budget. (The fleet's own tests are in `sim/tests/fleet.rs`.)

use std::time::Duration;

use proptest::prelude::*;
use stagger::{
    Adaptive, AttemptError, AttemptId, BrokerBook, BrokerMetadata, Cluster, ClusterConfig, ClusterEvent, ErrorKind,
    Estimator, HedgeBudget, Input, Instant, Metadata, RefreshConfig, Stagger,
};

// ============================================================================================
// Estimator: window bounds, nearest-rank quantiles, clamps
// ============================================================================================

/// Reference: nearest-rank quantile of the last `stagger::Estimator::WINDOW` observations, by sorting.
fn reference_quantile(observed: &[Duration], q: f64) -> Option<Duration> {
    let tail = &observed[observed.len().saturating_sub(stagger::Estimator::WINDOW)..];
    if tail.is_empty() {
        return None;
    }
    let mut v: Vec<u64> = tail.iter().map(|d| d.as_micros().min(u32::MAX as u128) as u64).collect();
    v.sort_unstable();
    let q = if q.is_nan() { 1.0 } else { q.clamp(0.0, 1.0) };
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(Duration::from_micros(v[rank - 1]))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// The window never holds more than `stagger::Estimator::WINDOW` observations, forgets the oldest, and its
    /// quantile is the nearest-rank quantile of exactly the last `stagger::Estimator::WINDOW` observations,
    /// monotone in `q`, within their range, with `q` clamped to [0, 1].
    #[test]
    fn estimator_window_is_bounded_and_exact(
        micros in prop::collection::vec(0u64..5_000_000_000, 0..200),
        q in prop_oneof![Just(f64::NAN), -1.0f64..2.0, 0.0f64..=1.0],
    ) {
        let mut e = Estimator::new();
        let mut seen = Vec::new();
        for &m in &micros {
            let d = Duration::from_micros(m);
            e.observe(d);
            seen.push(d);
            prop_assert!(e.len() <= stagger::Estimator::WINDOW);
            prop_assert_eq!(e.len(), seen.len().min(stagger::Estimator::WINDOW));
        }
        prop_assert_eq!(e.quantile(q), reference_quantile(&seen, q));
        if let Some(x) = e.quantile(q) {
            let lo = e.quantile(0.0).unwrap();
            let hi = e.quantile(1.0).unwrap();
            prop_assert!(lo <= x && x <= hi);
            prop_assert!(e.quantile(0.5).unwrap() <= e.quantile(0.99).unwrap());
            prop_assert!(hi <= Duration::from_micros(u32::MAX as u64), "saturates at u32::MAX µs");
        } else {
            prop_assert!(micros.is_empty());
        }
    }

    /// Each phase's wait stays within [floor, max(floor, ceiling)]: before the handshake it is
    /// `cold` (at least `floor`) when nothing is known and otherwise follows recent answers
    /// up to the ceiling; after it, the scaled handshake; while answering, `patience` times
    /// the typical answer — each clamped, never below the scaled value (up to the ceiling).
    #[test]
    fn adaptive_waits_respect_their_clamps(
        cold in 0u64..1_000_000, multiple in 1u32..50, patience in 1u32..50, floor in 0u64..100_000,
        extra in 0u64..3_000_000, handshake in 0u64..1_000_000, recent in prop::option::of(0u64..5_000_000),
    ) {
        let a = Adaptive {
            cold: Duration::from_micros(cold),
            multiple,
            floor: Duration::from_micros(floor),
            ceiling: Duration::from_micros(floor + extra),
            patience,
            ..Adaptive::default()
        };
        let top = a.ceiling.max(a.floor);
        let r = recent.map(Duration::from_micros);
        let before = a.before_connect(r);
        match r {
            None => prop_assert_eq!(before, a.cold.max(a.floor)),
            Some(r) => {
                prop_assert!(before >= a.floor && before <= top, "{before:?} outside clamps");
                prop_assert!(before >= r.min(a.ceiling));
            }
        }
        let h = Duration::from_micros(handshake);
        let silent = a.after_handshake(h);
        prop_assert!(silent >= a.floor && silent <= top, "{silent:?} outside clamps");
        prop_assert!(silent >= (h * multiple).min(a.ceiling));
        let typical = r.unwrap_or(h);
        let answering = a.while_answering(typical);
        prop_assert!(answering >= a.floor && answering <= top, "{answering:?} outside clamps");
        prop_assert!(answering >= (typical * patience).min(a.ceiling));
    }
}

#[test]
fn estimator_feeds_on_winning_response_times_only() {
    // A cluster whose every refresh is answered 3 ms after it starts learns exactly that.
    let mut d = Driver::new(HedgeBudget::default(), 3, 7);
    for i in 0..80 {
        d.plan = vec![Plan::Answer(3_000)];
        d.refresh();
        assert_eq!(d.cluster.estimator().len(), (i + 1).min(stagger::Estimator::WINDOW));
    }
    let e = d.cluster.estimator();
    assert_eq!(e.quantile(0.0), Some(Duration::from_millis(3)));
    assert_eq!(e.quantile(1.0), Some(Duration::from_millis(3)));
    // A refresh that fails teaches nothing.
    d.plan = vec![Plan::Refuse];
    let before = d.cluster.estimator().clone();
    d.refresh();
    assert_eq!(d.cluster.estimator(), &before);
}

// ============================================================================================
// Hedge budget: never negative, never more extra attempts than the budget allows
// ============================================================================================

/// What a simulated broker does with an attempt.
#[derive(Clone, Copy, Debug)]
enum Plan {
    /// Connects after 100 µs, never answers.
    Hang,
    /// Refused after 100 µs.
    Refuse,
    /// Connects after 100 µs, answers ApiVersions one round trip (100 µs) later if that is
    /// before its metadata, and answers with metadata this many µs after the attempt started.
    Answer(u64),
}

fn arb_plan() -> impl Strategy<Value = Plan> {
    prop_oneof![Just(Plan::Hang), Just(Plan::Refuse), (200u64..400_000).prop_map(Plan::Answer)]
}

/// Drives one `Cluster` by hand: each attempt follows the next entry of `plan` (cyclic).
struct Driver {
    cluster: Cluster,
    now: u64,
    plan: Vec<Plan>,
    next_plan: usize,
    pending: Vec<(u64, AttemptId, Input)>,
}

impl Driver {
    fn new(budget: HedgeBudget, brokers: usize, seed: u64) -> Self {
        let mut refresh = RefreshConfig::adaptive().with_seed(seed);
        refresh.deadline = Duration::from_secs(30);
        refresh.retry.retries = 1;
        let config = ClusterConfig {
            refresh,
            refresh_interval: Duration::from_secs(86_400),
            rebootstrap: false,
            hedge_budget: budget,
            ..ClusterConfig::default()
        };
        let book = BrokerBook::new(stagger::test_util::numbered_seeds(brokers)).unwrap();
        Driver {
            cluster: Cluster::new(config, book, Instant::ZERO).unwrap(),
            now: 0,
            plan: vec![],
            next_plan: 0,
            pending: vec![],
        }
    }

    /// The three brokers of `numbered_seeds(3)`, under a cluster id (the `Cluster` keeps
    /// broker identities only with one).
    fn metadata() -> Metadata {
        let brokers = (0..3)
            .map(|i| BrokerMetadata { node_id: i, host: format!("broker-{i}"), port: 9092, rack: None })
            .collect();
        Metadata { cluster_id: Some("stagger-sim".into()), controller_id: 0, brokers, ..Metadata::default() }
    }

    /// Runs one refresh to its end; returns (tokens at its start, hedged attempts it made,
    /// attempts it started, whether it succeeded).
    fn refresh(&mut self) -> (u32, u32, u32, bool) {
        self.now += 1_000_000;
        let tokens = self.cluster.hedge_tokens();
        let epoch = self.cluster.request_refresh(Instant::from_micros(self.now));
        let (mut hedges, mut started) = (0, 0);
        for _ in 0..10_000 {
            while let Some(ev) = self.cluster.poll_event() {
                match ev {
                    ClusterEvent::Connect { attempt, .. } | ClusterEvent::Reuse { attempt, .. } => {
                        started += 1;
                        let info = self
                            .cluster
                            .current()
                            .and_then(|r| r.attempt(attempt))
                            .copied()
                            .expect("a Connect comes from the running refresh");
                        hedges += info.hedge as u32;
                        let plan = self.plan[self.next_plan % self.plan.len().max(1)];
                        self.next_plan += 1;
                        let t = self.now;
                        match plan {
                            Plan::Hang => {
                                self.pending.push((t + 100, attempt, Input::Connected { attempt, tls: false }))
                            }
                            Plan::Refuse => self.pending.push((
                                t + 100,
                                attempt,
                                Input::Failed { attempt, error: AttemptError::new(ErrorKind::Refused) },
                            )),
                            Plan::Answer(after) => {
                                self.pending.push((t + 100, attempt, Input::Connected { attempt, tls: false }));
                                if after > 200 {
                                    self.pending.push((t + 200, attempt, Input::FirstFrame { attempt }));
                                }
                                self.pending.push((
                                    t + after.max(101),
                                    attempt,
                                    Input::Response { attempt, metadata: Self::metadata() },
                                ));
                            }
                        }
                    }
                    ClusterEvent::Cancel { attempt, .. } => self.pending.retain(|(_, a, _)| *a != attempt),
                    ClusterEvent::Refreshed { epoch: e, stats, .. } if e == epoch => {
                        assert_eq!((stats.hedges, stats.started), (hedges, started));
                        self.pending.clear();
                        return (tokens, hedges, started, true);
                    }
                    ClusterEvent::RefreshFailed { epoch: e, .. } if e == epoch => {
                        self.pending.clear();
                        return (tokens, hedges, started, false);
                    }
                    _ => {}
                }
            }
            let timer = self.cluster.poll_timeout().map(Instant::as_micros);
            let next = self.pending.iter().enumerate().min_by_key(|(_, (t, _, _))| *t).map(|(i, (t, _, _))| (i, *t));
            match (timer, next) {
                (Some(t), Some((_, p))) if t <= p => {
                    self.now = self.now.max(t);
                    self.cluster.handle_timeout(Instant::from_micros(self.now));
                }
                (_, Some((i, p))) => {
                    let (_, _, input) = self.pending.remove(i);
                    self.now = self.now.max(p);
                    self.cluster.handle_input(Instant::from_micros(self.now), input);
                }
                (Some(t), None) => {
                    self.now = self.now.max(t);
                    self.cluster.handle_timeout(Instant::from_micros(self.now));
                }
                (None, None) => panic!("stalled"),
            }
        }
        panic!("refresh did not finish");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Over any sequence of refreshes: a refresh hedges at most as many times as it had
    /// whole tokens when it started; the running total of hedges never exceeds what the
    /// bucket ever held (`burst` plus `ratio` per finished refresh); the token count is a
    /// whole, non-negative number that never exceeds what was put in.
    #[test]
    fn hedges_never_exceed_the_budget(
        ratio in prop_oneof![Just(0.0), Just(0.1), 0.0f64..2.0],
        burst in 0u32..6,
        brokers in 1usize..6,
        seed in any::<u64>(),
        plan in prop::collection::vec(arb_plan(), 1..12),
        refreshes in 1usize..25,
    ) {
        let budget = HedgeBudget { ratio, burst };
        let mut d = Driver::new(budget, brokers, seed);
        d.plan = plan;
        let earned = (ratio * 1000.0) as u64;
        let mut spent = 0u64;
        for k in 0..refreshes {
            let (tokens, hedges, _, _) = d.refresh();
            prop_assert!(hedges <= tokens, "refresh {k}: {hedges} hedges with {tokens} tokens");
            spent += hedges as u64;
            // Milli-token accounting: what was ever put in is the initial burst plus what
            // each finished refresh earned.
            prop_assert!(spent * 1000 <= burst as u64 * 1000 + earned * k as u64,
                "after {} refreshes: {spent} hedges, budget burst {burst} ratio {ratio}", k + 1);
            prop_assert!(d.cluster.hedge_tokens() as u64 * 1000 <= burst as u64 * 1000 + earned * (k as u64 + 1));
        }
    }
}

/// With an empty budget no refresh ever hedges, whatever the brokers do.
#[test]
fn an_empty_budget_never_hedges() {
    let mut d = Driver::new(HedgeBudget { ratio: 0.0, burst: 0 }, 4, 1);
    d.plan = vec![Plan::Hang, Plan::Answer(50_000), Plan::Refuse];
    for _ in 0..10 {
        let (tokens, hedges, _, _) = d.refresh();
        assert_eq!((tokens, hedges), (0, 0));
    }
}

/// The default budget lets a cluster that keeps hitting a silent broker hedge past it, and
/// the bucket refills at `ratio` per refresh.
#[test]
fn the_default_budget_refills_at_its_ratio() {
    let budget = HedgeBudget::default();
    let mut d = Driver::new(budget, 3, 2);
    assert_eq!(d.cluster.hedge_tokens(), budget.burst);
    d.plan = vec![Plan::Hang, Plan::Answer(2_000)];
    let (tokens, hedges, _, ok) = d.refresh();
    // The silent broker's tick starts one broker, which answers before the tick's second
    // attempt is due (a spread tick on a fast network): one hedge.
    assert!(ok && tokens == budget.burst && hedges == 1, "{tokens} tokens, {hedges} hedges");
    assert_eq!(d.cluster.hedge_tokens(), budget.burst - 1, "one spent, a tenth earned");
    (d.plan, d.next_plan) = (vec![Plan::Hang, Plan::Hang, Plan::Answer(2_000)], 0);
    let (_, hedges, _, ok) = d.refresh();
    // Two silent brokers: the tick's partner goes out as well.
    assert!(ok && hedges == 2, "{hedges} hedges");
    assert_eq!(d.cluster.hedge_tokens(), budget.burst - 3, "three spent, two tenths earned");
    d.plan = vec![Plan::Answer(2_000)];
    for _ in 0..10 {
        d.refresh();
    }
    assert_eq!(d.cluster.hedge_tokens(), budget.burst - 2, "ten calm refreshes earn one token back");
    for _ in 0..20 {
        d.refresh();
    }
    assert_eq!(d.cluster.hedge_tokens(), budget.burst, "and twenty more the others, up to the burst");
}

#[test]
fn adaptive_is_the_default_stagger() {
    assert!(matches!(RefreshConfig::default().fanout.stagger, Stagger::Adaptive(_)));
}
