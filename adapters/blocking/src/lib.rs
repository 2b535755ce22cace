//! `stagger-blocking`: carries out the `stagger` core's decisions over `std::net`, with no
//! async runtime, for programs that do not want one.
//!
//! The core's [`stagger::session::Session`] holds the whole conversation: the policy (which
//! broker, when, which connection to keep) and the Kafka exchange (ApiVersions, SASL,
//! Metadata). What is left is I/O — dial, send, close, look names up, a SCRAM nonce from the
//! OS, a token from the token source, TLS — and that is all this crate does.
//!
//! **Design: one thread, non-blocking sockets, one poll loop.** A refresh runs several
//! attempts at once (the stagger starts the next while the first is silent), so blocking
//! reads would need a thread per attempt, and a thread stuck in `connect` to a blackholed
//! broker cannot be told to stop. Instead every socket is non-blocking and registered with
//! one [`mio`] poll (epoll, kqueue, IOCP); the loop sleeps until a socket is ready or the
//! session's next timer ([`stagger::session::Session::poll_timeout`], mapped to
//! [`std::time::Instant`]) is due, reports what happened to the session, and carries out its
//! actions. Connects are non-blocking too, so a broker whose SYNs vanish costs nothing until
//! the session's attempt timeout closes it, at once, on the calling thread. The adapter adds
//! no timeout of its own.
//!
//! **Name resolution** is the one thing `std` only offers blocking (`getaddrinfo`). An
//! address that is an IP literal is used as is; a host name is looked up on a short-lived
//! helper thread that wakes the loop with the answer, so a slow resolver delays only that
//! attempt, and the attempt timeout bounds it like any other. A lookup cannot be
//! interrupted: when nobody waits for it any more the helper thread finishes on its own and
//! its answer is dropped.
//!
//! * [`refresh`] / [`refresh_with`]: one refresh episode on the calling thread, with every
//!   attempt's report.
//! * [`Client`]: long-lived, cached, single-flight and periodically refreshed metadata on a
//!   background thread of its own, keeping the winning connection for the next refresh.
//!
//! ```no_run
//! let metadata = stagger_blocking::refresh(&stagger::RefreshConfig::default(), &["127.0.0.1:9092"])?;
//! println!("{} brokers", metadata.brokers.len());
//! # Ok::<(), stagger_blocking::Error>(())
//! ```
//!
//! TLS (feature `tls`) is rustls over the same non-blocking sockets; the caller builds the
//! `rustls::ClientConfig` (see `Tls`, with the `tls` feature).
#![warn(missing_docs, unreachable_pub)]

mod client;
mod driver;
mod error;
mod host;
mod options;
mod report;
mod transport;

pub use client::{Client, ClientOptions};
pub use driver::{refresh, refresh_with};
pub use error::Error;
pub use options::RefreshOptions;
#[cfg(feature = "tls")]
pub use options::Tls;
pub use report::{AttemptReport, RefreshOutcome};
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
