//! Property tests of the sans-IO core (DESIGN.md, "Tests", item 2).
//!
//! Every property drives the real [`Refresh`] (or [`Cluster`]) with generated configs,
//! broker books and input sequences — time that jumps and goes backwards, inputs naming
//! unknown, finished or foreign attempts, bad answers, fatal errors — and checks the command
//! stream with an independent bookkeeper ([`Tracker`](tracker::Tracker)) that knows only the
//! public contract: which attempts are in flight, which inputs count, which failure came
//! last. A reference model of the policy for a restricted configuration predicts the exact
//! timed command sequence and is checked against the machine.
//!
//! Case counts default to what keeps this target at a few seconds in debug builds on two
//! cores; set `PROPTEST_CASES` to override them all.
//!
//! Where things are:
//!
//! * this file: the proptest settings and the properties of a bare [`Refresh`] (1–9, the
//!   arbitrary-config property, trace replay 11);
//! * [`strategies`]: generated configs, scenarios and inputs, and how raw integers decode to them;
//! * [`tracker`]: the bookkeeper and the invariants ([`Inv`](tracker::Inv)) it checks;
//! * [`driver`]: drives a `Refresh` (or a trace `Recorder`) through a scenario, feeding the tracker;
//! * [`model`]: the reference model of the policy and its property (10);
//! * [`cluster`]: the [`Cluster`] driver and its properties (12–12e);
//! * [`regressions`]: minimal repros of bugs the properties found, as plain `#[test]`s.

mod cluster;
mod driver;
mod model;
mod regressions;
mod strategies;
mod tracker;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use stagger::test_util::numbered_seeds;
use stagger::Trace;
use stagger::{BrokerBook, Cluster, ClusterConfig, Refresh};

use driver::{check, record, record_resolving, run, run_resolving, Clock};
use strategies::{arb_config, arb_mutation, arb_scenario, arb_start, arb_step, at, mutate, Scenario};
use tracker::Inv;

// ============================================================================================
// Proptest settings
// ============================================================================================

/// `cases` unless `PROPTEST_CASES` overrides it; no regression files are written into the
/// source tree (minimal repros of real failures live in [`regressions`] as plain `#[test]`s instead).
fn cases(cases: u32) -> ProptestConfig {
    let mut config = ProptestConfig { failure_persistence: None, ..ProptestConfig::default() };
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = cases;
    }
    config
}

// ============================================================================================
// Properties over arbitrary configs and input sequences
// ============================================================================================

proptest! {
    #![proptest_config(cases(2000))]

    /// 1. No panic on any valid config and input sequence (the run itself), and the basic
    /// bookkeeping agrees with the command stream.
    #[test]
    fn never_panics_and_keeps_its_books(s in arb_scenario()) {
        let run = run(&s, Clock::Free);
        check(&run, &[Inv::Contract])?;
    }

    /// 2. In flight (Connect − Cancel − failed/timed out/won) never exceeds `max_in_flight`.
    #[test]
    fn in_flight_never_exceeds_max_in_flight(s in arb_scenario()) {
        check(&run(&s, Clock::Free), &[Inv::Throttle])?;
    }

    /// 3. Never two attempts in flight to the same broker.
    #[test]
    fn never_two_attempts_to_one_broker(s in arb_scenario()) {
        check(&run(&s, Clock::Free), &[Inv::OneBroker])?;
    }

    /// 4. A stagger tick (a hedge, an attempt replacing a superseded one, or — without
    /// next_on_failure — any start no failure explains) starts no earlier than the previous
    /// start + (1 − jitter)·stagger (Fixed) or + (1 − jitter)·floor (Adaptive; the floor bounds every wait).
    #[test]
    fn stagger_ticks_respect_the_jittered_delay(s in arb_scenario()) {
        check(&run(&s, Clock::Free), &[Inv::Spacing])?;
    }

    /// 5. Exactly one terminal command and nothing after it; driven at `poll_timeout()`,
    /// the machine terminates within a bounded number of calls.
    #[test]
    fn exactly_one_terminal_and_bounded_completion(s in arb_scenario()) {
        check(&run(&s, Clock::Free), &[Inv::Terminal, Inv::Completion])?;
    }

    /// 6. GiveUp(AllFailed{passes}) only when every broker failed in every one of
    /// retries + 1 passes, carrying the last failure; Done only for (and always for) a valid
    /// answer of an attempt in flight.
    #[test]
    fn give_up_and_done_only_when_earned(s in arb_scenario()) {
        check(&run(&s, Clock::Free), &[Inv::GiveUp, Inv::LastError, Inv::Done])?;
    }

    /// 7b. With a clock that never oversleeps a timer, nothing but Cancel{Deadline}/GiveUp
    /// is emitted at or after the deadline, and the refresh finishes by start + deadline.
    #[test]
    fn deadline_holds_when_timers_fire_on_time(s in arb_scenario()) {
        check(&run(&s, Clock::OnTime), &[Inv::Deadline, Inv::DeadlineDriven])?;
    }

    /// 9. After any `handle_*(now)` (and draining), `poll_timeout()` is `None` or later
    /// than `now` (after `new` it may equal `now`).
    #[test]
    fn poll_timeout_is_never_due_after_a_call(s in arb_scenario()) {
        check(&run(&s, Clock::Free), &[Inv::PollTimeout])?;
    }
}

