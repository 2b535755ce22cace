//! A pre-decode walk that refuses array counts the bytes cannot hold.
//!
//! Why this exists: `kafka-protocol` 0.18 sizes every decoded array with
//! `Vec::with_capacity(count)` straight from the wire (upstream PRs #152, #161 and #200 fix
//! it, unreleased as of 0.18.0). A 20-byte frame claiming 2³¹ topics would ask the allocator
//! for hundreds of GiB and abort the process — not even a panic we could catch — and the
//! frame-size limit cannot help, because the count is independent of the frame length.
//!
//! So before the real decoder runs, this walks the body field by field, mirroring that
//! decoder for exactly the two responses the exchange reads, allocating nothing. Every array
//! count is checked against the bytes left (every element takes at least one byte), and every
//! element is walked, so when the walk succeeds each array the decoder pre-sizes really is
//! there. It decodes no values: the decoder's own checks (UTF-8, versions, ...) still apply.
//! Only wire *layout* is known here, no meaning.
//!
//! The decoder pre-sizes each array as `count × size_of::<Element>()`, and an element that
//! takes 8 bytes on the wire can take 100+ in memory, so "the count fits in the bytes" still
//! lets a frame ask for ~13× its size. The walk therefore also adds up what every array will
//! reserve and refuses a body whose arrays would reserve more than `budget` (the exchange
//! passes its maximum frame size): no decode allocates more than the limit the user set.

use alloc::format;
use alloc::string::String;
use core::mem::size_of;

use kafka_protocol::messages::api_versions_response::{ApiVersion, FinalizedFeatureKey, SupportedFeatureKey};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::BrokerId;

/// Checks an ApiVersions response body (after its header) of `version`.
pub(crate) fn check_api_versions(body: &[u8], version: i16, budget: usize) -> Result<(), String> {
    let mut w = Walker { rest: body, flexible: version >= 3, budget };
    w.skip(2)?; // error_code
    for _ in 0..w.array_len("api_keys", size_of::<ApiVersion>())? {
        w.skip(6)?; // api_key, min_version, max_version
        w.tagged_fields()?;
    }
    if version >= 1 {
        w.skip(4)?; // throttle_time_ms
    }
    if w.flexible {
        // The decoder reads the known tagged fields by their type, not by their size prefix.
        for _ in 0..w.uvarint()? {
            let tag = w.uvarint()?;
            let size = w.uvarint()?;
            match tag {
                0 | 2 => {
                    // supported_features / finalized_features: name, two i16, tagged fields
                    let element = size_of::<SupportedFeatureKey>().max(size_of::<FinalizedFeatureKey>());
                    for _ in 0..w.array_len("features", element)? {
                        w.string()?;
                        w.skip(4)?;
                        w.tagged_fields()?;
                    }
                }
                1 => w.skip(8)?, // finalized_features_epoch
                3 => w.skip(1)?, // zk_migration_ready
                _ => w.skip_u32(size)?,
            }
        }
    }
    Ok(())
}

/// Checks a SaslHandshake response body (v0 and v1 share it): the mechanisms list is an
/// array of strings the decoder pre-sizes.
pub(crate) fn check_sasl_handshake(body: &[u8], _version: i16, budget: usize) -> Result<(), String> {
    let mut w = Walker { rest: body, flexible: false, budget };
    w.skip(2)?; // error_code
    for _ in 0..w.array_len("mechanisms", size_of::<kafka_protocol::protocol::StrBytes>())? {
        w.string()?;
    }
    Ok(())
}

/// Checks a SaslAuthenticate response body: no arrays, but its strings and bytes must be
/// there before the decoder slices them.
pub(crate) fn check_sasl_authenticate(body: &[u8], version: i16, budget: usize) -> Result<(), String> {
    let mut w = Walker { rest: body, flexible: version >= 2, budget };
    w.skip(2)?; // error_code
    w.string()?; // error_message
    if w.flexible {
        match w.uvarint()? {
            0 => return Err(String::from("auth_bytes: null")),
            n => w.skip_u32(n - 1)?,
        }
    } else {
        let n = i32::from_be_bytes(w.bytes()?);
        w.skip(usize::try_from(n).map_err(|_| format!("auth_bytes length {n}"))?)?;
    }
    if version >= 1 {
        w.skip(8)?; // session_lifetime_ms
    }
    w.tagged_fields()
}

