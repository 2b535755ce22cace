#!/usr/bin/env bash
# Prints docs/third-party-licenses.md: the crates the `stagger` binary, the browser adapter's
# wasm, the ABI's wasm module and the Python wheel's native library are built from
# (dependencies and build tools, dev-dependencies left out), with the licences cargo-deny
# finds for each; and the Go modules
# the Go binding links, with the licence Debian's licensecheck identifies in each module's
# licence file. Fails if a Go module's licence is not one deny.toml allows (cargo-deny checks
# the crates': scripts/release-check.sh); and the Java binding's run-time Maven artifacts with
# the licences their POMs name, held to the same list.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v licensecheck >/dev/null 2>&1 || {
  echo "third-party-licenses.sh: licensecheck is missing (Debian: apt-get install licensecheck; scripts/release-check.sh installs it)" >&2
  exit 1
}
list() { # list MANIFEST TARGET...: the crates a build for any of the targets takes
  local manifest="$1" target
  shift
  for target in "$@"; do
    cargo deny --manifest-path "$manifest" --exclude-dev --target "$target" list -f json -l crate 2>/dev/null
    printf '\0'
  done |
    python3 -c '
import json, sys
crates = {}
for doc in sys.stdin.read().split("\0"):
    if doc.strip():
        crates.update(json.loads(doc))
rows = []
for key, value in crates.items():
    name, version = key.split(" ")[:2]
    if name.startswith("stagger"):
        continue
    rows.append((name, version, ", ".join(value["licenses"]) or "unknown"))
for name, version, licences in sorted(rows):
    print(f"| {name} | {version} | {licences} |")
print(f"\n{len(rows)} crates.")'
}
go_list() { # the Go binding's linked modules, each with its licence
  local os
  (
    cd bindings/go
    go mod download
    # The packages a program using the binding links (tests left out), on each OS it runs on.
    for os in linux darwin windows; do
      GOOS=$os GOARCH=amd64 go list -deps -f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}} {{.Dir}}{{end}}{{end}}' ./...
    done
  ) | sort -u | python3 -c '
import pathlib, subprocess, sys, tomllib
allowed = set(tomllib.loads(pathlib.Path("deny.toml").read_text())["licenses"]["allow"])
rows, refused = [], []
for line in sys.stdin:
    path, version, directory = line.split()
    files = sorted(f for f in pathlib.Path(directory).iterdir() if f.name.upper().startswith(("LICENSE", "LICENCE", "COPYING")))
    found = []
    for f in files:
        # "FILE<TAB>LICENCE", SPDX names; UNKNOWN when no licence text is recognised.
        out = subprocess.run(["licensecheck", "--machine", "--shortname-scheme=spdx", str(f)],
                             capture_output=True, text=True, check=True).stdout
        found += [name for name in out.rstrip("\n").split("\t", 1)[1].split(" and/or ") if name not in found]
    licences = ", ".join(found) or "unknown"
    names = ", ".join(f.name for f in files)
    if not found or any(name not in allowed for name in found):
        where = names or "no licence file"
        refused.append(f"{path} {version}: {licences} ({where})")
    rows.append((path, version, licences, names))
for path, version, licences, files in rows:
    print(f"| {path} | {version} | {licences} | {files} |")
