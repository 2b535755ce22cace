//! Whether a one-shot refresh should try its seeds in the order written or shuffled,
//! measured on a real Apache Kafka cluster.
//!
//! Starts a 5-broker Kafka 4.4 cluster (`scripts/kafka.sh`) with a counting forwarder
//! ([`stagger_lab::counting`]) in front of every broker's PLAINTEXT and SASL_SSL listener,
//! and compares `shuffle_seeds = false` (listed) with `true` (shuffled by the refresh's seed,
//! a different one per refresh as every process of a fleet has):
//!
//! * `1 stopped first`: one refresh at a time, the first seed `SIGSTOP`ped (its kernel
//!   accepts, nobody answers): time and connections per refresh;
//! * `burst of N`: N one-shot refreshes started at once against a healthy cluster (a fleet
//!   of short-lived programs starting together): time, and the share of the burst's
//!   connections the busiest broker took.
//!
//! The two orders take turns within each repetition, so ratios come from one run.
//!
//! ```text
//! cargo run --release -p stagger-lab --bin seed_order -- --reps 60 --burst 100 --out docs/performance/seed-order.md
//! ```

use std::error::Error;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use stagger::RefreshConfig;
use stagger_lab::bench::{arg, emit, write_out, Forwarded, Listener, Res, SETTLE};
use stagger_lab::stats::spread;
use stagger_tokio::refresh_with;

/// Brokers in the cluster.
const BROKERS: u32 = 5;
/// Refreshes before measuring, so the brokers' JIT has compiled their request paths.
const WARM_UP: usize = 200;
/// The orders compared: name and `shuffle_seeds`.
const ORDERS: [(&str, bool); 2] = [("listed", false), ("shuffled", true)];

/// What one order cost over a case's repetitions.
#[derive(Default)]
struct Cell {
    times: Vec<Duration>,
    /// Connections over every round.
    connections: u64,
    /// Per repetition: the busiest broker's share of the connections.
    busiest: Vec<f64>,
    failures: usize,
}

impl Cell {
    fn row(&self, case: &str, listener: Listener, order: &str) -> String {
        let refreshes = (self.times.len() + self.failures).max(1) as f64;
        let connections = self.connections as f64 / refreshes;
        let busiest = self.busiest.iter().sum::<f64>() / self.busiest.len().max(1) as f64 * 100.0;
        let worst = self.busiest.iter().copied().fold(0.0, f64::max) * 100.0;
        format!(
            "| {case} | {} | {order} | {} | {} | {connections:.2} | {busiest:.0} % | {worst:.0} % | {} |",
            listener.name(),
            self.times.len(),
            spread(&self.times),
            self.failures,
        )
    }
}

struct Bench {
    cluster: Forwarded,
}

impl Bench {
    /// `clients` one-shot refreshes at once; their times, and the connections each broker
    /// took meanwhile.
    async fn round(
        &self,
        listener: Listener,
        shuffle: bool,
        seed: u64,
        clients: usize,
    ) -> (Vec<Res<Duration>>, Vec<u64>) {
        let before = self.cluster.per_broker(listener);
        let seeds = Arc::new(self.cluster.seeds(listener));
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..clients {
            let mut config = RefreshConfig::default().with_seed(seed.wrapping_mul(1_000_003).wrapping_add(i as u64));
            config.shuffle_seeds = shuffle;
            let options = match self.cluster.options(listener, config) {
                Ok(options) => options,
                Err(e) => return (vec![Err(e)], Vec::new()),
            };
            let seeds = seeds.clone();
            tasks.spawn(async move {
                let outcome = refresh_with(&options, &seeds, |_| {}).await.map_err(|e| e.to_string())?;
                Ok::<_, Box<dyn Error + Send + Sync>>(outcome.elapsed)
            });
        }
        let mut times = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            times.push(joined.map_err(|e| e.into()).and_then(|r| r));
        }
        tokio::time::sleep(SETTLE).await;
        let paid = self.cluster.per_broker(listener).iter().zip(&before).map(|(a, b)| (*a - *b).accepted).collect();
        (times, paid)
    }

    /// One case: every order once per repetition, in turn.
    async fn case(&self, out: &mut String, case: &str, listener: Listener, clients: usize, reps: usize) -> Res<()> {
        let mut cells: Vec<Cell> = ORDERS.iter().map(|_| Cell::default()).collect();
        for rep in 0..reps {
            for (cell, &(_, shuffle)) in cells.iter_mut().zip(&ORDERS) {
                let (times, paid) = self.round(listener, shuffle, rep as u64 + 1, clients).await;
                for t in times {
                    match t {
                        Ok(t) => cell.times.push(t),
                        Err(e) => {
                            eprintln!("{case} {listener:?}: {e}");
                            cell.failures += 1;
                        }
                    }
                }
                let total: u64 = paid.iter().sum();
                cell.connections += total;
                cell.busiest.push(paid.iter().copied().max().unwrap_or(0) as f64 / total.max(1) as f64);
            }
        }
        for (cell, (order, _)) in cells.iter().zip(&ORDERS) {
            let row = cell.row(case, listener, order);
            emit(out, &row);
        }
        Ok(())
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Res<()> {
    let reps: usize = arg("--reps").map_or(Ok(60), |r| r.parse())?;
    let burst: usize = arg("--burst").map_or(Ok(100), |r| r.parse())?;
    let started = Instant::now();
    let bench = Bench { cluster: Forwarded::start(BROKERS).await? };
    bench.cluster.warm_up(WARM_UP).await?;
    let mut out = String::new();
    writeln!(out, "| case | listener | order | refreshes | p50 | p99 | max | connections per refresh | busiest broker's share of connections (mean) | (worst round) | failed |")?;
    writeln!(out, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")?;
    println!("{out}");
    for listener in Listener::ALL {
        {
            let _paused = bench.cluster.kafka.pause(1);
            bench.case(&mut out, "1 stopped first", listener, 1, reps).await?;
        }
        // The stopped broker's abandoned connections drain before the next case.
        tokio::time::sleep(Duration::from_millis(500)).await;
        bench.case(&mut out, &format!("burst of {burst}"), listener, burst, (reps / 6).max(1)).await?;
    }
    writeln!(
        out,
        "\nKafka {}, {BROKERS} brokers, {reps} repetitions of `1 stopped first`, {} bursts, {:.0} s in all.",
        bench.cluster.kafka.version(),
        (reps / 6).max(1),
        started.elapsed().as_secs_f64()
    )?;
    write_out(&out)
}
