//! The counters of a long-lived [`crate::Cluster`], in one definition so that every adapter's
//! client (tokio, blocking, the simulator's fleet) reports the same things under the same
//! names, counted once, by the core.

use alloc::string::String;
use serde::{Deserialize, Serialize};

/// What a [`crate::Cluster`] has cost so far ([`crate::Cluster::stats`]), so callers and tests
/// can see what the core decided: how many refreshes really ran, how many connections they
/// cost the cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientStats {
    /// Refreshes the core started (single-flight joins and cache hits do not count).
    pub refreshes: u32,
    /// Attempts started over all refreshes (lookups of seed names included).
    pub attempts: u64,
    /// New connections that came up (`Input::Connected` of an attempt that did not reuse
    /// one): what the brokers paid a TCP accept (and a TLS handshake) for.
    pub connections_opened: u64,
    /// Attempts that ran on a connection kept from an earlier refresh instead
    /// ([`crate::ClusterEvent::Reuse`]).
    pub connections_reused: u64,
    /// Connections of attempts that lost a race kept as spares once their exchange ended
    /// ([`crate::Cluster::keep_spare`]): each may spare a later hedge a new connection.
    #[serde(default)]
    pub spares_kept: u64,
    /// The broker whose connection is kept open for the next refresh, if any.
    pub kept: Option<String>,
    /// Connections kept open now: the winner's (or the home's) and the spares. A refresh
    /// past a broker that went away reuses another of them instead of opening one.
    #[serde(default)]
    pub kept_connections: u32,
    /// Times the view was rebuilt from the seeds ([`crate::ClusterEvent::Rebootstrapped`]):
    /// a broker answered REBOOTSTRAP_REQUIRED, or a refresh failed with every discovered
    /// broker it tried.
    pub rebootstraps: u32,
}
