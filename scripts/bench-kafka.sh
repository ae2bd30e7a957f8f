#!/usr/bin/env bash
# scripts/bench-kafka.sh: the lionet binary's `kafka` server (lionet/kafka) under a librdkafka
# client (bench/kafka/kafka_bench: produce, consume, single-record latency), and with
# --with-kafka the same client against Apache Kafka (a single-node KRaft broker, combined
# broker + controller, from Maven Central jars: bench/reference/kafka/pom.xml). Issue 25's
# targets: produce acks=1 >= 1.5x Kafka; acks=all with storage flush `every_batch` >= Kafka
# with log.flush.interval.messages=1; consume from offset 0 >= 1.0x; single-record latency
# median and p99 at most half of Kafka's; zero errors.
#
# Each broker is started fresh (data in the scratch directory, wiped per start) and pinned to
# CPU 0 (BROKER_CPUS), all its threads (lionet: 1 worker, the offload pool; Kafka: the JVM's
# network, request, log and GC threads); kafka_bench runs on CPU 1 (CLIENT_CPUS), one process
# per mode. Two configurations:
#   default  lionet storage flush `none` / Kafka's defaults (no fsync on the produce path):
#            produce acks=1 (COUNT records of 1 KiB, linger.ms=5, batch.size=65536), consume
#            the same records from offset 0 (every record checked), latency (linger.ms=0,
#            produce + flush, WARMUP then SAMPLES records, acks=1)
#   flush    lionet flush `every_batch` / Kafka log.flush.interval.messages=1: produce
#            acks=all, latency (acks=all)
# A warm-up round (not counted), then RUNS rounds; within a round lionet and Kafka alternate
# which goes first; medians. Before each broker start the script waits (at most QUIET_WAIT s)
# for the CPUs to be quiet (busy below QUIET_BUSY % over one second: the load average would
# mostly show this script's own previous run) and records the load average and that figure.
# Prints each figure for lionet and Kafka and the ratio lionet / Kafka (for latencies below 1
# is better); with --write puts the table into bench/RESULTS.md (section "kafka").
#
# --sasl: also lionet with TLS (a Kafka SSL listener) and with TLS + SASL SCRAM-SHA-256 (a
# SASL_SSL listener, the same certificate) from the same run, alternating, produce acks=1 and
# consume as above: authentication costs once per connection, so the target is SASL_SSL >= 0.9x
# of TLS alone; printed with the ratio and in the RESULT line (tls_*, sasl_*, ratio_sasl_*).
#
# Usage: scripts/bench-kafka.sh [--with-kafka] [--sasl] [--write] [--no-build] [--quick]
#   --with-kafka: also the Apache Kafka reference (needs java 17 and mvn: scripts/install-deps.sh
#     --bench); its jars are fetched once into $KAFKA_CACHE.
#   --quick: RUNS=1, COUNT=100000, SAMPLES=500 unless set (a smoke run; figures indicative only).
# Environment: BUILD_DIR (build/release), JOBS (2), RUNS (3), COUNT (500000), SAMPLES (2000),
#   WARMUP (200), QUIET_BUSY (25), QUIET_WAIT (60), KAFKA_CACHE (build/kafka-reference),
#   KAFKA_HEAP (1g), BROKER_CPUS (0) and CLIENT_CPUS (1) (taskset lists: BROKER_CPUS=0,1
#   CLIENT_CPUS=0,1 lets both brokers use both CPUs, shared with the client), REF_DIR.
# Last line: RESULT produce_acks1_mbps=.. [kafka_produce_acks1_mbps=.. ratio_produce_acks1=..]
#   produce_acksall_mbps=.. consume_mbps=.. lat_p50_us=.. lat_p99_us=.. lat_flush_p50_us=..
#   lat_flush_p99_us=.. (each with its kafka_ and ratio_ keys with --with-kafka) [tls_produce_mbps=..
#   sasl_produce_mbps=.. ratio_sasl_produce=.. tls_consume_mbps=.. sasl_consume_mbps=..
#   ratio_sasl_consume=.. with --sasl] errors=N
BENCH="kafka"
# shellcheck source-path=SCRIPTDIR source=lib/bench.sh
source "$(dirname "$0")/lib/bench.sh"
bench_parse "--with-kafka --sasl --write --no-build --quick" "$@"
with_kafka=0
bench_opt --with-kafka && with_kafka=1
with_sasl=0
bench_opt --sasl && with_sasl=1
if [ "$quick" = 1 ]; then
  bench_defaults RUNS=1 COUNT=100000 SAMPLES=500
