#!/usr/bin/env bash
# Runs every Strata test: builds the release broker, runs all Rust tests, checks that the API docs
# build without warnings, then the pytest interop
# suite (tests/interop) and the CI subset of librdkafka's own test suite
# (scripts/librdkafka-suite.sh, on one broker and on a 3-node cluster) against the real binary
# with real clients (confluent-kafka, kafka-python, aiokafka, kafkajs, kcat).
#
# Installs what the tests need first, idempotently (fast when already there):
#   - kcat, prometheus (promtool), burrow and zookeeper (Debian packages), and node/npm or
#     python3-venv if missing;
#   - a Python venv at .venv with tests/interop/requirements.txt;
#   - tests/interop/js/node_modules via `npm ci` (package-lock.json is committed);
#   - Apache Kafka (broker and tools, from Maven Central) via `scripts/kafka.sh install`, resolved
#     once into a cache and offline afterwards; Maven and a JDK 17+ must be on the machine;
#   - the Go modules of tests/interop/go (sarama, franz-go, kafka-go; go.sum is committed) via
#     `go mod download` into Go's default module cache, with the preinstalled Go
#     (/usr/local/go), which must be at least go.mod's `go` line; the tests build them offline;
#   - the Java client (kafka-clients at each version of tests/java/kafka-versions) via Maven into
#     ~/.m2; the tests copy the classpaths with `mvn -o` and compile with javac.
#   - Kafka Streams (tests/java-streams), Flink (tests/java-flink) and Kafka Connect
#     (tests/java-connect), modules of their own, the same way.
#
# Usage: scripts/test.sh [extra pytest args, e.g. -k crash -x]
# Env:   STRATA_SKIP_INSTALL=1  skip the install step (offline re-runs)
# Exits non-zero if any step fails; later steps still run when they can, so one run reports all.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
export DEBIAN_FRONTEND=noninteractive

log() { printf '\n==> %s\n' "$*"; }
now() { date +%s; }

# ---------------------------------------------------------------------------------------------
# Install
# ---------------------------------------------------------------------------------------------
APT_UPDATED=0
apt_install() {
    if [ "$APT_UPDATED" = 0 ]; then
        apt-get update -qq || return 1
        APT_UPDATED=1
    fi
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null || return 1
}

hash_of() { sha256sum "$@" | sha256sum | cut -c1-16; }

# The Go toolchain for tests/interop/go: the newest of the preinstalled /usr/local/go and a `go`
# on PATH, never one Go would download (GOTOOLCHAIN=local). Prints its path; fails if none is at
# least go.mod's `go` line.
GO_MOD_DIR="tests/interop/go"
go_version_of() { GOTOOLCHAIN=local "$1" env GOVERSION 2>/dev/null | sed 's/^go//'; }
version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]; } # $1 >= $2
pick_go() {
    local want best="" best_v="0" g v
    want=$(sed -n 's/^go \([0-9.]*\).*/\1/p' "$GO_MOD_DIR/go.mod")
    for g in /usr/local/go/bin/go "$(command -v go 2>/dev/null)"; do
        [ -n "$g" ] && [ -x "$g" ] || continue
        v=$(go_version_of "$g") || continue
        if [ -n "$v" ] && version_ge "$v" "$want" && ! version_ge "$best_v" "$v"; then
            best=$g best_v=$v
        fi
    done
    [ -n "$best" ] && echo "$best"
}

install_go_modules() {
    local go want
    want=$(sed -n 's/^go \([0-9.]*\).*/\1/p' "$GO_MOD_DIR/go.mod")
    go=$(pick_go)
    if [ -z "$go" ]; then
        # This machine kind ships Go in /usr/local/go; Debian's golang-go is a last resort,
        # taken only if the version apt would install is new enough for go.mod.
        local onpath; onpath=$(command -v go 2>/dev/null) && onpath="$onpath ($(go_version_of "$onpath"))"
        echo "no Go >= $want found (tests/interop/go/go.mod; looked at /usr/local/go/bin/go and at" \
            "PATH's: ${onpath:-none})" >&2
        [ "$APT_UPDATED" = 1 ] || { apt-get update -qq && APT_UPDATED=1; } || return 1
        local cand; cand=$(apt-cache policy golang-go | sed -n 's/^ *Candidate: *\(.*\)/\1/p' \
            | sed 's/^[0-9]*://; s/[~+-].*//')
        if [ -n "$cand" ] && [ "$cand" != "(none)" ] && version_ge "$cand" "$want"; then
            log "installing golang-go $cand (apt; no preinstalled Go >= $want)"
            apt_install golang-go || return 1
            go=$(pick_go)
        fi
        if [ -z "$go" ]; then
            echo "FATAL: the Go tests need Go >= $want (Debian offers golang-go ${cand:-none});" \
                "install it in /usr/local/go" >&2
            return 1
        fi
    fi
    # Stamped in the module cache itself, so wiping the cache (go clean -modcache) also forgets
    # the stamp; named by the hash, so worktrees with different go.sum do not thrash one file.
    local gwant modcache stamp
    gwant=$(hash_of "$GO_MOD_DIR/go.mod" "$GO_MOD_DIR/go.sum")
    modcache=$(GOTOOLCHAIN=local "$go" env GOMODCACHE) || return 1
    stamp="$modcache/cache/strata-interop-go-$gwant"
    if [ ! -f "$stamp" ]; then
        log "downloading the Go modules of $GO_MOD_DIR ($(GOTOOLCHAIN=local "$go" version))"
        # Then build offline, as the tests do: proves nothing is missing and warms the build cache.
        (cd "$GO_MOD_DIR" && GOTOOLCHAIN=local GOWORK=off GOFLAGS=-mod=readonly "$go" mod download &&
            GOTOOLCHAIN=local GOWORK=off GOPROXY=off GOFLAGS="-mod=readonly -buildvcs=false" "$go" build ./...) ||
            return 1
        touch "$stamp"
    fi
}

