//! `stagger-web`: the `stagger` core in the browser, as a Promise.
//!
//! ```js
//! import init, { refresh } from "./pkg/stagger_web.js";
//! await init();
//! const metadata = await refresh({
//!   bootstrap: ["ws://127.0.0.1:9001", "ws://127.0.0.1:9002"],
//!   config: "adaptive",
//!   onEvent: (e) => console.log(e.elapsed_ms, e.event, e.broker ?? e.timer),
//!   signal: AbortSignal.timeout(30_000),
//! });
//! ```
//!
//! Browsers cannot open TCP sockets, so each attempt is a WebSocket to a WebSocket↔TCP
//! bridge in front of one broker (websockify, or `stagger-bridge`), carrying the Kafka
//! connection's bytes as binary messages. Everything else — which broker, when, how many at
//! once, when to give up, the Kafka conversation, the live events, the per-attempt reports
//! and the trace — is the core's [`stagger::session::Session`], the very code the tokio and
//! blocking adapters host. This crate only carries out its actions: a `WebSocket` per dial,
//! bytes sent and received, closes, nonces from `crypto.getRandomValues`, `setTimeout`
//! re-armed to the session's `poll_timeout()`, `performance.now()` for the clock.
//!
//! `onEvent` receives the core's [`stagger::report::Event`]s as plain objects
//! (`{ elapsed_ms, event, attempt, broker, … }`); `refreshWith()` resolves with the
//! metadata, the [`stagger::report::RefreshReport`] and the replayable [`stagger::Trace`].
//!
//! The JS-facing half is built for `wasm32` only; [`options`] is plain Rust (and tested on
//! the host).
#![warn(missing_docs)]

pub mod options;

#[cfg(target_arch = "wasm32")]
mod web;

/// The wasm's allocator: talc, smaller than the standard library's dlmalloc (feature `talc`,
/// on by default; single-threaded wasm only).
#[cfg(all(feature = "talc", target_arch = "wasm32", not(target_feature = "atomics")))]
#[global_allocator]
static ALLOCATOR: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();

#[cfg(target_arch = "wasm32")]
pub use web::{
    default_config, knobs, presets, refresh, refresh_with, validate_config, ConfigInput, KnobList, MetadataPromise,
    PresetNames, RefreshConfigObject, RefreshOptions, RefreshResultPromise,
};
