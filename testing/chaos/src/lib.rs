//! A chaos soak: long-lived [`stagger_tokio::Client`]s and [`stagger_blocking::Client`]s
//! read metadata from a real Kafka cluster whose brokers sit behind namespaced hosts
//! ([`NetCluster`]), while a seeded chaos loop stops and continues, kills and restarts
//! brokers and switches the hosts' network faults. It reports what a user of a client cares
//! about across days: how old the metadata ever got (bounded by the refresh interval plus the
//! deadline), how many refreshes ran and gave up (each give-up with every broker's error),
//! attempts per refresh, and whether descriptors, threads, tasks and memory stayed flat.
//!
//! `cargo run --release -p stagger-chaos --example soak` runs it for ten minutes;
//! `tests/soak.rs` runs a 60-second version with fixed counts and asserts the bounds.
#![warn(missing_docs)]

mod chaos;
mod clients;
mod resources;

use std::time::Duration;

pub use chaos::Action;
pub use resources::Resources;
use stagger_kafka_fixture::netns::NetCluster;

/// What to run.
#[derive(Clone, Debug)]
pub struct Soak {
    /// How long the chaos lasts (the clients start before it and stop after).
    pub duration: Duration,
    /// Long-lived tokio clients, all on one runtime.
    pub tokio_clients: usize,
    /// Long-lived blocking clients, each on a thread of its own.
    pub blocking_clients: usize,
    /// Each client's refresh interval (its metadata's maximum age when all is well).
    pub refresh_interval: Duration,
    /// Each refresh's deadline.
    pub deadline: Duration,
    /// How often each client asks for metadata.
    pub poll: Duration,
    /// Time between chaos actions.
    pub step: Duration,
    /// Seed of the chaos loop: same seed, same actions in the same order (how many fit in
    /// the duration depends on how long the restarts take).
    pub seed: u64,
}

impl Default for Soak {
    /// Ten minutes, 40 tokio and 8 blocking clients, 10 s refresh interval, 15 s deadline.
    fn default() -> Self {
        Soak {
            duration: Duration::from_secs(600),
            tokio_clients: 40,
            blocking_clients: 8,
            refresh_interval: Duration::from_secs(10),
            deadline: Duration::from_secs(15),
            poll: Duration::from_millis(250),
            step: Duration::from_secs(5),
            seed: 1,
        }
    }
}

/// What a soak saw.
#[derive(Debug)]
pub struct Report {
    /// Every chaos action, in order, with when it happened.
    pub actions: Vec<(Duration, Action)>,
    /// The oldest metadata any client held at any poll.
    pub max_age: Duration,
    /// Refreshes done, over all clients (their own `ClientStats`).
    pub refreshes: u64,
    /// Attempts started, over all clients.
    pub attempts: u64,
    /// Refreshes that gave up, each with its error (which lists every broker's error).
    pub give_ups: Vec<String>,
    /// Metadata reads that returned an error (a give-up seen by a caller).
    pub failed_reads: u64,
    /// Measured after the clients' first metadata, before any chaos.
    pub start: Resources,
    /// Measured after the chaos healed and every client read fresh metadata again.
    pub end: Resources,
    /// Resident set size (KiB) once per chaos step, with when: a trend, not two points.
    pub rss_samples: Vec<(Duration, u64)>,
}

impl Report {
    /// The bound the age must stay under: one refresh interval plus one deadline.
    pub fn age_bound(soak: &Soak) -> Duration {
        soak.refresh_interval + soak.deadline
    }
}

/// Runs `soak` against `cluster` (see the crate docs).
pub fn run(soak: &Soak, cluster: &NetCluster) -> Report {
    clients::run(soak, cluster)
}
