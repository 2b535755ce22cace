//! The chaos soak (see the crate docs): `cargo run --release -p stagger-chaos --example soak
//! -- [--minutes M] [--tokio N] [--blocking N] [--seed S]`. Needs root (network namespaces),
//! Java and Maven (a real Kafka cluster from scripts/kafka.sh); stops everything it starts.

use std::time::Duration;

use stagger_chaos::{Report, Soak};
use stagger_kafka_fixture::netns::NetCluster;

fn main() {
    let mut soak = Soak::default();
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).map(String::as_str).unwrap_or("");
        let number = || value.parse::<u64>().unwrap_or_else(|_| panic!("{} needs a number", pair[0]));
        match pair[0].as_str() {
            "--minutes" => soak.duration = Duration::from_secs(number() * 60),
            "--seconds" => soak.duration = Duration::from_secs(number()),
            "--tokio" => soak.tokio_clients = number() as usize,
            "--blocking" => soak.blocking_clients = number() as usize,
            "--seed" => soak.seed = number(),
            other => panic!("unknown option {other}"),
        }
    }
    let cluster = match NetCluster::start(3, 0) {
        Ok(Some(cluster)) => cluster,
        Ok(None) => panic!("this machine cannot run Kafka (Java and Maven are needed)"),
        Err(why) => panic!("network namespaces unavailable: {why}"),
    };
    let report = stagger_chaos::run(&soak, &cluster);
    print(&soak, &report);
}

fn print(soak: &Soak, r: &Report) {
    let count = |f: fn(&stagger_chaos::Action) -> bool| r.actions.iter().filter(|(_, a)| f(a)).count();
    use stagger_chaos::Action::*;
    println!(
        "Chaos soak: {:?}, {} tokio + {} blocking clients, refresh interval {:?}, deadline {:?}, seed {}",
        soak.duration, soak.tokio_clients, soak.blocking_clients, soak.refresh_interval, soak.deadline, soak.seed
    );
    println!();
    println!("| measure | value |");
    println!("|---|---:|");
    println!(
        "| chaos actions | {} (pause {}, kill {}, network {}) |",
        r.actions.len(),
        count(|a| matches!(a, Pause(_))),
        count(|a| matches!(a, Kill(_))),
        count(|a| matches!(a, Net(..)))
    );
    println!(
        "| oldest metadata held | {:.1} s (bound: {:.0} s) |",
        r.max_age.as_secs_f64(),
        Report::age_bound(soak).as_secs_f64()
    );
    println!("| refreshes | {} |", r.refreshes);
    println!("| refreshes given up | {} |", r.give_ups.len());
    println!("| attempts per refresh | {:.2} |", r.attempts as f64 / r.refreshes.max(1) as f64);
    println!("| resources at start | {} |", r.start);
    println!("| resources at end | {} |", r.end);
    let half = r.rss_samples.len() / 2;
    let mean = |s: &[(Duration, u64)]| s.iter().map(|(_, k)| *k as f64).sum::<f64>() / s.len().max(1) as f64 / 1024.0;
    let (low, high) = r.rss_samples.iter().fold((u64::MAX, 0), |(lo, hi), (_, k)| (lo.min(*k), hi.max(*k)));
    println!(
        "| RSS during the chaos ({} samples) | {:.1}–{:.1} MiB; mean {:.1} MiB in the first half, {:.1} MiB in the second |",
        r.rss_samples.len(),
        low as f64 / 1024.0,
        high as f64 / 1024.0,
        mean(&r.rss_samples[..half]),
        mean(&r.rss_samples[half..])
    );
    for (i, e) in r.give_ups.iter().enumerate().take(5) {
        println!("\ngive-up {}: {e}", i + 1);
    }
    println!("\nActions:");
    for (at, a) in &r.actions {
        println!("  {:>7.1} s  {a:?}", at.as_secs_f64());
    }
}
