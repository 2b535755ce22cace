#!/usr/bin/env bash
# Builds the browser package into adapters/browser/pkg: the stagger-web wasm (size-tuned
# `wasm-release` profile), its ES-module glue and TypeScript definitions. Prints the
# gzipped size of the .wasm and fails if that is over its budget. Installs wasm-bindgen-cli
# at exactly the version of the wasm-bindgen crate in Cargo.lock if it is missing or
# different (idempotent).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

# The CLI must match the crate byte for byte in its schema: take the version from Cargo.lock.
want="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)"
if [ -z "$want" ]; then
  # No lock entry yet (e.g. no Cargo.lock): let cargo resolve, changing nothing locked.
  cargo metadata --format-version 1 >/dev/null
  want="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)"
fi
have="$(wasm-bindgen --version 2>/dev/null | awk '{ print $2 }' || true)"
if [ "$have" != "$want" ]; then
  echo "installing wasm-bindgen-cli $want (found: ${have:-none})" >&2
  # --locked pins the CLI's own dependencies; should one of them be missing from the
  # registry mirror, fall back to a fresh resolution of the same CLI version.
  cargo install --locked wasm-bindgen-cli --version "$want" ||
    cargo install --force wasm-bindgen-cli --version "$want"
fi

rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown

# The paths the compiler embeds (panic locations) name no directory of the machine that
# built it: this checkout becomes /stagger and each registry's sources /crates, as
# scripts/abi-wasm.sh does for the ABI's module. Shorter, too: the module holds 34 of them
# (the standard library's 30 come precompiled as /rustc/COMMIT/library/...).
sep=$'\x1f'
flags="--remap-path-prefix=$root/=stagger/"
for src in "$(cd "${CARGO_HOME:-$HOME/.cargo}" && pwd)"/registry/src/*/; do
  [ -d "$src" ] && flags+="${sep}--remap-path-prefix=$src="
done
CARGO_ENCODED_RUSTFLAGS="$flags" cargo build -p stagger-web --target wasm32-unknown-unknown --profile wasm-release
target_dir="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
wasm="$target_dir/wasm32-unknown-unknown/wasm-release/stagger_web.wasm"

rm -rf "$here/pkg"
# Function names are for debugging; the package ships without them.
wasm-bindgen --target web --remove-name-section --remove-producers-section --out-dir "$here/pkg" "$wasm"
# Make pkg/ importable by the tests' pages (ES module + TypeScript definitions). Private:
# the package users install is assembled from it by npm/pack.sh.
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$here/Cargo.toml" | head -1)"
cat >"$here/pkg/package.json" <<EOF
{
  "name": "stagger-web",
  "private": true,
  "version": "$version",
  "description": "Staggered Kafka metadata refresh in the browser, over WebSocket bridges",
  "license": "MIT OR Apache-2.0",
  "type": "module",
  "main": "stagger_web.js",
  "types": "stagger_web.d.ts",
  "files": ["stagger_web.js", "stagger_web.d.ts", "stagger_web_bg.wasm", "stagger_web_bg.wasm.d.ts"],
  "sideEffects": false
}
EOF
# Binaryen's optimiser, when installed, shrinks the raw module; its output is kept only if it
# is also smaller gzipped, which is what a browser downloads (Debian's wasm-opt 108 makes
# this module larger gzipped). The package works either way.
gzipped() { gzip -9 -c "$1" | wc -c; }
if command -v wasm-opt >/dev/null 2>&1; then
  if wasm-opt -Oz --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
    --enable-mutable-globals --enable-reference-types --enable-multivalue \
    -o "$here/pkg/stagger_web_bg.opt.wasm" "$here/pkg/stagger_web_bg.wasm" &&
    [ "$(gzipped "$here/pkg/stagger_web_bg.opt.wasm")" -lt "$(gzipped "$here/pkg/stagger_web_bg.wasm")" ]; then
    mv "$here/pkg/stagger_web_bg.opt.wasm" "$here/pkg/stagger_web_bg.wasm"
  else
    rm -f "$here/pkg/stagger_web_bg.opt.wasm"
    echo "wasm-opt failed or did not make the gzipped module smaller; keeping wasm-bindgen's output" >&2
  fi
fi

# The budget: 150 KiB gzipped and 700 bytes, 50 granted to a client's home, 100 to gentle
# until calm and 550 to the credentials hold (README.md, "Build and test", says what the
# module holds, what it measured and why). Over it, the build fails.
budget=154300
raw=$(wc -c <"$here/pkg/stagger_web_bg.wasm")
gz=$(gzipped "$here/pkg/stagger_web_bg.wasm")
echo "stagger-web: pkg/stagger_web_bg.wasm is $raw bytes, $gz bytes gzipped (-9) (budget: ≤ $budget)"
if [ "$gz" -gt "$budget" ]; then
  echo "error: stagger-web's gzipped wasm is $((gz - budget)) bytes over its budget ($budget bytes)" >&2
  exit 1
fi
