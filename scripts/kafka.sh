#!/usr/bin/env bash
# A real Apache Kafka cluster on 127.0.0.1 for stagger's tests and for trying `stagger metadata`:
# KRaft, every node broker + controller, listeners PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL.
#
#   bash scripts/kafka.sh start [--version 4.4.0] [--brokers 3] [--dir DIR] [--base-port P]
#                               [--lifetime SECONDS] [--owner PID] [--advertise-plaintext A1,A2,..]
#                               [--advertise-sasl-ssl A1,A2,..] [--broker-property KEY=VALUE]...
#                               [--request-log] [--cpus LIST]
#   eval "$(bash scripts/kafka.sh env [--dir DIR])"   # KAFKA_PLAINTEXT=127.0.0.1:p1,... and more
#   bash scripts/kafka.sh restart --node N [--dir DIR] # start node N again (after a SIGKILL)
#   bash scripts/kafka.sh stop [--dir DIR]             # stop every broker it started, remove DIR
#   bash scripts/kafka.sh fetch [--version V]          # only fetch the broker's jars
#
# The broker's jars come from Maven (testing/kafka/pom.xml, cached in Maven's local
# repository). --base-port auto picks a free block of ports. Node i (1-based) listens on base+10(i-1) + 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT,
# 3 SASL_SSL, 4 CONTROLLER. SASL mechanisms PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are enabled
# for the user `stagger` with the password `stagger-secret`, and on SASL_PLAINTEXT also
# OAUTHBEARER with unsecured JWTs (Kafka's test validator); TLS uses a CA generated under DIR.
# A watchdog stops the cluster after --lifetime seconds (default 1800), or as soon as the
# process --owner names has exited, so nothing lingers when a test run dies.
# --advertise-plaintext makes node i advertise Ai instead of its own PLAINTEXT address (a test
# puts a forwarder there, to re-point a broker's address at another cluster);
# --advertise-sasl-ssl does the same for SASL_SSL (a counting forwarder that relays the TLS
# bytes: it must be listening before the start, whose SASL_SSL check may be sent on to it).
# Both take exactly one host:port per broker.
# --broker-property adds KEY=VALUE to every node's server.properties (a broker protection such
# as max.connection.creation.rate, say); repeat it for more.
# --request-log makes every broker log each request it completes ("Completed request:{json}",
# Kafka's kafka.request.logger at DEBUG) into DIR/node-i/request.log, one line per request
# prefixed with the epoch milliseconds of the line; `env` names the files in
# KAFKA_REQUEST_LOGS (empty without it). Requests the SASL authenticator handles before a
# connection is authenticated are not in it. Logging costs the broker work per request.
# --cpus runs every broker JVM on those CPUs only (`taskset -c LIST`, e.g. 1): a benchmark
# that pins its clients to the other CPUs keeps them from competing with the brokers. A
# restarted node runs on the same CPUs.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
script="$root/scripts/kafka.sh"
pom_dir="$root/testing/kafka"

version="4.4.0"
brokers=3
dir="${STAGGER_KAFKA_DIR:-${TMPDIR:-/tmp}/stagger-kafka}"
base_port=19092
lifetime=1800
owner=""
node=""
advertise_plaintext=""
advertise_sasl_ssl=""
request_log=""
cpus=""
broker_properties=()
readonly sasl_user="stagger" sasl_password="stagger-secret"

die() {
  echo "kafka.sh: $*" >&2
  exit 1
}

