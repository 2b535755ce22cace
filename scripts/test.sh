#!/usr/bin/env bash
# Runs the whole test suite. Installs what the tests need first (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo test --workspace
# The core's scenario tests and the browser adapter's JS API, compiled to wasm32 and run by
# wasm-bindgen-test in Node.
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
  cargo test -p stagger-web --target wasm32-unknown-unknown --test core_scenarios --test web_api
# The browser adapter in real headless Chromium, against librdkafka's mock cluster behind
# WebSocket bridges (adapters/browser/tests/browser.test.mjs).
bash adapters/browser/build.sh
cargo build -p stagger-bridge --example testbed
(cd adapters/browser && node --test tests/)
# Web demo: build the static site (web-demo/dist), then drive it in headless Chromium.
bash web-demo/build.sh
(cd web-demo && node --test tests/)
