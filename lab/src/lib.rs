//! Shared pieces of the measurement programs in `src/bin/`: a seed forwarder that counts what
//! the cluster pays, a real cluster behind such forwarders, percentiles, what the real-socket
//! programs (`realsockets`, `realsockets_kafka`, `librdkafka_reference`) measure alike (one
//! refresh's cost, the lower median), command-line values (`cli`), and the JSON file `fleet_real` writes and `fleet_fit`
//! reads, as typed structs (`fleet_file`).
//!
//! Programs here measure; they are not product code and nothing depends on them.

pub mod bench;
pub mod cli;
pub mod counting;
pub mod fleet_file;
pub mod measure;
pub mod sample;
pub mod stats;

/// The workspace README's code samples (the core's run loop, the blocking adapter), compiled
/// by `cargo test --doc` here, so they cannot drift from the API without the core crate
/// depending on its own adapters for them.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct WorkspaceReadmeDoctests;
