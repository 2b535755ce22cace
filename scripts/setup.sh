#!/usr/bin/env bash
# Installs everything the build and tests need on a fresh machine. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
have_target() { rustup target list --installed | grep -qx "$1"; }
for t in wasm32-unknown-unknown thumbv7m-none-eabi; do
  have_target "$t" || rustup target add "$t"
done
