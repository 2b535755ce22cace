//! What a [`Cluster`](super::Cluster) asks of its adapter or tells the application.

use serde::{Deserialize, Serialize};

use crate::brokers::BrokerIndex;
use crate::error::RefreshError;
use crate::refresh::{AttemptId, CancelReason, RefreshStats};

/// What the cluster view asks of the adapter or tells the application.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClusterEvent {
    /// Start an attempt on a new connection (as [`Command::Connect`](crate::Command::Connect)).
    Connect {
        /// Attempt id to report progress with.
        attempt: AttemptId,
        /// Broker to connect to.
        broker: BrokerIndex,
    },
    /// Start an attempt on the connection kept to `broker` (the one [`ClusterEvent::Keep`]
    /// named and nobody closed since): no handshake, no ApiVersions, only the Metadata
    /// request. The connection now belongs to the attempt: a `Cancel` of it closes it, and
    /// it is kept again only if a later `Keep` names the attempt. Report `Input::Connected`
    /// at once.
    Reuse {
        /// Attempt id to report progress with.
        attempt: AttemptId,
        /// The broker whose kept connection to use.
        broker: BrokerIndex,
    },
    /// Keep the connection of `attempt`, the winner of the refresh that the
    /// [`ClusterEvent::Refreshed`] right after reports, open for later refreshes; any other
    /// attempt's connection closes as it ends. The adapter watches it and calls
    /// [`Cluster::connection_closed`](super::Cluster::connection_closed) or [`Cluster::connection_lost`](super::Cluster::connection_lost) when the broker closes
    /// or resets it.
    Keep {
        /// The winning attempt, whose connection to keep.
        attempt: AttemptId,
        /// The broker it is connected to.
        broker: BrokerIndex,
    },
    /// Close the connection kept to `broker`: a newer winner replaces it, the view went
    /// back to the seeds, the broker was named as the trouble's source, or the metadata no
    /// longer lists it.
    Release {
        /// The broker whose kept connection to close.
        broker: BrokerIndex,
    },
    /// Start an attempt by resolving a seed's name (as [`Command::Resolve`](crate::Command::Resolve)): answer with
    /// [`Input::Resolved`](crate::Input::Resolved) or [`Input::Failed`](crate::Input::Failed). The entries of its addresses are in
    /// [`Cluster::book`](super::Cluster::book) as soon as the answer is applied.
    Resolve {
        /// Attempt id to answer with.
        attempt: AttemptId,
        /// The book entry whose name to resolve.
        broker: BrokerIndex,
    },
    /// Abandon an attempt and close its connection (as [`Command::Cancel`](crate::Command::Cancel)).
    Cancel {
        /// Which attempt.
        attempt: AttemptId,
        /// Why.
        reason: CancelReason,
    },
    /// A refresh succeeded; [`Cluster::metadata`](super::Cluster::metadata) holds the new metadata. The winning
    /// attempt's connection is kept (the [`ClusterEvent::Keep`] just before), and the book
    /// now prefers that broker.
    Refreshed {
        /// Refresh epoch (what [`Cluster::request_refresh`](super::Cluster::request_refresh) returned).
        epoch: u32,
        /// The winning attempt.
        attempt: AttemptId,
        /// The broker that answered.
        broker: BrokerIndex,
        /// Counters of the refresh.
        stats: RefreshStats,
    },
    /// A refresh gave up; the cached metadata (if any) is kept.
    RefreshFailed {
        /// Refresh epoch.
        epoch: u32,
        /// Why, with every broker's error.
        error: RefreshError,
    },
    /// The view went back to the seeds (`ClusterConfig::rebootstrap`). Emitted
    ///
    /// * right after the `RefreshFailed` of a refresh in which every discovered broker it
    ///   tried failed (KIP-899), or a broker answered REBOOTSTRAP_REQUIRED: discovered
    ///   brokers are forgotten, and the next refresh asks the seeds;
    /// * right after the `Refreshed` of a refresh in which a broker answered
    ///   REBOOTSTRAP_REQUIRED and the winner was a broker asked without a cluster check (a
    ///   seed): the view was rebuilt from the seeds, within the refresh.
    ///
    /// REBOOTSTRAP_REQUIRED is error 129: the broker refused the ApiVersions v5 cluster
    /// check (KIP-1242), the client's own check found another cluster's id in the answer, or
    /// a Metadata answer carried it at the top (KIP-1102). That address no longer belongs to
    /// the cluster, so the rest of the book is suspect too; the refresh goes on to its other
    /// candidates — the seeds are in every refresh, after the healthy discovered brokers —
    /// and every attempt to a discovered broker, retries included, keeps its check. A
    /// refresh won by another discovered broker (which passed the same check) has rebuilt
    /// the book from the cluster itself, and emits nothing.
    Rebootstrapped,
}
