//! Time to metadata past k hung brokers listed first (then three healthy ones), for every
//! preset, in virtual time: the table `docs/performance/hung-first.md` quotes.
//!
//! Hung brokers accept the connection after 1 ms and never answer; healthy ones answer 2 ms
//! after their 1 ms handshake. Seeds are in that order (the user's order: a seed list
//! written zone by zone, one zone dark). The reference is librdkafka's pace of one new
//! broker about every 51 ms, so "k × 51 ms" is what a peer needs for the same list.
//!
//! Run with `cargo run --release -p stagger-lab --bin hung_first [-- --markdown]`.

use core::time::Duration;
use stagger::RefreshConfig;
use stagger_sim::{run_refresh, BrokerBehavior, Report, Scenario};

/// The k of the table: dense where the policy changes, sparse beyond.
const KS: [usize; 14] = [1, 2, 3, 5, 7, 9, 12, 15, 20, 30, 45, 60, 80, 100];
/// librdkafka's measured pace per broker tried (docs/performance/peers.md).
const PEER_PACE: Duration = Duration::from_millis(51);

/// Most attempts in flight at once.
fn peak_in_flight(report: &Report) -> usize {
    let mut edges: Vec<(u64, i32)> = Vec::new();
    for (_, span) in report.spans() {
        edges.push((span.start.as_micros(), 1));
        edges.push((span.end.map_or(u64::MAX, |e| e.as_micros()), -1));
    }
    // Ends before starts at the same instant: a replaced attempt does not count twice.
    edges.sort_by_key(|&(at, delta)| (at, delta));
    let (mut open, mut peak) = (0i32, 0i32);
    for (_, delta) in edges {
        open += delta;
        peak = peak.max(open);
    }
    peak as usize
}

/// The default with `shuffle_seeds`: the median time over [`SHUFFLE_SEEDS`] seeds (gave-up
/// refreshes count as the deadline), and how many of them gave up.
fn shuffled_median(scenario: &Scenario) -> String {
    let mut config = RefreshConfig::adaptive();
    config.shuffle_seeds = true;
    let mut times: Vec<Duration> = Vec::new();
    let mut gave_up = 0;
    for seed in 0..SHUFFLE_SEEDS {
        config.seed = seed;
        match run_refresh(&config, scenario).time_to_metadata() {
            Some(t) => times.push(t),
            None => {
                gave_up += 1;
                times.push(config.deadline);
            }
        }
    }
    times.sort();
    let median = times[times.len() / 2];
    let worst = times[times.len() - 1];
    format!("{:.1} ms · worst {:.1} ms · {gave_up} gave up", median.as_secs_f64() * 1e3, worst.as_secs_f64() * 1e3)
}

/// The default (seeds listed, and shuffled over [`SHUFFLE_SEEDS`] seeds) past every k from
/// 1 to 100: the largest time per broker tried against the peer pace, and the most attempts
/// in flight at once.
fn every_k() -> String {
    let (mut worst, mut worst_k, mut peak) = (0.0f64, 0, 0);
    for k in 1..=100usize {
        let behaviors = (0..k)
            .map(|_| BrokerBehavior::Hung)
            .chain((0..3).map(|_| BrokerBehavior::Healthy { rtt: Duration::from_millis(2) }));
        let scenario = Scenario::from_behaviors(behaviors).with_seed(1);
        for (shuffle, seed) in core::iter::once((false, 0)).chain((0..SHUFFLE_SEEDS).map(|s| (true, s))) {
            let mut config = RefreshConfig::adaptive();
            (config.shuffle_seeds, config.seed) = (shuffle, seed);
            let report = run_refresh(&config, &scenario);
            let time = report.time_to_metadata().unwrap_or(Duration::MAX);
            let ratio = time.as_secs_f64() / (PEER_PACE.as_secs_f64() * k as f64);
            if ratio > worst {
                (worst, worst_k) = (ratio, k);
            }
            peak = peak.max(peak_in_flight(&report));
        }
    }
    format!(
        "every k from 1 to 100, seeds listed and shuffled ({SHUFFLE_SEEDS} seeds): at most {worst:.2} × the peer \
         pace (at k = {worst_k}), at most {peak} attempts in flight"
    )
}

/// Seeds the shuffled column runs.
const SHUFFLE_SEEDS: u64 = 21;

fn main() {
    let markdown = std::env::args().any(|a| a == "--markdown");
    // Every preset asks in the order listed, the hung brokers first; the last column shuffles.
    let presets: Vec<(&str, RefreshConfig)> = RefreshConfig::PRESETS
        .iter()
        .filter_map(|name| RefreshConfig::preset(name).map(|c| (*name, RefreshConfig { shuffle_seeds: false, ..c })))
        .collect();
    if markdown {
        let head: Vec<String> = presets.iter().map(|(n, _)| format!("{n}: time · attempts · peak")).collect();
        println!(
            "| k hung first | peer pace (k × 51 ms) | {} | adaptive, seeds shuffled: median, worst of {SHUFFLE_SEEDS} seeds |",
            head.join(" | ")
        );
        println!("|---:|---:|{}", "---:|".repeat(presets.len() + 1));
    } else {
        println!(
            "{:>4}  {:>10}  {}",
            "k",
            "k×51ms",
            presets.iter().map(|(n, _)| format!("{n:>28}")).collect::<String>()
                + &format!("{:>28}", "adaptive, shuffled")
        );
    }
    for k in KS {
        let behaviors = (0..k)
            .map(|_| BrokerBehavior::Hung)
            .chain((0..3).map(|_| BrokerBehavior::Healthy { rtt: Duration::from_millis(2) }));
        let scenario = Scenario::from_behaviors(behaviors).with_seed(1);
        let cells: Vec<String> = presets
            .iter()
            .map(|(_, config)| {
                let report = run_refresh(config, &scenario);
                let time = match report.time_to_metadata() {
                    Some(t) => format!("{:.1} ms", t.as_secs_f64() * 1e3),
                    None => String::from("gave up"),
                };
                format!("{time} · {} · {}", report.attempts_started, peak_in_flight(&report))
            })
            .collect();
        let mut cells = cells;
        cells.push(shuffled_median(&scenario));
        let pace = format!("{} ms", PEER_PACE.as_millis() * k as u128);
        if markdown {
            println!("| {k} | {pace} | {} |", cells.join(" | "));
        } else {
            println!("{k:>4}  {pace:>10}  {}", cells.iter().map(|c| format!("{c:>28}")).collect::<String>());
        }
    }
    println!();
    println!("{}", every_k());
}
