//! Shared pieces of the measurement programs in `src/bin/`: a seed forwarder that counts what
//! the cluster pays, a real cluster behind such forwarders, percentiles, and what the
//! real-socket programs (`realsockets`, `realsockets_kafka`, `librdkafka_reference`) measure
//! alike (one refresh's cost, the lower median).
//!
//! Programs here measure; they are not product code and nothing depends on them.

pub mod bench;
pub mod counting;
pub mod measure;
pub mod sample;
pub mod stats;
