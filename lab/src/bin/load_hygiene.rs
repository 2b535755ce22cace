//! Load hygiene, measured: many sequential and concurrent refreshes in one process against
//! healthy, hung, refusing and never-answering brokers, printing open descriptors, alive
//! tasks and resident memory as they go, so "nothing leaks" can be seen, not just asserted
//! (the tokio adapter's `tests/hygiene.rs` asserts the descriptor and task counts).
//!
//! * sequential: librdkafka's mock cluster (broker 1 hung: an hour's round-trip time;
//!   brokers 2 and 3 healthy), a refusing port and a listener that never answers a connect;
//! * concurrent: the scripted fake brokers (healthy and silent) — librdkafka's mock listens
//!   with a backlog of 5, so hundreds of simultaneous connects to it overflow its accept
//!   queue and wait for SYN retransmits, which would measure the mock, not us.
//!
//! ```text
//! cargo run --release -p stagger-lab --bin load_hygiene -- [sequential=1000] [concurrent=200] [rounds=5]
//! ```

use std::error::Error;
use std::time::{Duration, Instant};

use rdkafka::mocking::MockCluster;
use stagger::{GiveUpReason, RefreshConfig, Stagger};
use stagger_test_faults::fake::{FakeBroker, Script};
use stagger_test_faults::sockets::{open_fds, Refusing, Unanswered};
use stagger_tokio::{refresh_with, RefreshOptions};
use tokio::task::JoinSet;

/// The brokers a load run rotates through.
struct Brokers {
    hung: String,
    healthy: [String; 2],
    refusing: String,
    unanswered: String,
}

/// The `i`-th refresh: mostly hung, refused, healthy (success); every 10th a connect that is
/// never answered before a healthy broker (success); every 10th only hung brokers with a
/// 20 ms deadline (deadline exceeded). Returns whether it must succeed.
fn scenario(brokers: &Brokers, i: usize) -> (RefreshOptions, Vec<String>, bool) {
    let mut config = RefreshConfig::default();
    config.fanout.stagger = Stagger::Fixed(Duration::from_millis(2));
    config.fanout.jitter = 0.0;
    config.attempt_timeout = Duration::from_millis(500);
    config.retry.retries = 0;
    let healthy = brokers.healthy[i % 2].clone();
    let (seeds, succeeds) = match i % 10 {
        8 => (vec![brokers.unanswered.clone(), healthy], true),
        9 => {
            config.deadline = Duration::from_millis(20);
            (vec![brokers.hung.clone(), brokers.unanswered.clone()], false)
        }
        _ => (vec![brokers.hung.clone(), brokers.refusing.clone(), healthy], true),
    };
    (RefreshOptions { config, ..RefreshOptions::default() }, seeds, succeeds)
}

/// Runs one refresh; returns its duration and whether it ended as it should.
async fn run(options: RefreshOptions, seeds: Vec<String>, succeeds: bool) -> (Duration, bool) {
    let started = Instant::now();
    let result = refresh_with(&options, &seeds, |_| {}).await;
    let expected = match result {
        Ok(_) => succeeds,
        Err(stagger_tokio::Error::Refresh { error, .. }) => !succeeds && error.reason == GiveUpReason::DeadlineExceeded,
        Err(_) => false,
    };
    (started.elapsed(), expected)
}

/// Resident set size in KiB, from `/proc/self/status`.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).map(str::to_owned))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

fn alive_tasks() -> usize {
    tokio::runtime::Handle::current().metrics().num_alive_tasks()
}

/// Waits until the descriptors are back to `target` (the brokers in this process close
/// their ends on their own schedule), at most `limit`.
async fn settle_fds(target: usize, limit: Duration) -> usize {
    let started = Instant::now();
    while open_fds() > target && started.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    open_fds()
}

