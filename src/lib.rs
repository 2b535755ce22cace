//! `stagger`: fast, gentle Kafka metadata refresh as a sans-IO state machine.
//!
//! Kafka clients ask brokers for metadata one after another, so a hung broker costs a full
//! timeout each; asking every broker at once overloads big clusters. [`Refresh`] starts one
//! attempt and, when no answer comes within a stagger delay, starts another — throttled,
//! jittered and bounded — and the first good answer wins. It never touches a socket or a
//! clock: adapters (tokio, browser) carry out its [`Command`]s and feed back [`Input`]s.
//!
//! ```
//! use stagger::{BrokerBook, Command, Instant, Refresh, RefreshConfig};
//! let book = BrokerBook::new(["127.0.0.1:9092", "127.0.0.1:9093"]).unwrap();
//! let mut refresh = Refresh::new(&RefreshConfig::default(), &book, Instant::ZERO).unwrap();
//! assert!(matches!(refresh.poll_command(), Some(Command::Connect { .. })));
//! assert!(refresh.poll_command().is_none()); // one attempt at first; the next after a stagger delay
//! ```
#![cfg_attr(not(feature = "std"), no_std)]
#![warn(missing_docs)]

extern crate alloc;

pub mod brokers;
pub mod cluster;
pub mod config;
pub mod error;
pub mod estimator;
pub mod metadata;
pub mod refresh;
mod rng;
pub mod time;
pub mod trace;

#[cfg(feature = "kafka")]
pub mod kafka;

pub use brokers::{BrokerBook, BrokerIdentity, BrokerIndex};
pub use cluster::{Cluster, ClusterConfig, ClusterEvent};
pub use config::{Adaptive, Backoff, Fanout, Growth, HedgeBudget, RefreshConfig, Stagger, Tuning};
pub use error::{AttemptError, ConfigError, ErrorKind, GiveUpReason, RefreshError};
pub use estimator::Estimator;
pub use metadata::{BrokerMetadata, Metadata, PartitionMetadata, TopicMetadata};
pub use refresh::{
    AttemptId, AttemptInfo, AttemptState, CancelReason, Command, Input, InputOutcome, Refresh, RefreshStats, TimerKind,
};
pub use rng::Rng;
pub use time::Instant;
