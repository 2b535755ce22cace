//! The core's table-driven scenario tests (the workspace's `tests/scenarios.rs`), compiled to
//! wasm32 and run by wasm-bindgen-test in Node: the same state machine gives the same
//! commands in WebAssembly as natively.
//!
//! The file is shared, not copied: `build.rs` drops its leading `//!` docs (which
//! `include!` cannot take) into `OUT_DIR`, and `#[test]` is rebound to `#[wasm_bindgen_test]`.
//!
//! ```text
//! CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
//!   cargo test -p stagger-web --target wasm32-unknown-unknown --test core_scenarios
//! ```
#![cfg(target_arch = "wasm32")]

use wasm_bindgen_test::wasm_bindgen_test as test;

include!(concat!(env!("OUT_DIR"), "/core_scenarios.rs"));