proptest! {
    #![proptest_config(cases(1000))]

    /// 8. Same config, seed and inputs ⇒ the same commands at the same times (four runs per
    /// case, so half the cases of the others).
    #[test]
    fn same_seed_same_commands(s in arb_scenario()) {
        let a = run(&s, Clock::Free);
        let b = run(&s, Clock::Free);
        prop_assert_eq!(&a.log, &b.log, "two runs of one scenario differ");
        let c = run(&s, Clock::OnTime);
        let d = run(&s, Clock::OnTime);
        prop_assert_eq!(&c.log, &d.log, "two on-time runs of one scenario differ");
        prop_assert_eq!(c.refresh.stats(), d.refresh.stats());
    }

    /// 7a. The deadline holds even when the adapter oversleeps: no command other than
    /// Cancel{Deadline}/GiveUp at or after start + deadline.
    #[test]
    fn deadline_holds_even_when_the_adapter_oversleeps(s in arb_scenario()) {
        check(&run(&s, Clock::Free), &[Inv::Deadline])?;
    }
}

// ============================================================================================
// Arbitrary, possibly invalid configs
// ============================================================================================

proptest! {
    #![proptest_config(cases(1500))]

    /// 1. Arbitrary, possibly invalid configs: `Refresh::new` and `Cluster::new` return
    /// `Err` exactly when `validate` does, never panic, and a config they accept runs any
    /// input sequence to completion without panicking or breaking the contract.
    #[test]
    fn arbitrary_configs_are_refused_or_run_without_panic(
        base in arb_config(),
        mutations in prop::collection::vec(arb_mutation(), 0..4),
        brokers in 1usize..=12,
        start in arb_start(),
        steps in prop::collection::vec(arb_step(), 0..40),
    ) {
        let mut cluster_config = ClusterConfig { refresh: base, ..ClusterConfig::default() };
        for m in &mutations {
            mutate(&mut cluster_config, m);
        }
        let config = cluster_config.refresh;
        let book = BrokerBook::new(numbered_seeds(brokers)).unwrap();
        let valid = config.validate();
        let refresh = Refresh::new(&config, &book, at(start));
        prop_assert_eq!(refresh.as_ref().err(), valid.as_ref().err(), "Refresh::new disagrees with validate");
        let cluster_valid = cluster_config.validate();
        let cluster = Cluster::new(cluster_config, book, at(start));
        prop_assert_eq!(cluster.as_ref().err(), cluster_valid.as_ref().err(), "Cluster::new disagrees with validate");
        if valid.is_ok() {
            prop_assert!(cluster_valid.is_ok() || matches!(
                cluster_valid.as_ref().map_err(|e| e.field), Err("hedge_budget.ratio" | "window_quantile")
            ), "a valid refresh policy makes a cluster view invalid only through a cluster knob");
        }
        for e in [&valid, &cluster_valid].into_iter().filter_map(|v| v.as_ref().err()) {
            prop_assert!(!e.field.is_empty() && e.to_string().contains(e.field));
        }
        if valid.is_err() {
            return Ok(());
        }
        let run = run(&Scenario { config, brokers, start, recent: None, steps }, Clock::Free);
        check(&run, &[
            Inv::Contract, Inv::Throttle, Inv::OneBroker, Inv::Spacing, Inv::Terminal, Inv::Completion,
            Inv::GiveUp, Inv::LastError, Inv::Done, Inv::PollTimeout,
        ])?;
    }
}

