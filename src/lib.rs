//! `stagger`: fast, gentle Kafka metadata refresh as a sans-IO state machine.
//!
//! Kafka clients ask brokers for metadata one after another, so a hung broker costs a full
//! timeout each; asking every broker at once overloads big clusters. [`Refresh`] starts one
//! attempt and, when no answer comes within a stagger delay, starts another — throttled,
//! jittered and bounded — takes the first good answer, cancels the rest, retries with
//! backoff, and finally gives up with the last error and every broker's error.
//!
//! The crate never touches a socket, a clock, a thread or an OS random source: time and I/O
//! results go in, commands come out. Adapters carry the commands out (`stagger-tokio`,
//! `stagger-blocking`, `stagger-web` in the browser), the simulator `stagger-sim` runs the
//! very same code in virtual time, and a recorded [`trace::Trace`] replays to the same
//! commands. The logic is `no_std` + `alloc`; feature `std` (default) adds
//! `std::error::Error` impls, feature `kafka` (default) the sans-IO Kafka layer
//! ([`kafka`]). How the crates and modules fit together is in `docs/architecture.md`.
//!
//! # Driving a refresh
//!
//! One [`Refresh`] is one refresh episode. Driving it takes six steps:
//!
//! 1. **Build** it with [`Refresh::new`] from a [`RefreshConfig`] (validated: the error
//!    names the bad field) and a [`BrokerBook`] (the seeds). The first commands are ready
//!    at once.
//! 2. **Drain** [`Refresh::poll_command`] until it returns `None`, and carry out each
//!    [`Command`]: `Connect` opens a connection for a new attempt to a broker of the book,
//!    `Cancel` closes one (with a reason), and — for seeds given by name in a book built
//!    with [`BrokerBook::resolving`] — `Resolve` looks a name up, to be answered with
//!    [`Input::Resolved`] (each address then becomes a candidate of its own; take the new
//!    entries into the book with [`BrokerBook::absorb`]). Drain after *every* `handle_*` call, before
//!    waiting.
//! 3. **Wait** until [`Refresh::poll_timeout`] or the next I/O result, whichever comes
//!    first. While the refresh runs there is always a timer (at least the deadline).
//! 4. **Feed I/O results** with [`Refresh::handle_input`]: [`Input::Connected`] when an
//!    attempt's transport is up, [`Input::FirstFrame`] when its broker first answers,
//!    over SASL [`Input::Authenticating`] and [`Input::Authenticated`] around the broker's
//!    check of the credentials, [`Input::Response`] with the metadata, or
//!    [`Input::Failed`] (a [`crate::kafka::KafkaAttempt`] derives them all from the bytes). It returns an
//!    [`InputOutcome`]: applied, or why not (the attempt already ended, another refresh's,
//!    …). Inputs that cannot apply are ignored, never a panic.
//! 5. **Feed time** with [`Refresh::handle_timeout`] when the wait ran out. Time that goes
//!    backwards is clamped.
//! 6. **Stop** at the terminal command, [`Command::Done`] (the winner's metadata) or
//!    [`Command::GiveUp`] (a [`RefreshError`] with the last error and every broker's).
//!    It comes exactly once, after every `Cancel`, and nothing follows it.
//!
//! The run below drives a refresh against an in-memory fake with virtual time: broker 0
//! accepts the connection and then says nothing (hung), broker 1 answers. With the default
//! (adaptive) policy the core suspects broker 0 at most 24 ms after its handshake (twice the
//! 12 ms it allows a broker for its first answer while it has seen none, shortened by
//! jitter), starts broker 1, cancels broker 0 the moment broker 1 answers, and finishes in
//! milliseconds, where a one-at-a-time client waits out a 10 s timeout.
//!
//! ```
//! use std::time::Duration;
//! use stagger::{AttemptId, BrokerBook, BrokerIndex, BrokerMetadata, CancelReason, Command};
//! use stagger::{Input, InputOutcome, Instant, Metadata, Refresh, RefreshConfig};
//!
//! /// The fake network: what broker `b` sends, and when, on an attempt started at `t`.
//! /// (A real adapter gets these inputs from `kafka::KafkaAttempt` and its socket.)
//! fn fake(b: BrokerIndex, attempt: AttemptId, t: Instant) -> Vec<(Instant, Input)> {
//!     let at = |ms| t.saturating_add(Duration::from_millis(ms));
//!     let mut sends = vec![(at(1), Input::Connected { attempt, tls: false })]; // both accept TCP
//!     if b == BrokerIndex(1) {
//!         let node = BrokerMetadata { node_id: 1, host: "10.0.0.2".into(), port: 9092, rack: None };
//!         let metadata = Metadata { brokers: vec![node], ..Metadata::default() };
//!         sends.push((at(2), Input::FirstFrame { attempt })); // its ApiVersions answer
//!         sends.push((at(3), Input::Response { attempt, metadata }));
//!     }
//!     sends
//! }
//!
//! // 1. Build: a validated config, the seeds, the time now.
//! let book = BrokerBook::new(["10.0.0.1:9092", "10.0.0.2:9092"])?;
//! let mut now = Instant::ZERO;
//! let mut refresh = Refresh::new(&RefreshConfig::default(), &book, now)?;
//! let mut network: Vec<(Instant, Input)> = Vec::new(); // what is on its way to us
//! let mut cancelled = Vec::new();
//! let (winner, metadata) = 'drive: loop {
//!     // 2. Drain the commands and carry out each one before waiting.
//!     while let Some(command) = refresh.poll_command() {
//!         match command {
//!             Command::Connect { attempt, broker } => network.extend(fake(broker, attempt, now)),
//!             // Only for seeds given by name in a book built with `BrokerBook::resolving`.
//!             Command::Resolve { .. } => unreachable!("a book of IP addresses has no name to resolve"),
//!             Command::Cancel { attempt, reason } => {
//!                 network.retain(|(_, input)| input.attempt() != attempt); // close its socket
//!                 cancelled.push((refresh.attempt(attempt).map(|a| a.broker), reason));
//!             }
//!             // 6. Stop at the terminal command: nothing follows it.
//!             Command::Done { broker, metadata, .. } => break 'drive (broker, metadata),
//!             Command::GiveUp(error) => return Err(error.into()),
//!         }
//!     }
//!     // 3. Wait: until the core's next timer, or less if an I/O result comes first.
//!     let timer = refresh.poll_timeout().expect("a running refresh has a timer");
//!     let wait = timer.saturating_since(now);
//!     let next = (0..network.len()).min_by_key(|&i| network[i].0);
//!     match next {
//!         // 4. An I/O result came within the wait: feed it; the outcome says what became of it.
//!         Some(i) if network[i].0.saturating_since(now) <= wait => {
//!             let (at, input) = network.remove(i);
//!             now = at;
//!             assert_eq!(refresh.handle_input(now, input), InputOutcome::Applied);
//!         }
//!         // 5. The wait ran out: feed the time; due timers fire.
//!         _ => {
//!             now = timer;
//!             refresh.handle_timeout(now);
//!         }
//!     }
//! };
//! assert_eq!(winner, BrokerIndex(1));
//! assert_eq!(metadata.brokers[0].host, "10.0.0.2");
//! // Broker 0 said nothing after its handshake, so broker 1's first answer cancelled it.
//! assert_eq!(cancelled, [(Some(BrokerIndex(0)), CancelReason::Overtaken)]);
//! // A 1 ms handshake, at most 24 ms of silence, and broker 1's answer 3 ms after its start.
//! assert!(now <= Instant::from_millis(28), "done after {now:?}, not after a 10 s timeout");
//! assert_eq!((refresh.is_finished(), refresh.poll_timeout()), (true, None));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The table of what each input and timer makes the core do is on [`Refresh`];
//! the knobs, their defaults and why are on [`RefreshConfig`] and its parts; the attempts' records (when each
//! started, connected, answered and ended) are [`Refresh::attempts`].
//!
//! # A long-lived client: [`Cluster`]
//!
//! [`Cluster`] wraps `Refresh` for a client that lives longer than one refresh, with the
//! same sans-IO shape (`handle_input`, `handle_timeout`, `poll_timeout`, and
//! [`ClusterEvent`]s out of `poll_event`). It caches the latest metadata, joins concurrent
//! [`Cluster::request_refresh`] calls to the running refresh (single-flight), refreshes
//! periodically, keeps the seeds apart from the brokers metadata discovered (connected and
//! healthy brokers first, recently failed ones last), learns the cluster's response,
//! handshake and first-answer times for the adaptive stagger, reads why each refresh runs
//! ([`RefreshCause`]: a failover's causes make it gentle), spends and earns a hedge budget, and goes back
//! to the seeds (rebootstrap) when every discovered broker fails or one answers
//! REBOOTSTRAP_REQUIRED. It also decides which connection outlives a refresh (keep the
//! winner's, reuse it first next time, release it when replaced or suspect) and counts what
//! the refreshes cost ([`Cluster::stats`]), so no adapter writes that policy. See [`Cluster`].
//!
//! # The Kafka layer: [`kafka`]
//!
//! The core decides *which* broker to ask and *when*; [`kafka`] (feature `kafka`) knows
//! *what to say*. [`kafka::Exchange`] is one connection's conversation — ApiVersions (with
//! Kafka 4.4's cluster check for a discovered broker), then Metadata at the best common
//! version — fed bytes in any pieces and yielding the bytes to write, with a maximum frame
//! size and a guard against hostile array counts. [`kafka::KafkaAttempt`] wraps it with what
//! the core must hear: an adapter creates one per `Command::Connect`, writes what its
//! `poll_transmit` yields, feeds it the socket's bytes, and hands every [`Input`] from its
//! `poll_input` to `handle_input`. So an adapter only moves bytes.
#![cfg_attr(not(feature = "std"), no_std)]
#![warn(missing_docs)]
#![warn(unreachable_pub)]

