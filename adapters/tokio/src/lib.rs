//! `stagger-tokio`: carries out the `stagger` core's decisions over tokio TCP (and TLS).
//!
//! The core's [`stagger::session::Session`] holds the whole conversation: the policy (which
//! broker, when, which connection to keep) and the Kafka exchange (ApiVersions, SASL,
//! Metadata). This crate only does the I/O it asks for: dial, send, close, look names up
//! ([`Resolver`]), a SCRAM nonce from the OS, a token from the token source, TLS (rustls,
//! feature `tls`), and tokio time. It adds no timeouts of its own: attempt timeouts, the
//! stagger, backoff and the deadline are all the session's timers.
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

mod client;
mod clock;
mod driver;
mod host;
mod options;
pub mod properties;
mod resolver;
mod tls;
mod transport;

pub use client::{Client, ClientOptions};
pub use driver::{refresh, refresh_with};
pub use options::{ClientCert, RefreshOptions, TlsOptions, TokenSource};
pub use properties::{ClientProperties, ClientSettings};
pub use resolver::{DnsOptions, Resolver};
/// The error of every call: bad settings, a refresh that gave up (with every attempt's
/// report), a failed host, a closed client — the same type in every adapter.
pub use stagger::report::ClientError as Error;
pub use stagger::report::{AttemptOutcome, AttemptReport, Event, EventKind, RefreshOutcome, RefreshReport};
pub use stagger::ClientStats;

/// The core crate, re-exported so users of the adapter need only one dependency.
pub use stagger;
/// The exchange settings every attempt uses (client id, topics, maximum frame size).
pub use stagger::kafka::ExchangeConfig;

/// The README's code samples, compiled by `cargo test --doc` so they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