/// Checks a Metadata response body (after its header) of `version`.
pub(crate) fn check_metadata(body: &[u8], version: i16, budget: usize) -> Result<(), String> {
    let mut w = Walker { rest: body, flexible: version >= 9, budget };
    if version >= 3 {
        w.skip(4)?; // throttle_time_ms
    }
    for _ in 0..w.array_len("brokers", size_of::<MetadataResponseBroker>())? {
        w.skip(4)?; // node_id
        w.string()?; // host
        w.skip(4)?; // port
        if version >= 1 {
            w.string()?; // rack
        }
        w.tagged_fields()?;
    }
    if version >= 2 {
        w.string()?; // cluster_id
    }
    if version >= 1 {
        w.skip(4)?; // controller_id
    }
    for _ in 0..w.array_len("topics", size_of::<MetadataResponseTopic>())? {
        w.skip(2)?; // error_code
        w.string()?; // name
        if version >= 10 {
            w.skip(16)?; // topic_id
        }
        if version >= 1 {
            w.skip(1)?; // is_internal
        }
        for _ in 0..w.array_len("partitions", size_of::<MetadataResponsePartition>())? {
            w.skip(10)?; // error_code, partition_index, leader_id
            if version >= 7 {
                w.skip(4)?; // leader_epoch
            }
            w.int32_array("replica_nodes")?;
            w.int32_array("isr_nodes")?;
            if version >= 5 {
                w.int32_array("offline_replicas")?;
            }
            w.tagged_fields()?;
        }
        if version >= 8 {
            w.skip(4)?; // topic_authorized_operations
        }
        w.tagged_fields()?;
    }
    // What follows (cluster_authorized_operations, error_code, tagged fields) holds no arrays.
    Ok(())
}

/// A read position over a body; `flexible` selects compact (varint) lengths and tagged fields.
struct Walker<'a> {
    rest: &'a [u8],
    flexible: bool,
    /// In-memory bytes the decoder may still reserve for arrays.
    budget: usize,
}

