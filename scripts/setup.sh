#!/usr/bin/env bash
# Installs everything the build and tests need on a fresh machine. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
have_target() { rustup target list --installed | grep -qx "$1"; }
for t in wasm32-unknown-unknown thumbv7m-none-eabi; do
  # Offline fallback: the matching standard library shipped beside the project (../shared).
  have_target "$t" || rustup target add "$t" || bash ../shared/toolchain/install.sh "$t"
done
# Browser adapter (adapters/browser): Debian's Chromium and chromedriver (never a downloaded
# browser), wasm-bindgen-cli at exactly Cargo.lock's wasm-bindgen version, playwright-core.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver
fi
wasm_bindgen_version="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)"
if [ "$(wasm-bindgen --version 2>/dev/null | awk '{ print $2 }')" != "$wasm_bindgen_version" ]; then
  cargo install --locked wasm-bindgen-cli --version "$wasm_bindgen_version" ||
    cargo install --force wasm-bindgen-cli --version "$wasm_bindgen_version"
fi
if ! (cd adapters/browser && node -e 'const l = require("./package-lock.json").packages["node_modules/playwright-core"].version;
  process.exit(require("./node_modules/playwright-core/package.json").version === l ? 0 : 1)' 2>/dev/null); then
  (cd adapters/browser && npm ci --no-audit --no-fund)
fi
# Web demo (web-demo/): playwright-core from its package-lock.json (Chromium and the
# wasm-bindgen CLI it also needs are installed above, for the browser adapter).
pw_want="$(node -p "require('./web-demo/package-lock.json').packages['node_modules/playwright-core'].version")"
[ "$(node -p "require('./web-demo/node_modules/playwright-core/package.json').version" 2>/dev/null)" = "$pw_want" ] || (cd web-demo && npm ci --no-audit --no-fund)
# websockify (Debian): the browser tests check that the adapter works through it unchanged.
command -v websockify >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq websockify; }
# Network faults (testing/netns): hosts in network namespaces, their faults made with
# iptables (and `tc netem` where the kernel has it).
if ! command -v ip >/dev/null 2>&1 || ! command -v iptables >/dev/null 2>&1 || ! command -v tc >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 iptables
fi
# Python binding (bindings/python): maturin builds its wheel; a pinned version in a virtual
# environment of its own (no system or user site touched), made once and reused.
maturin_version=1.16.0
py_tools="${STAGGER_PY_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/stagger/python-tools}"
if [ "$("$py_tools/bin/maturin" --version 2>/dev/null)" != "maturin $maturin_version" ]; then
  python3 -m venv "$py_tools"
  "$py_tools/bin/python" -m pip install --quiet --disable-pip-version-check "maturin==$maturin_version"
fi
# The Go binding (bindings/go): its module's dependencies (wazero) into Go's module cache,
# so its build and tests need no network after this. It needs Go 1.25 or later (wazero's
# floor), which this project's machines ship; Debian's golang-go is older.
command -v go >/dev/null 2>&1 || { echo "setup.sh: the Go binding needs Go 1.25+ (go on PATH)" >&2; exit 1; }
(cd bindings/go && go mod download)
# Real Apache Kafka for the integration tests (scripts/kafka.sh): a JDK 17 (the readiness
# probe runs a Java source file), Maven and openssl from Debian when missing, then the
# broker's jars for both tested versions, fetched once into Maven's local repository.
if ! command -v javac >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1 || ! command -v openssl >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless maven openssl
fi
bash scripts/kafka.sh fetch --version 4.4.0
bash scripts/kafka.sh fetch --version 3.9.1