fi
bench_defaults RUNS=3 COUNT=500000 SAMPLES=2000 WARMUP=200 QUIET_BUSY=25 QUIET_WAIT=60 \
  KAFKA_CACHE=build/kafka-reference KAFKA_HEAP=1g BROKER_CPUS=0 CLIENT_CPUS=1
bench_need taskset python3 timeout
[ "$with_sasl" = 0 ] || bench_need openssl
[ "$with_kafka" = 0 ] || bench_need java mvn
bench_build kafka_bench lionet_app
client=$(bench_bin kafka_bench)
lionet=$BUILD_DIR/bin/lionet
[[ "$lionet" == /* ]] || lionet=$REPO/$lionet
[ -x "$lionet" ] || bench_die "$lionet is not built (run without --no-build)"

# ---- the Apache Kafka jars, once ----------------------------------------------------------
kafka_jars=""
if [ "$with_kafka" = 1 ]; then
  pom=$(ref_file kafka/pom.xml)
  cache=$KAFKA_CACHE
  [[ "$cache" == /* ]] || cache=$REPO/$cache
  jars_dir=$cache/$(cksum <"$pom" | cut -d' ' -f1)  # another pom, another directory
  if [ ! -f "$jars_dir/.complete" ]; then
    echo "bench-$BENCH: fetching the Apache Kafka jars into $jars_dir (Maven Central)"
    rm -rf "$jars_dir" && mkdir -p "$jars_dir"
    mvn -q -B -f "$pom" dependency:copy-dependencies -DoutputDirectory="$jars_dir/lib" >"$jars_dir/mvn.log" 2>&1 ||
      { cat "$jars_dir/mvn.log" >&2; bench_die "mvn could not fetch the Kafka jars (bench/reference/kafka/pom.xml)"; }
    touch "$jars_dir/.complete"
  fi
  kafka_jars=$jars_dir/lib
  kafka_version=$(find "$kafka_jars" -name 'kafka_2.13-*.jar' -printf '%f\n' | sed 's/kafka_2.13-\(.*\)\.jar/\1/')
  java_version=$(java -version 2>&1 | head -1 | sed 's/.*version "\([^"]*\)".*/\1/')
fi

bench_start
errors=0
bench_warm

# ---- quiet check ----------------------------------------------------------------------------
# cpu_busy: percent of the CPUs' time busy over the next second (all CPUs, from /proc/stat).
cpu_busy() {
  local a b
  a=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat)
  sleep 1
  b=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat)
  awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " ");
    busy = y[1] - x[1]; all = busy + y[2] - x[2]; printf "%.0f\n", (all > 0 ? 100 * busy / all : 0) }'
}
busy_seen=()  # each run's busy figure before it
# wait_quiet: waits (at most QUIET_WAIT s) until cpu_busy < QUIET_BUSY; records and prints it.
wait_quiet() {
  local busy waited=0
  busy=$(cpu_busy)
  while [ "$busy" -ge "$QUIET_BUSY" ] && [ "$waited" -lt "$QUIET_WAIT" ]; do
    sleep 2
    waited=$((waited + 3))
    busy=$(cpu_busy)
  done
  busy_seen+=("$busy")
  local note=""
  [ "$waited" = 0 ] || note="; waited $waited s"
  echo "  (load average $(bench_loadavg), CPUs ${busy}% busy over 1 s before the start$note)" >&2
}