# The Java client scenarios (tests/java, tests/interop/test_java_*.py): each kafka-clients version
# of tests/java/kafka-versions resolved into ~/.m2 once (stamped there by the pom's and the list's
# hash); the tests then copy each classpath with `mvn -o` and compile with javac, offline.
JAVA_DIR="tests/java"
install_java_modules() {
    local want stamp v out
    want=$(hash_of "$JAVA_DIR/pom.xml" "$JAVA_DIR/kafka-versions")
    # Maven's repository is under Java's user.home, which comes from the passwd entry, not $HOME.
    stamp="$(getent passwd "$(id -u)" | cut -d: -f6)/.m2/repository/.strata-java-interop-$want"
    [ -f "$stamp" ] && return 0
    out=$(mktemp -d) || return 1
    for v in $(grep -v '^#' "$JAVA_DIR/kafka-versions"); do
        log "resolving kafka-clients $v for $JAVA_DIR (mvn)"
        (cd "$JAVA_DIR" && mvn -q -B -Dstyle.color=never dependency:copy-dependencies -Dkafka.version="$v" -DoutputDirectory="$out/$v" &&
            mvn -o -q -B -Dstyle.color=never dependency:copy-dependencies -Dkafka.version="$v" -DoutputDirectory="$out/$v-offline") ||
            { rm -rf "$out"; return 1; }
    done
    rm -rf "$out"
    touch "$stamp"
}

# The JVM applications with a Maven module of their own, so that their classpaths stay off the
# kafka-clients ones above: the Kafka Streams word count (tests/java-streams,
# tests/interop/test_kafka_streams.py), the Flink word count (tests/java-flink,
# tests/interop/test_flink.py) and Kafka Connect's worker with our source connector
# (tests/java-connect, tests/interop/test_kafka_connect.py). Each is resolved into ~/.m2 once (stamped by its pom's hash), then
# copied with `mvn -o` by its test, offline.
STREAMS_DIR="tests/java-streams"
FLINK_DIR="tests/java-flink"
CONNECT_DIR="tests/java-connect"
install_java_module() { # install_java_module DIR WHAT
    local dir=$1 what=$2 want stamp out
    want=$(hash_of "$dir/pom.xml")
    stamp="$(getent passwd "$(id -u)" | cut -d: -f6)/.m2/repository/.strata-$(basename "$dir")-$want"
    [ -f "$stamp" ] && return 0
    out=$(mktemp -d) || return 1
    log "resolving $what for $dir (mvn)"
    (cd "$dir" && mvn -q -B -Dstyle.color=never dependency:copy-dependencies -DoutputDirectory="$out/online" &&
        mvn -o -q -B -Dstyle.color=never dependency:copy-dependencies -DoutputDirectory="$out/offline") ||
        { rm -rf "$out"; return 1; }
    rm -rf "$out"
    touch "$stamp"
}
install_java_streams() { install_java_module "$STREAMS_DIR" kafka-streams; }
install_java_flink() { install_java_module "$FLINK_DIR" "Flink and flink-connector-kafka"; }
install_java_connect() { install_java_module "$CONNECT_DIR" "Kafka Connect (connect-runtime)"; }

