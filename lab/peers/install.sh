#!/usr/bin/env bash
# Installs and builds every peer of lab/peers into lab/peers/.cache (gitignored), each from
# its ordinary registry, at the versions pinned below (the newest each registry held when the
# benchmark was written), and builds stagger's CLI and library probe, its Go binding's probe
# (bindings/go through a replace) and its Python wheel (bindings/python, maturin). Idempotent; a peer that
# cannot be installed is reported in one line and left out, the others still install.
# franz-go, sarama and aiokafka are also registered with stagger's bootstrap recipe in front of
# them ("franz-go + stagger front", ...: the same probes with -front / aiokafka+front).
#
#   bash lab/peers/install.sh
#
# Writes .cache/versions.tsv (peer, version actually installed) and .cache/peers.tsv (peer,
# the command that runs its probe); run.sh reads both.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cache="$here/.cache"
mkdir -p "$cache"
: "${CARGO_TARGET_DIR:=$root/target}"
export CARGO_TARGET_DIR

KAFKA_CLIENTS_VERSION=4.4.0   # Maven: org.apache.kafka:kafka-clients
FRANZ_VERSION=v1.22.3         # Go: github.com/twmb/franz-go (kadm v1.20.0), see go/go.mod
SARAMA_VERSION=v1.61.1        # Go: github.com/IBM/sarama, see go/go.mod
CONFLUENT_VERSION=2.16.1      # PyPI: confluent-kafka (bundles librdkafka)
KAFKA_PYTHON_VERSION=3.0.12   # PyPI: kafka-python
AIOKAFKA_VERSION=0.14.0       # PyPI: aiokafka
KAFKAJS_VERSION=2.2.4         # npm: kafkajs

versions="$cache/versions.tsv.tmp"
peers="$cache/peers.tsv.tmp"
: >"$versions"
: >"$peers"
log() { echo "install.sh: $*" >&2; }
left_out() { log "LEFT OUT $1: $2"; printf '%s\t-\tleft out: %s\n' "$1" "$2" >>"$versions"; }
peer() { printf '%s\t%s\n' "$1" "$2" >>"$peers"; }
version() { printf '%s\t%s\n' "$1" "$2" >>"$versions"; }

# --- stagger: the CLI and the library's one-shot probe (rebuilt every time: the core changes).
# If the tree does not build right now (others are editing it), an earlier build in the same
# target directory is used, and versions.tsv says so with its build time.
v="$(cd "$root" && cargo pkgid -p stagger 2>/dev/null | sed 's/.*[#@]//')"
stagger_v="${v:-?}"
stagger_build() { # stagger_build NAME BINARY CARGO_ARGS...
  local name="$1" bin="$2"
  shift 2
  if (cd "$root" && cargo build --release -q "$@") >>"$cache/cargo.log" 2>&1; then
    version "$name" "${v:-?} (this tree, release build)"
    peer "$name" "$bin"
  elif [ -x "$bin" ]; then
    log "cargo build of $name failed (see $cache/cargo.log); using the earlier build of $(date -u -r "$bin" '+%F %H:%M UTC')"
    version "$name" "${v:-?} (release build of $(date -u -r "$bin" '+%F %H:%M UTC'): the tree did not build at run time)"
    peer "$name" "$bin"
  else
    grep -m3 '^error' "$cache/cargo.log" >&2
    left_out "$name" "cargo build failed and no earlier build (see $cache/cargo.log)"
  fi
}
: >"$cache/cargo.log"
stagger_build "stagger CLI" "$CARGO_TARGET_DIR/release/stagger" -p stagger-cli
stagger_build "stagger library" "$CARGO_TARGET_DIR/release/peers_probe" -p stagger-lab --bin peers_probe

# --- Java: kafka-clients from Maven, the probe built with mvn
if command -v mvn >/dev/null && command -v java >/dev/null &&
  mvn -q -B -Dstyle.color=never -f "$here/java/pom.xml" -Dkafka.clients.version="$KAFKA_CLIENTS_VERSION" \
    package >"$cache/mvn.log" 2>&1 && [ -f "$cache/java/lib/kafka-clients-$KAFKA_CLIENTS_VERSION.jar" ]; then
  version "kafka-clients (Java)" "$KAFKA_CLIENTS_VERSION ($(java -version 2>&1 | head -1 | tr -d '"'))"
  peer "kafka-clients (Java)" "java -XX:+UseSerialGC -cp $cache/java/peers-java-probe-0.jar:$cache/java/lib/* Probe"
