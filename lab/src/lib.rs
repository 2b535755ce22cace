//! Shared pieces of the measurement programs in `src/bin/`: a seed forwarder that counts what
//! the cluster pays, a real cluster behind such forwarders, and percentiles.
//!
//! Programs here measure; they are not product code and nothing depends on them.

pub mod bench;
pub mod counting;
pub mod stats;
