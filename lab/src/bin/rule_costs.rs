//! What each of the fan-out's switchable rules earns on a real Apache Kafka cluster: the
//! default against the default with one rule switched off (`fanout.tuning.*`), one-shot
//! refreshes through the library, PLAINTEXT and SASL_SSL.
//!
//! Starts a 5-broker Kafka 4.4 cluster (`scripts/kafka.sh`) behind counting forwarders
//! ([`stagger_lab::bench`]). Cases, the faulty address first in the seed list:
//! * `healthy`: every broker is up;
//! * `1 stopped first`, `3 stopped first`: brokers `SIGSTOP`ped (their kernels accept,
//!   nobody answers);
//! * `refused first`: a loopback port nobody listens on;
//! * `blackhole first`: a loopback listener whose accept queue is full, so its SYNs vanish.
//!
//! Each row gives time to metadata (p50 / p99 / max), attempts per refresh and the
//! connections the brokers accepted per refresh; the policies take turns within each
//! repetition, so ratios come from one run.
//!
//! ```text
//! cargo run --release -p stagger-lab --bin rule_costs -- --reps 40 --out docs/performance/rule-costs.md
//! ```

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use stagger::RefreshConfig;
use stagger_lab::bench::{arg, emit, write_out, Forwarded, Listener, Res, SETTLE};
use stagger_lab::stats::spread;
use stagger_test_faults::blackhole;
use stagger_tokio::refresh_with;

/// Brokers in the cluster: three can be stopped with two left to answer.
const BROKERS: u32 = 5;
/// Refreshes before measuring, so the brokers' JIT has compiled their request paths.
const WARM_UP: usize = 200;

/// The default, then the default with one rule off: (name, `--set` path).
const POLICIES: [(&str, Option<&str>); 6] = [
    ("default", None),
    ("no next_on_failure", Some("fanout.tuning.next_on_failure")),
    ("no replace_when_full", Some("fanout.tuning.replace_when_full")),
    ("no cancel_silent_on_answer", Some("fanout.tuning.cancel_silent_on_answer")),
    ("no spread_ticks", Some("fanout.tuning.spread_ticks")),
    ("no cancel_outrun", Some("fanout.tuning.cancel_outrun")),
];

/// What goes first in the seed list.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Case {
    Healthy,
    Stopped(u32),
    Refused,
    Blackhole,
}

impl Case {
    fn name(self) -> String {
        match self {
            Case::Healthy => "healthy".into(),
            Case::Stopped(k) => format!("{k} stopped first"),
            Case::Refused => "refused first".into(),
            Case::Blackhole => "blackhole first".into(),
        }
    }
}

#[derive(Default)]
struct Cell {
    times: Vec<Duration>,
    attempts: usize,
    accepted: u64,
    failures: usize,
}

impl Cell {
    fn row(&self, case: &str, listener: Listener, policy: &str) -> String {
        let n = (self.times.len() + self.failures).max(1) as f64;
        format!(
            "| {case} | {} | {policy} | {} | {} | {:.2} | {:.2} | {} |",
            listener.name(),
            self.times.len(),
            spread(&self.times),
            self.attempts as f64 / n,
            self.accepted as f64 / n,
            self.failures,
        )
    }
}

async fn case(cluster: &Forwarded, out: &mut String, case: Case, listener: Listener, reps: usize) -> Res<()> {
    let mut seeds = cluster.seeds(listener);
    // Held for the case: the faulty broker or address stays faulty while it runs.
    let _paused: Vec<_> = match case {
        Case::Stopped(k) => (1..=k).map(|node| cluster.kafka.pause(node)).collect(),
        _ => Vec::new(),
    };
    let _hole = match case {
        Case::Blackhole => {
            let hole = blackhole::blackhole().await?;
            seeds.insert(0, hole.address.to_string());
            Some(hole)
        }
        _ => None,
    };
    if case == Case::Refused {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        seeds.insert(0, port.to_string());
    }
    let mut cells: Vec<Cell> = POLICIES.iter().map(|_| Cell::default()).collect();
    for rep in 0..reps {
        for (cell, (name, off)) in cells.iter_mut().zip(&POLICIES) {
            let mut config =
                RefreshConfig { shuffle_seeds: false, ..RefreshConfig::default() }.with_seed(rep as u64 + 1);
            if let Some(path) = off {
                config.set(path, "false")?;
            }
            let options = cluster.options(listener, config)?;
            let before = cluster.counts(listener);
            let result = refresh_with(&options, &seeds, |_| {}).await;
            tokio::time::sleep(SETTLE).await;
            cell.accepted += (cluster.counts(listener) - before).accepted;
            match result {
                Ok(outcome) => {
                    cell.times.push(outcome.elapsed);
                    cell.attempts += outcome.attempts.len();
                }
                Err(e) => {
                    eprintln!("{} {listener:?} {name}: {e}", case.name());
                    cell.failures += 1;
                }
            }
        }
    }
    drop(_paused);
    // Stopped brokers' abandoned connections drain before the next case.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for (cell, (policy, _)) in cells.iter().zip(&POLICIES) {
        let row = cell.row(&case.name(), listener, policy);
        emit(out, &row);
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Res<()> {
    let reps: usize = arg("--reps").map_or(Ok(40), |r| r.parse())?;
    let started = Instant::now();
    let cluster = Forwarded::start(BROKERS).await?;
    cluster.warm_up(WARM_UP).await?;
    let mut out = String::new();
    writeln!(out, "| case | listener | policy | refreshes | p50 | p99 | max | attempts per refresh | connections the brokers accepted per refresh | failed |")?;
    writeln!(out, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|")?;
    println!("{out}");
    for listener in Listener::ALL {
        for (c, share) in [
            (Case::Healthy, 1.0),
            (Case::Stopped(1), 0.75),
            (Case::Stopped(3), 0.5),
            (Case::Refused, 0.75),
            (Case::Blackhole, 0.5),
        ] {
            case(&cluster, &mut out, c, listener, ((reps as f64 * share) as usize).max(1)).await?;
        }
    }
    writeln!(
        out,
        "\nKafka {}, {BROKERS} brokers, {reps} repetitions per healthy cell, {:.0} s in all.",
        cluster.kafka.version(),
        started.elapsed().as_secs_f64()
    )?;
    write_out(&out)
}
