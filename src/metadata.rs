//! Cluster metadata as the core sees it.
//!
//! A plain data model, independent of the wire format: the Kafka exchange (feature `kafka`)
//! decodes into it, the simulator fabricates it, and the trace serialises it. The refresh
//! only looks at `error_code` and `brokers` to decide whether a response is a valid win.

use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// The answer to a metadata request: brokers, controller and topics of one cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metadata {
    /// Cluster id, when the broker reports one (Metadata v2+).
    pub cluster_id: Option<String>,
    /// Node id of the controller, or -1 when unknown.
    pub controller_id: i32,
    /// Top-level error code (Metadata v13+, e.g. REBOOTSTRAP_REQUIRED); 0 means none.
    /// A non-zero code makes the response a failure, not a win.
    pub error_code: i16,
    /// Live brokers. An empty list makes the response a failure, not a win.
    pub brokers: Vec<BrokerMetadata>,
    /// Topics, each with its partitions.
    pub topics: Vec<TopicMetadata>,
}

/// One broker as listed in a metadata response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerMetadata {
    /// The broker's node id.
    pub node_id: i32,
    /// Advertised host name.
    pub host: String,
    /// Advertised port.
    pub port: u16,
    /// Rack, if configured.
    pub rack: Option<String>,
}

impl BrokerMetadata {
    /// `host:port`, bracketing IPv6 literals, as used in broker books and errors.
    pub fn address(&self) -> String {
        let mut out = String::new();
        self.write_address(&mut out);
        out
    }

    /// Appends [`BrokerMetadata::address`] to `out` (lets a caller reuse one buffer).
    pub fn write_address(&self, out: &mut String) {
        use core::fmt::Write;
        // Writing to a String cannot fail.
        let _ = if self.host.contains(':') && !self.host.starts_with('[') {
            write!(out, "[{}]:{}", self.host, self.port)
        } else {
            write!(out, "{}:{}", self.host, self.port)
        };
    }
}

/// One topic and its partitions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMetadata {
    /// Topic name.
    pub name: String,
    /// Per-topic error code (0 = none), e.g. UNKNOWN_TOPIC_OR_PARTITION.
    pub error_code: i16,
    /// Whether this is an internal topic such as `__consumer_offsets`.
    pub is_internal: bool,
    /// Partitions, in the order the broker sent them.
    pub partitions: Vec<PartitionMetadata>,
}

/// One partition: who leads it and who replicates it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionMetadata {
    /// Partition index.
    pub id: i32,
    /// Per-partition error code (0 = none), e.g. LEADER_NOT_AVAILABLE.
    pub error_code: i16,
    /// Leader node id, or -1 when there is none.
    pub leader: i32,
    /// Replica node ids.
    pub replicas: Vec<i32>,
    /// In-sync replica node ids.
    pub isr: Vec<i32>,
}

impl Metadata {
    /// Why this response cannot win the refresh, if it cannot.
    ///
    /// A broker that answers with no brokers or with a top-level error has not given us a
    /// usable view of the cluster, so another broker should be asked instead. A
    /// REBOOTSTRAP_REQUIRED (KIP-1102) says why in its detail, as the error people read.
    pub fn rejection(&self) -> Option<crate::error::AttemptError> {
        use crate::error::{AttemptError, ErrorKind};
        /// What a top-level REBOOTSTRAP_REQUIRED means to whoever reads the error.
        const REBOOTSTRAP: &str = "the broker answered Metadata with REBOOTSTRAP_REQUIRED (KIP-1102): this address \
                                   no longer belongs to the cluster the client knew; rebootstrap from the seeds";
        if self.error_code == 129 {
            Some(AttemptError::with_detail(ErrorKind::BrokerError(129), REBOOTSTRAP))
        } else if self.error_code != 0 {
            Some(AttemptError::new(ErrorKind::BrokerError(self.error_code)))
        } else if self.brokers.is_empty() {
            Some(AttemptError::new(ErrorKind::NoBrokers))
        } else {
            None
        }
    }
}
