//! Minimal repros of bugs the properties found, kept as regression tests (all fixed). Each
//! names the property that shrank to it.

use std::time::Duration;

use stagger::test_util::numbered_seeds;
use stagger::{
    BrokerBook, CancelReason, Cluster, ClusterConfig, ClusterEvent, Command, HedgeBudget, Input, Instant, Refresh,
    RefreshConfig, Stagger,
};
use stagger::{Recorder, Trace};

use crate::driver::drain;
use crate::strategies::{metadata, Answer};

/// Shrunk from `deadline_holds_even_when_the_adapter_oversleeps`. An adapter whose event loop
/// stalls calls `handle_timeout` after the deadline; the machine used to fire the overdue
/// attempt timeout *first*, with `now` past the deadline, starting a replacement attempt,
/// and only then the deadline, which cancelled it again: a `Connect` (and a
/// `Cancel{TimedOut}`) at or after start + deadline. Now the deadline wins over everything
/// overdue.
#[test]
fn deadline_overslept_timeout_connects_after_deadline() {
    let mut config = RefreshConfig::sequential();
    config.attempt_timeout = Duration::from_secs(1);
    config.fanout.stagger = Stagger::Fixed(Duration::from_secs(1));
    config.deadline = Duration::from_secs(3);
    let book = BrokerBook::new(numbered_seeds(3)).unwrap();
    let mut r = Refresh::new(&config, &book, Instant::ZERO).unwrap();
    assert_eq!(drain(&mut r).len(), 1); // Connect #0.0
    r.handle_timeout(Instant::from_millis(3_500)); // woke up 0.5 s after the deadline
    let commands = drain(&mut r);
    // Before the fix: [Cancel{#0.0, TimedOut}, Connect{#0.1, broker 1}, Cancel{#0.1, Deadline}, GiveUp(..)]
    for c in &commands {
        assert!(
            matches!(c, Command::Cancel { reason: CancelReason::Deadline, .. } | Command::GiveUp(_)),
            "{c:?} emitted 0.5 s after the deadline; all: {commands:?}"
        );
    }
}

/// Same bug through the stagger timer: with the default (adaptive) policy, a wake-up after
/// the deadline used to start the overdue stagger attempt first, then cancel it.
#[test]
fn deadline_overslept_stagger_tick_connects_after_deadline() {
    let mut config = RefreshConfig::adaptive();
    config.deadline = Duration::from_secs(1);
    let book = BrokerBook::new(numbered_seeds(3)).unwrap();
    let mut r = Refresh::new(&config, &book, Instant::ZERO).unwrap();
    drain(&mut r);
    r.handle_timeout(Instant::from_millis(2_000));
    let commands = drain(&mut r);
    // Before the fix: [Connect{#0.1}, Cancel{#0.0, Deadline}, Cancel{#0.1, Deadline}, GiveUp(..)]
    assert!(
        !commands.iter().any(|c| matches!(c, Command::Connect { .. })),
        "Connect emitted 1 s after the deadline: {commands:?}"
    );
}

/// Shrunk from `cluster_hedge_tokens_never_exceed_burst_for_any_budget`: with
/// `hedge_budget.ratio` above `burst` (here ratio 1, burst 0), one settled refresh used to
/// leave more tokens than the bucket holds; the bucket is now capped at `burst`.
#[test]
fn hedge_bucket_overflows_burst_when_ratio_exceeds_it() {
    let config = ClusterConfig { hedge_budget: HedgeBudget { ratio: 1.0, burst: 0 }, ..ClusterConfig::default() };
    let book = BrokerBook::new(numbered_seeds(1)).unwrap();
    let mut cluster = Cluster::new(config, book, Instant::ZERO).unwrap();
    cluster.request_refresh(Instant::ZERO);
    let attempt = match cluster.poll_event() {
        Some(ClusterEvent::Connect { attempt, .. }) => attempt,
        other => panic!("expected a Connect, got {other:?}"),
    };
    cluster.handle_input(Instant::from_millis(5), Input::Response { attempt, metadata: metadata(&Answer::Valid(1)) });
    while cluster.poll_event().is_some() {}
    assert_eq!(cluster.hedge_tokens(), 0, "hedge_tokens() above burst 0");
}

/// Shrunk from `cluster_poll_timeout_is_never_due_even_when_time_goes_backwards`:
/// `request_refresh(now)` with a `now` earlier than the cluster's clock used to clamp the
/// clock but start the refresh at the raw, earlier `now`, so the refresh began in the past
/// (its deadline shortened, `poll_timeout()` overdue at once). It now starts at the clamped
/// clock.
#[test]
fn request_refresh_with_earlier_now_starts_refresh_in_the_past() {
    let book = BrokerBook::new(numbered_seeds(3)).unwrap();
    let mut cluster = Cluster::new(ClusterConfig::default(), book, Instant::ZERO).unwrap();
    cluster.handle_timeout(Instant::from_millis(10_000)); // clock at 10 s, nothing due
    cluster.request_refresh(Instant::from_millis(9_000)); // a caller with a slightly stale clock
    let started = cluster.current().expect("a refresh runs").started_at();
    assert_eq!(started, Instant::from_millis(10_000), "refresh started at {started:?}, clock at 10 s");
}

/// Found by `recorded_traces_round_trip_through_json_losslessly`: serde_json without its
/// `float_roundtrip` feature (as this workspace used to build it) parses some `f64`s one ULP
/// off, so a trace's config read back from JSON was not the recorded config (jitter, growth
/// factor, backoff multiplier, hedge ratio). `str::parse` reads the same text back exactly,
/// so the text was right and the parser lossy; the workspace now enables `float_roundtrip`.
/// Replays practically never diverged (a 1-ULP change moves a truncated µs with probability
/// ~1e-10), but traces should be exact.
#[test]
fn trace_json_round_trip_is_lossless() {
    let multiplier = 1.853_462_844_810_419_8_f64;
    let text = serde_json::to_string(&multiplier).unwrap();
    assert_eq!(text.parse::<f64>().unwrap(), multiplier, "the text itself is exact");
    let mut config = RefreshConfig::default();
    config.retry.multiplier = multiplier;
    let book = BrokerBook::new(numbered_seeds(1)).unwrap();
    let trace = Recorder::new(&config, &book, Instant::ZERO, "repro").unwrap().into_trace();
    let back: Trace = serde_json::from_str(&serde_json::to_string(&trace).unwrap()).unwrap();
    assert_eq!(back.config.retry.multiplier, multiplier, "JSON changed the backoff multiplier");
}
