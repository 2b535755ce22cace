//! `stagger-web`: the `stagger` core in the browser, as a Promise.
//!
//! ```js
//! import init, { refresh } from "./pkg/stagger_web.js";
//! await init();
//! const metadata = await refresh({
//!   bootstrap: ["ws://127.0.0.1:9001", "ws://127.0.0.1:9002"],
//!   config: "adaptive",
//!   onEvent: (e) => console.log(e.at_ms, e.type, e.command ?? e.input ?? e.timer),
//!   signal: AbortSignal.timeout(30_000),
//! });
//! ```
//!
//! Browsers cannot open TCP sockets, so each attempt is a WebSocket to a WebSocket↔TCP
//! bridge in front of one broker (websockify, or `stagger-bridge`), carrying the Kafka
//! connection's bytes as binary messages. The decisions — which broker, when, how many at
//! once, when to give up — are the core's [`stagger::Refresh`]; the Kafka bytes are the
//! core's [`stagger::kafka::Exchange`], the very code the tokio adapter runs. This crate only
//! carries them out: `WebSocket` for attempts, `setTimeout` re-armed to the core's
//! `poll_timeout()` for time, `performance.now()` for the clock (µs since the refresh began).
//!
//! The JS-facing half is built for `wasm32` only; [`options`] and [`events`] are plain Rust
//! (and tested on the host).
#![warn(missing_docs)]

pub mod events;
pub mod options;

#[cfg(target_arch = "wasm32")]
mod web;

#[cfg(target_arch = "wasm32")]
pub use web::{
    default_config, knobs, presets, refresh, validate_config, ConfigInput, KnobList, MetadataPromise, PresetNames,
    RefreshConfigObject, RefreshOptions,
};
