//! `stagger-tokio`: carries out the `stagger` core's decisions over tokio TCP (and TLS).
//!
//! The core ([`stagger::Refresh`], [`stagger::Cluster`]) decides which broker to ask and
//! when; it never touches a socket or a clock. This crate is the thin layer that does: it
//! resolves (seeds given by name through the core, each address a candidate: [`Resolver`])
//! and connects, runs the sans-IO Kafka exchange ([`stagger::kafka::Exchange`]) on
//! each connection, feeds its progress (connected, the broker's first answer, the response
//! or failure) and tokio time back to the core, and closes whatever the core cancels. It adds no timeouts of its own: attempt timeouts, the stagger, backoff and
//! the deadline are all the core's timers.
//!
//! * [`refresh`] / [`refresh_with`]: one refresh episode, with per-attempt reports, live
//!   [`Event`]s and an optional replayable [`stagger::Trace`].
//! * [`Client`]: long-lived, cached, single-flight and periodically refreshed metadata that
//!   keeps the winning connection for the next refresh.
//!
//! ```no_run
//! # async fn demo() -> Result<(), stagger_tokio::Error> {
//! let metadata = stagger_tokio::refresh(&stagger::RefreshConfig::default(), &["127.0.0.1:9092"]).await?;
//! println!("{} brokers", metadata.brokers.len());
//! # Ok(()) }
//! ```
//!
//! Every attempt runs inside the future that drives it, so dropping a refresh future closes
//! every socket it opened before `drop` returns, and cancelling an attempt closes its socket
//! at once.
#![warn(missing_docs)]

mod attempt;
mod client;
mod clock;
mod driver;
mod error;
mod ledger;
mod options;
pub mod properties;
mod report;
mod resolver;
mod tls;
mod transport;

pub use client::{Client, ClientOptions};
pub use driver::{refresh, refresh_with};
pub use error::Error;
pub use options::{ClientCert, RefreshOptions, TlsOptions, TokenSource};
pub use properties::{ClientProperties, ClientSettings};
pub use report::{AttemptOutcome, AttemptReport, Event, EventKind, RefreshOutcome, RefreshReport};
pub use resolver::{DnsOptions, Resolver};
pub use stagger::ClientStats;

/// The core crate, re-exported so users of the adapter need only one dependency.
pub use stagger;
/// The exchange settings every attempt uses (client id, topics, maximum frame size).
pub use stagger::kafka::ExchangeConfig;

/// The README's code samples, compiled by `cargo test --doc` so they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