usage() {
  # The header comment: from line 2 up to the first line that is not a comment.
  awk 'NR > 1 && !/^#/ { exit } NR > 1' "$script" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

check_advertised() { # check_advertised FLAG LIST: exactly one host:port per broker
  local flag="$1" list="$2" address
  local -a addresses
  IFS=, read -r -a addresses <<<"$list"
  [ "${#addresses[@]}" = "$brokers" ] && [ "${list%,}" = "$list" ] ||
    die "$flag needs one host:port per broker ($brokers), comma-separated, not '$list'"
  for address in "${addresses[@]}"; do
    [[ "$address" =~ ^[^:,[:space:]]+:[0-9]+$ ]] ||
      die "$flag needs one host:port per broker ($brokers), comma-separated, not '$list'"
  done
}

parse_args() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --version) version="${2:?--version needs a value}"; shift 2 ;;
      --brokers) brokers="${2:?--brokers needs a value}"; shift 2 ;;
      --dir) dir="${2:?--dir needs a value}"; shift 2 ;;
      --base-port) base_port="${2:?--base-port needs a value}"; shift 2 ;;
      --lifetime) lifetime="${2:?--lifetime needs a value}"; shift 2 ;;
      --owner) owner="${2:?--owner needs a value}"; shift 2 ;;
      --node) node="${2:?--node needs a value}"; shift 2 ;;
      --advertise-plaintext) advertise_plaintext="${2:?--advertise-plaintext needs a value}"; shift 2 ;;
      --advertise-sasl-ssl) advertise_sasl_ssl="${2:?--advertise-sasl-ssl needs a value}"; shift 2 ;;
      --request-log) request_log=1; shift ;;
      --cpus) cpus="${2:?--cpus needs a value}"; shift 2 ;;
      --broker-property)
        [[ "${2:-}" =~ ^[a-z][a-z0-9._-]*=[^[:space:]]+$ ]] ||
          die "--broker-property needs KEY=VALUE (a lower-case Kafka property, a value without spaces), not '${2:-}'"
        broker_properties+=("$2")
        shift 2
        ;;
      -h | --help) usage ;;
      *) die "unknown argument '$1' (see --help)" ;;
    esac
  done
  [[ "$brokers" =~ ^[1-9][0-9]?$ ]] || die "--brokers must be a number from 1 to 99, not '$brokers'"
  if [ "$base_port" != auto ]; then
    [[ "$base_port" =~ ^[0-9]+$ ]] && [ "$base_port" -ge 1024 ] && [ $((base_port + 10 * brokers)) -le 65535 ] ||
      die "--base-port must be auto or leave room for 10 ports per broker between 1024 and 65535, not '$base_port'"
  fi
  [[ "$lifetime" =~ ^[0-9]+$ ]] || die "--lifetime must be a number of seconds, not '$lifetime'"
  [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "--version must look like 4.4.0, not '$version'"
  [ -z "$advertise_plaintext" ] || check_advertised --advertise-plaintext "$advertise_plaintext"
  [ -z "$advertise_sasl_ssl" ] || check_advertised --advertise-sasl-ssl "$advertise_sasl_ssl"
  [ -z "$cpus" ] || [[ "$cpus" =~ ^[0-9]+([,-][0-9]+)*$ ]] ||
    die "--cpus needs a CPU list as taskset takes it (e.g. 1 or 0,2-3), not '$cpus'"
}

# One clear sentence when Java or Maven is missing or too old.
check_tools() {
  command -v java >/dev/null 2>&1 ||
    die "Java 17 or newer is needed to run Apache Kafka brokers, and 'java' is not on PATH (Debian: apt-get install openjdk-17-jdk-headless)"
  command -v mvn >/dev/null 2>&1 ||
    die "Maven is needed to fetch the Apache Kafka broker's jars, and 'mvn' is not on PATH (Debian: apt-get install maven)"
  local java_major
  java_major="$(java -version 2>&1 | awk -F'"' '/version/ { split($2, v, "."); print (v[1] == 1 ? v[2] : v[1]); exit }')"
  case "$version" in
    3.*) ;;
    *) [ "${java_major:-0}" -ge 17 ] || die "Apache Kafka $version needs Java 17 or newer; 'java' on PATH is version ${java_major:-unknown}" ;;
  esac
}

# The broker's jars for $version, copied from Maven's local repository (fetched once).
fetch_jars() {
  lib="$pom_dir/target/kafka-$version"
  [ -f "$lib/.complete" ] && return
  echo "kafka.sh: fetching Apache Kafka $version with Maven" >&2
  rm -rf "$lib"
  mkdir -p "$pom_dir/target"
  mvn -q -B -Dstyle.color=never -f "$pom_dir/pom.xml" dependency:copy-dependencies -Dkafka.version="$version" \
    -DincludeScope=runtime -DoutputDirectory="$lib" >"$pom_dir/target/mvn-$version.log" 2>&1 || {
    tail -20 "$pom_dir/target/mvn-$version.log" >&2
    die "Maven could not fetch org.apache.kafka:kafka_2.13:$version and its dependencies"
  }
  [ -f "$lib/kafka_2.13-$version.jar" ] || die "Maven fetched no kafka_2.13-$version.jar"
  touch "$lib/.complete"
}

