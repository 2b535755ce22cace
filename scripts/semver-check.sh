#!/usr/bin/env bash
# The library crates' public API against a released version: `cargo semver-checks` with that
# release's git tag as the baseline (offline: it builds both from this repository).
#
#   bash scripts/semver-check.sh [BASELINE_REV]     (default: the newest v* tag)
#
# Not part of CI: cargo-semver-checks takes about 12 minutes to build on this project's
# machines, which CI's 30-minute budget cannot spare. Run it before tagging a release.
set -euo pipefail
cd "$(dirname "$0")/.."
base="${1:-$(git describe --tags --abbrev=0 --match 'v*' 2>/dev/null || true)}"
if [ -z "$base" ]; then
  echo "semver-check: no v* tag yet, so no released API to compare with" >&2
  exit 0
fi
version=0.51.0
[ "$(cargo semver-checks --version 2>/dev/null | awk '{ print $2 }')" = "$version" ] ||
  cargo install --locked cargo-semver-checks --version "$version"
# The library crates users depend on (stagger-cli is a binary: it has no API to check).
for crate in stagger stagger-sim stagger-tokio stagger-blocking stagger-web stagger-bridge; do
  cargo semver-checks -p "$crate" --baseline-rev "$base"
done
