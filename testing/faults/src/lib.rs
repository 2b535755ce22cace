//! Test fixtures every adapter's tests share, so the tokio and the blocking adapter are
//! checked against the very same brokers and faults: a real Kafka-protocol cluster
//! (librdkafka's mock, in-process), a fault proxy for what the mock cannot do, a scripted
//! fake broker for protocol-level faults, a TLS test PKI, socket accounting (with refusing
//! and never-answering listeners, and [`blackhole`] on tokio), and the fault matrix's rows
//! ([`matrix`]).
//!
//! What the mock does on the wire (librdkafka 2.12 `rdkafka_mock.c`, checked in its source
//! and by these tests):
//! * `broker_down(id)` closes the broker's listening socket and re-creates it bound but *not
//!   listening* (to keep the port), and closes its open connections: a new connection is
//!   refused (RST, `ECONNREFUSED`) — the attempt fails with `ErrorKind::Refused` at once.
//! * `broker_round_trip_time(id, rtt)` keeps accepting connections and reading requests, but
//!   holds every response until `rtt` after its request arrived: with an hour's RTT the
//!   broker is "hung" (TCP up, ApiVersions never answered), the case the core's stagger is for.
//!
//! The proxy and the fake broker serve on tokio. Tests of an adapter that runs no runtime
//! start them on [`background`], a runtime of their own.
#![warn(missing_docs)]
// Fixtures start things (sockets, listeners, PKI files) in `new`: a `Default` would hide that.
#![allow(clippy::new_without_default)]

pub mod blackhole;
pub mod fake;
pub mod matrix;
pub mod mock;
pub mod proxy;
pub mod sockets;
pub mod tls;

use std::future::Future;
use std::sync::mpsc;
use std::time::Duration;

/// How long any test body may run before it fails instead of hanging CI.
pub const BOUND: Duration = Duration::from_secs(60);

/// Every async test body runs under this bound, so a regression fails instead of hanging CI.
pub async fn bounded<F: Future>(body: F) -> F::Output {
    tokio::time::timeout(BOUND, body).await.expect("test exceeded its 60 s bound")
}

/// [`bounded`] for a blocking test body: it runs on a thread of its own, and the test fails
/// (with the body's own panic, if it panicked) when it ends or after 60 s.
pub fn bounded_blocking<T: Send + 'static>(body: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        let _ = done.send(body());
    });
    match result.recv_timeout(BOUND) {
        Ok(value) => value,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("test exceeded its 60 s bound"),
        Err(mpsc::RecvTimeoutError::Disconnected) => match thread.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the body ended without a result"),
        },
    }
}

/// A tokio runtime for the fixtures of tests that run none themselves: `block_on` a
/// fixture's `start` on it and keep it alive as long as the fixture. Dropping it stops every
/// fixture task (and closes their sockets).
pub fn background() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("fixture runtime")
}

/// A cluster config whose adaptive stagger suspects a silent broker 300 ms after its
/// handshake but an answering one only at the 30 s ceiling, one broker per tick, no jitter,
/// attempts that outlive the ceiling, and seeds tried in the order listed: what the "a busy
/// broker gets patience" tests of every adapter run with.
pub fn patient_cluster_config() -> stagger::ClusterConfig {
    let mut config = stagger::ClusterConfig::default();
    config.refresh.fanout.stagger = stagger::Stagger::Adaptive(stagger::Adaptive {
        cold: Duration::from_secs(5),
        multiple: 2,
        floor: Duration::from_millis(300),
        ceiling: Duration::from_secs(30),
        patience: u32::MAX,
        ..stagger::Adaptive::default()
    });
    // The tests list the busy broker first and name brokers by position.
    config.refresh.shuffle_seeds = false;
    config.refresh.fanout.growth = stagger::Growth::Linear(1);
    config.refresh.fanout.jitter = 0.0;
    config.refresh.attempt_timeout = Duration::from_secs(40);
    config
}
