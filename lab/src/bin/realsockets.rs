//! Real sockets, compared with real clients (issue 7, item 4).
//!
//! Starts librdkafka's mock cluster in-process (6 brokers per scenario) and refreshes it over
//! real loopback TCP with every preset, with faulty brokers *first* in the seed list:
//!
//! * `silent k`: the first k seeds accept TCP and never answer (an hour of round-trip time);
//! * `refusing k`: the first k seeds refuse connections (broker down, port closed);
//! * `no handshake`: the first seed is a loopback listener (backlog 1, never accepting) whose
//!   accept queue is pre-filled, so the kernel drops further SYNs and `connect` hangs.
//!
//! Each cell is repeated [`REPS`] times (a different jitter seed each time); the table shows
//! the median time to metadata, and connections opened (attempts whose TCP handshake
//! completed) next to attempts started. The default policy is compared with librdkafka's
//! loopback figures quoted in the issue. Then [`CLIENTS`] concurrent clients (tokio tasks,
//! each one `refresh_with` with its own PRNG seed) refresh a cluster whose first seed is
//! silent, per preset, with ratios against `staggered()` from the same run.
//!
//! `sequential()` keeps its default 10 s attempt timeout; to stay bounded, its repetitions in
//! the silent and no-handshake scenarios run concurrently with each other (they are
//! timer-bound: 10 s per silent or handshake-less broker), after every other run; all other
//! refreshes run one at a time. The many-clients run is done twice: all clients starting
//! together (a burst that overflows the mock brokers' listen backlog of 5, so the kernel drops
//! SYNs; the dropped count is printed) and with starts spaced 1 ms apart. About 90 s in all.
//!
//! ```text
//! cargo run --release -p stagger-lab --bin realsockets
//! ```

use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;
use stagger::RefreshConfig;
use stagger_lab::measure::{median, ms};
use stagger_lab::sample::{once, Sample};
use stagger_test_faults::blackhole::{blackhole, Blackhole};
use stagger_tokio::{AttemptOutcome, RefreshOutcome};
use tokio::task::JoinSet;

type Mock = MockCluster<'static, DefaultProducerContext>;
type Res<T> = Result<T, Box<dyn Error>>;

/// Brokers per mock cluster.
const BROKERS: i32 = 6;
/// Repetitions per (scenario, preset) cell.
const REPS: u64 = 7;
/// Concurrent clients in the many-clients run.
const CLIENTS: u64 = 200;
/// "Accepts TCP, never answers".
const SILENT_RTT: Duration = Duration::from_secs(3600);

/// What is wrong with the first seeds.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    Silent,
    Refusing,
    NoHandshake,
}

/// One scenario: a cluster (kept alive), its seed list, and what librdkafka needs for it.
struct Scenario {
    name: String,
    fault: Fault,
    k: usize,
    seeds: Arc<Vec<String>>,
    /// librdkafka's time to metadata on loopback, from the issue: (low, high) ms.
    reference: Option<(f64, f64)>,
    _mock: Mock,
    blackhole: Option<Blackhole>,
}

impl Scenario {
    /// What we assume librdkafka opens: it connects to brokers as it needs them, one
    /// connection per broker it tries, so at least the k faulty ones plus one that answers.
    /// Returns (attempts started, TCP connections completed).
    fn librdkafka_connections(&self) -> (usize, usize) {
        match self.fault {
            Fault::Silent => (self.k + 1, self.k + 1),
            Fault::Refusing | Fault::NoHandshake => (self.k + 1, 1),
        }
    }
}

/// A fresh mock cluster with `faulty` of its brokers (lowest node ids) made `fault`; returns it
/// and every broker's address in node-id order.
async fn cluster(fault: Fault, faulty: usize) -> Res<(Mock, Vec<String>)> {
    let mock = MockCluster::new(BROKERS)?;
    mock.create_topic("demo", 6, 3)?;
    let bootstrap: Vec<String> = mock.bootstrap_servers().split(',').map(str::to_owned).collect();
    // Learn which address is which node id (also warms up the adapter).
    let discovered = stagger_tokio::refresh(&RefreshConfig::default(), &bootstrap).await?;
    let mut nodes: Vec<(i32, String)> = discovered.brokers.iter().map(|b| (b.node_id, b.address())).collect();
    nodes.sort();
    for (id, _) in nodes.iter().take(faulty) {
        match fault {
            Fault::Silent => mock.broker_round_trip_time(*id, SILENT_RTT)?,
            Fault::Refusing => mock.broker_down(*id)?,
            Fault::NoHandshake => {}
        }
    }
    Ok((mock, nodes.into_iter().map(|(_, address)| address).collect()))
}

