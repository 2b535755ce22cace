//! What one-shot refreshes cost a real Apache Kafka cluster, counted at the seeds.
//!
//! Starts a 5-broker Kafka 4.4 cluster (`scripts/kafka.sh`), puts a counting forwarder
//! ([`stagger_lab::counting`]) in front of every broker's PLAINTEXT and SASL_SSL listener,
//! and refreshes through them one refresh at a time: the library (`stagger_tokio::refresh_with`)
//! and, with `--cli PATH`, the `stagger` binary (`metadata --json`, a fresh process each time).
//! Each cell prints the share of refreshes that opened exactly one connection, the most any
//! opened, the mean connections and broker answers (TLS or Kafka bytes sent back) per
//! refresh, and p50 / p99 / max time to metadata; the policies take turns within each
//! repetition, so ratios come from one run.
//!
//! Cases, faulty brokers first in the seed list:
//! * `healthy`: every broker is up;
//! * `k stopped`: the first k brokers are `SIGSTOP`ped (their kernels accept, nobody answers);
//! * `burst of N` (`--burst N`, 100): a cold start, N library refreshes at once against a
//!   healthy cluster; `--only burst` runs just that, `--no-burst` skips it.
//!
//! `--listener plaintext` or `--listener sasl_ssl` measures one listener only.
//!
//! ```text
//! cargo run --release -p stagger-lab --bin gentleness -- --reps 100 --cli target/release/stagger --out docs/performance/gentleness.md
//! ```

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use stagger::{ClusterConfig, RefreshCause, RefreshConfig};
use stagger_kafka_fixture::{SASL_PASSWORD, SASL_USERNAME};
use stagger_lab::bench::{arg, emit, write_out, Forwarded, Listener, Res, SETTLE};
use stagger_lab::stats::{ms, quantile, spread};
use stagger_tokio::{refresh_with, AttemptOutcome, ClientOptions};

/// Brokers in the cluster: three can be stopped with two left to answer.
const BROKERS: u32 = 5;
/// Refreshes before measuring, so the brokers' JIT has compiled their request paths.
const WARM_UP: usize = 300;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Client {
    Library,
    Cli,
}

/// The policies compared; `--set` settings as the CLI takes them.
fn policies(stopped: usize, listener: Listener) -> Vec<(&'static str, Vec<(&'static str, &'static str)>)> {
    let mut p = vec![("adaptive (default)", vec![])];
    if listener == Listener::SaslSsl {
        // One prior for every transport: a connection whose TLS handshake follows judged by
        // the 12 ms plaintext pace, as before `silent_tls` existed.
        p.push(("TLS-blind prior (silent_tls 12 ms)", vec![("fanout.stagger.adaptive.silent_tls", "12ms")]));
        // Between the two: what a shorter TLS prior would trade.
        p.push(("silent_tls 16 ms", vec![("fanout.stagger.adaptive.silent_tls", "16ms")]));
    }
    // The silence rule the broker pace replaced: a connected broker suspected 2 × the TCP
    // handshake after it, floored at 2 ms (the kernel's pace, not the broker's).
    p.push((
        "kernel pace (silent 0, floor 2 ms)",
        vec![
            ("fanout.stagger.adaptive.silent", "0ms"),
            ("fanout.stagger.adaptive.silent_tls", "0ms"),
            ("fanout.stagger.adaptive.floor", "2ms"),
        ],
    ));
    if stopped == 0 {
        p.push((
            "sequential",
            vec![
                ("fanout.stagger", "fixed:10s"),
                ("fanout.growth", "linear:1"),
                ("fanout.max_in_flight", "1"),
                ("fanout.tuning.replace_when_full", "false"),
            ],
        ));
    }
    p
}

#[derive(Default)]
struct Cell {
    times: Vec<Duration>,
    connections: Vec<u64>,
    answered: Vec<u64>,
    /// The winner's first answer after its TCP handshake (TLS end or ApiVersions): the
    /// broker pace a silent broker is judged by.
    first_answers: Vec<Duration>,
    failures: usize,
}

