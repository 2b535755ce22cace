//! The counters every adapter's long-lived client keeps, in one definition so that a tokio
//! and a blocking client report the same things under the same names.

use alloc::string::String;
use serde::{Deserialize, Serialize};

/// Counters of an adapter's long-lived client (built on [`crate::Cluster`]), so callers and
/// tests can see what the core decided: how many refreshes really ran, how many connections
/// they cost.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientStats {
    /// Refreshes the core started (single-flight joins and cache hits do not count).
    pub refreshes: u32,
    /// Attempts started over all refreshes.
    pub attempts: u64,
    /// TCP connections opened.
    pub connections_opened: u64,
    /// Attempts that ran on a connection kept from an earlier refresh instead.
    pub connections_reused: u64,
    /// The broker whose connection is kept open for the next refresh, if any.
    pub kept: Option<String>,
    /// Times the view was rebuilt from the seeds ([`crate::ClusterEvent::Rebootstrapped`]):
    /// a broker answered REBOOTSTRAP_REQUIRED, or a refresh failed with every discovered
    /// broker it tried.
    pub rebootstraps: u32,
}