async fn scenario(fault: Fault, k: usize, reference: Option<(f64, f64)>) -> Res<Scenario> {
    let (name, faulty) = match fault {
        Fault::Silent => (format!("silent × {k}"), k),
        Fault::Refusing => (format!("refusing × {k}"), k),
        Fault::NoHandshake => ("no handshake × 1".to_owned(), 0),
    };
    let (mock, addresses) = cluster(fault, faulty).await?;
    let (seeds, blackhole) = if fault == Fault::NoHandshake {
        let hole = blackhole().await?;
        let mut seeds = vec![hole.address.to_string()];
        seeds.extend(addresses.into_iter().take(BROKERS as usize - 1));
        (seeds, Some(hole))
    } else {
        (addresses, None)
    };
    Ok(Scenario { name, fault, k, seeds: Arc::new(seeds), reference, _mock: mock, blackhole })
}

/// Checks that the scenario's faults did what they claim on this outcome: the faulty seeds
/// were never the winner, and the first seed behaved as its fault says.
fn check(s: &Scenario, outcome: &RefreshOutcome) -> Res<()> {
    let faulty = if s.fault == Fault::NoHandshake { 1 } else { s.k };
    if s.seeds[..faulty].contains(&outcome.winner) {
        return Err(format!("{}: faulty broker {} answered", s.name, outcome.winner).into());
    }
    for a in outcome.attempts.iter().filter(|a| s.seeds[..faulty].contains(&a.broker)) {
        let ok = match s.fault {
            Fault::Silent => a.connected.is_some(),
            Fault::Refusing => a.connected.is_none() && matches!(a.outcome, AttemptOutcome::Failed(_)),
            Fault::NoHandshake => a.connected.is_none(),
        };
        if !ok {
            return Err(
                format!("{}: attempt on {} did not behave as {:?}: {}", s.name, a.broker, s.fault, a.outcome).into()
            );
        }
    }
    Ok(())
}

/// `config` asking the seeds in the order listed, the faulty ones first.
fn listed(config: RefreshConfig) -> RefreshConfig {
    RefreshConfig { shuffle_seeds: false, ..config }
}

