//! `stagger demo`: an embedded real Kafka-protocol cluster with misbehaving brokers.
//!
//! librdkafka's mock cluster (through the `rdkafka` crate) speaks the real Kafka protocol on
//! loopback. We hang some brokers (they accept TCP and never answer: a huge round-trip time)
//! and take some down (connections refused), put them first in the seed list — the worst
//! case for a client that asks one broker after another — and refresh.

use std::time::Duration;

use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;

/// How a demo broker behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Accepts connections, never answers.
    Hung,
    /// Refuses connections.
    Down,
    /// Answers normally.
    Healthy,
}

impl Role {
    /// A short description for the banner.
    pub fn describe(self) -> &'static str {
        match self {
            Role::Hung => "hung (accepts TCP, never answers)",
            Role::Down => "down (refuses connections)",
            Role::Healthy => "healthy",
        }
    }
}

/// A running mock cluster and what we did to it.
pub struct DemoCluster {
    /// Kept alive for as long as the demo runs; dropping it stops the brokers.
    _cluster: MockCluster<'static, DefaultProducerContext>,
    /// `(node id, host:port, role)` in seed order: hung first, then down, then healthy.
    pub brokers: Vec<(i32, String, Role)>,
}

/// Topics the demo creates: `(name, partitions)`.
pub const TOPICS: [(&str, i32); 3] = [("orders", 6), ("payments", 3), ("audit", 1)];

impl DemoCluster {
    /// Starts `n` brokers, learns their addresses with a healthy refresh, then makes the
    /// first `hung` brokers hang and the next `down` refuse.
    pub async fn start(n: usize, hung: usize, down: usize) -> Result<DemoCluster, String> {
        if n == 0 || n > 64 {
            return Err(format!("--brokers must be between 1 and 64 (got {n})"));
        }
        if hung + down >= n {
            return Err(format!("--hung ({hung}) + --down ({down}) must leave at least one healthy broker of {n}"));
        }
        let cluster = MockCluster::new(n as i32).map_err(|e| format!("could not start the mock cluster: {e}"))?;
        for (name, partitions) in TOPICS {
            cluster
                .create_topic(name, partitions, (n as i32).min(3))
                .map_err(|e| format!("could not create topic {name}: {e}"))?;
        }
        let bootstrap: Vec<String> = cluster.bootstrap_servers().split(',').map(str::to_owned).collect();
        // Learn node id ↔ address from the cluster itself, while every broker is healthy.
        let metadata = stagger_tokio::refresh(&stagger::RefreshConfig::default(), &bootstrap)
            .await
            .map_err(|e| format!("the fresh mock cluster did not answer: {e}"))?;
        let mut known: Vec<(i32, String)> = metadata.brokers.iter().map(|b| (b.node_id, b.address())).collect();
        known.sort();
        let mut brokers = Vec::with_capacity(n);
        for (i, (id, address)) in known.into_iter().enumerate() {
            let role = if i < hung {
                cluster
                    .broker_round_trip_time(id, Duration::from_secs(3600))
                    .map_err(|e| format!("could not hang broker {id}: {e}"))?;
                Role::Hung
            } else if i < hung + down {
                cluster.broker_down(id).map_err(|e| format!("could not take broker {id} down: {e}"))?;
                Role::Down
            } else {
                Role::Healthy
            };
            brokers.push((id, address, role));
        }
        Ok(DemoCluster { _cluster: cluster, brokers })
    }

    /// Seed addresses, worst first.
    pub fn seeds(&self) -> Vec<String> {
        self.brokers.iter().map(|(_, a, _)| a.clone()).collect()
    }
}
