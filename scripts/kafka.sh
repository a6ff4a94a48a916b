#!/usr/bin/env bash
# Apache Kafka on this machine, from Maven Central only: the reference broker the interop suite
# can run against (STRATA_TARGET=kafka, tests/interop/kafka_broker.py), since "Kafka-compatible"
# means Apache Kafka's behaviour is the specification.
#
# The broker (org.apache.kafka:kafka_2.13) and kafka-tools, with their runtime dependencies, are
# named in tests/kafka/pom.xml; `install` copies them into a directory that is the classpath.
# Storage is formatted with Kafka's own tool (kafka.tools.StorageTool, what kafka-storage.sh runs)
# and the broker main is kafka.Kafka (what kafka-server-start.sh runs), in KRaft mode with every
# node a combined broker+controller and a static quorum (controller.quorum.voters).
#
# Usage:
#   scripts/kafka.sh install                 resolve the jars (idempotent; offline once resolved)
#   scripts/kafka.sh version                 the Kafka version the pom names
#   scripts/kafka.sh classpath               print the classpath
#   scripts/kafka.sh format CONFIG           format CONFIG's log.dirs (KAFKA_CLUSTER_ID, else a new
#                                            id); an already formatted dir is left as it is
#   scripts/kafka.sh run CONFIG              format CONFIG's log dir if it is not yet (see format),
#                                            then exec the broker in the foreground (the tests'
#                                            way: the caller's pid is the JVM's, for SIGTERM/SIGKILL)
#   scripts/kafka.sh start [--nodes 1|3] [--dir DIR]
#                                            write configs, format, start in the background on
#                                            free loopback ports, wait until every node listens,
#                                            print the bootstrap servers (DIR: a new temp dir)
#   scripts/kafka.sh stop --dir DIR          SIGTERM every node of DIR, SIGKILL after 60 s
#
# Env:
#   KAFKA_HEAP_OPTS     default "-Xmx1G -Xms1G", as kafka-server-start.sh (tests pass less)
#   KAFKA_JVM_PERFORMANCE_OPTS  default as kafka-run-class.sh
#   KAFKA_OPTS          appended to the JVM options
#   KAFKA_JAVA          the java binary (default: $JAVA_HOME/bin/java, else java on PATH); the
#                       broker of Kafka 4.x needs Java 17 or newer
#   STRATA_KAFKA_CACHE  where the jars go (default ~/.cache/strata/kafka)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
POM="$ROOT/tests/kafka/pom.xml"
VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM")
CACHE=${STRATA_KAFKA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/kafka}
# Named by the pom's hash, so editing the pom (a new version) resolves again into a fresh dir.
POM_HASH=$(sha256sum "$POM" | cut -c1-12)
LIBS="$CACHE/$VERSION-$POM_HASH/libs"

die() { echo "kafka.sh: $*" >&2; exit 1; }

java_bin() {
    if [ -n "${KAFKA_JAVA:-}" ]; then echo "$KAFKA_JAVA"
    elif [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then echo "$JAVA_HOME/bin/java"
    else command -v java || die "no java found (Kafka $VERSION needs Java 17+)"
    fi
}

cmd_install() {
    [ -f "$LIBS/.complete" ] && return 0
    command -v mvn >/dev/null || die "mvn not found"
    rm -rf "$LIBS"; mkdir -p "$LIBS"
    local args=(-q -B -f "$POM" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$LIBS")
    # Offline first: once ~/.m2 holds the jars nothing goes to the network.
    if ! mvn -o "${args[@]}" >/dev/null 2>&1; then
        echo "kafka.sh: resolving Apache Kafka $VERSION from Maven Central" >&2
        mvn "${args[@]}" || die "mvn could not resolve tests/kafka/pom.xml"
    fi
    ls "$LIBS"/kafka_2.13-"$VERSION".jar "$LIBS"/kafka-tools-"$VERSION".jar >/dev/null ||
        die "the broker or tools jar is missing from $LIBS"
    touch "$LIBS/.complete"
}

need_libs() { [ -f "$LIBS/.complete" ] || die "Kafka is not installed: run scripts/kafka.sh install"; }

cmd_classpath() { need_libs; echo "$LIBS/*"; }

# Log4j 2 configuration: the broker logs to stdout (the caller redirects it), at INFO, with the
# noisiest loggers turned down, as Kafka's own config/log4j2.yaml does.
log_config() {
    local f="$CACHE/log4j2.properties"
    if [ ! -f "$f" ]; then
        mkdir -p "$CACHE"
        cat >"$f" <<'EOF'
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = info
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.controller.name = org.apache.kafka.controller
logger.controller.level = info
logger.state.name = state.change.logger
logger.state.level = warn
logger.clients.name = org.apache.kafka.clients
logger.clients.level = warn
EOF
    fi
    echo "$f"
}

jvm_opts() {
    # As kafka-run-class.sh / kafka-server-start.sh default them.
    echo "${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G}"
    echo "${KAFKA_JVM_PERFORMANCE_OPTS:--server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true}"
    echo "-Dlog4j2.configurationFile=$(log_config)"
    echo "${KAFKA_OPTS:-}"
}

# A random UUID in Kafka's URL-safe base64; like Kafka's Uuid.randomUuid, never one that starts
# with "-" (the storage tool's argument parser would take it for an option).
new_cluster_id() {
    local id
    while id=$(head -c16 /dev/urandom | base64 | tr '+/' '-_' | cut -c1-22); [ "${id:0:1}" = - ]; do :; done
    echo "$id"
}

cmd_format() {
    local config=${1:?format CONFIG}
    need_libs
    local id=${KAFKA_CLUSTER_ID:-$(new_cluster_id)}
    # shellcheck disable=SC2046 # word splitting of the JVM options is intended
    "$(java_bin)" -Xmx256m -Dlog4j2.configurationFile="$(log_config)" -cp "$LIBS/*" kafka.tools.StorageTool \
        format --ignore-formatted --cluster-id="$id" --config="$config"
}

cmd_run() {
    local config=${1:?run CONFIG}
    need_libs
    # Kafka refuses an unformatted log dir; Strata needs no such step. Formatting here, when the
    # first log dir has no meta.properties yet, makes a first start and a restart after kill -9
    # the same command, and a config the storage tool refuses fails this process, as it would
    # fail the broker.
    local first_dir
    first_dir=$(sed -n 's/^log\.dirs\{0,1\}=\([^,]*\).*/\1/p' "$config" | tail -1)
    if [ -n "$first_dir" ] && [ ! -f "$first_dir/meta.properties" ]; then
        cmd_format "$config" || exit 1
    fi
    local opts; mapfile -t opts < <(jvm_opts)
    # shellcheck disable=SC2086,SC2048 # each line may hold several options
    exec "$(java_bin)" ${opts[*]} -cp "$LIBS/*" kafka.Kafka "$config"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

cmd_start() {
    local nodes=1 dir=""
    while [ $# -gt 0 ]; do
        case $1 in
            --nodes) nodes=$2; shift 2 ;;
            --dir) dir=$2; shift 2 ;;
            *) die "start: unknown argument $1" ;;
        esac
    done
    case $nodes in 1|3) ;; *) die "--nodes must be 1 or 3" ;; esac
    need_libs
    [ -n "$dir" ] || dir=$(mktemp -d /tmp/strata-kafka.XXXXXX)
    mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
    if ls "$dir"/node*/pid >/dev/null 2>&1; then die "$dir already has nodes: stop them first"; fi
    local i port=() cport=() voters="" id
    for ((i = 0; i < nodes; i++)); do
        port[i]=$(free_port); cport[i]=$(free_port)
        voters+="${voters:+,}$i@127.0.0.1:${cport[i]}"
    done
    id=$(new_cluster_id)
    local rf=$(( nodes < 3 ? nodes : 3 )) min_isr=$(( nodes < 3 ? 1 : 2 ))
    for ((i = 0; i < nodes; i++)); do
        local nd="$dir/node$i"
        mkdir -p "$nd/data"
        cat >"$nd/server.properties" <<EOF