fn presets() -> [(&'static str, RefreshConfig); 4] {
    [
        ("adaptive (default)", listed(RefreshConfig::adaptive())),
        ("staggered (500 ms)", listed(RefreshConfig::staggered())),
        ("sequential (10 s timeout)", listed(RefreshConfig::sequential())),
        ("all-at-once", listed(RefreshConfig::all_at_once())),
    ]
}

/// Nearest-rank quantile.
fn quantile(values: &[Duration], q: f64) -> Duration {
    let mut v = values.to_vec();
    v.sort();
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

fn span(values: &[usize]) -> String {
    let (lo, hi) = (values.iter().min().unwrap(), values.iter().max().unwrap());
    if lo == hi {
        lo.to_string()
    } else {
        format!("{lo}–{hi}")
    }
}

fn reference_text(reference: Option<(f64, f64)>) -> String {
    match reference {
        None => "—".to_owned(),
        Some((lo, hi)) if lo == hi => format!("≈{lo:.0} ms"),
        Some((lo, hi)) => format!("{lo:.0}–{hi:.0} ms"),
    }
}

fn speedup_text(reference: Option<(f64, f64)>, median: Duration) -> String {
    let m = ms(median).max(0.001);
    match reference {
        None => "—".to_owned(),
        Some((lo, hi)) if lo == hi => format!("{}×", ratio(lo / m)),
        Some((lo, hi)) => format!("{}–{}×", ratio(lo / m), ratio(hi / m)),
    }
}

/// A ratio with as many digits as it needs to be read.
fn ratio(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.0}")
    } else if x >= 1.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Res<()> {
    let started = Instant::now();
    let scenarios = vec![
        scenario(Fault::Silent, 1, Some((60.0, 60.0))).await?,
        scenario(Fault::Silent, 3, Some((110.0, 160.0))).await?,
        scenario(Fault::Refusing, 1, None).await?,
        scenario(Fault::Refusing, 2, Some((110.0, 110.0))).await?,
        scenario(Fault::NoHandshake, 1, None).await?,
    ];
    let hole = scenarios.iter().find_map(|s| s.blackhole.as_ref()).expect("blackhole scenario");
    println!(
        "{BROKERS}-broker librdkafka mock clusters on loopback, faulty brokers first in the seed list; \
         {REPS} runs per cell. No-handshake listener: backlog 1, {} connections queued, a probe connect \
         still pending after 500 ms.\n",
        hole.queued
    );

    // samples[scenario][preset]
    let mut samples: Vec<Vec<Vec<Sample>>> = vec![vec![Vec::new(); presets().len()]; scenarios.len()];

    // Every preset but sequential: one refresh at a time.
    for (si, s) in scenarios.iter().enumerate() {
        for (pi, (name, config)) in presets().into_iter().enumerate() {
            if name.starts_with("sequential") {
                continue;
            }
            for rep in 0..REPS {
                let (sample, outcome) = once(config.with_seed(rep), &s.seeds).await?;
                check(s, &outcome)?;
                samples[si][pi].push(sample);
            }
        }
    }
    // Sequential: its refusing cells are fast and run like the others; the rest are
    // timer-bound (10 s per silent or handshake-less broker), so those runs all go at once to
    // keep the program bounded.
    let seq_index = presets().iter().position(|(n, _)| n.starts_with("sequential")).unwrap();
    let seq_config = presets()[seq_index].1;
    let mut batch = JoinSet::new();
    for (si, s) in scenarios.iter().enumerate() {
        for rep in 0..REPS {
            if s.fault == Fault::Refusing {
                let (sample, outcome) = once(seq_config.with_seed(rep), &s.seeds).await?;
                check(s, &outcome)?;
                samples[si][seq_index].push(sample);
            } else {
                // Starts 20 ms apart, so concurrent runs do not reach the next broker in the
                // same instant (a burst the mock's listen backlog of 5 would drop SYNs of).
                let offset = Duration::from_millis(20) * batch.len() as u32;
                let seeds = Arc::clone(&s.seeds);
                batch.spawn(async move {
                    tokio::time::sleep(offset).await;
                    (si, once(seq_config.with_seed(rep), &seeds).await)
                });
            }
        }
    }
    while let Some(joined) = batch.join_next().await {
        let (si, result) = joined?;
        let (sample, outcome) = result?;
        check(&scenarios[si], &outcome)?;
        samples[si][seq_index].push(sample);
    }

    println!("### Time to metadata and connections, per scenario and preset\n");
    println!(
        "| scenario | preset | median | min–max | connections (TCP up) | attempts started | librdkafka | × faster than librdkafka |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for (si, s) in scenarios.iter().enumerate() {
        for (pi, (name, _)) in presets().into_iter().enumerate() {
            let cell = &samples[si][pi];
            let times: Vec<Duration> = cell.iter().map(|x| x.elapsed).collect();
            let connections: Vec<usize> = cell.iter().map(|x| x.connections).collect();
            let attempts: Vec<usize> = cell.iter().map(|x| x.attempts).collect();
            let med = median(&times);
            println!(
                "| {} | {} | {:.1} ms | {:.1}–{:.1} ms | {} | {} | {} | {} |",
                s.name,
                name,
                ms(med),
                ms(*times.iter().min().unwrap()),
                ms(*times.iter().max().unwrap()),
                span(&connections),
                span(&attempts),
                if pi == 0 { reference_text(s.reference) } else { String::new() },
                speedup_text(s.reference, med),
            );
        }
    }

    println!("\n### The default policy against librdkafka's figures (target: ≥ 3× faster, no more connections)\n");
    println!(
        "| scenario | librdkafka | target (≤ fastest figure / 3) | default, median | × faster | connections / attempts (max) | librdkafka, assumed (≥) | met |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---|");
    let mut all_met = true;
    for (si, s) in scenarios.iter().enumerate() {
        let cell = &samples[si][0];
        let med = median(&cell.iter().map(|x| x.elapsed).collect::<Vec<_>>());
        let max_conn = cell.iter().map(|x| x.connections).max().unwrap();
        let max_att = cell.iter().map(|x| x.attempts).max().unwrap();
        let (lib_att, lib_conn) = s.librdkafka_connections();
        let fewer = max_conn <= lib_conn && max_att <= lib_att;
        let (target, met) = match s.reference {
            Some((lo, _)) => {
                let met = ms(med) * 3.0 <= lo && fewer;
                all_met &= met;
                (format!("≤ {:.1} ms", lo / 3.0), if met { "yes" } else { "**no**" })
            }
            None => {
                ("— (no figure)".to_owned(), if fewer { "n/a (connections: yes)" } else { "n/a (connections: **no**)" })
            }
        };
        println!(
            "| {} | {} | {} | {:.1} ms | {} | {} / {} | {} / {} | {} |",
            s.name,
            reference_text(s.reference),
            target,
            ms(med),
            speedup_text(s.reference, med),
            max_conn,
            max_att,
            lib_conn,
            lib_att,
            met
        );
    }
    println!(
        "\nAssumption: librdkafka connects to brokers as it needs them, one connection per broker it tries, so it \
         starts at least k + 1 attempts; k + 1 of them complete the TCP handshake when the k brokers are silent, \
         1 when they refuse or never complete the handshake."
    );
    println!("Targets with a librdkafka figure met: {}.", if all_met { "all" } else { "NOT all" });

    // Many clients, one silent broker first: all at once, then with starts spread out.
    drop(scenarios);
    fleet(None).await?;
    fleet(Some(Duration::from_millis(1))).await?;
    println!("\nTotal run time: {:.0} s.", started.elapsed().as_secs_f64());
    Ok(())
}

/// One row of the many-clients table.
#[derive(Clone)]
struct FleetRow {
    name: &'static str,
    median: Duration,
    p99: Duration,
    max: Duration,
    failures: usize,
    attempts: usize,
    connections: usize,
    overflows: Option<u64>,
}

/// [`CLIENTS`] concurrent clients against a fresh cluster whose first seed is silent, per
/// preset; `gap` spaces the clients' starts (`None`: all start together).
async fn fleet(gap: Option<Duration>) -> Res<()> {
    let (_mock, seeds) = cluster(Fault::Silent, 1).await?;
    let seeds = Arc::new(seeds);
    match gap {
        None => println!("\n### {CLIENTS} concurrent clients, all starting at once, one silent broker first\n"),
        Some(g) => println!(
            "\n### {CLIENTS} concurrent clients, starts spaced {:.0} ms apart ({:.0} ms in all), one silent broker first\n",
            ms(g),
            ms(g) * CLIENTS as f64
        ),
    }
    let mut rows = Vec::new();
    // staggered first: it is the baseline of the ratios.
    for name in ["staggered", "adaptive", "sequential", "all-at-once"] {
        let (name, config) = presets().into_iter().find(|(n, _)| n.starts_with(name)).unwrap();
        let before = listen_overflows();
        let mut clients = JoinSet::new();
        for client in 0..CLIENTS {
            let seeds = Arc::clone(&seeds);
            clients.spawn(async move {
                if let Some(g) = gap {
                    tokio::time::sleep(g * client as u32).await;
                }
                once(config.with_seed(client), &seeds).await.map(|(s, _)| s)
            });
        }
        let (mut ok, mut failures) = (Vec::new(), 0usize);
        while let Some(joined) = clients.join_next().await {
            match joined? {
                Ok(sample) => ok.push(sample),
                Err(_) => failures += 1,
            }
        }
        let overflows = before.zip(listen_overflows()).map(|(b, a)| a.saturating_sub(b));
        let times: Vec<Duration> = ok.iter().map(|x| x.elapsed).collect();
        rows.push(FleetRow {
            name,
            median: median(&times),
            p99: quantile(&times, 0.99),
            max: *times.iter().max().unwrap(),
            failures,
            attempts: ok.iter().map(|x| x.attempts).sum(),
            connections: ok.iter().map(|x| x.connections).sum(),
            overflows,
        });
    }
    let base = rows[0].clone();
    println!(
        "| preset | median | p99 | max | failed | attempts started | connections | SYNs dropped (listen overflows) | median × staggered | p99 × staggered | attempts × staggered | connections × staggered |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {:.1} ms | {:.1} ms | {:.1} ms | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} |",
            r.name,
            ms(r.median),
            ms(r.p99),
            ms(r.max),
            r.failures,
            r.attempts,
            r.connections,
            r.overflows.map_or("?".to_owned(), |o| o.to_string()),
            ms(r.median) / ms(base.median),
            ms(r.p99) / ms(base.p99),
            r.attempts as f64 / base.attempts as f64,
            r.connections as f64 / base.connections as f64,
        );
    }
    Ok(())
}

/// The kernel's count of connections dropped because a listener's accept queue was full
/// (`TcpExt: ListenOverflows` in `/proc/net/netstat`, for this network namespace). The mock's
/// brokers listen with backlog 5, so a burst of connects overflows them and the dropped SYNs
/// are retried by the kernel after 1 s, 3 s, ….
fn listen_overflows() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/netstat").ok()?;
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (names, values) = (lines.next()?, lines.next()?);
    let at = names.split_whitespace().position(|n| n == "ListenOverflows")?;
    values.split_whitespace().nth(at)?.parse().ok()
}
