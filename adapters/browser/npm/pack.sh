#!/usr/bin/env bash
# Assembles the npm package `stagger-web` and packs it:
#
#   bash adapters/browser/npm/pack.sh [--build] [--dry-run] [OUT_DIR]   # OUT_DIR: default the current directory
#
# The package is wasm-bindgen's output in adapters/browser/pkg (built by adapters/browser/build.sh:
# run here when pkg is missing, and always with --build) plus this folder's own files
# (package.json, README.md, node.js, node.d.ts) and the root LICENSE-MIT and LICENSE-APACHE,
# copied into a scratch staging directory, never into the source tree. Prints the tarball's
# absolute path as the last line of stdout (with --dry-run: lists the files, writes and prints
# no tarball); everything else goes to stderr. Needs no registry.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
browser="$(cd "$here/.." && pwd)"
root="$(cd "$browser/../.." && pwd)"
pkg="$browser/pkg"

build=0
dry=()
out=""
for arg in "$@"; do
  case "$arg" in
    --build) build=1 ;;
    --dry-run) dry=(--dry-run) ;;
    -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "pack.sh: unknown option $arg" >&2; exit 2 ;;
    *) [ -z "$out" ] || { echo "pack.sh: one OUT_DIR only" >&2; exit 2; }; out="$arg" ;;
  esac
done
out="${out:-$PWD}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

generated=(stagger_web.js stagger_web.d.ts stagger_web_bg.wasm)
missing=0
for f in "${generated[@]}"; do [ -f "$pkg/$f" ] || missing=1; done
if [ "$build" = 1 ] || [ "$missing" = 1 ]; then
  [ "$build" = 1 ] || echo "pack.sh: adapters/browser/pkg is missing or incomplete: running build.sh" >&2
  bash "$browser/build.sh" >&2
else
  # build.sh is not run when pkg exists (it is slow); say so when pkg looks older than its sources.
  newer="$(find "$browser/src" "$browser/Cargo.toml" "$root/src" "$root/Cargo.lock" -newer "$pkg/stagger_web_bg.wasm" -type f -print -quit 2>/dev/null || true)"
  [ -z "$newer" ] || echo "pack.sh: warning: ${newer#"$root"/} is newer than adapters/browser/pkg; pack.sh --build (or build.sh) rebuilds it" >&2
fi

# The package's version, licence and repository (if any) are the crate's, as cargo resolves them
# (workspace inheritance included): a mismatch fails here, naming the field to change.
cargo metadata --no-deps --format-version 1 --manifest-path "$root/Cargo.toml" |
  node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
    const crate = JSON.parse(s).packages.find((p) => p.name === "stagger-web");
    if (!crate) { console.error("pack.sh: cargo metadata lists no stagger-web crate"); process.exit(1); }
    const npm = require(process.argv[1]);
    const repo = typeof npm.repository === "object" ? npm.repository?.url : npm.repository;
    const pairs = [["version", npm.version, crate.version], ["license", npm.license, crate.license], ["repository", repo ?? null, crate.repository ?? null]];
    const bad = pairs.filter(([, a, b]) => a !== b);
    for (const [field, a, b] of bad) console.error(`pack.sh: adapters/browser/npm/package.json has ${field} ${JSON.stringify(a)}, the stagger-web crate ${JSON.stringify(b)}`);
    process.exit(bad.length ? 1 : 0);
  })' "$here/package.json"
# The generated definitions must still declare the API the README documents.
for decl in "export function refresh(options: RefreshOptions): Promise<Metadata>;" \
  "export interface RefreshOptions" "export interface Metadata" "export interface RefreshConfig" \
  "export default function __wbg_init"; do
  grep -qF "$decl" "$pkg/stagger_web.d.ts" || { echo "pack.sh: pkg/stagger_web.d.ts lacks: $decl" >&2; exit 1; }
done

stage="$(mktemp -d "${TMPDIR:-/tmp}/stagger-web-pack.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
for f in "${generated[@]}"; do cp "$pkg/$f" "$stage/"; done
cp "$here/package.json" "$here/README.md" "$here/node.js" "$here/node.d.ts" "$stage/"
cp "$root/LICENSE-MIT" "$root/LICENSE-APACHE" "$stage/"

# --json names the tarball; npm pack of a directory without dependencies contacts no registry.
json="$(cd "$stage" && npm pack "${dry[@]}" --json --pack-destination "$out" --ignore-scripts --no-fund --no-audit --loglevel=error)"
name="$(printf '%s' "$json" | node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
  const [p] = JSON.parse(s);
  console.error(`pack.sh: ${p.name}@${p.version}: ${p.entryCount} files, ${p.size} bytes packed, ${p.unpackedSize} unpacked`);
  for (const f of p.files) console.error(`  ${String(f.size).padStart(8)}  ${f.path}`);
  console.log(p.filename);
})')"
[ "${#dry[@]}" -gt 0 ] || echo "$out/$name"