# ---- the brokers ----------------------------------------------------------------------------
# wait_listen PORT SECS: true once 127.0.0.1:PORT accepts, false after SECS or if SERVER_PID died.
wait_listen() {
  local i
  for i in $(seq $(($2 * 10))); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    kill -0 "$SERVER_PID" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
# stop_broker: SIGTERM, up to 60 s for a clean stop (Kafka's controlled shutdown), then SIGKILL.
stop_broker() {
  [ -n "${SERVER_PID:-}" ] || return 0
  local i
  kill "$SERVER_PID" 2>/dev/null || true
  for i in $(seq 600); do
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
}
bench_at_exit 'stop_broker'

# start_lionet none|every_batch [tls|sasl]: sets port and SERVER_PID; false if it did not listen.
# tls: the listener has tls: ($tmp/cert.pem); sasl: tls and sasl (SCRAM-SHA-256, user bench).
start_lionet() {
  local dir=$tmp/lionet
  rm -rf "$dir" && mkdir -p "$dir"
  port=$(free_port)
  cat >"$dir/server.yml" <<EOF
scheduler: {threads: 1}
log: {loggers: [{name: root, level: warn}]}
storage: {data_dir: $dir/data, flush: {policy: $1}}
servers:
  - name: kafka
    type: kafka
    listen: ["127.0.0.1:$port"]
EOF
  case "${2:-}" in
    tls) echo "    tls: {cert: $tmp/cert.pem, key: $tmp/key.pem}" >>"$dir/server.yml" ;;
    sasl)
      echo "    tls: {cert: $tmp/cert.pem, key: $tmp/key.pem}" >>"$dir/server.yml"
      echo "    sasl: {mechanisms: [SCRAM-SHA-256], users: $tmp/users.txt}" >>"$dir/server.yml" ;;
  esac
  taskset -c "$BROKER_CPUS" "$lionet" -c "$dir" >"$dir/out.log" 2>&1 &
  SERVER_PID=$!
  wait_listen "$port" 10
}

