//! Topics created and metadata read by librdkafka's own client (the `rdkafka` crate): the
//! independent reference our metadata is compared with.

use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::ClientConfig;
use stagger::Metadata;

/// Everything a metadata listing shows, in a comparable order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FullView {
    /// `(node id, "host:port")`, sorted by id.
    pub brokers: Vec<(i32, String)>,
    /// `(topic, [(partition, leader, replicas, isr)])` for the topics asked about, sorted.
    pub topics: Vec<(String, Vec<Partition>)>,
}

/// `(partition, leader, replicas, sorted isr)`.
pub type Partition = (i32, i32, Vec<i32>, Vec<i32>);

/// Creates `name` with `partitions` partitions replicated `replication` times (an existing
/// topic of that name is fine), and waits until librdkafka sees a leader for every partition.
pub async fn create_topic(bootstrap: &str, name: &str, partitions: i32, replication: i32) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", bootstrap).set("log_level", "3").create().expect("admin client");
    let topic = NewTopic::new(name, partitions, TopicReplication::Fixed(replication));
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let results = admin.create_topics([&topic], &options).await.expect("CreateTopics request");
    for result in results {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((topic, code)) => panic!("creating {topic}: {code}"),
        }
    }
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let view = librdkafka_view(bootstrap, &[name]);
        let ready = view.topics.iter().any(|(t, p)| {
            t == name && p.len() == partitions as usize && p.iter().all(|(_, leader, _, _)| *leader >= 0)
        });
        if ready {
            return;
        }
        assert!(Instant::now() < until, "{name}: partitions without a leader after 30 s: {view:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What librdkafka's client sees of `topics` (and the brokers), asking through `bootstrap`.
pub fn librdkafka_view(bootstrap: &str, topics: &[&str]) -> FullView {
    let consumer: BaseConsumer =
        ClientConfig::new().set("bootstrap.servers", bootstrap).set("log_level", "3").create().expect("consumer");
    let metadata = consumer.fetch_metadata(None, Duration::from_secs(10)).expect("librdkafka metadata");
    let mut brokers: Vec<(i32, String)> =
        metadata.brokers().iter().map(|b| (b.id(), format!("{}:{}", b.host(), b.port()))).collect();
    brokers.sort();
    let mut listed: Vec<(String, Vec<Partition>)> = metadata
        .topics()
        .iter()
        .filter(|t| topics.contains(&t.name()))
        .map(|t| {
            let mut partitions: Vec<Partition> = t
                .partitions()
                .iter()
                .map(|p| (p.id(), p.leader(), p.replicas().to_vec(), sorted(p.isr().to_vec())))
                .collect();
            partitions.sort();
            (t.name().to_owned(), partitions)
        })
        .collect();
    listed.sort();
    FullView { brokers, topics: listed }
}

/// The cluster id librdkafka reads.
pub fn librdkafka_cluster_id(bootstrap: &str) -> String {
    let consumer: BaseConsumer =
        ClientConfig::new().set("bootstrap.servers", bootstrap).set("log_level", "3").create().expect("consumer");
    consumer.client().fetch_cluster_id(Duration::from_secs(10)).expect("librdkafka cluster id")
}

/// Our metadata in the same shape, for `topics`.
pub fn stagger_view(metadata: &Metadata, topics: &[&str]) -> FullView {
    let mut brokers: Vec<(i32, String)> = metadata.brokers.iter().map(|b| (b.node_id, b.address())).collect();
    brokers.sort();
    let mut listed: Vec<(String, Vec<Partition>)> = metadata
        .topics
        .iter()
        .filter(|t| topics.contains(&t.name.as_str()))
        .map(|t| {
            let mut partitions: Vec<Partition> =
                t.partitions.iter().map(|p| (p.id, p.leader, p.replicas.clone(), sorted(p.isr.clone()))).collect();
            partitions.sort();
            (t.name.clone(), partitions)
        })
        .collect();
    listed.sort();
    FullView { brokers, topics: listed }
}

fn sorted(mut ids: Vec<i32>) -> Vec<i32> {
    ids.sort();
    ids
}
