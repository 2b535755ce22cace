//! One refresh over real sockets, measured: shared by the real-socket programs (`realsockets`
//! on librdkafka's mock, `realsockets_kafka` on real Apache Kafka) so both count alike.

use std::time::Duration;

use stagger::RefreshConfig;
use stagger_tokio::{refresh_with, RefreshOptions, RefreshOutcome};

/// What one refresh cost.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// Time to metadata.
    pub elapsed: Duration,
    /// Attempts whose TCP handshake completed.
    pub connections: usize,
    /// Attempts started.
    pub attempts: usize,
}

/// One refresh of `seeds` with `config`, and what it cost.
pub async fn once(config: RefreshConfig, seeds: &[String]) -> Result<(Sample, RefreshOutcome), String> {
    let options = RefreshOptions { config, ..RefreshOptions::default() };
    let outcome = refresh_with(&options, seeds, |_| {}).await.map_err(|e| e.to_string())?;
    let sample = Sample {
        elapsed: outcome.elapsed,
        connections: outcome.connections_opened(),
        attempts: outcome.attempts.len(),
    };
    Ok((sample, outcome))
}
