//! Real sockets against real Apache Kafka: the `realsockets` cases, with the faults made by
//! the broker processes themselves.
//!
//! Starts a 5-broker Kafka 4.4 KRaft cluster (`scripts/kafka.sh`, brokers from Maven) and
//! refreshes it over loopback TCP with each preset, faulty brokers *first* in the seed list:
//!
//! * `healthy`: nothing is wrong (what a refresh costs when every broker is up);
//! * `silent k`: the first k brokers are stopped with `SIGSTOP` — the kernel still accepts
//!   their connections and nobody answers;
//! * `refusing k`: the first k brokers are killed with `SIGKILL` (connections refused);
//! * `no handshake`: the first seed is a loopback listener whose accept queue is full, so the
//!   kernel drops SYNs and `connect` hangs (a blackholed address in front of the cluster).
//!
//! Each cell runs [`REPS`] times (a different jitter seed each time) and shows the median
//! time to metadata, the TCP connections opened and the attempts started; ratios against
//! `sequential()` come from the same run, the presets taking turns within each repetition. `sequential()` keeps its 10 s attempt timeout, so
//! its timer-bound cells (silent, no handshake) run their repetitions concurrently. Every
//! broker is continued or restarted after its case. About 3 minutes in all.
//!
//! ```text
//! cargo run --release -p stagger-lab --bin realsockets_kafka
//! ```

use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use stagger::RefreshConfig;
use stagger_kafka_fixture::{KafkaCluster, Options};
use stagger_lab::measure::{median, ms};
use stagger_lab::sample::{once, Sample};
use stagger_test_faults::blackhole::blackhole;
use stagger_tokio::{AttemptOutcome, RefreshOutcome};
use tokio::task::JoinSet;

type Res<T> = Result<T, Box<dyn Error>>;

/// Brokers in the cluster: three can be silent with two left to answer.
const BROKERS: u32 = 5;
/// Repetitions per (case, preset) cell.
const REPS: u64 = 7;
/// Refreshes before measuring, so the brokers' JIT has compiled their request path.
const WARM_UP: u64 = 500;

/// What is wrong with the first seeds.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    Healthy,
    Silent,
    Refusing,
    NoHandshake,
}

/// `config` asking the seeds in the order listed, the faulty ones first.
fn listed(config: RefreshConfig) -> RefreshConfig {
    RefreshConfig { shuffle_seeds: false, ..config }
}

