//! From the wire's `MetadataResponse` to the core's [`Metadata`].
//!
//! The core never sees `kafka-protocol` types: its model is plain data it can serialise,
//! simulate and compare, so the translation (and its few judgement calls) lives here.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataResponse};

use crate::error::{AttemptError, ErrorKind};
use crate::metadata::{BrokerMetadata, Metadata, PartitionMetadata, TopicMetadata};

/// Translates a decoded response. Fields absent in older versions already hold the
/// decoder's defaults (no cluster id, controller -1, error code 0), which are ours too.
pub(crate) fn metadata_from_response(response: MetadataResponse) -> Result<Metadata, AttemptError> {
    Ok(Metadata {
        cluster_id: response.cluster_id.map(|id| id.to_string()),
        controller_id: response.controller_id.0,
        error_code: response.error_code,
        brokers: response.brokers.iter().map(broker).collect::<Result<_, _>>()?,
        topics: response.topics.iter().map(topic).collect(),
    })
}

/// A broker; a port outside `u16` is a malformed answer, not something to connect to.
fn broker(b: &MetadataResponseBroker) -> Result<BrokerMetadata, AttemptError> {
    let port = u16::try_from(b.port).map_err(|_| {
        let detail = format!("broker {} advertises port {}, outside 0..=65535", b.node_id.0, b.port);
        AttemptError::with_detail(ErrorKind::Protocol, detail)
    })?;
    Ok(BrokerMetadata {
        node_id: b.node_id.0,
        host: b.host.to_string(),
        port,
        rack: b.rack.as_ref().map(|r| r.to_string()),
    })
}

/// A topic. Metadata v10+ may identify a topic by id only (null or empty name): then the
/// id's text stands in for the name, or an empty string if there is neither.
fn topic(t: &MetadataResponseTopic) -> TopicMetadata {
    let name = match &t.name {
        Some(name) if !name.0.is_empty() => name.0.to_string(),
        _ if !t.topic_id.is_nil() => t.topic_id.to_string(),
        _ => String::new(),
    };
    TopicMetadata {
        name,
        error_code: t.error_code,
        is_internal: t.is_internal,
        partitions: t.partitions.iter().map(partition).collect(),
    }
}

fn partition(p: &MetadataResponsePartition) -> PartitionMetadata {
    PartitionMetadata {
        id: p.partition_index,
        error_code: p.error_code,
        leader: p.leader_id.0,
        replicas: node_ids(&p.replica_nodes),
        isr: node_ids(&p.isr_nodes),
    }
}

fn node_ids(ids: &[BrokerId]) -> Vec<i32> {
    ids.iter().map(|id| id.0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::StrBytes;

    #[test]
    fn translates_every_field() {
        let response = MetadataResponse::default()
            .with_cluster_id(Some(StrBytes::from_static_str("c1")))
            .with_controller_id(BrokerId(2))
            .with_error_code(129)
            .with_brokers(vec![MetadataResponseBroker::default()
                .with_node_id(BrokerId(2))
                .with_host(StrBytes::from_static_str("::1"))
                .with_port(9092)
                .with_rack(Some(StrBytes::from_static_str("rack-a")))])
            .with_topics(vec![MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("__consumer_offsets"))))
                .with_is_internal(true)
                .with_error_code(5)
                .with_partitions(vec![MetadataResponsePartition::default()
                    .with_partition_index(3)
                    .with_error_code(9)
                    .with_leader_id(BrokerId(2))
                    .with_replica_nodes(vec![BrokerId(2), BrokerId(1)])
                    .with_isr_nodes(vec![BrokerId(2)])])]);
        let metadata = metadata_from_response(response).unwrap();
        assert_eq!(
            metadata,
            Metadata {
                cluster_id: Some("c1".into()),
                controller_id: 2,
                error_code: 129,
                brokers: vec![BrokerMetadata {
                    node_id: 2,
                    host: "::1".into(),
                    port: 9092,
                    rack: Some("rack-a".into())
                }],
                topics: vec![TopicMetadata {
                    name: "__consumer_offsets".into(),
                    error_code: 5,
                    is_internal: true,
                    partitions: vec![PartitionMetadata {
                        id: 3,
                        error_code: 9,
                        leader: 2,
                        replicas: vec![2, 1],
                        isr: vec![2]
                    }],
                }],
            }
        );
        assert_eq!(metadata.brokers[0].address(), "[::1]:9092");
    }

    #[test]
    fn nameless_topics_fall_back_to_their_id() {
        let mut by_id = MetadataResponseTopic::default().with_name(None);
        by_id.topic_id = "01234567-89ab-cdef-0123-456789abcdef".parse().unwrap();
        let mut empty_name = by_id.clone().with_name(Some(TopicName(StrBytes::from_static_str(""))));
        let neither = MetadataResponseTopic::default().with_name(None);
        let response = MetadataResponse::default().with_topics(vec![by_id, empty_name.clone(), neither]);
        let metadata = metadata_from_response(response).unwrap();
        assert_eq!(metadata.topics[0].name, "01234567-89ab-cdef-0123-456789abcdef");
        assert_eq!(metadata.topics[1].name, "01234567-89ab-cdef-0123-456789abcdef");
        assert_eq!(metadata.topics[2].name, "");
        empty_name.topic_id = Default::default();
        assert_eq!(
            metadata_from_response(MetadataResponse::default().with_topics(vec![empty_name])).unwrap().topics[0].name,
            ""
        );
    }

    #[test]
    fn bad_ports_are_protocol_errors() {
        for port in [-1, 65536] {
            let response = MetadataResponse::default()
                .with_brokers(vec![MetadataResponseBroker::default().with_node_id(BrokerId(7)).with_port(port)]);
            let err = metadata_from_response(response).unwrap_err();
            assert_eq!(err.kind, ErrorKind::Protocol);
            assert!(err.detail.contains("broker 7 advertises port"), "{err}");
        }
    }
}