process.roles=broker,controller
node.id=$i
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:${port[i]},CONTROLLER://127.0.0.1:${cport[i]}
advertised.listeners=PLAINTEXT://127.0.0.1:${port[i]}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$nd/data
offsets.topic.replication.factor=$rf
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$min_isr
EOF
        KAFKA_CLUSTER_ID=$id cmd_format "$nd/server.properties" >"$nd/format.log" 2>&1 ||
            die "formatting node $i failed: $(tail -5 "$nd/format.log")"
        echo "127.0.0.1:${port[i]}" >"$nd/bootstrap"
    done
    for ((i = 0; i < nodes; i++)); do
        local nd="$dir/node$i"
        ( cmd_run "$nd/server.properties" >"$nd/kafka.log" 2>&1 ) &
        echo $! >"$nd/pid"
    done
    local deadline=$(( $(date +%s) + 120 ))
    for ((i = 0; i < nodes; i++)); do
        until listening "${port[i]}"; do
            kill -0 "$(cat "$dir/node$i/pid")" 2>/dev/null ||
                die "node $i exited: $(tail -20 "$dir/node$i/kafka.log")"
            [ "$(date +%s)" -lt "$deadline" ] || die "node $i did not listen on ${port[i]} within 120 s"
            sleep 0.2
        done
    done
    local bs=""
    for ((i = 0; i < nodes; i++)); do bs+="${bs:+,}127.0.0.1:${port[i]}"; done
    echo "$bs" >"$dir/bootstrap"
    echo "$bs"
}

cmd_stop() {
    local dir=""
    while [ $# -gt 0 ]; do
        case $1 in
            --dir) dir=$2; shift 2 ;;
            *) die "stop: unknown argument $1" ;;
        esac
    done
    [ -n "$dir" ] || die "stop needs --dir DIR"
    local f pids=()
    for f in "$dir"/node*/pid; do
        [ -f "$f" ] || continue
        pids+=("$(cat "$f")")
    done
    [ ${#pids[@]} -gt 0 ] || { echo "nothing to stop in $dir" >&2; return 0; }
    kill -TERM "${pids[@]}" 2>/dev/null || true
    local deadline=$(( $(date +%s) + 60 )) p
    for p in "${pids[@]}"; do
        while kill -0 "$p" 2>/dev/null; do
            if [ "$(date +%s)" -ge "$deadline" ]; then
                echo "kafka.sh: pid $p still running 60 s after SIGTERM: SIGKILL" >&2
                kill -KILL "$p" 2>/dev/null || true
                break
            fi
            sleep 0.2
        done
    done
    rm -f "$dir"/node*/pid
}

case ${1:-} in
    install) shift; cmd_install "$@" ;;
    version) echo "$VERSION" ;;
    classpath) cmd_classpath ;;
    format) shift; cmd_format "$@" ;;
    run) shift; cmd_run "$@" ;;
    start) shift; cmd_start "$@" ;;
    stop) shift; cmd_stop "$@" ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