fn quantile(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn row(label: &str, fds: usize, tasks: usize) {
    println!("{label:<28} {fds:>8} {tasks:>8} {:>10}", rss_kib());
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let sequential = args.next().transpose()?.unwrap_or(1000);
    let concurrent = args.next().transpose()?.unwrap_or(200);
    let rounds = args.next().transpose()?.unwrap_or(5);

    let mock = MockCluster::new(3)?;
    mock.create_topic("alpha", 3, 3)?;
    let bootstrap: Vec<String> = mock.bootstrap_servers().split(',').map(str::to_owned).collect();
    let discovered = stagger_tokio::refresh(&RefreshConfig::default(), &bootstrap).await?;
    let mut nodes: Vec<(i32, String)> = discovered.brokers.iter().map(|b| (b.node_id, b.address())).collect();
    nodes.sort();
    mock.broker_round_trip_time(nodes[0].0, Duration::from_secs(3600))?;
    let refusing = Refusing::new();
    let unanswered = Unanswered::new();
    let on_mock = Brokers {
        hung: nodes[0].1.clone(),
        healthy: [nodes[1].1.clone(), nodes[2].1.clone()],
        refusing: refusing.address.clone(),
        unanswered: unanswered.address.clone(),
    };
    let (fake_hung, fake_a, fake_b) = (
        FakeBroker::start(Script::Silent).await,
        FakeBroker::start(Script::Healthy).await,
        FakeBroker::start(Script::Healthy).await,
    );
    let on_fakes = Brokers {
        hung: fake_hung.address.clone(),
        healthy: [fake_a.address.clone(), fake_b.address.clone()],
        refusing: refusing.address.clone(),
        unanswered: unanswered.address.clone(),
    };

    // Warm up, then the baseline.
    for i in 0..20 {
        let (o, s, ok) = scenario(&on_mock, i);
        run(o, s, ok).await;
        let (o, s, ok) = scenario(&on_fakes, i);
        run(o, s, ok).await;
    }
    let baseline_fds = settle_fds(0, Duration::from_millis(200)).await;
    let baseline_tasks = alive_tasks();
    let baseline_rss = rss_kib();
    println!("{:<28} {:>8} {:>8} {:>10}", "", "fds", "tasks", "RSS KiB");
    row("baseline", baseline_fds, baseline_tasks);

    // Sequential, against the mock.
    let mut times = Vec::with_capacity(sequential);
    let mut wrong = 0;
    let started = Instant::now();
    for i in 0..sequential {
        let (o, s, ok) = scenario(&on_mock, i);
        let (took, expected) = run(o, s, ok).await;
        times.push(took);
        wrong += usize::from(!expected);
        if (i + 1) % (sequential / 5).max(1) == 0 {
            row(&format!("sequential {}", i + 1), open_fds(), alive_tasks());
        }
    }
    times.sort();
    println!(
        "  {sequential} refreshes in {:.1} s: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; {wrong} unexpected outcomes",
        started.elapsed().as_secs_f64(),
        quantile(&times, 0.5),
        quantile(&times, 0.99),
        quantile(&times, 1.0)
    );

    // Concurrent, against the fake brokers.
    let mut times = Vec::new();
    let mut wrong = 0;
    let started = Instant::now();
    for round in 0..rounds {
        let mut set = JoinSet::new();
        for i in 0..concurrent {
            let (o, s, ok) = scenario(&on_fakes, i);
            set.spawn(run(o, s, ok));
        }
        let peak_tasks = alive_tasks();
        let peak_fds = open_fds();
        while let Some(joined) = set.join_next().await {
            let (took, expected) = joined?;
            times.push(took);
            wrong += usize::from(!expected);
        }
        row(&format!("concurrent round {} (peak)", round + 1), peak_fds, peak_tasks);
        row(&format!("concurrent round {} (after)", round + 1), open_fds(), alive_tasks());
    }
    times.sort();
    println!(
        "  {} refreshes ({concurrent} at a time) in {:.1} s: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; {wrong} unexpected outcomes",
        times.len(),
        started.elapsed().as_secs_f64(),
        quantile(&times, 0.5),
        quantile(&times, 0.99),
        quantile(&times, 1.0)
    );

    let fds = settle_fds(baseline_fds, Duration::from_secs(10)).await;
    let tasks = alive_tasks();
    row("end (settled)", fds, tasks);
    println!(
        "\ndescriptors {} (baseline {baseline_fds}), tasks {} (baseline {baseline_tasks}), RSS {:+} KiB",
        if fds <= baseline_fds { "back to baseline" } else { "ABOVE baseline" },
        tasks,
        rss_kib() as i64 - baseline_rss as i64
    );
    Ok(())
}
