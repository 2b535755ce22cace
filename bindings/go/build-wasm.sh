#!/usr/bin/env bash
# The Go binding embeds the ABI's wasm module (bindings/go/stagger.wasm, built from this
# checkout by scripts/abi-wasm.sh: zero imports, the same bytes from any directory).
#
#   bash bindings/go/build-wasm.sh            # rebuild and refresh the committed stagger.wasm
#   bash bindings/go/build-wasm.sh --check    # rebuild to a temporary path; fail unless the
#                                             # committed module is byte for byte the same
#   bash bindings/go/build-wasm.sh --check BUILT.wasm   # the same, against a module already
#                                             # built by scripts/abi-wasm.sh from this checkout
#
# scripts/test.sh runs the check against the module it builds anyway (with
# --check-reproducible), so CI pays for no extra build.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
committed="$here/stagger.wasm"

if [ "${1:-}" != "--check" ]; then
  bash "$root/scripts/abi-wasm.sh" "$committed"
  exit 0
fi

built="${2:-}"
if [ -z "$built" ]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  built="$tmp/stagger.wasm"
  bash "$root/scripts/abi-wasm.sh" "$built" >/dev/null
fi
if ! cmp -s "$committed" "$built"; then
  echo "bindings/go/stagger.wasm is stale: it differs from the module this checkout builds ($built," >&2
  echo "$(wc -c <"$built") bytes; committed: $(wc -c <"$committed") bytes). Refresh it with" >&2
  echo "  bash bindings/go/build-wasm.sh" >&2
  echo "and commit bindings/go/stagger.wasm (the Go tests then run the new core)." >&2
  exit 1
fi
echo "bindings/go/stagger.wasm: byte for byte the module this checkout builds ($(wc -c <"$committed") bytes)"
