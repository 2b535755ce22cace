#!/usr/bin/env bash
# Tests the npm package as a user gets it:
#
#   bash adapters/browser/npm/test.sh [--build]
#
# 1. packs it (pack.sh; --build rebuilds adapters/browser/pkg first, which is otherwise built
#    only when missing);
# 2. installs the tarball into a scratch project in a temporary directory with npm --offline,
#    an empty npm cache of its own and an unreachable loopback registry, so no registry is
#    ever asked;
# 3. runs test/package.test.mjs: the installed files, exports and types; a refresh from Node;
#    Node without a WebSocket; a refresh from headless Chromium importing the package from the
#    scratch project's node_modules. Both refreshes go to the testbed (librdkafka's mock cluster
#    behind stagger-bridge bridges, built with cargo), on 127.0.0.1 only.
#
# Needs node and npm, cargo, /usr/bin/chromium (or $CHROMIUM), and playwright-core in
# adapters/browser/node_modules (scripts/setup.sh). Bounded: the tests time out on their own,
# and the whole run is killed after 30 minutes (most of which only a cold testbed build needs).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

work="$(mktemp -d "${TMPDIR:-/tmp}/stagger-web-npm.XXXXXX")"
trap 'rm -rf "$work"' EXIT

tarball="$(bash "$here/pack.sh" "$@" "$work/dist" | tail -1)"
echo "test.sh: packed $tarball" >&2

scratch="$work/scratch"
mkdir -p "$scratch"
cat >"$scratch/package.json" <<'EOF'
{
  "name": "stagger-web-scratch",
  "version": "0.0.0",
  "private": true,
  "type": "module"
}
EOF
(
  cd "$scratch"
  npm install "$tarball" --offline --cache "$work/npm-cache" --registry http://127.0.0.1:9/ \
    --no-audit --no-fund --ignore-scripts --loglevel=error >&2
)

STAGGER_NPM_SCRATCH="$scratch" STAGGER_NPM_TARBALL="$tarball" \
  timeout -k 10 1800 node --test "$here/test/package.test.mjs"