impl Walker<'_> {
    fn skip(&mut self, n: usize) -> Result<(), String> {
        if self.rest.len() < n {
            return Err(format!("truncated: {n} more bytes needed, {} left", self.rest.len()));
        }
        self.rest = &self.rest[n..];
        Ok(())
    }

    fn skip_u32(&mut self, n: u32) -> Result<(), String> {
        self.skip(usize::try_from(n).map_err(|_| format!("field of {n} bytes"))?)
    }

    fn bytes<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut out = [0; N];
        let head = self.rest.get(..N).ok_or_else(|| format!("truncated: {N} more bytes needed"))?;
        out.copy_from_slice(head);
        self.rest = &self.rest[N..];
        Ok(out)
    }

    /// An unsigned varint, read exactly as `kafka-protocol` reads it (at most five bytes).
    fn uvarint(&mut self) -> Result<u32, String> {
        let mut value = 0u32;
        for i in 0..5 {
            let [b] = self.bytes::<1>()?;
            value |= u32::from(b & 0x7f).wrapping_shl(i * 7);
            if b < 0x80 {
                break;
            }
        }
        Ok(value)
    }

    /// Skips a (nullable) string.
    fn string(&mut self) -> Result<(), String> {
        if self.flexible {
            match self.uvarint()? {
                0 => Ok(()), // null
                n => self.skip_u32(n - 1),
            }
        } else {
            match i16::from_be_bytes(self.bytes()?) {
                -1 => Ok(()), // null
                n => self.skip(usize::try_from(n).map_err(|_| format!("string length {n}"))?),
            }
        }
    }

    /// Reads a non-null array's element count, checks that the bytes left can hold it, and
    /// charges `count × element` (what the decoder will reserve) to the budget.
    fn array_len(&mut self, what: &str, element: usize) -> Result<usize, String> {
        let count = self.array_count(what)?;
        let reserve = count.saturating_mul(element);
        if reserve > self.budget {
            return Err(format!(
                "{what}: {count} elements would need {reserve} bytes in memory, over the {} bytes the maximum frame size allows",
                self.budget
            ));
        }
        self.budget -= reserve;
        Ok(count)
    }

    /// Reads a non-null array's element count and checks that the bytes left can hold it.
    fn array_count(&mut self, what: &str) -> Result<usize, String> {
        let count = if self.flexible {
            match self.uvarint()? {
                0 => return Err(format!("{what}: null array")),
                n => u64::from(n - 1),
            }
        } else {
            let n = i32::from_be_bytes(self.bytes()?);
            u64::try_from(n).map_err(|_| format!("{what}: array length {n}"))?
        };
        match usize::try_from(count) {
            Ok(count) if count <= self.rest.len() => Ok(count),
            _ => Err(format!("{what}: array claims {count} elements but only {} bytes remain", self.rest.len())),
        }
    }

    /// Skips an array of `i32` (node ids), checking its count like any other.
    fn int32_array(&mut self, what: &str) -> Result<(), String> {
        let count = self.array_len(what, size_of::<BrokerId>())?;
        self.skip(count.checked_mul(4).ok_or_else(|| format!("{what}: array of {count} elements"))?)
    }

    /// Skips the tagged-field section of a flexible struct (nothing in older versions).
    fn tagged_fields(&mut self) -> Result<(), String> {
        if self.flexible {
            for _ in 0..self.uvarint()? {
                self.uvarint()?; // tag
                let size = self.uvarint()?;
                self.skip_u32(size)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;
    use bytes::BytesMut;
    use kafka_protocol::messages::api_versions_response::{ApiVersion, FinalizedFeatureKey, SupportedFeatureKey};
    use kafka_protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use kafka_protocol::messages::{ApiVersionsResponse, BrokerId, MetadataResponse, TopicName};
    use kafka_protocol::protocol::{Encodable, StrBytes};
    use proptest::prelude::*;

    fn encode<T: Encodable>(message: &T, version: i16) -> Vec<u8> {
        let mut buf = BytesMut::new();
        message.encode(&mut buf, version).unwrap();
        buf.to_vec()
    }

    fn metadata(topics: usize, partitions: usize, replicas: usize, null_names: bool) -> MetadataResponse {
        let nodes: Vec<BrokerId> = (0..replicas as i32).map(BrokerId).collect();
        MetadataResponse::default()
            .with_brokers(vec![
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(1))
                    .with_host(StrBytes::from_static_str("b1"))
                    .with_port(9092)
                    .with_rack(Some(StrBytes::from_static_str("r1"))),
                MetadataResponseBroker::default().with_host(StrBytes::from_static_str("b2")).with_port(9093),
            ])
            .with_cluster_id(Some(StrBytes::from_static_str("cluster")))
            .with_topics(
                (0..topics)
                    .map(|t| {
                        let name = (!null_names).then(|| TopicName(StrBytes::from_string(format!("topic-{t}"))));
                        MetadataResponseTopic::default().with_name(name).with_partitions(
                            (0..partitions as i32)
                                .map(|p| {
                                    MetadataResponsePartition::default()
                                        .with_partition_index(p)
                                        .with_replica_nodes(nodes.clone())
                                        .with_isr_nodes(nodes.clone())
                                        .with_offline_replicas(if p % 2 == 0 { vec![] } else { nodes.clone() })
                                })
                                .collect(),
                        )
                    })
                    .collect(),
            )
            .with_unknown_tagged_field(7, bytes::Bytes::from_static(b"xyz"))
    }

    proptest! {
        /// The walk must accept everything the real encoder produces, in every version.
        #[test]
        fn accepts_every_encoded_metadata(
            version in 0i16..=13, topics in 0usize..4, partitions in 0usize..4, replicas in 0usize..4, null_names: bool,
        ) {
            let mut response = metadata(topics, partitions, replicas, null_names && version >= 12);
            if version < 9 {
                response.unknown_tagged_fields.clear();
            }
            if version < 5 {
                for topic in &mut response.topics {
                    for p in &mut topic.partitions {
                        p.offline_replicas.clear();
                    }
                }
            }
            let body = encode(&response, version);
            prop_assert_eq!(check_metadata(&body, version, usize::MAX), Ok(()));
        }
    }

    #[test]
    fn accepts_every_encoded_api_versions() {
        let mut response = ApiVersionsResponse::default().with_api_keys(vec![
            ApiVersion::default().with_api_key(3).with_max_version(13),
            ApiVersion::default().with_api_key(18).with_max_version(4),
        ]);
        for version in 0..=4 {
            if version >= 3 {
                response = response
                    .with_supported_features(vec![SupportedFeatureKey::default()
                        .with_name(StrBytes::from_static_str("metadata.version"))
                        .with_max_version(20)])
                    .with_finalized_features_epoch(7)
                    .with_finalized_features(vec![
                        FinalizedFeatureKey::default().with_name(StrBytes::from_static_str("a")),
                        FinalizedFeatureKey::default().with_name(StrBytes::from_static_str("b")),
                    ])
                    .with_zk_migration_ready(true)
                    .with_unknown_tagged_field(9, bytes::Bytes::from_static(b"??"));
            }
            assert_eq!(check_api_versions(&encode(&response, version), version, usize::MAX), Ok(()), "v{version}");
        }
    }

    #[test]
    fn refuses_counts_the_bytes_cannot_hold() {
        // Metadata v1: brokers = [], cluster_id absent in v1, controller_id, topics = 2^31-1.
        let mut body = vec![0, 0, 0, 0, 0, 0, 0, 1];
        body.extend_from_slice(&i32::MAX.to_be_bytes());
        body.extend_from_slice(&[0; 16]);
        let err = check_metadata(&body, 1, usize::MAX).unwrap_err();
        assert!(err.contains("topics: array claims 2147483647 elements"), "{err}");

        // Flexible: a compact array count of u32::MAX - 1 replica ids.
        let partition = MetadataResponsePartition::default().with_replica_nodes(vec![BrokerId(0x7e7e_7e7e)]);
        let response = MetadataResponse::default()
            .with_topics(vec![MetadataResponseTopic::default().with_partitions(vec![partition])]);
        let mut body = encode(&response, 12);
        // The replica array: compact count 2 (one element), then the marker id.
        let at = body.windows(5).position(|w| w == [2, 0x7e, 0x7e, 0x7e, 0x7e]).unwrap();
        body.splice(at..at + 1, [0xff, 0xff, 0xff, 0xff, 0x0f]);
        let err = check_metadata(&body, 12, usize::MAX).unwrap_err();
        assert!(err.contains("replica_nodes: array claims 4294967294 elements"), "{err}");

        // ApiVersions v0 with 2^31-1 api keys.
        let mut body = vec![0, 0];
        body.extend_from_slice(&i32::MAX.to_be_bytes());
        assert!(check_api_versions(&body, 0, usize::MAX).unwrap_err().contains("api_keys"));

        // ApiVersions v3 whose supported_features tag claims a huge array.
        let body = [0, 0, 1, 0, 0, 0, 0, 1, 0, 5, 0xff, 0xff, 0xff, 0xff, 0x0f];
        assert!(check_api_versions(&body, 3, usize::MAX).unwrap_err().contains("features"));
    }

    #[test]
    fn refuses_truncation_and_nulls_where_the_decoder_would() {
        assert!(check_metadata(&[0, 0], 0, usize::MAX).unwrap_err().contains("truncated"));
        assert!(check_metadata(&[0xff, 0xff, 0xff, 0xff], 0, usize::MAX).unwrap_err().contains("array length -1"));
        assert!(check_metadata(&[0, 0, 0, 0, 0], 9, usize::MAX).unwrap_err().contains("null array"));
    }

    #[test]
    fn refuses_arrays_whose_memory_would_exceed_the_budget() {
        // 2000 v0 topics of 8 wire bytes each: 16 KB on the wire, ~200 KB in memory.
        let body = encode(&metadata(2000, 0, 0, true), 0);
        assert_eq!(check_metadata(&body, 0, usize::MAX), Ok(()));
        let err = check_metadata(&body, 0, body.len()).unwrap_err();
        assert!(err.contains("topics") && err.contains("in memory"), "{err}");
    }
}