install_deps() {
    if ! command -v kcat >/dev/null 2>&1; then
        log "installing kcat (apt)"
        apt_install kcat || return 1
    fi
    # promtool checks the /metrics exposition (tests/tests/metrics.rs); the prometheus server
    # scrapes a broker in tests/interop/test_metrics.py.
    if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
        log "installing prometheus and promtool (apt)"
        apt_install prometheus || return 1
    fi
    # Burrow (with the ZooKeeper it needs for itself) checks group lag in tests/interop/test_burrow.py.
    if ! command -v Burrow >/dev/null 2>&1 || [ ! -f /usr/share/java/zookeeper.jar ]; then
        log "installing burrow and zookeeper (apt)"
        apt_install burrow zookeeper || return 1
    fi
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        log "installing nodejs and npm (apt)"
        apt_install nodejs npm || return 1
    fi
    if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
        log "installing python3-venv (apt)"
        apt_install python3-venv || return 1
    fi

    local req="tests/interop/requirements.txt" stamp=".venv/.strata-requirements"
    local want; want=$(hash_of "$req")
    if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        log "installing Python test packages into .venv"
        [ -x .venv/bin/python ] || python3 -m venv .venv || return 1
        .venv/bin/python -m pip install -q --disable-pip-version-check -r "$req" || return 1
        echo "$want" >"$stamp"
    fi

    install_go_modules || return 1

    # Apache Kafka, the reference the kafka-smoke step runs a few interop tests against; its
    # kafka-tools jar also runs Kafka's own tools and verification clients against Strata in the
    # interop step (test_kafka_tools.py, test_kafka_txn_copier.py).
    if ! command -v mvn >/dev/null 2>&1; then
        log "installing maven (apt)"
        apt_install maven || return 1
    fi
    scripts/kafka.sh install || return 1
    install_java_modules || return 1
    install_java_streams || return 1
    install_java_flink || return 1
    install_java_connect || return 1

    local js="tests/interop/js" jstamp="tests/interop/js/node_modules/.strata-lock"
    local jwant; jwant=$(hash_of "$js/package-lock.json")
    if [ ! -d "$js/node_modules" ] || [ "$(cat "$jstamp" 2>/dev/null)" != "$jwant" ]; then
        log "installing kafkajs (npm ci)"
        (cd "$js" && npm ci --no-audit --no-fund --loglevel=error) || return 1
        echo "$jwant" >"$jstamp"
    fi
}

# ---------------------------------------------------------------------------------------------
# Run
# ---------------------------------------------------------------------------------------------
FAILED=()
declare -A TOOK

step() { # step NAME COMMAND...
    local name=$1 t0; shift
    log "$name: $*"
    t0=$(now)
    "$@"
    local rc=$?
    TOOK[$name]=$(( $(now) - t0 ))
    if [ $rc -ne 0 ]; then
        FAILED+=("$name (exit $rc)")
        return 1
    fi
}

# In CI every build starts from a fresh clone: incremental compilation only adds work there, and
# full debuginfo in test binaries mostly adds link time (line tables keep backtraces useful).
if [ "${CI:-}" = true ]; then
    export CARGO_INCREMENTAL=0
    export CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-line-tables-only}
fi

T_START=$(now)
if [ "${STRATA_SKIP_INSTALL:-0}" != 1 ]; then
    step install install_deps
fi

STRATA_BIN="$ROOT/target/release/strata"
STRATA_WORDCOUNT="$ROOT/target/release/examples/wordcount"
export STRATA_BIN STRATA_WORDCOUNT
# The broker, and the exactly-once example the end-to-end tests drive (tests/tests/exactly_once_wordcount.rs).
build_release() {
    cargo build --release -p strata-broker --bin strata && cargo build --release -p strata-client --features fault-injection --example wordcount
}
BUILD_OK=1
step build build_release || BUILD_OK=0

# --no-fail-fast: one failing test binary must not hide the results of the others.
step cargo-test cargo test --workspace --no-fail-fast

# The API docs build without warnings (broken or private intra-doc links); the examples in
# them ran as doc tests above.
step docs env RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps -q

if [ "$BUILD_OK" = 1 ] && [ -x .venv/bin/python ]; then
    step interop .venv/bin/python -m pytest tests/interop -p no:cacheprovider -ra "$@"
else
    FAILED+=("interop (not run: build or install failed)")
fi

# A few fast interop tests against Apache Kafka itself (STRATA_TARGET=kafka, marker kafka_smoke):
# proves the suite's fixtures still drive the reference broker and that those expectations hold
# on it. The whole suite runs there by hand (docs/compatibility.md, "The suite on Apache Kafka").
if [ -x .venv/bin/python ] && scripts/kafka.sh classpath >/dev/null 2>&1; then
    step kafka-smoke env STRATA_TARGET=kafka .venv/bin/python -m pytest tests/interop -m kafka_smoke \
        -p no:cacheprovider -ra
else
    FAILED+=("kafka-smoke (not run: the venv or Apache Kafka is not installed)")
fi

# librdkafka's own test suite, its CI subset (tests/librdkafka/quick.txt; the whole of it is
# `scripts/librdkafka-suite.sh --full`), against one broker and then against a 3-node cluster
# with replication factor 3 (tests/librdkafka/cluster.txt: the same subset plus 0103, which
# needs a cluster). Builds librdkafka from the rdkafka-sys crate's source.
if [ "$BUILD_OK" = 1 ]; then
    step librdkafka scripts/librdkafka-suite.sh
    step librdkafka-cluster scripts/librdkafka-suite.sh --cluster
else
    FAILED+=("librdkafka (not run: build failed)")
fi

log "summary (total $(( $(now) - T_START ))s)"
for k in install build cargo-test docs interop kafka-smoke librdkafka librdkafka-cluster; do
    [ -n "${TOOK[$k]:-}" ] && printf '  %-18s %5ss\n' "$k" "${TOOK[$k]}"
done
if [ ${#FAILED[@]} -gt 0 ]; then
    printf 'FAILED: %s\n' "${FAILED[@]}"
    exit 1
fi
echo "all tests passed"