fn presets() -> [(&'static str, RefreshConfig); 3] {
    [
        ("adaptive (default)", listed(RefreshConfig::adaptive())),
        ("staggered (500 ms)", listed(RefreshConfig::staggered())),
        ("sequential (10 s timeout)", listed(RefreshConfig::sequential())),
    ]
}

/// The faulty seeds never won, and behaved as their fault says.
fn check(name: &str, fault: Fault, faulty: &[String], outcome: &RefreshOutcome) -> Res<()> {
    if faulty.contains(&outcome.winner) {
        return Err(format!("{name}: faulty broker {} answered", outcome.winner).into());
    }
    for a in outcome.attempts.iter().filter(|a| faulty.contains(&a.broker)) {
        let ok = match fault {
            Fault::Healthy => true,
            Fault::Silent => a.connected.is_some() && a.answered.is_none(),
            Fault::Refusing => a.connected.is_none() && matches!(a.outcome, AttemptOutcome::Failed(_)),
            Fault::NoHandshake => a.connected.is_none(),
        };
        if !ok {
            return Err(format!("{name}: attempt on {} did not behave as {fault:?}: {}", a.broker, a.outcome).into());
        }
    }
    Ok(())
}

/// Every preset on `seeds`, [`REPS`] times each: `samples[preset]`. The presets take turns
/// within each repetition, so a cluster still settling after a fault (leaders moving off a
/// killed broker) weighs on all of them alike; the timer-bound cells run together at the end.
async fn measure(name: &str, fault: Fault, faulty: usize, seeds: &[String]) -> Res<Vec<Vec<Sample>>> {
    let seeds = Arc::new(seeds.to_vec());
    let faulty = Arc::new(seeds[..faulty].to_vec());
    let timer_bound =
        |preset: &str| preset.starts_with("sequential") && matches!(fault, Fault::Silent | Fault::NoHandshake);
    let mut samples = vec![Vec::new(); presets().len()];
    for rep in 0..REPS {
        for (pi, (preset, config)) in presets().into_iter().enumerate() {
            if !timer_bound(preset) {
                let (sample, outcome) = once(config.with_seed(rep), &seeds).await?;
                check(name, fault, &faulty, &outcome)?;
                samples[pi].push(sample);
            }
        }
    }
    for (pi, (preset, config)) in presets().into_iter().enumerate() {
        if !timer_bound(preset) {
            continue;
        }
        let mut batch = JoinSet::new();
        for rep in 0..REPS {
            let (seeds, faulty, name) = (Arc::clone(&seeds), Arc::clone(&faulty), name.to_owned());
            batch.spawn(async move {
                // Starts 20 ms apart, so the runs do not reach the next broker in one instant.
                tokio::time::sleep(Duration::from_millis(20) * rep as u32).await;
                let (sample, outcome) = once(config.with_seed(rep), &seeds).await?;
                check(&name, fault, &faulty, &outcome).map_err(|e| e.to_string())?;
                Ok::<Sample, String>(sample)
            });
        }
        while let Some(joined) = batch.join_next().await {
            samples[pi].push(joined??);
        }
    }
    Ok(samples)
}

fn span(values: impl Iterator<Item = usize> + Clone) -> String {
    let (lo, hi) = (values.clone().min().unwrap_or(0), values.max().unwrap_or(0));
    if lo == hi {
        lo.to_string()
    } else {
        format!("{lo}–{hi}")
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Res<()> {
    let started = Instant::now();
    let Some(kafka) = KafkaCluster::start(&Options { brokers: BROKERS, ..Options::default() }) else {
        return Err("this machine cannot run Apache Kafka (see the message above)".into());
    };
    let seeds = kafka.plaintext();
    // Warm up: the brokers' first answers after a start are slow (class loading, JIT).
    for rep in 0..WARM_UP {
        once(RefreshConfig::default().with_seed(rep), &seeds).await?;
    }
    println!(
        "Apache Kafka {} ({BROKERS} KRaft brokers, each broker + controller) on loopback, faulty brokers first in \
         the seed list; {REPS} runs per cell.\n",
        kafka.version()
    );

    let mut rows: Vec<(String, Vec<Vec<Sample>>)> = Vec::new();
    rows.push(("healthy".into(), measure("healthy", Fault::Healthy, 0, &seeds).await?));
    for k in [1u32, 3] {
        let name = format!("silent × {k} (SIGSTOP)");
        let paused: Vec<_> = (1..=k).map(|n| kafka.pause(n)).collect();
        let samples = measure(&name, Fault::Silent, k as usize, &seeds).await;
        drop(paused);
        rows.push((name, samples?));
    }
    {
        let name = "refusing × 2 (SIGKILL)".to_owned();
        kafka.kill(1);
        kafka.kill(2);
        let samples = measure(&name, Fault::Refusing, 2, &seeds).await;
        tokio::task::block_in_place(|| {
            kafka.restart(1);
            kafka.restart(2);
        });
        rows.push((name, samples?));
    }
    {
        let hole = blackhole().await?;
        let mut with_hole = vec![hole.address.to_string()];
        with_hole.extend(seeds.iter().cloned());
        let name = "no handshake × 1".to_owned();
        rows.push((name.clone(), measure(&name, Fault::NoHandshake, 1, &with_hole).await?));
    }

    println!("| case | preset | median | min–max | connections (TCP up) | attempts started | median × sequential |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for (name, samples) in &rows {
        let sequential = median(&samples[2].iter().map(|s| s.elapsed).collect::<Vec<_>>());
        for (pi, (preset, _)) in presets().into_iter().enumerate() {
            let cell = &samples[pi];
            let times: Vec<Duration> = cell.iter().map(|s| s.elapsed).collect();
            let med = median(&times);
            println!(
                "| {name} | {preset} | {:.1} ms | {:.1}–{:.1} ms | {} | {} | {:.3} |",
                ms(med),
                ms(*times.iter().min().unwrap()),
                ms(*times.iter().max().unwrap()),
                span(cell.iter().map(|s| s.connections)),
                span(cell.iter().map(|s| s.attempts)),
                ms(med) / ms(sequential).max(0.001),
            );
        }
    }
    println!("\nTotal run time: {:.0} s (cluster start included).", started.elapsed().as_secs_f64());
    Ok(())
}