else
  tail -5 "$cache/mvn.log" >&2 2>/dev/null
  left_out "kafka-clients (Java)" "Maven could not fetch or build kafka-clients $KAFKA_CLIENTS_VERSION (see $cache/mvn.log)"
fi

# --- stagger's JVM binding (bindings/java) from this tree: installed into Maven's local
# repository (tests left to scripts/test.sh), then its probe built against it
if command -v mvn >/dev/null && command -v java >/dev/null &&
  mvn -q -B -Dstyle.color=never -f "$root/bindings/java/pom.xml" -DskipTests install >"$cache/mvn-stagger.log" 2>&1 &&
  mvn -q -B -Dstyle.color=never -f "$here/java-stagger/pom.xml" package >>"$cache/mvn-stagger.log" 2>&1 &&
  [ -f "$cache/java-stagger/peers-stagger-java-probe-0.jar" ]; then
  version "stagger Java" "0.1.0 (this tree, bindings/java on Chicory 1.7.5's compiler; $(java -version 2>&1 | head -1 | tr -d '"'))"
  peer "stagger Java" "java -XX:+UseSerialGC -cp $cache/java-stagger/peers-stagger-java-probe-0.jar:$cache/java-stagger/lib/* StaggerProbe"
else
  tail -5 "$cache/mvn-stagger.log" >&2 2>/dev/null
  left_out "stagger Java" "Maven could not build bindings/java or its probe (see $cache/mvn-stagger.log)"
fi

# --- Go: franz-go and sarama from the Go module proxy, stagger's Go binding from this tree
# (go.mod's replace), one module, three probes; franz and sarama also run with -front (stagger's
# bootstrap recipe before the peer: "franz-go + stagger front", "sarama + stagger front")
if command -v go >/dev/null; then
  mkdir -p "$cache/go"
  for p in franz sarama stagger; do
    if (cd "$here/go" && GOFLAGS=-mod=mod go build -o "$cache/go/$p" "./$p") >"$cache/go-$p.log" 2>&1; then
      if [ $p = franz ]; then
        version "franz-go" "$(cd "$here/go" && GOFLAGS=-mod=mod go list -m -f '{{.Version}}' github.com/twmb/franz-go) (kadm $(cd "$here/go" && GOFLAGS=-mod=mod go list -m -f '{{.Version}}' github.com/twmb/franz-go/pkg/kadm); $(go version | cut -d' ' -f3))"
        peer "franz-go" "$cache/go/franz"
        # the same probe with stagger's bootstrap recipe in front (bindings/go/examples/bootstrap)
        version "franz-go + stagger front" "franz-go as above, after stagger Go (this tree, bindings/go) md.Seeds()"
        peer "franz-go + stagger front" "$cache/go/franz -front"
      elif [ $p = stagger ]; then
        version "stagger Go" "$stagger_v (this tree, bindings/go; wazero $(cd "$here/go" && GOFLAGS=-mod=mod go list -m -f '{{.Version}}' github.com/tetratelabs/wazero), $(go version | cut -d' ' -f3))"
        peer "stagger Go" "$cache/go/stagger"
      else
        version "sarama" "$(cd "$here/go" && GOFLAGS=-mod=mod go list -m -f '{{.Version}}' github.com/IBM/sarama) (SCRAM: xdg-go/scram $(cd "$here/go" && GOFLAGS=-mod=mod go list -m -f '{{.Version}}' github.com/xdg-go/scram); $(go version | cut -d' ' -f3))"
        peer "sarama" "$cache/go/sarama"
        version "sarama + stagger front" "sarama as above, after stagger Go (this tree, bindings/go) md.Seeds()"
        peer "sarama + stagger front" "$cache/go/sarama -front"
      fi
    else
      tail -5 "$cache/go-$p.log" >&2
      left_out "$p" "go build failed (see $cache/go-$p.log)"
    fi
  done
else
  left_out "franz-go" "no Go toolchain"
  left_out "sarama" "no Go toolchain"
  left_out "stagger Go" "no Go toolchain"
fi

