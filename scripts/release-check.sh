#!/usr/bin/env bash
# What a release needs, checked on every CI run:
# 1. every publishable crate packages and its package builds alone (`cargo publish --dry-run`,
#    in dependency order, the unpublished workspace crates overlaid as a local registry);
# 2. `cargo deny check licenses bans sources` (deny.toml);
# 3. the third-party licences the CLI, the browser adapter's wasm, the ABI's wasm module, the
#    Python wheel's native library, the Go binding and the Java binding bundle
#    (docs/third-party-licenses.md)
#    are what cargo-deny lists for today's Cargo.lock, what licensecheck finds in the Go
#    modules of today's go.sum and what the POMs of the Java binding's Maven artifacts name,
#    and every Go module's and Maven artifact's licence is one deny.toml allows.
# Advisories are not checked: cargo-deny fetches its advisory database from a git host this
# project's machines cannot reach. Run `cargo deny check advisories` where it can.
set -euo pipefail
cd "$(dirname "$0")/.."
crates=(stagger stagger-sim stagger-tokio stagger-blocking stagger-web stagger-bridge stagger-cli)
deny_version=0.20.2

args=()
for c in "${crates[@]}"; do args+=(-p "$c"); done
# The dry-run unpacks each overlaid package under Cargo's home, in a directory named after the
# overlay's path, and builds it in this workspace's target directory; Cargo takes a registry
# package as never changing, so a second run from the same checkout would reuse the first
# run's sources and builds. Remove both, and only those of this workspace's crates.
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)"
for c in "${crates[@]}"; do rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/"$c-$version"; done
target="${CARGO_TARGET_DIR:-target}"
for built in $(grep -l "registry/src/-[0-9a-f]*/stagger" "$target"/debug/deps/*.d 2>/dev/null); do
  hash="${built##*-}"
  rm -rf "$target"/debug/.fingerprint/*-"${hash%.d}"
done
# Build outputs of the other steps (web-demo/dist, adapters/browser/pkg) are not in any
# package's include list, but cargo still sees an uncommitted tree after them.
cargo publish --dry-run --allow-dirty "${args[@]}" 2>&1 | grep -Ev '^warning: (ignoring (test|benchmark|example)|aborting upload)' >&2

if [ "$(cargo deny --version 2>/dev/null | awk '{ print $2 }')" != "$deny_version" ]; then
  # An unoptimised build: ~1.5 min instead of ~5 (its release profile is fat LTO, one codegen
  # unit), and still a few seconds per check on this workspace.
  cargo install --locked --debug cargo-deny --version "$deny_version"
fi
cargo deny check --hide-inclusion-graph licenses bans sources

# Debian's licensecheck names the Go modules' licences (scripts/third-party-licenses.sh).
command -v licensecheck >/dev/null 2>&1 || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq licensecheck
}
want="$(mktemp)"
trap 'rm -f "$want"' EXIT
bash scripts/third-party-licenses.sh >"$want"
if ! diff -u docs/third-party-licenses.md "$want" >&2; then
  echo "release-check: docs/third-party-licenses.md is stale; run bash scripts/third-party-licenses.sh > docs/third-party-licenses.md" >&2
  exit 1
fi
echo "release-check: ${#crates[@]} crates package, licences and sources allowed, third-party list current"
