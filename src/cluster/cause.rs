//! Why a refresh runs, and what that says about the cluster right now.
//!
//! The same silent broker means different things depending on why the client asked. A
//! refused or reset connection, or partitions whose leader moved, is seen by every client of
//! that broker at the same moment: a failover, and with it a storm of refreshes on the
//! brokers that are left, whose queues make live brokers look silent — so the refresh is
//! *gentle*. A request that timed out on one broker is one client's evidence that this broker
//! hangs — so that broker is tried last and the refresh is as quick as ever.
//!
//! | cause | who sees it | the refresh |
//! |---|---|---|
//! | [`RefreshCause::Bootstrap`], [`RefreshCause::Periodic`], [`RefreshCause::Requested`] | this client | gentle until the view is calm, then as configured |
//! | [`RefreshCause::StaleMetadata`] | every client of the moved partitions | gentle |
//! | [`RefreshCause::ConnectionLost`] | every client of that broker | gentle |
//! | [`RefreshCause::RequestTimedOut`] | this client | as configured |
//!
//! *Calm* ([`crate::ClusterConfig::gentle_until_calm`], on by default): the view's latest
//! refresh ended with an answer, every first answer came within the fast policy's wait
//! ([`crate::Refresh::saw_queue`]), and the view knows what Metadata on a kept connection
//! takes. A bootstrap has seen nothing; a refresh after one that met a queue or failed is
//! likely one of many clients still working through the same burst (a fleet starting
//! together); and a TLS bootstrap's winner shows only its handshake's end, not how long a
//! kept connection's Metadata waits behind the burst's other handshakes: all three run
//! gently. A one-shot session is fast whatever the cause.
//!
//! Whatever the cause, the broker the caller names with it
//! ([`crate::Cluster::request_refresh_because`]'s `broker`) counts as failed: it is tried
//! last and no longer preferred for a kept connection.
//!
//! *Gentle* ([`RefreshCause::storm_likely`]): a broker still connecting is suspected only
//! after the adaptive stagger's `pace`, a broker that accepted the connection (silent or
//! answering) only at its `ceiling`, and each stagger tick starts one broker instead of the
//! growth's count (see [`crate::config::Adaptive`]). In a failover a connected broker is far
//! more likely queued than stopped, and a hedge to another one costs that broker a new
//! connection (over SASL_SSL a TLS handshake and a SCRAM exchange) while it is as queued.
//! For the same reason an attempt whose connection is up outlives its attempt timeout, up to
//! as many more as the refresh has retries, instead of being closed and its broker dialled
//! again in the next pass: a queued broker, or one throttling new connections (KIP-612's
//! `max.connection.creation.rate`), keeps the client's place, and a redial would count
//! against the throttle again (`docs/performance/gentleness.md`).

use serde::{Deserialize, Serialize};

/// Why a refresh is wanted; [`crate::Cluster::request_refresh_because`] takes it and the
/// policy reads it (see the module table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RefreshCause {
    /// The view has no metadata yet (its first refresh, or the first after a rebootstrap).
    Bootstrap,
    /// [`crate::ClusterConfig::refresh_interval`] ran out.
    Periodic,
    /// The application was told its metadata is stale: NOT_LEADER_OR_FOLLOWER,
    /// UNKNOWN_TOPIC_OR_PARTITION, a moved coordinator and the like.
    StaleMetadata,
    /// A broker refused or reset a connection.
    ConnectionLost,
    /// A request to a broker timed out.
    RequestTimedOut,
    /// The application asked, for no reason the policy can read.
    Requested,
}

impl RefreshCause {
    /// Whether many clients are likely refreshing at this moment (a failover): the refresh
    /// is then gentle.
    pub fn storm_likely(&self) -> bool {
        matches!(self, RefreshCause::StaleMetadata | RefreshCause::ConnectionLost)
    }

    /// A short name, for traces, reports and tables.
    pub fn name(&self) -> &'static str {
        match self {
            RefreshCause::Bootstrap => "bootstrap",
            RefreshCause::Periodic => "periodic",
            RefreshCause::StaleMetadata => "stale_metadata",
            RefreshCause::ConnectionLost => "connection_lost",
            RefreshCause::RequestTimedOut => "request_timed_out",
            RefreshCause::Requested => "requested",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_causes_every_client_sees_at_once_are_gentle() {
        let table = [
            (RefreshCause::Bootstrap, false, "bootstrap"),
            (RefreshCause::Periodic, false, "periodic"),
            (RefreshCause::Requested, false, "requested"),
            (RefreshCause::StaleMetadata, true, "stale_metadata"),
            (RefreshCause::ConnectionLost, true, "connection_lost"),
            (RefreshCause::RequestTimedOut, false, "request_timed_out"),
        ];
        for (cause, gentle, name) in table {
            assert_eq!(cause.storm_likely(), gentle, "{cause:?}");
            assert_eq!(cause.name(), name);
            assert_eq!(serde_json::to_string(&cause).unwrap(), alloc::format!("\"{name}\""), "serde says the same");
        }
    }
}
