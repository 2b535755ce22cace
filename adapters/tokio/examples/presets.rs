//! Compares the core's presets on a real Kafka-protocol cluster with hung brokers first.
//!
//! Starts librdkafka's mock cluster in-process (5 brokers by default), makes the first `k`
//! seeds hung (connections accepted, no answer: an hour of round-trip time), and refreshes
//! once per preset, printing time to metadata and connections opened, with ratios to the
//! best of the same run. Not a timed test: numbers depend on the machine.
//!
//! ```text
//! cargo run -p stagger-tokio --example presets -- [k=2] [brokers=5]
//! ```

use std::error::Error;
use std::time::Duration;

use rdkafka::mocking::MockCluster;
use stagger::{RefreshConfig, Stagger};
use stagger_tokio::{refresh_with, RefreshOptions};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<i32>());
    let hung = args.next().transpose()?.unwrap_or(2).max(0);
    let brokers = args.next().transpose()?.unwrap_or(5).max(hung + 1);

    let mock = MockCluster::new(brokers)?;
    mock.create_topic("demo", 6, brokers.min(3))?;
    let bootstrap: Vec<String> = mock.bootstrap_servers().split(',').map(str::to_owned).collect();
    // Learn which address is which node id (the mock numbers brokers from 1).
    let discovered = stagger_tokio::refresh(&RefreshConfig::default(), &bootstrap).await?;
    let mut nodes: Vec<(i32, String)> = discovered.brokers.iter().map(|b| (b.node_id, b.address())).collect();
    nodes.sort();
    for (id, _) in nodes.iter().take(hung as usize) {
        mock.broker_round_trip_time(*id, Duration::from_secs(3600))?;
    }
    let seeds: Vec<String> = nodes.into_iter().map(|(_, address)| address).collect();
    println!("{brokers} brokers, the first {hung} seeds hung (TCP accepted, never answered)\n");

    let mut sequential = RefreshConfig::sequential();
    sequential.attempt_timeout = Duration::from_secs(1);
    sequential.fanout.stagger = Stagger::Fixed(sequential.attempt_timeout);
    let presets = [
        ("sequential (1 s timeout)", sequential),
        ("all-at-once", RefreshConfig::all_at_once()),
        ("staggered (500 ms)", RefreshConfig::staggered()),
        ("adaptive (default)", RefreshConfig::adaptive()),
    ];
    let mut rows = Vec::new();
    for (name, config) in presets {
        let options = RefreshOptions { config, ..RefreshOptions::default() };
        let outcome = refresh_with(&options, &seeds, |_| {}).await?;
        rows.push((name, outcome.elapsed, outcome.connections_opened(), outcome.attempts.len(), outcome.winner));
    }

    let fastest = rows.iter().map(|r| r.1).min().unwrap_or_default().max(Duration::from_micros(1));
    let fewest = rows.iter().map(|r| r.2).min().unwrap_or(1).max(1);
    println!(
        "{:<26} {:>12} {:>9} {:>12} {:>9} {:>9}  winner",
        "preset", "to metadata", "× best", "connections", "× fewest", "attempts"
    );
    for (name, elapsed, connections, attempts, winner) in rows {
        println!(
            "{:<26} {:>9.1} ms {:>8.1}× {:>12} {:>8.1}× {:>9}  {winner}",
            name,
            elapsed.as_secs_f64() * 1000.0,
            elapsed.as_secs_f64() / fastest.as_secs_f64(),
            connections,
            connections as f64 / fewest as f64,
            attempts,
        );
    }
    Ok(())
}