port() { # port NODE OFFSET
  echo $((base_port + 10 * ($1 - 1) + $2))
}

java_cmd() { # java_cmd LOG_FILE LOG_LEVEL HEAP: sets JAVA to the JVM a short-lived tool or probe runs in
  JAVA=(java "-Xmx$3" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData -Djava.awt.headless=true
    "-Dlog4j2.configurationFile=$pom_dir/log4j2.properties" "-Dstagger.log.file=$1" "-Dstagger.log.level=$2"
    -cp "$lib/*")
}

broker_java_cmd() { # broker_java_cmd NODE: sets JAVA to node NODE's broker JVM
  java_cmd "$dir/node-$1/server.log" INFO 384m
  # A broker runs with the full JIT, as in production: answer times are what the
  # real-socket benchmark measures (the tools' C1-only JIT only makes them start faster).
  JAVA=("${JAVA[@]/-XX:TieredStopAtLevel=1/-XX:+TieredCompilation}")
  if [ -n "$request_log" ]; then
    # log4j2.properties sends kafka.request.logger at this level to this file (without
    # them: WARN, into the broker's own log).
    JAVA+=("-Dstagger.request.log.file=$(request_log_file "$1")" -Dstagger.request.log.level=DEBUG)
  fi
}

request_log_file() { # request_log_file NODE
  echo "$dir/node-$1/request.log"
}

# A CA and one broker certificate for 127.0.0.1 and localhost, PEM (key and chain in one file).
make_tls() {
  local tls="$dir/tls"
  mkdir -p "$tls"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=stagger test CA" \
    -keyout "$tls/ca.key" -out "$tls/ca.pem" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$tls/broker.key" \
    -out "$tls/broker.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$tls/ext.cnf"
  openssl x509 -req -in "$tls/broker.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial \
    -days 2 -extfile "$tls/ext.cnf" -out "$tls/broker.crt" 2>/dev/null
  # Kafka's PEM key store reads an unencrypted PKCS#8 key followed by the certificate chain.
  openssl pkcs8 -topk8 -nocrypt -in "$tls/broker.key" >"$tls/broker.pem"
  cat "$tls/broker.crt" "$tls/ca.pem" >>"$tls/broker.pem"
}

write_properties() { # write_properties NODE
  local i="$1" voters="" n
  for n in $(seq 1 "$brokers"); do
    voters="${voters:+$voters,}$n@127.0.0.1:$(port "$n" 4)"
  done
  local rf=$((brokers < 3 ? brokers : 3))
  local p s sp ss c
  p="$(port "$i" 0)" s="$(port "$i" 1)" sp="$(port "$i" 2)" ss="$(port "$i" 3)" c="$(port "$i" 4)"
  # parse_args checked the lists: one host:port per broker.
  local advertised="127.0.0.1:$p" advertised_sasl_ssl="127.0.0.1:$ss"
  [ -z "$advertise_plaintext" ] || advertised="$(echo "$advertise_plaintext" | cut -d, -f"$i")"
  [ -z "$advertise_sasl_ssl" ] || advertised_sasl_ssl="$(echo "$advertise_sasl_ssl" | cut -d, -f"$i")"
  local plain="org.apache.kafka.common.security.plain.PlainLoginModule required user_$sasl_user=\"$sasl_password\";"
  local scram="org.apache.kafka.common.security.scram.ScramLoginModule required;"
  # OAUTHBEARER (SASL_PLAINTEXT only) validates unsecured JWTs: {"alg":"none"}, a `sub` and an `exp`.
  local oauth="org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub=\"$sasl_user\";"
  mkdir -p "$dir/node-$i"
  cat >"$dir/node-$i/server.properties" <<EOF
process.roles=broker,controller
node.id=$i
controller.quorum.voters=$voters
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://127.0.0.1:$p,SSL://127.0.0.1:$s,SASL_PLAINTEXT://127.0.0.1:$sp,SASL_SSL://127.0.0.1:$ss,CONTROLLER://127.0.0.1:$c
advertised.listeners=PLAINTEXT://$advertised,SSL://127.0.0.1:$s,SASL_PLAINTEXT://127.0.0.1:$sp,SASL_SSL://$advertised_sasl_ssl
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$dir/node-$i/data
num.partitions=1
default.replication.factor=$rf
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=3
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=2
background.threads=2
num.recovery.threads.per.data.dir=1
log.cleaner.threads=1
log.cleaner.dedupe.buffer.size=4194304
ssl.keystore.type=PEM
ssl.keystore.location=$dir/tls/broker.pem
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_plaintext.plain.sasl.jaas.config=$plain
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=$scram
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=$scram
listener.name.sasl_ssl.plain.sasl.jaas.config=$plain
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=$scram
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=$scram
listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER
listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=$oauth
listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler
EOF
  if [ "${#broker_properties[@]}" -gt 0 ]; then
    printf '%s\n' "${broker_properties[@]}" >>"$dir/node-$i/server.properties"
  fi
}

