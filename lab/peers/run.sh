#!/usr/bin/env bash
# stagger and its peers against one real Kafka cluster, faulty seeds first: one command.
#
#   bash lab/peers/run.sh [--reps N] [--timeout S] [--only CLIENT,..] [--settings defaults,tuned]
#                           [--cases healthy,hung1,..]
#                           [--merge RESULTS.json --merge-note TEXT]
#                           [--label TEXT] [--keep-earlier]   (see bench.py --help)
#
# 1. lab/peers/install.sh: installs every peer into lab/peers/.cache and builds stagger
#    (in CARGO_TARGET_DIR, the workspace's target/ unless set);
# 2. lab/peers/bench.py: one counting forwarder per broker on 127.0.0.1, then (scripts/kafka.sh)
#    a 5-broker KRaft cluster whose brokers advertise the forwarders (stopped on exit, whatever
#    happens); the cases, one probe process at a time; prints one Markdown table and writes it
#    with the method and versions to docs/performance/peers.md (raw runs:
#    lab/peers/.cache/results.json). --keep-earlier keeps the runs already there below it.
# Not part of `cargo test`. Needs Java 17+, Maven, Go, Python 3 (venv), Node + npm, cargo.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cache="$here/.cache"
: "${CARGO_TARGET_DIR:=$root/target}"
export CARGO_TARGET_DIR
command_line="bash lab/peers/run.sh"
for a in "$@"; do # quoted as a shell would need it (the merge note has spaces)
  case "$a" in
    *[!A-Za-z0-9_,./:=+-]*) command_line+=" '${a//\'/\'\\\'\'}'" ;;
    *) command_line+=" $a" ;;
  esac
done

# PEERS_NO_INSTALL=1 reuses what the last install.sh built (e.g. to finish a run with --merge
# against the same builds).
[ -n "${PEERS_NO_INSTALL:-}" ] || bash "$here/install.sh"

kdir="$cache/kafka"
cleanup() {
  bash "$root/scripts/kafka.sh" stop --dir "$kdir" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
bash "$root/scripts/kafka.sh" stop --dir "$kdir" >/dev/null 2>&1 || true
# bench.py starts the cluster after its forwarders (the brokers advertise them) and stops it;
# it also stops by itself when bench.py exits (--owner), or after an hour.
python3 "$here/bench.py" --kafka-script "$root/scripts/kafka.sh" --kafka-dir "$kdir" --brokers 5 --lifetime 3600 \
  --peers "$cache/peers.tsv" --versions "$cache/versions.tsv" \
  --out "$root/docs/performance/peers.md" --raw "$cache/results.json" --command "$command_line" "$@"
