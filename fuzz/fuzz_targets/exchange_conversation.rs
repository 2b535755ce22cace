//! Structure-aware: a real conversation (ApiVersions, maybe the v0 downgrade, then Metadata
//! at any version with a fuzzer-chosen cluster shape), encoded by `kafka-protocol`, then
//! corrupted — bodies replaced, bytes overwritten, the stream truncated — split anyhow and
//! interleaved with polls and an EOF anywhere. Reaches the guard and both decoders at every
//! version far more often than noise does.
#![no_main]

use arbitrary::Arbitrary;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{ApiVersionsResponse, BrokerId, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use libfuzzer_sys::fuzz_target;
use stagger_fuzz::{api_versions, config, drive_and_check, framed, interleave, response, split, try_response};

#[derive(Arbitrary, Debug)]
struct Input {
    max_frame: u8,
    version: u8,
    downgrade: bool,
    /// Cluster shape: brokers (≤ 255), topics (≤ 255), partitions per topic (≤ 7),
    /// replicas per partition (≤ 3) — large arrays too, where allocation sizes matter.
    shape: [u8; 4],
    error_code: i16,
    names: Vec<String>,
    /// Replaces the ApiVersions body (after the correlation id).
    api_versions_body: Option<Vec<u8>>,
    /// Replaces the Metadata body (after the header).
    metadata_body: Option<Vec<u8>>,
    edits: Vec<(u16, u8)>,
    truncate: Option<u16>,
    cuts: Vec<u16>,
    polls: Vec<(u16, bool)>,
    eof_at: Option<u16>,
}

fn name(names: &[String], i: usize) -> StrBytes {
    StrBytes::from_string(names.get(i).cloned().unwrap_or_else(|| format!("n{i}")))
}

fn cluster(input: &Input) -> MetadataResponse {
    let [brokers, topics, partitions, replicas] = input.shape.map(usize::from);
    let (partitions, replicas) = (partitions % 8, replicas % 4);
    let replicas: Vec<BrokerId> = (0..replicas as i32).map(BrokerId).collect();
    MetadataResponse::default()
        .with_error_code(input.error_code)
        .with_cluster_id(input.names.first().map(|n| StrBytes::from_string(n.clone())))
        .with_brokers(
            (0..brokers)
                .map(|i| {
                    MetadataResponseBroker::default()
                        .with_node_id(BrokerId(i as i32))
                        .with_host(name(&input.names, i))
                        .with_port(9092 + i as i32)
                })
                .collect(),
        )
        .with_topics(
            (0..topics)
                .map(|t| {
                    MetadataResponseTopic::default()
                        .with_name(Some(TopicName(name(&input.names, t + 1))))
                        .with_partitions(
                            (0..partitions)
                                .map(|p| {
                                    MetadataResponsePartition::default()
                                        .with_partition_index(p as i32)
                                        .with_replica_nodes(replicas.clone())
                                        .with_isr_nodes(replicas.clone())
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

fuzz_target!(|input: Input| {
    let version = (input.version % 14) as i16;
    let mut stream = Vec::new();
    let mut correlation_id = 1;
    if input.downgrade {
        stream.extend(response(correlation_id, 0, &ApiVersionsResponse::default().with_error_code(35)));
        correlation_id += 1;
    }
    let api_version = if input.downgrade { 0 } else { 3 };
    match &input.api_versions_body {
        Some(body) => {
            let mut message = correlation_id.to_be_bytes().to_vec();
            message.extend(body);
            stream.extend(framed(&message));
        }
        None => stream.extend(response(correlation_id, api_version, &api_versions(version))),
    }
    correlation_id += 1;
    match &input.metadata_body {
        Some(body) => {
            let mut message = correlation_id.to_be_bytes().to_vec();
            if version >= 9 {
                message.push(0); // response header v1: no tagged fields
            }
            message.extend(body);
            stream.extend(framed(&message));
        }
        // Some fuzzer-made names do not encode (too long): then there is nothing to test.
        None => match try_response(correlation_id, version, &cluster(&input)) {
            Some(frame) => stream.extend(frame),
            None => return,
        },
    }
    if !stream.is_empty() {
        let len = stream.len();
        for &(at, byte) in &input.edits {
            stream[at as usize % len] = byte;
        }
    }
    if let Some(at) = input.truncate {
        stream.truncate(at as usize % (stream.len() + 1));
    }
    let ops = interleave(split(&stream, &input.cuts), &input.polls, input.eof_at);
    drive_and_check(&config(input.max_frame), &ops);
});
