#!/usr/bin/env bash
# Builds the Java binding and runs its tests: the conformance replay of every
# conformance/*.json through the wasm core (Chicory's compiler) and, when STAGGER_KAFKA_DIR
# names a cluster of scripts/kafka.sh, the real-Kafka tests (skipped otherwise).
# Fails when Maven fails or when no test ran.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
rm -rf target/surefire-reports
mvn -q -B -Dstyle.color=never test "$@"
shopt -s nullglob
reports=(target/surefire-reports/TEST-*.xml)
if [ "${#reports[@]}" -eq 0 ]; then
  echo "test.sh: no test reports: no test ran" >&2
  exit 1
fi
# Totals over every suite: tests, failures, errors, skipped.
read -r tests failures errors skipped < <(
  sed -n 's/.*<testsuite [^>]*tests="\([0-9]*\)"[^>]*errors="\([0-9]*\)"[^>]*skipped="\([0-9]*\)"[^>]*failures="\([0-9]*\)".*/\1 \4 \2 \3/p' "${reports[@]}" |
    awk '{t+=$1; f+=$2; e+=$3; s+=$4} END {print t+0, f+0, e+0, s+0}')
ran=$((tests - skipped))
echo "test.sh: $tests tests, $ran ran, $skipped skipped, $failures failed, $errors errors"
if [ "$ran" -le 0 ]; then
  echo "test.sh: no test ran" >&2
  exit 1
fi