# --- Python: one venv with confluent-kafka (librdkafka), kafka-python, aiokafka
venv="$cache/venv"
if [ -x "$venv/bin/python" ] || python3 -m venv "$venv" >"$cache/venv.log" 2>&1; then
  for spec in "confluent-kafka==$CONFLUENT_VERSION" "kafka-python==$KAFKA_PYTHON_VERSION" "aiokafka==$AIOKAFKA_VERSION"; do
    name="${spec%%==*}"
    if "$venv/bin/pip" install -q "$spec" >>"$cache/pip.log" 2>&1; then
      v="$("$venv/bin/pip" show "$name" 2>/dev/null | awk '/^Version:/ {print $2}')"
      case "$name" in
        confluent-kafka)
          lib="$("$venv/bin/python" -c 'import confluent_kafka; print(confluent_kafka.libversion()[0])' 2>/dev/null)"
          version "librdkafka (confluent-kafka)" "confluent-kafka $v, librdkafka ${lib:-?}"
          peer "librdkafka (confluent-kafka)" "$venv/bin/python $here/python/probe.py confluent-kafka" ;;
        kafka-python)
          version "kafka-python" "$v ($("$venv/bin/python" --version))"
          peer "kafka-python" "$venv/bin/python $here/python/probe.py kafka-python" ;;
        aiokafka)
          version "aiokafka" "$v ($("$venv/bin/python" --version))"
          peer "aiokafka" "$venv/bin/python $here/python/probe.py aiokafka" ;;
      esac
    else
      tail -3 "$cache/pip.log" >&2
      left_out "$name" "pip could not install $spec (see $cache/pip.log)"
    fi
  done
  # stagger's Python wheel from this tree, as bindings/python/test.sh builds it (maturin, release;
  # cffi generates its loader), installed into the same venv.
  py_tools="${STAGGER_PY_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/stagger/python-tools}"
  maturin="${MATURIN:-}"
  [ -n "$maturin" ] || { [ -x "$py_tools/bin/maturin" ] && maturin="$py_tools/bin/maturin"; } ||
    maturin="$(command -v maturin || true)"
  rm -rf "$cache/wheels"
  if [ -z "$maturin" ]; then
    left_out "stagger Python" "no maturin (bash scripts/setup.sh installs it)"
  elif "$venv/bin/pip" install -q cffi >>"$cache/pip.log" 2>&1 &&
    (cd "$root/bindings/python" && nice -n 10 "$maturin" build --release --quiet --interpreter "$venv/bin/python" \
      --out "$cache/wheels") >"$cache/maturin.log" 2>&1 &&
    "$venv/bin/pip" install -q --force-reinstall --no-deps "$cache"/wheels/stagger_kafka-*.whl >>"$cache/pip.log" 2>&1; then
    version "stagger Python" "$("$venv/bin/pip" show stagger-kafka 2>/dev/null | awk '/^Version:/ {print $2}') (this tree, wheel built from bindings/python by maturin; $("$venv/bin/python" --version))"
    peer "stagger Python" "$venv/bin/python $here/python/probe.py stagger"
    if grep -q '^aiokafka	' "$peers"; then # aiokafka after the wheel's recipe, stagger.bootstrap_servers()
      version "aiokafka + stagger front" "aiokafka as above, after stagger Python (this wheel) bootstrap_servers()"
      peer "aiokafka + stagger front" "$venv/bin/python $here/python/probe.py aiokafka+front"
    fi
  else
    tail -3 "$cache/maturin.log" >&2 2>/dev/null
    left_out "stagger Python" "the wheel did not build or install (see $cache/maturin.log, $cache/pip.log)"
  fi
else
  left_out "confluent-kafka, kafka-python, aiokafka, stagger Python" "python3 -m venv failed (see $cache/venv.log)"
fi

# --- Node: kafkajs from npm
if command -v npm >/dev/null && command -v node >/dev/null; then
  mkdir -p "$cache/node"
  cp "$here/node/package.json" "$cache/node/package.json"
  if (cd "$cache/node" && npm install --no-audit --no-fund --silent) >"$cache/npm.log" 2>&1; then
    version "kafkajs" "$(node -p "require('$cache/node/node_modules/kafkajs/package.json').version") (node $(node --version))"
    peer "kafkajs" "env NODE_PATH=$cache/node/node_modules node $here/node/probe.js"
  else
    tail -3 "$cache/npm.log" >&2
    left_out "kafkajs" "npm could not install kafkajs@$KAFKAJS_VERSION (see $cache/npm.log)"
  fi
else
  left_out "kafkajs" "no node/npm"
fi

mv "$versions" "$cache/versions.tsv"
mv "$peers" "$cache/peers.tsv"
log "installed: $(cut -f1 "$cache/peers.tsv" | paste -sd, | sed 's/,/, /g')"
