#!/usr/bin/env bash
# Runs the whole test suite. Installs what the tests need first (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Real Apache Kafka (scripts/kafka.sh): one 3-broker cluster for `cargo test` and the browser tests,
# found by the tests through STAGGER_KAFKA_DIR and stopped right after (or by its watchdog,
# should this script die). Tests that stop, kill or re-point brokers start their own.
if command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; then
  STAGGER_KAFKA_DIR="$(mktemp -u "${TMPDIR:-/tmp}/stagger-kafka-run.XXXXXX")"
  export STAGGER_KAFKA_DIR
  trap 'bash scripts/kafka.sh stop --dir "$STAGGER_KAFKA_DIR"' EXIT
  bash scripts/kafka.sh start --dir "$STAGGER_KAFKA_DIR" --base-port auto --owner $$ --lifetime 3600 >/dev/null
else
  echo "test.sh: Java 17+ and Maven are missing, so the real-Kafka tests are skipped (each says why with --nocapture)" >&2
fi
# The C ABI's wasm module, built from this checkout and again from a copy elsewhere, which
# must give the same bytes; abi/tests/wasm.rs (in the workspace tests) checks that it imports
# nothing and exports the ABI with the documented signatures.
abi_target="${CARGO_TARGET_DIR:-target}"
[[ "$abi_target" = /* ]] || abi_target="$PWD/$abi_target"
export STAGGER_ABI_WASM="$abi_target/abi-wasm/stagger.wasm"
bash scripts/abi-wasm.sh --check-reproducible "$STAGGER_ABI_WASM"
# Node runs a session round in it first, instantiated with no imports, as wazero would.
node abi/tests/wasm-smoke.mjs "$STAGGER_ABI_WASM"
# The Go binding (bindings/go) embeds that module: the committed copy must be byte for byte
# the one just built (else: bash bindings/go/build-wasm.sh, and commit it). Then go vet and
# go test with the race detector: fake brokers, the shared cluster, and a cluster of the Go
# tests' own for the ones that stop and kill brokers.
bash bindings/go/build-wasm.sh --check "$STAGGER_ABI_WASM"
(cd bindings/go && go vet ./... && go test -race -count=1 ./...)
# The boundary benchmark once per case, so it cannot rot unseen (the numbers: boundary.md).
(cd bindings/go && go test -run '^$' -bench Boundary -benchtime 1x .)
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
# The npm package: packed, installed from its tarball into a scratch project, and used from
# Node and from Chromium (adapters/browser/npm/test.sh).
bash adapters/browser/npm/test.sh
# Web demo: build the static site (web-demo/dist), then drive it in headless Chromium.
bash web-demo/build.sh
(cd web-demo && node --test tests/)
# The Python package (bindings/python/test.sh): the wheel built with maturin, installed into a
# fresh venv, pytest against fake brokers and the real cluster (its destructive tests restart
# the broker they kill, so they run last here).
bash bindings/python/test.sh
# The JVM binding (bindings/java/test.sh): the same wasm module on Chicory's compiler, every
# conformance scenario replayed, and one-shot refreshes of the real cluster.
bash bindings/java/test.sh
# The browser, web demo, Python and Java tests use the real cluster too; it is not needed after them.
if [ -n "${STAGGER_KAFKA_DIR:-}" ]; then
  bash scripts/kafka.sh stop --dir "$STAGGER_KAFKA_DIR"
  trap - EXIT
fi