extern crate alloc;

mod brokers;
mod client_stats;
mod cluster;
mod config;
mod error;
mod estimator;
mod metadata;
mod refresh;
mod rng;
mod time;
mod trace;

#[cfg(feature = "kafka")]
pub mod kafka;
pub mod report;
#[cfg(feature = "kafka")]
pub mod session;

pub use brokers::{validate_address, BrokerBook, BrokerEntry, BrokerIdentity, BrokerIndex};
pub use client_stats::ClientStats;
pub use cluster::{Cluster, ClusterEvent, Drain, RefreshCause};
pub use config::{
    knobs, parse_duration, Adaptive, Backoff, ClusterConfig, Fanout, Growth, HedgeBudget, Knob, KnobChoice, KnobKind,
    KnobScope, KnobValue, RefreshConfig, Stagger, Tuning,
};
pub use error::{kafka_error_name, AttemptError, BrokerFailure, ConfigError, ErrorKind, GiveUpReason, RefreshError};
pub use estimator::Estimator;
pub use metadata::{BrokerMetadata, Metadata, PartitionMetadata, TopicMetadata};
pub use refresh::{
    AttemptId, AttemptInfo, AttemptPhase, AttemptState, CancelReason, Command, Input, InputOutcome, Refresh,
    RefreshContext, RefreshStats, TimerKind, FIRST_ADDRESS_FAMILY_COUNT, MAX_ATTEMPTS, MAX_RESOLVED_ADDRESSES,
};
pub use rng::Rng;
pub use time::{duration_micros, scale_duration, Instant};
pub use trace::{Divergence, Recorder, Trace, TraceEvent, TRACE_VERSION};

/// Helpers for tests, benchmarks and simulators: fake broker addresses and a book that has
/// learnt brokers without a refresh. Not part of the stable API (feature `test-util`).
#[cfg(feature = "test-util")]
pub mod test_util {
    pub use crate::brokers::numbered_seeds;
}