// ============================================================================================
// Trace replay
// ============================================================================================

proptest! {
    #![proptest_config(cases(600))]

    /// 11. A recorded trace replays to exactly the recorded commands (no divergence), both
    /// as recorded and after a round trip through JSON.
    #[test]
    fn recorded_traces_replay_before_and_after_json(s in arb_scenario()) {
        let (trace, commands) = record(&s);
        match trace.replay() {
            Ok(Ok(replayed)) => prop_assert_eq!(&replayed, &commands, "replay (left) differs from the run (right)"),
            Ok(Err(d)) => return Err(TestCaseError::fail(format!("the trace itself does not replay: {d}"))),
            Err(e) => return Err(TestCaseError::fail(format!("replay refused the config: {e}"))),
        }
        let json = serde_json::to_string(&trace).expect("traces serialise");
        let back: Trace = serde_json::from_str(&json).expect("traces deserialise");
        match back.replay() {
            Ok(Ok(replayed)) => prop_assert_eq!(&replayed, &commands),
            Ok(Err(d)) => return Err(TestCaseError::fail(format!("JSON round-tripped trace diverges: {d}"))),
            Err(e) => return Err(TestCaseError::fail(format!("replay refused the config: {e}"))),
        }
    }

    /// 11b. A trace read back from JSON is the trace that was written.
    #[test]
    fn recorded_traces_round_trip_through_json_losslessly(s in arb_scenario()) {
        let (trace, _) = record(&s);
        let back: Trace = serde_json::from_str(&serde_json::to_string(&trace).unwrap()).unwrap();
        prop_assert_eq!(&back, &trace, "JSON round trip changed the trace");
    }
}

// ============================================================================================
// Resolution: seeds given by name, `Resolve` out and `Resolved` in
// ============================================================================================

/// Every invariant a bare refresh keeps, which a refresh resolving names keeps too.
const RESOLVING_INVARIANTS: [Inv; 12] = [
    Inv::Contract,
    Inv::Throttle,
    Inv::OneBroker,
    Inv::Spacing,
    Inv::Terminal,
    Inv::Completion,
    Inv::GiveUp,
    Inv::LastError,
    Inv::Done,
    Inv::Deadline,
    Inv::PollTimeout,
    Inv::DeadlineDriven,
];

proptest! {
    #![proptest_config(cases(1000))]

    /// 13. A book of names and IP literals, with `Resolved` answers (empty, overlapping the
    /// IP seeds and each other, longer than a refresh takes), stale, repeated and
    /// mismatched ones among arbitrary inputs: no panic, and every invariant of 1–9 holds.
    #[test]
    fn resolving_names_never_panics_and_keeps_every_invariant(s in arb_scenario()) {
        check(&run_resolving(&s, Clock::Free), &RESOLVING_INVARIANTS[..11])?;
        check(&run_resolving(&s, Clock::OnTime), &RESOLVING_INVARIANTS)?;
    }

    /// 13b. A trace with `Resolve` and `Resolved` replays to the recorded commands, before
    /// and after JSON.
    #[test]
    fn traces_with_resolution_replay_before_and_after_json(s in arb_scenario()) {
        let (trace, commands) = record_resolving(&s);
        match trace.replay() {
            Ok(Ok(replayed)) => prop_assert_eq!(&replayed, &commands),
            Ok(Err(d)) => return Err(TestCaseError::fail(format!("the trace does not replay: {d}"))),
            Err(e) => return Err(TestCaseError::fail(format!("replay refused the config: {e}"))),
        }
        let back: Trace = serde_json::from_str(&serde_json::to_string(&trace).unwrap()).unwrap();
        prop_assert_eq!(&back, &trace, "JSON round trip changed the trace");
    }
}
