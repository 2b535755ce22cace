#!/usr/bin/env bash
# Builds the ABI's wasm module (stagger-abi for wasm32-unknown-unknown, zero imports) into
# OUT_PATH, reproducibly: the `abi-wasm` profile (opt-level 3, LTO, one codegen unit, no
# debug info, no names) and every path the compiler could embed remapped — this checkout to
# /stagger, Cargo's home to /cargo, the toolchain to /rustc-sysroot — so that builds from any
# directory give the same bytes. Prints the module's size.
#
#   bash scripts/abi-wasm.sh OUT_PATH
#   bash scripts/abi-wasm.sh --check-reproducible OUT_PATH
#
# --check-reproducible builds a second time from a copy of this checkout at another path
# (with its own target directory, kept for the next run) and fails unless both modules are
# byte-identical. scripts/test.sh runs it; abi/tests/wasm.rs then checks imports and exports.
set -euo pipefail
check=0
if [ "${1:-}" = "--check-reproducible" ]; then
  check=1
  shift
fi
out="${1:?usage: scripts/abi-wasm.sh [--check-reproducible] OUT_PATH}"
root="$(cd "$(dirname "$0")/.." && pwd)"
rustup target list --installed | grep -qx wasm32-unknown-unknown ||
  rustup target add wasm32-unknown-unknown || bash "$root/../shared/toolchain/install.sh" wasm32-unknown-unknown

cargo_home="$(cd "${CARGO_HOME:-$HOME/.cargo}" && pwd)"
sysroot="$(rustc --print sysroot)"
target="${CARGO_TARGET_DIR:-$root/target}"
mkdir -p "$target" "$(dirname "$out")"
target="$(cd "$target" && pwd)"

build() { # build CHECKOUT TARGET_DIR DEST
  local src="$1" dir="$2" dest="$3" sep=$'\x1f'
  # Rust flags for the wasm target only (host build scripts and proc-macros keep theirs).
  local flags="--remap-path-prefix=$src=/stagger${sep}--remap-path-prefix=$cargo_home=/cargo"
  flags+="${sep}--remap-path-prefix=$sysroot=/rustc-sysroot"
  (cd "$src" && CARGO_TARGET_DIR="$dir" CARGO_ENCODED_RUSTFLAGS="$flags" \
    cargo build --locked --quiet -p stagger-abi --lib --target wasm32-unknown-unknown --profile abi-wasm)
  cp "$dir/wasm32-unknown-unknown/abi-wasm/stagger_abi.wasm" "$dest"
}

build "$root" "$target" "$out"
echo "abi-wasm: $out, $(wc -c <"$out") bytes"

if [ "$check" = 1 ]; then
  # The copy: every file git would commit (tracked and new, not ignored), as it is now.
  elsewhere="$target/abi-repro"
  rm -rf "$elsewhere/checkout"
  mkdir -p "$elsewhere/checkout"
  (cd "$root" && git ls-files -z --cached --others --exclude-standard |
    tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -C "$elsewhere/checkout" -xf -
  build "$elsewhere/checkout" "$elsewhere/target" "$elsewhere/stagger_abi.wasm"
  if ! cmp -s "$out" "$elsewhere/stagger_abi.wasm"; then
    echo "abi-wasm: the module built from $elsewhere/checkout differs from the one built from $root:" >&2
    cmp "$out" "$elsewhere/stagger_abi.wasm" >&2 || true
    exit 1
  fi
  echo "abi-wasm: byte-identical when built from another directory ($elsewhere/checkout)"
fi