impl Cell {
    fn row(&self, case: &str, client: &str, listener: &str, policy: &str) -> String {
        let n = self.connections.len().max(1) as f64;
        let one = self.connections.iter().filter(|&&c| c == 1).count() as f64 / n * 100.0;
        let two = self.connections.iter().filter(|&&c| c <= 2).count() as f64 / n * 100.0;
        let max = self.connections.iter().max().copied().unwrap_or(0);
        let median = {
            let mut c = self.connections.clone();
            c.sort();
            c.get(c.len() / 2).copied().unwrap_or(0)
        };
        let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / n;
        // A `Client` reports no per-attempt record of a refresh that succeeded: "—".
        let answered = if self.answered.is_empty() { "—".into() } else { format!("{:.2}", mean(&self.answered)) };
        let first = if self.first_answers.is_empty() {
            "—".into()
        } else {
            let [p50, p99, max] = [0.5, 0.99, 1.0].map(|q| ms(quantile(&self.first_answers, q)));
            format!("{p50} / {p99} / {max}")
        };
        format!(
            "| {case} | {client} | {listener} | {policy} | {} | {one:.0} % | {two:.0} % | {median} | {max} | {:.2} | {answered} | {first} | {} | {} |",
            self.connections.len(),
            mean(&self.connections),
            spread(&self.times),
            self.failures,
        )
    }
}

struct Bench {
    cluster: Forwarded,
    cli: Option<String>,
}

impl Bench {
    async fn library(
        &self,
        listener: Listener,
        settings: &[(&str, &str)],
        seed: u64,
    ) -> Res<(Duration, Option<Duration>)> {
        let mut config = RefreshConfig::default().with_seed(seed);
        for (path, value) in settings {
            config.set(path, value)?;
        }
        let options = self.cluster.options(listener, config)?;
        let outcome = refresh_with(&options, &self.cluster.seeds(listener), |_| {}).await?;
        let winner = outcome.attempts.iter().find(|a| matches!(a.outcome, AttemptOutcome::Won));
        let first = winner.and_then(|a| Some(a.answered?.saturating_sub(a.connected?)));
        Ok((outcome.elapsed, first))
    }

