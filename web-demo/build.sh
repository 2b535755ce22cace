#!/usr/bin/env bash
# Builds the web demo into web-demo/dist: a static site, no server-side logic.
#
#   web-demo/build.sh            # then: python3 -m http.server -d web-demo/dist 8080 --bind 127.0.0.1
#
# 1. the engine (crate `stagger-demo`: the core + stagger-sim) for wasm32, size-optimised,
#    through wasm-bindgen --target web into dist/pkg;
# 2. the page itself (index.html, style.css, js/) and the fixture traces;
# 3. the browser adapter (`stagger-web`, adapters/browser/pkg) into dist/browser, if it has
#    been built (adapters/browser/build.sh) — Live mode needs it, the other modes do not.
#
# Needs the wasm32-unknown-unknown target and a wasm-bindgen CLI of the exact version in
# Cargo.lock (scripts/setup.sh installs both). No wasm-opt: binaryen's -Oz shrinks the raw
# module but makes it larger gzipped, which is what a browser downloads.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
dist="$here/dist"
cd "$root"

want="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, "", $0); print; exit }' Cargo.lock)"
have="$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)"
if [[ -z "$have" || ( -n "$want" && "$have" != "$want" ) ]]; then
  echo "web-demo/build.sh: need wasm-bindgen ${want:-(any)} (found: ${have:-none}); run scripts/setup.sh" >&2
  exit 1
fi

# The workspace's size-tuned wasm profile (root Cargo.toml, shared with the browser adapter);
# defined on the command line, with the same settings, should it ever go away there.
profile=(--profile wasm-release)
if ! grep -q '^\[profile.wasm-release\]' Cargo.toml; then
  profile+=(
    --config 'profile.wasm-release.inherits="release"'
    --config 'profile.wasm-release.opt-level="z"'
    --config 'profile.wasm-release.lto=true'
    --config 'profile.wasm-release.codegen-units=1'
    --config 'profile.wasm-release.debug=false'
    --config 'profile.wasm-release.panic="abort"'
  )
fi
cargo build -p stagger-demo --lib --target wasm32-unknown-unknown "${profile[@]}"
wasm="${CARGO_TARGET_DIR:-$root/target}/wasm32-unknown-unknown/wasm-release/stagger_demo.wasm"

rm -rf "$dist"
mkdir -p "$dist/pkg" "$dist/fixtures"
wasm-bindgen --target web --no-typescript --remove-name-section --remove-producers-section --out-dir "$dist/pkg" "$wasm"

cp "$here/index.html" "$here/style.css" "$dist/"
cp -r "$here/js" "$dist/js"
cp "$here"/fixtures/*.json "$dist/fixtures/"

browser_pkg="$root/adapters/browser/pkg"
if [[ -f "$browser_pkg/stagger_web.js" ]]; then
  mkdir -p "$dist/browser"
  cp "$browser_pkg"/stagger_web.js "$browser_pkg"/stagger_web_bg.wasm "$dist/browser/"
  live="with Live mode (stagger-web from adapters/browser/pkg)"
else
  live="without Live mode (adapters/browser/pkg not built; run adapters/browser/build.sh first)"
fi

size="$(wc -c <"$dist/pkg/stagger_demo_bg.wasm")"
gz="$(gzip -9c "$dist/pkg/stagger_demo_bg.wasm" | wc -c)"
echo "web-demo: built $dist $live; engine ${size} bytes (${gz} gzipped)"
echo "serve it:  python3 -m http.server -d web-demo/dist 8080 --bind 127.0.0.1   # then open http://127.0.0.1:8080/"
