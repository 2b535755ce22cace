//! `stagger-blocking`: the `stagger` client session over `std::net`, with no async runtime.
//!
//! The core's [`stagger::session::Session`] holds the whole conversation: the policy (which
//! broker, when, which connection to keep) and the Kafka exchange (ApiVersions, SASL,
//! Metadata). This crate only does the I/O it asks for: dial, send, close, look names up,
//! a SCRAM nonce from the OS, a token from the token source, TLS (rustls, feature `tls`; the
//! caller builds the `rustls::ClientConfig`, see `Tls`).
//!
//! **One thread, non-blocking sockets, one poll loop.** A refresh runs several attempts at
//! once, and a thread stuck in `connect` to a blackholed broker cannot be told to stop. So
//! every socket is non-blocking and registered with one [`mio`] poll; the loop sleeps until a
//! socket is ready or the session's next timer is due, reports what happened, and carries
//! out the session's actions: a closed attempt's socket closes at once, and the adapter adds
//! no timeout of its own. Host names are looked up (`getaddrinfo`, which only blocks) on a
//! short-lived helper thread that wakes the loop; one nobody waits for any more finishes on
//! its own.
//!
//! * [`refresh`] / [`refresh_with`]: one refresh on the calling thread, with every
//!   attempt's report.
//! * [`Client`]: long-lived, cached, single-flight and periodically refreshed metadata on a
//!   background thread of its own, keeping the winning connection for the next refresh.
//!
//! ```no_run
//! let metadata = stagger_blocking::refresh(&stagger::RefreshConfig::default(), &["127.0.0.1:9092"])?;
//! println!("{} brokers", metadata.brokers.len());
//! # Ok::<(), stagger_blocking::Error>(())
//! ```
#![warn(missing_docs, unreachable_pub)]

mod client;
mod driver;
mod host;
mod options;
mod transport;

pub use client::{Client, ClientOptions};
pub use driver::{refresh, refresh_with};
pub use options::RefreshOptions;
#[cfg(feature = "tls")]
pub use options::Tls;
/// The error of every call: bad settings, a refresh that gave up (with every attempt's
/// report), a failed host, a closed client — the same type in every adapter.
pub use stagger::report::ClientError as Error;
pub use stagger::report::{AttemptOutcome, AttemptReport, RefreshOutcome, RefreshReport};
pub use stagger::ClientStats;

/// The core crate, re-exported so users of the adapter need only one dependency.
pub use stagger;
/// The exchange settings every attempt uses (client id, topics, maximum frame size).
pub use stagger::kafka::sasl::TokenSource;
pub use stagger::kafka::ExchangeConfig;

/// The README's code samples, compiled by `cargo test --doc` so they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
