//! How far past its deadline does `refresh` return when no broker ever answers?
//!
//! Every broker is hung: librdkafka's mock cluster with an hour's round-trip time on every
//! broker (TCP accepted, requests read, nothing answered), plus a listener whose accept
//! queue is full (the TCP handshake itself never completes). Each run refreshes with a short
//! deadline and measures, on the wall clock around the call, how long after the deadline it
//! returned `DeadlineExceeded` — which includes cancelling every attempt and closing every
//! socket. Prints p50 / p99 / max overshoot per policy; the target is p99 ≤ 50 ms.
//!
//! ```text
//! cargo run --release -p stagger-lab --bin deadline_overshoot -- [runs=200] [deadline_ms=200]
//! ```

use std::error::Error;
use std::time::{Duration, Instant};

use rdkafka::mocking::MockCluster;
use stagger::{GiveUpReason, RefreshConfig, Stagger};
use stagger_tokio::{refresh_with, RefreshOptions};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>());
    let runs = args.next().transpose()?.unwrap_or(200).max(1) as usize;
    let deadline = Duration::from_millis(args.next().transpose()?.unwrap_or(200).max(1));

    let mock = MockCluster::new(3)?;
    let mut seeds: Vec<String> = mock.bootstrap_servers().split(',').map(str::to_owned).collect();
    for id in 1..=3 {
        mock.broker_round_trip_time(id, Duration::from_secs(3600))?;
    }
    let unanswered = stagger_test_faults::sockets::Unanswered::new();
    seeds.push(unanswered.address.clone());
    println!(
        "{} brokers, all hung (3 accept and never answer, 1 never completes the TCP handshake); \
         deadline {} ms, {runs} runs per policy\n",
        seeds.len(),
        deadline.as_millis()
    );

    let policies = [
        ("adaptive (default)", RefreshConfig::adaptive()),
        ("all-at-once", RefreshConfig::all_at_once()),
        ("sequential", RefreshConfig::sequential()),
    ];
    println!("{:<20} {:>10} {:>10} {:>10} {:>10}   target p99 <= 50 ms", "policy", "p50", "p99", "max", "min");
    let mut worst_p99 = Duration::ZERO;
    for (name, mut config) in policies {
        config.deadline = deadline;
        // No stagger may exceed the deadline: the adaptive cold guess (250 ms) becomes a
        // quarter of it, sequential's fixed one (= its attempt timeout, 10 s) the deadline.
        match &mut config.fanout.stagger {
            Stagger::Adaptive(a) => a.cold = a.cold.min(deadline / 4),
            Stagger::Fixed(d) => *d = (*d).min(deadline),
        }
        let options = RefreshOptions { config, ..RefreshOptions::default() };
        let mut overshoots = Vec::with_capacity(runs);
        for _ in 0..runs {
            let started = Instant::now();
            let result = refresh_with(&options, &seeds, |_| {}).await;
            let elapsed = started.elapsed();
            match result {
                Err(stagger_tokio::Error::Refresh { error, .. }) if error.reason == GiveUpReason::DeadlineExceeded => {}
                other => return Err(format!("expected DeadlineExceeded, got {other:?}").into()),
            }
            overshoots.push(elapsed.saturating_sub(deadline));
        }
        overshoots.sort();
        let p99 = quantile(&overshoots, 0.99);
        worst_p99 = worst_p99.max(p99);
        println!(
            "{name:<20} {:>7.2} ms {:>7.2} ms {:>7.2} ms {:>7.2} ms   {}",
            ms(quantile(&overshoots, 0.5)),
            ms(p99),
            ms(overshoots[overshoots.len() - 1]),
            ms(overshoots[0]),
            if p99 <= Duration::from_millis(50) { "ok" } else { "MISSED" }
        );
    }
    if worst_p99 > Duration::from_millis(50) {
        return Err("p99 overshoot above 50 ms".into());
    }
    Ok(())
}