    async fn cli(&self, listener: Listener, settings: &[(&str, &str)], seed: u64) -> Res<(Duration, Option<Duration>)> {
        let Some(cli) = &self.cli else { return Err("no --cli".into()) };
        let mut cmd = tokio::process::Command::new(cli);
        cmd.args(["metadata", "--json", "-b", &self.cluster.seeds(listener).join(","), "--seed", &seed.to_string()]);
        for (path, value) in settings {
            cmd.args(["--set", &format!("{path}={value}")]);
        }
        if listener == Listener::SaslSsl {
            cmd.arg("--ca").arg(self.cluster.kafka.ca());
            for x in ["security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512"] {
                cmd.args(["-X", x]);
            }
            cmd.args(["-X", &format!("sasl.username={SASL_USERNAME}")]);
            cmd.args(["-X", &format!("sasl.password={SASL_PASSWORD}")]);
        }
        cmd.env("XDG_CONFIG_HOME", "/nonexistent");
        let out = cmd.output().await?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned().into());
        }
        let json: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        let elapsed = json["refresh"]["elapsed_ms"].as_f64().ok_or("no refresh.elapsed_ms")?;
        let attempts = json["refresh"]["attempts"].as_array().ok_or("no refresh.attempts")?;
        let winner = attempts.iter().find(|a| a["outcome"] == "won");
        let first = winner.and_then(|a| Some(a["answered_ms"].as_f64()? - a["connected_ms"].as_f64()?));
        let first = first.map(|f| Duration::from_secs_f64(f.max(0.0) / 1e3));
        Ok((Duration::from_secs_f64(elapsed / 1e3), first))
    }

    /// A cold start: `clients` library refreshes at once (a fleet of programs starting
    /// together), every policy once per repetition, in turn. Connections per refresh are the
    /// refreshes' own reports (attempts whose TCP handshake completed): a forwarder cannot
    /// tell whose a connection is when they overlap.
    async fn burst(&self, out: &mut String, listener: Listener, clients: usize, reps: usize) -> Res<()> {
        let policies = policies(0, listener);
        let mut cells: Vec<Cell> = policies.iter().map(|_| Cell::default()).collect();
        let seeds = std::sync::Arc::new(self.cluster.seeds(listener));
        for rep in 0..reps {
            for (i, (name, settings)) in policies.iter().enumerate() {
                let mut tasks = tokio::task::JoinSet::new();
                for c in 0..clients {
                    let mut config = RefreshConfig::default().with_seed((rep * clients + c) as u64);
                    for (path, value) in settings {
                        config.set(path, value)?;
                    }
                    let options = self.cluster.options(listener, config)?;
                    let seeds = seeds.clone();
                    tasks.spawn(async move { refresh_with(&options, &seeds, |_| {}).await });
                }
                while let Some(joined) = tasks.join_next().await {
                    match joined? {
                        Ok(outcome) => {
                            let connected = outcome.attempts.iter().filter(|a| a.connected.is_some()).count();
                            let answered = outcome.attempts.iter().filter(|a| a.answered.is_some()).count();
                            let winner = outcome.attempts.iter().find(|a| matches!(a.outcome, AttemptOutcome::Won));
                            cells[i]
                                .first_answers
                                .extend(winner.and_then(|a| Some(a.answered?.saturating_sub(a.connected?))));
                            cells[i].times.push(outcome.elapsed);
                            cells[i].connections.push(connected as u64);
                            cells[i].answered.push(answered as u64);
                        }
                        Err(e) => {
                            eprintln!("burst {listener:?} {name}: {e}");
                            cells[i].failures += 1;
                        }
                    }
                }
                tokio::time::sleep(SETTLE).await;
            }
        }
        for (cell, (policy, _)) in cells.iter().zip(&policies) {
            let row = cell.row(&format!("burst of {clients}"), "library", listener.name(), policy);
            emit(out, &row);
        }
        // The same burst of new long-lived `Client`s (seeds shuffled per client, as
        // `ClusterConfig::default()` does): bootstrapping as configured (gentle until calm),
        // fast from the start, and fast but saying a failover is likely (`StaleMetadata`,
        // gentle).
        let kinds: [(&str, bool, Option<RefreshCause>); 3] = [
            ("Client, bootstrap (default: gentle until calm, seeds shuffled)", true, None),
            ("Client, bootstrap, fast start (gentle_until_calm false)", false, None),
            ("Client, fast start, cause StaleMetadata (gentle)", false, Some(RefreshCause::StaleMetadata)),
        ];
        for (policy, gentle_until_calm, cause) in kinds {
            let mut cell = Cell::default();
            for rep in 0..reps {
                let mut tasks = tokio::task::JoinSet::new();
                for c in 0..clients {
                    let refresh = RefreshConfig::default().with_seed((rep * clients + c) as u64);
                    let config = ClusterConfig { refresh, gentle_until_calm, ..ClusterConfig::default() };
                    let o = self.cluster.options(listener, refresh)?;
                    let options = ClientOptions { exchange: o.exchange, tls: o.tls, ..ClientOptions::default() };
                    let seeds = seeds.clone();
                    tasks.spawn(async move {
                        let client = stagger_tokio::Client::new(config, &seeds, options)?;
                        let started = Instant::now();
                        let result = match cause {
                            Some(cause) => client.refresh_because(cause, None).await,
                            None => client.refresh().await,
                        };
                        let elapsed = started.elapsed();
                        let stats = client.stats();
                        client.close().await;
                        result.map(|_| (elapsed, stats))
                    });
                }
                while let Some(joined) = tasks.join_next().await {
                    match joined? {
                        Ok((elapsed, stats)) => {
                            cell.times.push(elapsed);
                            cell.connections.push(stats.connections_opened);
                        }
                        Err(e) => {
                            eprintln!("burst {listener:?} {policy}: {e}");
                            cell.failures += 1;
                        }
                    }
                }
                tokio::time::sleep(SETTLE).await;
            }
            emit(out, &cell.row(&format!("burst of {clients}"), "Client", listener.name(), policy));
        }
        Ok(())
    }

    /// One cell-row of repetitions: every policy once per repetition, in turn.
    async fn case(
        &self,
        out: &mut String,
        case: &str,
        client: Client,
        listener: Listener,
        stopped: usize,
        reps: usize,
    ) -> Res<()> {
        let policies = policies(stopped, listener);
        let mut cells: Vec<Cell> = policies.iter().map(|_| Cell::default()).collect();
        let _paused: Vec<_> = (1..=stopped as u32).map(|node| self.cluster.kafka.pause(node)).collect();
        for rep in 0..reps {
            for (i, (_, settings)) in policies.iter().enumerate() {
                let before = self.cluster.counts(listener);
                let seed = rep as u64 + 1;
                let result = match client {
                    Client::Library => self.library(listener, settings, seed).await,
                    Client::Cli => self.cli(listener, settings, seed).await,
                };
                tokio::time::sleep(SETTLE).await;
                let paid = self.cluster.counts(listener) - before;
                match result {
                    Ok((elapsed, first)) => {
                        cells[i].times.push(elapsed);
                        cells[i].first_answers.extend(first);
                        cells[i].connections.push(paid.accepted);
                        cells[i].answered.push(paid.answered);
                    }
                    Err(e) => {
                        eprintln!("{case} {client:?} {listener:?} {}: {e}", policies[i].0);
                        cells[i].failures += 1;
                    }
                }
            }
        }
        // Stopped brokers continue here, then their abandoned connections drain.
        drop(_paused);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let client = match client {
            Client::Library => "library",
            Client::Cli => "CLI",
        };
        let listener = listener.name();
        for (cell, (policy, _)) in cells.iter().zip(&policies) {
            let row = cell.row(case, client, listener, policy);
            emit(out, &row);
        }
        Ok(())
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Res<()> {
    let reps: usize = arg("--reps").map_or(Ok(100), |r| r.parse())?;
    let started = Instant::now();
    let bench = Bench { cluster: Forwarded::start(BROKERS).await?, cli: arg("--cli") };
    bench.cluster.warm_up(WARM_UP).await?;
    let mut out = String::new();
    writeln!(out, "| case | client | listener | policy | refreshes | exactly 1 connection | at most 2 | median connections | most | connections per refresh | broker answers per refresh | winner's first answer after its handshake (p50 / p99 / max) | p50 | p99 | max | failed |")?;
    writeln!(out, "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")?;
    println!("{out}");
    let clients: &[Client] = if bench.cli.is_some() { &[Client::Library, Client::Cli] } else { &[Client::Library] };
    let burst: usize = arg("--burst").map_or(Ok(100), |b| b.parse())?;
    if arg("--only").as_deref() == Some("burst") {
        for listener in Listener::ALL {
            bench.burst(&mut out, listener, burst, (reps / 10).max(1)).await?;
        }
        print!("{out}");
        return Ok(());
    }
    // `--listener sasl_ssl` (or `plaintext`) measures one listener; `--no-burst` skips the bursts.
    let only: Option<String> = arg("--listener");
    let listeners =
        Listener::ALL.into_iter().filter(|l| only.as_deref().is_none_or(|o| l.name().to_lowercase().starts_with(o)));
    for listener in listeners {
        for &client in clients {
            bench.case(&mut out, "healthy", client, listener, 0, reps).await?;
        }
        for &client in clients {
            bench.case(&mut out, "1 stopped first", client, listener, 1, reps / 2).await?;
        }
        bench.case(&mut out, "3 stopped first", Client::Library, listener, 3, reps / 4).await?;
        if !std::env::args().any(|a| a == "--no-burst") {
            bench.burst(&mut out, listener, burst, (reps / 10).max(1)).await?;
        }
    }
    writeln!(
        out,
        "\nKafka {}, {BROKERS} brokers, {reps} repetitions per healthy cell, {:.0} s in all.",
        bench.cluster.kafka.version(),
        started.elapsed().as_secs_f64()
    )?;
    write_out(&out)
}