print(f"\n{len(rows)} modules.")
if refused:
    sys.exit("third-party-licenses.sh: Go modules whose licence deny.toml does not allow, or that none was found for:\n  " + "\n  ".join(refused))'
}
java_list() { # the Java binding's run-time Maven dependencies, each with its POM's licence
  local deps
  deps="$(mktemp)"
  (cd bindings/java && mvn -q -B dependency:list -DincludeScope=runtime -DoutputFile="$deps" >/dev/null)
  python3 - "$deps" "${HOME}/.m2/repository" <<'PY'
import pathlib, re, sys, tomllib
deps, repo = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
allowed = set(tomllib.loads(pathlib.Path("deny.toml").read_text())["licenses"]["allow"])
# The licence names the POMs use, as SPDX names.
spdx = {"apache-2.0": "Apache-2.0", "the apache software license, version 2.0": "Apache-2.0",
        "apache license, version 2.0": "Apache-2.0", "bsd-3-clause": "BSD-3-Clause"}
def pom(group, artifact, version):
    return repo.joinpath(*group.split("."), artifact, version, f"{artifact}-{version}.pom").read_text()
def licences(group, artifact, version):
    # A POM without <licenses> inherits its parent's.
    for _ in range(8):
        text = pom(group, artifact, version)
        names = re.findall(r"<license>\s*<name>([^<]+)</name>", text)
        if names:
            return [spdx.get(n.strip().lower(), n.strip()) for n in names]
        parent = re.search(r"<parent>.*?<groupId>([^<]+)</groupId>.*?<artifactId>([^<]+)</artifactId>.*?<version>([^<]+)</version>", text, re.S)
        if not parent:
            return []
        group, artifact, version = parent.groups()
    return []
rows, refused = [], []
for line in deps.read_text().splitlines():
    parts = line.strip().split(":")
    if len(parts) < 5:
        continue
    group, artifact, version = parts[0], parts[1], parts[3]
    found = licences(group, artifact, version)
    if not found or any(name not in allowed for name in found):
        refused.append(f"{group}:{artifact} {version}: {', '.join(found) or 'none found'}")
    rows.append((f"{group}:{artifact}", version, ", ".join(found) or "unknown"))
for name, version, found in sorted(rows):
    print(f"| {name} | {version} | {found} |")
print(f"\n{len(rows)} artifacts.")
if refused:
    sys.exit("third-party-licenses.sh: Maven artifacts whose licence deny.toml does not allow, or that none was found for:\n  " + "\n  ".join(refused))
PY
  rm -f "$deps"
}
cat <<'HEAD'
# Third-party licences

Generated by `bash scripts/third-party-licenses.sh` from `Cargo.lock` with cargo-deny, from
`bindings/go/go.sum` with `go list` and Debian's `licensecheck`, and from
`bindings/java/pom.xml` with Maven (CI checks it is current: `scripts/release-check.sh`).
Each row names the licences in a crate's licence expression (read it on the crate for AND
or OR); cargo-deny's check (`deny.toml`) allows only permissive ones, and the Go modules and
Maven artifacts are held to the same list. The `stagger` binary also links librdkafka
(BSD-2-Clause, built by `rdkafka-sys`) for its embedded demo cluster.

## The `stagger` CLI (`stagger-cli`, x86_64 Linux)

| crate | version | licences |
|---|---|---|
HEAD
list adapters/cli/Cargo.toml x86_64-unknown-linux-gnu
cat <<'MID'

## The browser adapter's wasm (`stagger-web`, wasm32)

| crate | version | licences |
|---|---|---|
MID
list adapters/browser/Cargo.toml wasm32-unknown-unknown
cat <<'ABI'

## The ABI's wasm module (`stagger-abi`, wasm32), embedded in the Go binding

`bindings/go/stagger.wasm`, built by `scripts/abi-wasm.sh`.

| crate | version | licences |
|---|---|---|
ABI
list abi/Cargo.toml wasm32-unknown-unknown
cat <<'WHEEL'

## The Python wheel's native library (`stagger-abi`; Linux, macOS, Windows)

`bindings/python` (the `stagger-kafka` wheel): maturin builds `stagger-abi` as the native
library the wheel carries (`bindings/python/pyproject.toml`); the table holds the crates a
build takes on any of the hosts `deny.toml` names (x86_64 Linux, aarch64 macOS, x86_64
Windows). The wheel's Python code needs `cffi` (MIT) at run time, which pip installs as a
dependency.

| crate | version | licences |
|---|---|---|
WHEEL
list abi/Cargo.toml x86_64-unknown-linux-gnu aarch64-apple-darwin x86_64-pc-windows-msvc
cat <<'GO'

## The Go binding (`bindings/go`, module `stagger.dev/go/stagger`)

The Go modules a program using the binding links (`go list -deps` of its packages on Linux,
macOS and Windows, tests left out), from `bindings/go/go.sum`. Each licence is what Debian's
`licensecheck` identifies in the module's licence file, as an SPDX name; this script fails if
it is not one `deny.toml` allows.

| module | version | licences | licence file |
|---|---|---|---|
GO
go_list
cat <<'JAVA'

## The Java binding (`bindings/java`, `dev.stagger:stagger-java`, experimental)

The Maven artifacts a program using the binding runs with (`mvn dependency:list`, run-time
scope), with the licences their POMs (or their parents') name; this script fails if one is
not a licence `deny.toml` allows. The binding carries the ABI's wasm module above.

| artifact | version | licences |
|---|---|---|
JAVA
java_list