# start_kafka default|flush: a fresh single-node KRaft broker; sets port and SERVER_PID.
start_kafka() {
  local dir=$tmp/kafka cport id
  rm -rf "$dir" && mkdir -p "$dir/data"
  port=$(free_port)
  cport=$(free_port)
  cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$dir/data
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
EOF
  [ "$1" = flush ] && echo "log.flush.interval.messages=1" >>"$dir/server.properties"
  # A cluster id as Kafka's Uuid prints it (22 characters of URL-safe base64), not starting with '-'.
  id=$(python3 -c 'import base64, uuid
while True:
    s = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    if not s.startswith("-"): break
print(s)')
  java -cp "$kafka_jars/*" -Dorg.slf4j.simpleLogger.defaultLogLevel=warn kafka.tools.StorageTool format \
    -t "$id" -c "$dir/server.properties" >"$dir/format.log" 2>&1 || { echo "bench-$BENCH: kafka format failed" >&2; return 1; }
  # The JVM options of Kafka's own bin/kafka-server-start.sh (heap) and kafka-run-class.sh.
  taskset -c "$BROKER_CPUS" java "-Xmx$KAFKA_HEAP" "-Xms$KAFKA_HEAP" -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 \
    -Djava.awt.headless=true -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
    -cp "$kafka_jars/*" kafka.Kafka "$dir/server.properties" >"$dir/broker.log" 2>&1 &
  SERVER_PID=$!
  wait_listen "$port" 60
}

# ---- the runs -------------------------------------------------------------------------------
# Figures per system (lionet | kafka), space-separated, one per counted run.
declare -A fig
keys="produce_acks1_mbps consume_mbps lat_p50_us lat_p99_us produce_acksall_mbps lat_flush_p50_us lat_flush_p99_us"
for s in lionet kafka; do for k in $keys; do fig[$s.$k]=""; done; done

# bench_run SYSTEM CONFIG COUNTED: one broker start, the client's modes, the broker stopped.
bench_run() {
  local sys=$1 cfg=$2 counted=$3 out rc=0 topic="b$RANDOM"
  echo "== $sys $cfg$([ "$counted" = 1 ] || echo ' (warm-up)')" >&2
  bench_warm
  wait_quiet
  local started=0
  if [ "$sys" = lionet ]; then
    if [ "$cfg" = default ]; then start_lionet none && started=1; else start_lionet every_batch && started=1; fi
  else
    start_kafka "$cfg" && started=1
  fi
  if [ "$started" = 0 ]; then
    echo "bench-$BENCH: $sys ($cfg) did not start:" >&2
    tail -5 "$tmp/$sys/"*.log >&2 || true
    stop_broker
    errors=$((errors + 1))
    return
  fi
  # One client process per mode, as separate producer and consumer applications would be.
  local -a common=(-b "127.0.0.1:$port" -t "$topic" -n "$COUNT" -N "$SAMPLES" -w "$WARMUP")
  local acks=1 modes="produce consume latency" m res="" r e
  [ "$cfg" = default ] || { acks=all; modes="produce latency"; }
  for m in $modes; do
    rc=0
    out=$(taskset -c "$CLIENT_CPUS" timeout 600 "$client" "${common[@]}" -m "$m" -a "$acks" 2>&1) || rc=$?
    grep -v '^RESULT' <<<"$out" | sed 's/^/  /' >&2
    r=$(grep '^RESULT' <<<"$out" | tail -1)
    e=$(field errors <<<"$r")
    [ -n "$r" ] || echo "bench-$BENCH: kafka_bench -m $m ended with status $rc and no RESULT line" >&2
    [ -n "$e" ] || e=1
    errors=$((errors + e))
    res+=" ${r#RESULT}"
  done
  stop_broker
  [ "$counted" = 1 ] || return 0
  if [ "$cfg" = default ]; then
    fig[$sys.produce_acks1_mbps]+="$(field produce_mbps <<<"$res") "
    fig[$sys.consume_mbps]+="$(field consume_mbps <<<"$res") "
    fig[$sys.lat_p50_us]+="$(field lat_p50_us <<<"$res") "
    fig[$sys.lat_p99_us]+="$(field lat_p99_us <<<"$res") "
  else
    fig[$sys.produce_acksall_mbps]+="$(field produce_mbps <<<"$res") "
    fig[$sys.lat_flush_p50_us]+="$(field lat_p50_us <<<"$res") "
    fig[$sys.lat_flush_p99_us]+="$(field lat_p99_us <<<"$res") "
  fi
}
# ---- TLS alone against TLS + SASL (--sasl) ----------------------------------------------------
if [ "$with_sasl" = 1 ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tmp/key.pem" -out "$tmp/cert.pem" -days 2 -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost,IP:127.0.0.1 >/dev/null 2>&1 || bench_die "openssl req failed"
  (umask 077 && echo "bench:bench-secret" >"$tmp/users.txt")
  for k in produce consume; do fig[tls.$k]=""; fig[sasl.$k]=""; done
fi
# sec_run tls|sasl COUNTED: lionet (flush none) with that listener; produce acks=1 and consume.
sec_run() {
  local sec=$1 counted=$2 out r e m rc topic="s$RANDOM"
  echo "== lionet $sec$([ "$counted" = 1 ] || echo ' (warm-up)')" >&2
  bench_warm
  wait_quiet
  if ! start_lionet none "$sec"; then
    echo "bench-$BENCH: lionet ($sec) did not start:" >&2
    tail -5 "$tmp/lionet/"*.log >&2 || true
    stop_broker
    errors=$((errors + 1))
    return
  fi
  local -a x=(-X security.protocol=SSL -X "ssl.ca.location=$tmp/cert.pem")
  [ "$sec" = tls ] || x=(-X security.protocol=SASL_SSL -X "ssl.ca.location=$tmp/cert.pem"
    -X sasl.mechanisms=SCRAM-SHA-256 -X sasl.username=bench -X sasl.password=bench-secret)
  for m in produce consume; do
    rc=0
    out=$(taskset -c "$CLIENT_CPUS" timeout 600 "$client" -b "127.0.0.1:$port" -t "$topic" -n "$COUNT" \
      -N "$SAMPLES" -w "$WARMUP" -m "$m" -a 1 "${x[@]}" 2>&1) || rc=$?
    grep -v '^RESULT' <<<"$out" | sed 's/^/  /' >&2
    r=$(grep '^RESULT' <<<"$out" | tail -1)
    e=$(field errors <<<"$r")
    [ -n "$r" ] || echo "bench-$BENCH: kafka_bench -m $m ($sec) ended with status $rc and no RESULT line" >&2
    [ -n "$e" ] || e=1
    errors=$((errors + e))
    [ "$counted" = 1 ] && fig[$sec.$m]+="$(field "${m}_mbps" <<<"$r") "
  done
  stop_broker
}

systems=(lionet)
[ "$with_kafka" = 0 ] || systems+=(kafka)
round() {  # round N COUNTED: every system and configuration once; odd rounds lionet first
  local order=("${systems[@]}")
  if [ $(($1 % 2)) = 0 ] && [ "${#systems[@]}" = 2 ]; then order=(kafka lionet); fi
  local s
  for s in "${order[@]}"; do
    bench_run "$s" default "$2"
    bench_run "$s" flush "$2"
  done
}
sec_round() {  # sec_round N COUNTED: TLS and SASL_SSL once each; odd rounds TLS first
  if [ $(($1 % 2)) = 1 ]; then sec_run tls "$2"; sec_run sasl "$2"; else sec_run sasl "$2"; sec_run tls "$2"; fi
}
round 1 0
[ "$with_sasl" = 0 ] || sec_round 1 0
for i in $(seq "$RUNS"); do
  round "$i" 1
  [ "$with_sasl" = 0 ] || sec_round "$i" 1
done

# ---- the table ------------------------------------------------------------------------------
# shellcheck disable=SC2086  # med "1 2 3": the runs' figures, split on purpose
med() { printf '%s\n' $1 | median; }
declare -A label target kind
label[produce_acks1_mbps]="produce acks=1 (MB/s)";                 target[produce_acks1_mbps]=">= 1.5x"; kind[produce_acks1_mbps]=tput:1.5
label[produce_acksall_mbps]="produce acks=all, flushed (MB/s)";   target[produce_acksall_mbps]=">= 1.0x"; kind[produce_acksall_mbps]=tput:1.0
label[consume_mbps]="consume from offset 0 (MB/s)";               target[consume_mbps]=">= 1.0x"; kind[consume_mbps]=tput:1.0
label[lat_p50_us]="1-record latency median (us)";                 target[lat_p50_us]="<= 0.5x"; kind[lat_p50_us]=lat:0.5
label[lat_p99_us]="1-record latency p99 (us)";                    target[lat_p99_us]="<= 0.5x"; kind[lat_p99_us]=lat:0.5
label[lat_flush_p50_us]="1-record latency median, flushed (us)"; target[lat_flush_p50_us]="<= 0.5x"; kind[lat_flush_p50_us]=lat:0.5
label[lat_flush_p99_us]="1-record latency p99, flushed (us)";    target[lat_flush_p99_us]="<= 0.5x"; kind[lat_flush_p99_us]=lat:0.5
summary="RESULT"
rows=()
for k in $keys; do
  lm=$(med "${fig[lionet.$k]}")
  summary+=" $k=$lm"
  if [ "$with_kafka" = 1 ]; then
    km=$(med "${fig[kafka.$k]}")
    r=$(ratio "$lm" "$km")
    met=$(awk -v r="$r" -v spec="${kind[$k]}" 'BEGIN { split(spec, s, ":");
      if (r + 0 == 0) print "-"; else if (s[1] == "tput") print (r >= s[2] ? "yes" : "**no**"); else print (r <= s[2] ? "yes" : "**no**") }')
    rk=${k%_mbps}
    summary+=" kafka_$k=$km ratio_${rk%_us}=$r"
    rows+=("| ${label[$k]} | $lm | $km | $r | ${target[$k]} | $met | ${fig[lionet.$k]% } / ${fig[kafka.$k]% } |")
    printf '%-40s lionet %8s  kafka %8s  ratio %s (target %s: %s)\n' "${label[$k]}" "$lm" "$km" "$r" "${target[$k]}" "$met"
  else
    rows+=("| ${label[$k]} | $lm | - | - | ${target[$k]} | - | ${fig[lionet.$k]% } |")
    printf '%-40s lionet %8s\n' "${label[$k]}" "$lm"
  fi
done
[ "$with_kafka" = 1 ] || echo "bench-$BENCH: the reference (Apache Kafka) was not run: add --with-kafka for it and the ratios"
sec_rows=()
if [ "$with_sasl" = 1 ]; then
  for m in produce consume; do
    tm=$(med "${fig[tls.$m]}")
    sm=$(med "${fig[sasl.$m]}")
    r=$(ratio "$sm" "$tm")
    met=$(awk -v r="$r" 'BEGIN { print (r + 0 == 0 ? "-" : r >= 0.9 ? "yes" : "**no**") }')
    summary+=" tls_${m}_mbps=$tm sasl_${m}_mbps=$sm ratio_sasl_$m=$r"
    sec_rows+=("| $m acks=1 (MB/s): SASL_SSL SCRAM-SHA-256 vs TLS alone (lionet) | $sm | $tm | $r | >= 0.9x | $met | ${fig[sasl.$m]% } / ${fig[tls.$m]% } |")
    printf '%-40s SASL_SSL %8s  TLS %8s  ratio %s (target >= 0.9x: %s)\n' "$m (MB/s), lionet" "$sm" "$tm" "$r" "$met"
  done
fi
busy_max=$(printf '%s\n' "${busy_seen[@]}" | sort -n | tail -1)

commit=$(bench_commit lionet/kafka lionet/storage lionet/app bench/kafka)
cpu=$(bench_cpu)
{
  echo "## Kafka protocol (lionet/kafka) vs Apache Kafka, librdkafka client"
  echo
  echo "Produced by \`scripts/bench-kafka.sh$([ "$with_kafka" = 1 ] && echo ' --with-kafka') --write\` at commit $commit on $cpu;"
  echo "load average before: $load_before; CPUs busy before each broker start at most ${busy_max:-?}% (over 1 s)."
  if [ "$with_kafka" = 1 ]; then
    echo "Reference: Apache Kafka $kafka_version (single-node KRaft, broker + controller, Java $java_version, -Xmx$KAFKA_HEAP, the JVM options of its start scripts)."
  else
    echo "The reference (Apache Kafka) was not run (\`--with-kafka\`): lionet's figures only."
  fi
  echo "Each broker fresh per run, on CPU(s) $BROKER_CPUS; the client (bench/kafka/kafka_bench, Debian librdkafka $(pkg-config --modversion rdkafka 2>/dev/null || echo '?'))"
  echo "on CPU(s) $CLIENT_CPUS, one process per mode. 1 partition, 1 KiB values, $COUNT records, linger.ms=5, batch.size=65536, no compression; the clock stops at the"
  echo "last delivery report; consume reads them back from offset 0 (simple consumer), every record checked; latency:"
  echo "linger.ms=0, produce + flush, $SAMPLES records after $WARMUP. Default: lionet storage flush \`none\`, Kafka's defaults;"
  echo "flushed: lionet \`every_batch\` (fdatasync before the answer), Kafka \`log.flush.interval.messages=1\`."
  echo "One warm-up round, then $RUNS interleaved rounds, medians. MB/s = 1e6 value bytes per second. Ratio = lionet / Kafka."
  echo
  echo "| figure | lionet | Apache Kafka | ratio | target | met | runs (lionet / Kafka) |"
  echo "|---|---:|---:|---:|---|---|---|"
  printf '%s\n' "${rows[@]}"
  [ "${#sec_rows[@]}" = 0 ] || printf '%s\n' "${sec_rows[@]}"
} >"$tmp/section.md"
bench_section "$tmp/section.md"
bench_result "$summary errors=$errors"
