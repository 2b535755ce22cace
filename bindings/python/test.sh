#!/usr/bin/env bash
# Tests the Python package as users get it: builds the wheel with maturin (release), installs
# it into a fresh virtual environment with pytest, and runs the tests from a scratch copy,
# where the source tree is not importable (conftest.py refuses a `stagger` that is not
# installed). The real-Kafka tests use the cluster named by STAGGER_KAFKA_DIR (scripts/test.sh
# starts one); without it they skip, or fail under STAGGER_REQUIRE_KAFKA=1.
#
#   bash bindings/python/test.sh [PYTEST ARGS...]
#
# Needs cargo and maturin: the one scripts/setup.sh installs, else MATURIN or one on PATH.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
python="${PYTHON:-python3}"
py_tools="${STAGGER_PY_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/stagger/python-tools}"
maturin="${MATURIN:-}"
if [ -z "$maturin" ]; then
  if [ -x "$py_tools/bin/maturin" ]; then
    maturin="$py_tools/bin/maturin"
  elif command -v maturin >/dev/null 2>&1; then
    maturin="$(command -v maturin)"
  else
    echo "bindings/python/test.sh: maturin is missing (bash scripts/setup.sh installs it)" >&2
    exit 1
  fi
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/stagger-python.XXXXXX")"
trap 'rm -rf "$work"' EXIT
started=$SECONDS

"$python" -m venv "$work/venv"
venv_python="$work/venv/bin/python"
# cffi: maturin generates the package's loader with it at build time (and the wheel needs it
# at run time); pytest runs the tests, mypy checks the installed package's hints.
"$venv_python" -m pip install --quiet --disable-pip-version-check pytest cffi mypy

(cd "$here" && nice -n 10 "$maturin" build --release --quiet --interpreter "$venv_python" --out "$work/wheels")
wheel="$(ls "$work/wheels"/*.whl)"
"$venv_python" -m pip install --quiet --disable-pip-version-check "$wheel"
echo "bindings/python/test.sh: $(basename "$wheel") built and installed in $((SECONDS - started)) s" >&2

cp -R "$here/tests" "$here/examples" "$work/"
cd "$work/tests"
# The conformance scenarios every host replays (conformance/README.md), read in place.
STAGGER_REPO="$repo" STAGGER_CONFORMANCE_DIR="$repo/conformance" \
  "$venv_python" -m pytest -p no:cacheprovider -ra --durations=5 "$@"
