//! Shared test fixtures: a real Kafka-protocol cluster (librdkafka's mock, in-process), a
//! fault proxy for what the mock cannot do, a scripted fake broker for protocol-level faults,
//! a TLS test PKI, and socket accounting (with refusing and never-answering listeners).
//!
//! What the mock does on the wire (librdkafka 2.12 `rdkafka_mock.c`, checked in its source
//! and by these tests):
//! * `broker_down(id)` closes the broker's listening socket and re-creates it bound but *not
//!   listening* (to keep the port), and closes its open connections: a new connection is
//!   refused (RST, `ECONNREFUSED`) — the attempt fails with `ErrorKind::Refused` at once.
//! * `broker_round_trip_time(id, rtt)` keeps accepting connections and reading requests, but
//!   holds every response until `rtt` after its request arrived: with an hour's RTT the
//!   broker is "hung" (TCP up, ApiVersions never answered), the case the core's stagger is for.
#![allow(dead_code)]

pub mod fake;
pub mod mock;
pub mod proxy;
pub mod sockets;
pub mod tls;

use std::future::Future;
use std::time::Duration;

/// Every test body runs under this bound, so a regression fails instead of hanging CI.
pub async fn bounded<F: Future>(body: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), body).await.expect("test exceeded its 60 s bound")
}
