//! librdkafka's mock cluster, plus librdkafka's own client view of it (an independent
//! reference for what our metadata must say).

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;
use rdkafka::ClientConfig;

/// An in-process mock cluster with brokers `1..=n`.
pub struct Mock {
    cluster: MockCluster<'static, DefaultProducerContext>,
    /// The reference view, taken right after start (before any fault).
    pub view: View,
}

/// What librdkafka's client sees.
#[derive(Clone, Debug, PartialEq)]
pub struct View {
    /// `(node id, "host:port")`, sorted by id.
    pub brokers: Vec<(i32, String)>,
    /// `(topic, [(partition, leader)])`, sorted.
    pub topics: Vec<(String, Vec<(i32, i32)>)>,
}

impl View {
    /// What our metadata says, in the same shape (sorted), to compare with librdkafka's.
    pub fn of(metadata: &stagger::Metadata) -> View {
        let mut brokers: Vec<(i32, String)> = metadata.brokers.iter().map(|b| (b.node_id, b.address())).collect();
        brokers.sort();
        let mut topics: Vec<(String, Vec<(i32, i32)>)> = metadata
            .topics
            .iter()
            .map(|t| {
                let mut partitions: Vec<(i32, i32)> = t.partitions.iter().map(|p| (p.id, p.leader)).collect();
                partitions.sort();
                (t.name.clone(), partitions)
            })
            .collect();
        topics.sort();
        View { brokers, topics }
    }
}

impl Mock {
    /// Starts `brokers` brokers and creates `topics` (`(name, partitions)`).
    pub fn start(brokers: i32, topics: &[(&str, i32)]) -> Mock {
        let cluster = MockCluster::new(brokers).expect("mock cluster");
        // Note: librdkafka 2.12's mock appends one stray tagged-fields byte to flexible (v9+)
        // Metadata responses and answers ApiVersions v3 with a non-standard error body; the
        // core's exchange tolerates both (trailing bytes are ignored, as Kafka's clients do,
        // and the ApiVersions downgrade is decided from the error code alone).
        for (name, partitions) in topics {
            cluster.create_topic(name, *partitions, brokers.min(3)).expect("create topic");
        }
        let view = librdkafka_view(&cluster.bootstrap_servers());
        assert_eq!(view.brokers.len(), brokers as usize, "librdkafka sees every mock broker");
        Mock { cluster, view }
    }

    /// `host:port` of broker `id`.
    pub fn address(&self, id: i32) -> String {
        self.view.brokers.iter().find(|(b, _)| *b == id).map(|(_, a)| a.clone()).expect("broker id")
    }

    /// Addresses of brokers `ids`, in that order (a seed list).
    pub fn seeds(&self, ids: &[i32]) -> Vec<String> {
        ids.iter().map(|&id| self.address(id)).collect()
    }

    /// Every broker's port (for socket accounting).
    pub fn ports(&self) -> Vec<u16> {
        self.view.brokers.iter().map(|(_, a)| a.rsplit_once(':').unwrap().1.parse().unwrap()).collect()
    }

    /// Makes broker `id` hung: connections accepted, requests read, no answer for an hour.
    pub fn hang(&self, id: i32) {
        self.cluster.broker_round_trip_time(id, Duration::from_secs(3600)).expect("set rtt");
    }

    /// Takes broker `id` down: new connections are refused.
    pub fn down(&self, id: i32) {
        self.cluster.broker_down(id).expect("broker down");
    }
}

/// Asks librdkafka's own client for the cluster's metadata.
pub fn librdkafka_view(bootstrap: &str) -> View {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("log_level", "3")
        .create()
        .expect("librdkafka consumer");
    let metadata = consumer.fetch_metadata(None, Duration::from_secs(10)).expect("librdkafka metadata");
    let mut brokers: Vec<(i32, String)> =
        metadata.brokers().iter().map(|b| (b.id(), format!("{}:{}", b.host(), b.port()))).collect();
    brokers.sort();
    let mut topics: Vec<(String, Vec<(i32, i32)>)> = metadata
        .topics()
        .iter()
        .map(|t| {
            let mut partitions: Vec<(i32, i32)> = t.partitions().iter().map(|p| (p.id(), p.leader())).collect();
            partitions.sort();
            (t.name().to_owned(), partitions)
        })
        .collect();
    topics.sort();
    View { brokers, topics }
}
