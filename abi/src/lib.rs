//! `stagger-abi`: one small C ABI over the stagger session, for hosts in other languages —
//! Go through a zero-import wasm module (wazero), Python through the native library. A host
//! only moves bytes, time and TLS; the policy and the whole Kafka conversation (ApiVersions,
//! SASL, Metadata) run in here, once.
//!
//! # The functions
//!
//! | function | what |
//! |---|---|
//! | `stagger_abi_version() -> u32` | [`ABI_VERSION`]; check it first |
//! | `stagger_alloc(len)`, `stagger_free(ptr, len)` | memory for inputs (a wasm host writes into the module's memory) |
//! | `stagger_session_new(config, len, now_ns, seed) -> handle` | a session from config JSON; 0 on error |
//! | `stagger_last_error(out) -> status` | the calling thread's last error, as JSON |
//! | `stagger_step(handle, now_ns, events, len, out) -> status` | **one call per wake-up**: events in, actions and the next wake-up out |
//! | `stagger_metadata(handle, out)`, `stagger_report(handle, out)` | the latest metadata; the counters and the last refresh's attempts (JSON) |
//! | `stagger_session_free(handle)` | the end |
//!
//! Fallible calls return `STAGGER_OK` or a `STAGGER_ERR_*` status and point `*out` (a
//! [`StaggerBuf`]: pointer and length) at the answer, or at the error JSON. Read it before
//! the next call. The byte layout of event and action batches, every JSON shape and every
//! rule a host must know are in `docs/abi.md`; the C header is `abi/include/stagger.h`.
//!
//! # The run loop
//!
//! 1. **Build** a session with `stagger_session_new`, and step once with a
//!    `REQUEST_REFRESH` event.
//! 2. **Carry out** every action of the batch, in order: `DIAL` (then report `CONNECTED`,
//!    `SECURED` after TLS, or `IO_ERROR`), `SEND`, `CLOSE`, `RESOLVE`, `NEED_NONCE` (answer
//!    with 18 random bytes), `NEED_TOKEN`; `REFRESHED` and `REFRESH_FAILED` end a refresh.
//! 3. **Wait** for I/O or until the batch's next wake-up.
//! 4. **Step** with the time and everything that happened meanwhile, as one batch; go to 2.
//!
//! The invariant: every step answers with all the actions there are; between steps the
//! session asks nothing. Below, the loop through the exported functions against a network
//! where every broker refuses, ending in `REFRESH_FAILED` with every broker's error (the
//! tests in `abi/tests/` run it against fake Kafka brokers).
//!
//! ```
//! use stagger_abi::host::{decode_actions, encode_events, HostAction, HostEvent};
//! use stagger_abi::*;
//!
//! let config = br#"{"seeds": ["10.0.0.1:9092", "10.0.0.2:9092"], "one_shot": true,
//!                   "settings": {"retry.retries": "0"}}"#;
//! let mut now_ns = 1_000_000_000u64; // the host's monotonic clock
//! // SAFETY (here and below): valid pointers and lengths, `out` a valid place.
//! let handle = unsafe { stagger_session_new(config.as_ptr(), config.len(), now_ns, 42) };
//! assert_ne!(handle, 0);
//! let mut out = StaggerBuf { ptr: std::ptr::null(), len: 0 };
//! let mut events = vec![HostEvent::RequestRefresh(STAGGER_CAUSE_BOOTSTRAP, String::new())];
//! let error = 'run: loop {
//!     // 4. One step per wake-up: the time and every event since the last one.
//!     let batch = encode_events(&std::mem::take(&mut events));
//!     let status = unsafe { stagger_step(handle, now_ns, batch.as_ptr(), batch.len(), &mut out) };
//!     assert_eq!(status, STAGGER_OK);
//!     let actions = unsafe { std::slice::from_raw_parts(out.ptr, out.len) };
//!     let actions = decode_actions(actions)?;
//!     // 2. Carry out every action; here, every broker refuses the connection.
//!     for action in actions.actions {
//!         match action {
//!             HostAction::Dial { conn, .. } => {
//!                 events.push(HostEvent::IoError(conn, STAGGER_ERROR_REFUSED, 0, "refused".into()))
//!             }
//!             HostAction::RefreshFailed { error, .. } => break 'run serde_json::from_str::<serde_json::Value>(error)?,
//!             HostAction::RefreshRequested { .. } => {}
//!             other => unreachable!("no bytes are sent to a broker that refuses: {other:?}"),
//!         }
//!     }
//!     // 3. Wait for I/O (here: the refusals, at once) or the next wake-up.
//!     if events.is_empty() {
//!         now_ns = actions.next_wakeup_ns.expect("a running refresh has a timer");
//!     }
//! };
//! assert_eq!(error["reason"], "all_failed");
//! assert_eq!(error["brokers"].as_array().unwrap().len(), 2, "every broker's error: {error}");
//! assert_eq!(error["last_error"]["kind"], "refused");
//! assert_eq!(stagger_session_free(handle), STAGGER_OK);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Built two ways
//!
//! * `scripts/abi-wasm.sh OUT` builds the `wasm32-unknown-unknown` module: no imports at
//!   all (no clock, no randomness, no WASI — time, nonces and tokens are events), the same
//!   bytes from any checkout. A panic traps there; the host rebuilds its sessions.
//! * `cargo build -p stagger-abi --release` builds the native `cdylib` for
//!   `abi/include/stagger.h` (generated by cbindgen; a test fails when it is stale). There
//!   a panic is caught and returned as `STAGGER_ERR_PANIC`.
#![warn(missing_docs)]
#![warn(unreachable_pub)]

pub mod codes;
pub mod config;
// The conformance files' JSON form, for the Rust programs that replay them; the wasm module
// leaves it out (its bytes are checked in: bindings/go/stagger.wasm).
#[cfg(not(target_arch = "wasm32"))]
pub mod conformance;
pub mod error;
pub mod ffi;
pub mod host;
pub mod json;
pub mod wire;

pub use codes::*;
pub use ffi::{
    stagger_abi_version, stagger_alloc, stagger_free, stagger_last_error, stagger_metadata, stagger_report,
    stagger_session_free, stagger_session_new, stagger_step, StaggerBuf,
};

/// The ABI's version ([`STAGGER_ABI_VERSION`]), separate from the crate's.
pub const ABI_VERSION: u32 = STAGGER_ABI_VERSION;