format_node() { # format_node NODE CLUSTER_ID: storage, with the SCRAM credentials of the test user
  local i="$1" scram="name=$sasl_user,password=$sasl_password"
  java_cmd "$dir/node-$i/format.log" INFO 256m
  "${JAVA[@]}" kafka.tools.StorageTool format -t "$2" \
    -c "$dir/node-$i/server.properties" --ignore-formatted \
    --add-scram "SCRAM-SHA-256=[$scram]" --add-scram "SCRAM-SHA-512=[$scram]" >"$dir/node-$i/format.out" 2>&1 ||
    die "formatting node $i's storage failed: $(tail -5 "$dir/node-$i/format.out")"
}

launch_node() { # launch_node NODE: starts the broker in its own session; records its pid
  local i="$1"
  broker_java_cmd "$i"
  local -a pin=()
  [ -z "$cpus" ] || pin=(taskset -c "$cpus")
  setsid "${pin[@]}" "${JAVA[@]}" kafka.Kafka "$dir/node-$i/server.properties" \
    </dev/null >"$dir/node-$i/stdout.log" 2>&1 &
  echo $! >"$dir/node-$i/pid"
}

# Whether PID is still a broker of this cluster (never signal a recycled pid).
is_ours() {
  [ -n "$1" ] && [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -qF -- "$dir/node-"
}

# Whether PID has not finished exiting (it is neither gone nor a zombie).
is_alive() {
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"
  [ "${stat%% *}" != Z ]
}

probe() { # probe DEADLINE_SECONDS ADDRESS...: prints the cluster id once every address serves metadata
  local deadline="$1"
  shift
  java_cmd "$dir/probe.log" ERROR 128m
  "${JAVA[@]}" "$pom_dir/Probe.java" "$brokers" "$deadline" "$@"
}

addresses() { # addresses OFFSET: the comma-separated list of one listener over every node
  local out="" n
  for n in $(seq 1 "$brokers"); do
    out="${out:+$out,}127.0.0.1:$(port "$n" "$1")"
  done
  echo "$out"
}

write_env() {
  local pids="" logs="" n
  for n in $(seq 1 "$brokers"); do
    pids="${pids:+$pids,}$(cat "$dir/node-$n/pid")"
    [ -z "$request_log" ] || logs="${logs:+$logs,}$(request_log_file "$n")"
  done
  cat >"$dir/cluster.env.tmp" <<EOF
KAFKA_VERSION=$version
KAFKA_BROKERS=$brokers
KAFKA_DIR=$dir
KAFKA_BASE_PORT=$base_port
KAFKA_PLAINTEXT=$(addresses 0)
KAFKA_SSL=$(addresses 1)
KAFKA_SASL_PLAINTEXT=$(addresses 2)
KAFKA_SASL_SSL=$(addresses 3)
KAFKA_CA=$dir/tls/ca.pem
KAFKA_SASL_USERNAME=$sasl_user
KAFKA_SASL_PASSWORD=$sasl_password
KAFKA_CLUSTER_ID=$cluster_id
KAFKA_PIDS=$pids
KAFKA_REQUEST_LOGS=$logs
KAFKA_CPUS=$cpus
EOF
  mv "$dir/cluster.env.tmp" "$dir/cluster.env"
}

load_state() {
  [ -f "$dir/cluster.env" ] || die "no cluster is running from $dir (start one with: bash scripts/kafka.sh start)"
  # shellcheck disable=SC1091
  . "$dir/cluster.env"
  version="$KAFKA_VERSION" brokers="$KAFKA_BROKERS" base_port="$KAFKA_BASE_PORT" cluster_id="$KAFKA_CLUSTER_ID"
  # A restarted node logs its requests as it did before (into the same file, appended).
  request_log="${KAFKA_REQUEST_LOGS:+1}"
  cpus="${KAFKA_CPUS:-}"
  lib="$pom_dir/target/kafka-$version"
}

start_watchdog() {
  # Polls once a second; then stops the cluster itself (exec: the watchdog becomes the stop).
  setsid bash -c '
    dir="$1" script="$2" lifetime="$3" owner="$4"
    end=$((SECONDS + lifetime))
    while [ "$SECONDS" -lt "$end" ] && [ -f "$dir/cluster.env" ]; do
      if [ -n "$owner" ] && ! kill -0 "$owner" 2>/dev/null; then break; fi
      sleep 1
    done
    [ -f "$dir/cluster.env" ] && exec bash "$script" stop --dir "$dir"
  ' watchdog "$dir" "$script" "$lifetime" "$owner" </dev/null >>"$dir/watchdog.log" 2>&1 &
  echo $! >"$dir/watchdog.pid"
}

# Whether every port of every node is free (nothing accepts connections on it).
ports_free() {
  local n offset
  for n in $(seq 1 "$brokers"); do
    for offset in 0 1 2 3 4; do
      ! (exec 3<>"/dev/tcp/127.0.0.1/$(port "$n" "$offset")") 2>/dev/null || return 1
    done
  done
}

cmd_start() {
  check_tools
  [ -f "$dir/cluster.env" ] && die "a cluster is already running from $dir (stop it first: bash scripts/kafka.sh stop --dir $dir)"
  if [ "$base_port" = auto ]; then
    # Below Linux's ephemeral range (32768+), so no outgoing connection holds one of them.
    for base_port in $(seq 18000 200 32000) none; do
      [ "$base_port" != none ] || die "no free block of ports on 127.0.0.1 between 18000 and 32000"
      ! ports_free || break
    done
  fi
  ports_free || die "a port of $base_port..$((base_port + 10 * brokers - 1)) on 127.0.0.1 is in use; choose another --base-port"
  local t0
  t0="$(date +%s.%N)"
  fetch_jars
  [ ! -e "$dir" ] || [ -f "$dir/.stagger-kafka" ] || die "$dir exists and is not a cluster directory of this script; choose another --dir"
  rm -rf "$dir"
  mkdir -p "$dir"
  touch "$dir/.stagger-kafka"
  make_tls
  # A Kafka cluster id: 16 random bytes, URL-safe base64 without padding. Like Kafka's own
  # Uuid.randomUuid, draw again while it starts with '-': the storage tool would read it as a flag.
  cluster_id=-
  while [ "${cluster_id#-}" != "$cluster_id" ]; do
    cluster_id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
  done
  for n in $(seq 1 "$brokers"); do
    write_properties "$n"
  done
  local formatting=()
  for n in $(seq 1 "$brokers"); do
    format_node "$n" "$cluster_id" &
    formatting+=($!)
  done
  local failed=0
  for n in "${formatting[@]}"; do
    wait "$n" || failed=1
  done
  [ "$failed" = 0 ] || { cmd_stop; die "formatting storage failed (see above)"; }
  for n in $(seq 1 "$brokers"); do
    launch_node "$n"
  done
  write_env
  start_watchdog
  local probed
  if ! probed="$(probe 120 $(addresses 0 | tr ',' ' ') 2>"$dir/probe.err")"; then
    cat "$dir/probe.err" >&2
    for n in $(seq 1 "$brokers"); do
      echo "--- node $n (last lines of $dir/node-$n/server.log)" >&2
      tail -5 "$dir/node-$n/server.log" "$dir/node-$n/stdout.log" 2>/dev/null >&2 || true
    done
    cmd_stop
    die "the cluster did not serve metadata within 120 s"
  fi
  [ "$probed" = "$cluster_id" ] || { cmd_stop; die "the brokers report cluster id '$probed', formatted as '$cluster_id'"; }
  local took
  took="$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')"
  # Every kind of listener, with the CA and each SASL mechanism, on node 1 (the later nodes
  # share the configuration).
  local trust="ssl.truststore.type=PEM|ssl.truststore.location=$dir/tls/ca.pem"
  local login="username=\"$sasl_user\" password=\"$sasl_password\";"
  local plain="sasl.mechanism=PLAIN|sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required $login"
  local scram="sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required $login"
  probe 60 "127.0.0.1:$(port 1 1)|security.protocol=SSL|$trust" \
    "127.0.0.1:$(port 1 2)|security.protocol=SASL_PLAINTEXT|$plain" \
    "127.0.0.1:$(port 1 2)|security.protocol=SASL_PLAINTEXT|sasl.mechanism=SCRAM-SHA-256|$scram" \
    "127.0.0.1:$(port 1 3)|security.protocol=SASL_SSL|sasl.mechanism=SCRAM-SHA-512|$scram|$trust" \
    >/dev/null 2>"$dir/probe.err" || {
    cat "$dir/probe.err" >&2
    cmd_stop
    die "the TLS and SASL listeners did not all accept the test CA and user"
  }
  touch "$dir/ready"
  local checked
  checked="$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')"
  echo "kafka.sh: Apache Kafka $version, $brokers brokers on 127.0.0.1 serving metadata after $took s, TLS and SASL listeners checked after $checked s (cluster $cluster_id; stops by itself after $((lifetime / 60)) min)" >&2
  cat "$dir/cluster.env"
}

cmd_env() {
  load_state
  cat "$dir/cluster.env"
}

cmd_restart() {
  load_state
  [[ "$node" =~ ^[0-9]+$ ]] && [ "$node" -ge 1 ] && [ "$node" -le "$brokers" ] ||
    die "--node must name a node from 1 to $brokers"
  local pid
  pid="$(cat "$dir/node-$node/pid")"
  if is_ours "$pid"; then
    kill -KILL "$pid" 2>/dev/null || true
    while is_alive "$pid"; do sleep 0.05; done
  fi
  # The last thread of a killed broker closes its listeners, maybe after the process looks
  # gone: wait until its ports are free again before binding them anew.
  local offset
  for offset in 0 1 2 3 4; do
    while (exec 3<>"/dev/tcp/127.0.0.1/$(port "$node" "$offset")") 2>/dev/null; do sleep 0.05; done
  done
  launch_node "$node"
  write_env
  probe 120 "127.0.0.1:$(port "$node" 0)" >/dev/null 2>"$dir/probe.err" || {
    cat "$dir/probe.err" >&2
    die "node $node did not serve metadata again within 120 s"
  }
  cat "$dir/cluster.env"
}

cmd_stop() {
  # Only ever a directory this script made (it holds the marker): never remove anything else.
  [ -f "$dir/.stagger-kafka" ] || return 0
  local f pid
  for f in "$dir"/node-*/pid; do
    [ -f "$f" ] || continue
    pid="$(cat "$f")"
    # SIGKILL: the data is removed next, so there is nothing to shut down gracefully.
    if is_ours "$pid"; then kill -KILL "$pid" 2>/dev/null || true; else rm -f "$f"; fi
  done
  for f in "$dir"/node-*/pid; do
    [ -f "$f" ] || continue
    pid="$(cat "$f")"
    while is_alive "$pid"; do sleep 0.05; done
  done
  if [ -f "$dir/watchdog.pid" ]; then
    pid="$(cat "$dir/watchdog.pid")"
    # The watchdog may be this very process (it execs the stop); never signal ourselves.
    if [ "$pid" != "$$" ] && [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$dir"; then
      kill "$pid" 2>/dev/null || true
    fi
  fi
  rm -rf "$dir"
}

[ $# -ge 1 ] || usage
command="$1"
shift
parse_args "$@"
case "$command" in
  start) cmd_start ;;
  env) cmd_env ;;
  restart) cmd_restart ;;
  stop) cmd_stop ;;
  fetch) check_tools && fetch_jars ;;
  *) usage ;;
esac
