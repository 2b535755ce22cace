#!/usr/bin/env bash
# Builds the wheel (maturin, release) into a fresh virtual environment and runs the boundary
# benchmark against it (bench/boundary.py; its arguments pass through).
#
#   bash bindings/python/bench/run.sh [--secs 3] [--batch 20]
#
# Needs cargo and maturin, as bindings/python/test.sh does.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-python3}"
py_tools="${STAGGER_PY_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/stagger/python-tools}"
maturin="${MATURIN:-}"
if [ -z "$maturin" ]; then
  if [ -x "$py_tools/bin/maturin" ]; then
    maturin="$py_tools/bin/maturin"
  elif command -v maturin >/dev/null 2>&1; then
    maturin="$(command -v maturin)"
  else
    echo "bindings/python/bench/run.sh: maturin is missing (bash scripts/setup.sh installs it)" >&2
    exit 1
  fi
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/stagger-python-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check cffi
(cd "$here/.." && "$maturin" build --release --quiet --interpreter "$work/venv/bin/python" --out "$work/wheels")
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$work"/wheels/*.whl
cd "$work"
"$work/venv/bin/python" "$here/boundary.py" "$@"
