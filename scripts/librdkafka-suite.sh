#!/usr/bin/env bash
# librdkafka's own test suite (the C client's tests/, run by its test-runner) against a
# strata broker this script starts on loopback with num.partitions=4 (the suite's default
# scenario expects auto-created topics of 4 partitions) and Kafka's
# `group.initial.rebalance.delay.ms` (3 s), which lets a group test's members join together
# (0102, 0113 and 0118 count on it).
#
# The source is librdkafka as bundled in the rdkafka-sys crate from crates.io, fetched with
# cargo into the local registry through a throwaway manifest under target/, copied into
# target/librdkafka-suite/ and built there (libs and tests; about 1-2 minutes on 2 cores the
# first time). Nothing of it is committed. Build dependencies come from apt when missing.
#
#   scripts/librdkafka-suite.sh              the CI subset (tests/librdkafka/quick.txt), a few minutes
#   scripts/librdkafka-suite.sh --full       every test Strata is expected to pass
#                                            (tests/librdkafka/full.txt), 30-50 minutes
#   scripts/librdkafka-suite.sh 0011 0030    just these test numbers
#   scripts/librdkafka-suite.sh --cluster    against three combined nodes (process.roles=
#                                            broker,controller) whose auto-created and
#                                            internal topics have replication factor 3
#                                            (__transaction_state min.insync.replicas 2),
#                                            each in a rack of its own (broker.rack=
#                                            RACK<node id>) with the rack-aware replica
#                                            selector: the CI subset plus the tests that
#                                            need a cluster (tests/librdkafka/cluster.txt),
#                                            or the numbers given
#
# Each test number runs in a test-runner of its own (`TESTS=NNNN test-runner -p1 -E -L`,
# plus -Q, quick mode, unless its list entry says `full`), under a timeout (the seconds in
# its list entry, else LIBRDKAFKA_SUITE_TIMEOUT). One line per test (PASS/FAIL/SKIP,
# seconds), then a summary; logs stay in target/librdkafka-suite/runs/. Exit status 0 when
# no test failed (a test that skipped itself exits 0 too; its SKIP line gives the reason).
#
# Env: STRATA_BIN (default target/release/strata), RDKAFKA_SYS_VERSION (default 4.10.0,
# librdkafka 2.12.1), LIBRDKAFKA_SUITE_TIMEOUT (per test, default 300 s),
# LIBRDKAFKA_SUITE_DELAY_MS (`group.initial.rebalance.delay.ms`, default 3000).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
LIST=tests/librdkafka/quick.txt
# Kafka's 3 s: with none, two consumers created together may join one after the other, and
# tests that count on one rebalance for both (0118 in the quick list) fail now and then.
DELAY=${LIBRDKAFKA_SUITE_DELAY_MS:-3000}
ONLY=()
CLUSTER=0
while [ $# -gt 0 ]; do
    case "$1" in
        --full) LIST=tests/librdkafka/full.txt; shift ;;
        --cluster) CLUSTER=1; LIST=tests/librdkafka/cluster.txt; shift ;;
        --quick) LIST=tests/librdkafka/quick.txt; shift ;;
        -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
        [0-9][0-9][0-9][0-9]) ONLY+=("$1"); shift ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done

log() { printf '==> %s\n' "$*" >&2; }
VERSION=${RDKAFKA_SYS_VERSION:-4.10.0}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=$TARGET_DIR/librdkafka-suite
SRC=$WORK/librdkafka
RUNNER=$SRC/tests/test-runner
STRATA=${STRATA_BIN:-$TARGET_DIR/release/strata}
# shellcheck source=scripts/cluster-ready.sh
. "$ROOT/scripts/cluster-ready.sh"
TIMEOUT=${LIBRDKAFKA_SUITE_TIMEOUT:-300}

install_build_deps() {
    local missing=()
    for pkg in zlib1g-dev libzstd-dev liblz4-dev rapidjson-dev; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    command -v g++ >/dev/null 2>&1 || missing+=(g++)
    command -v make >/dev/null 2>&1 || missing+=(make)
    command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing ${missing[*]} (apt)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
}

# The librdkafka directory of the registry copy of rdkafka-sys, fetched if missing.
source_dir() {
    local fetch=$WORK/fetch found
    mkdir -p "$fetch/src"
    printf '[package]\nname = "librdkafka-suite-fetch"\nversion = "0.0.0"\nedition = "2021"\npublish = false\n\n# Its own workspace: it lives under the target dir of the Strata workspace.\n[workspace]\n\n[dependencies]\nrdkafka-sys = "=%s"\n' \
        "$VERSION" >"$fetch/Cargo.toml"
    [ -f "$fetch/src/main.rs" ] || echo 'fn main() {}' >"$fetch/src/main.rs"
    cargo fetch --manifest-path "$fetch/Cargo.toml" >"$fetch/fetch.log" 2>&1 || cat "$fetch/fetch.log" >&2
    found=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/rdkafka-sys-"$VERSION"+*/librdkafka 2>/dev/null | head -1)
    [ -d "$found/tests" ] || { echo "rdkafka-sys $VERSION has no librdkafka/tests" >&2; exit 2; }
    echo "$found"
}

build() {
    local from stamp
    from=$(source_dir)
    stamp="$from configure --disable-ssl --disable-gssapi --disable-curl"
    if [ -x "$RUNNER" ] && [ "$(cat "$WORK/.built" 2>/dev/null)" = "$stamp" ]; then
        return
    fi
    install_build_deps
    log "building librdkafka and its test-runner from $from"
    rm -rf "$SRC"
    mkdir -p "$WORK"
    cp -r "$from" "$SRC"
    (cd "$SRC" && ./configure --disable-ssl --disable-gssapi --disable-curl --no-download >"$WORK/configure.log" 2>&1 \
        && make -j"$(nproc)" libs >"$WORK/make.log" 2>&1 \
        && make -j"$(nproc)" -C tests build >>"$WORK/make.log" 2>&1) \
        || { tail -30 "$WORK/make.log" "$WORK/configure.log" >&2 2>/dev/null; exit 2; }
    echo "$stamp" >"$WORK/.built"
}

build
[ -x "$STRATA" ] || { echo "no strata binary at $STRATA (cargo build --release -p strata-broker)" >&2; exit 2; }

RUN=$WORK/runs/$(date +%Y%m%d-%H%M%S)-$$
mkdir -p "$RUN"
BROKERS=()
trap 'for b in "${BROKERS[@]}"; do kill "$b" 2>/dev/null; done; for b in "${BROKERS[@]}"; do wait "$b" 2>/dev/null; done; true' EXIT
free_port() { echo $(( 20000 + RANDOM % 40000 )); }
wait_listening() {
    for _ in $(seq 400); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done
    echo "no broker listening on $1; logs in $RUN" >&2
    exit 1
}
# Settings of every broker: the suite's auto-created topics have 4 partitions.
COMMON=(--override num.partitions=4 --override metrics.listener= --override "group.initial.rebalance.delay.ms=$DELAY")
if [ "$CLUSTER" = 0 ]; then
    PORT=$(free_port)
    "$STRATA" --override "listeners=PLAINTEXT://127.0.0.1:$PORT" --override "advertised.listeners=PLAINTEXT://127.0.0.1:$PORT" \
        --override "log.dirs=$RUN/data" "${COMMON[@]}" >"$RUN/strata.log" 2>&1 &
    BROKERS+=($!)
    wait_listening "$PORT"
    BOOTSTRAP=127.0.0.1:$PORT
else
    # Each node in a rack of its own, named as 0101 (fetch from follower) expects: it
    # gives its consumer the client.rack RACK<id> of a follower and checks that the bytes
    # came from that follower, which Kafka's rack-aware selector picks.
    SELECTOR=org.apache.kafka.common.replica.RackAwareReplicaSelector
    voters="" BOOTSTRAP="" PORTS=() CTLS=()
    for n in 0 1 2; do
        PORTS+=("$(free_port)")
        CTLS+=("$(free_port)")
        voters="$voters${voters:+,}$n@127.0.0.1:${CTLS[$n]}"
        BOOTSTRAP="$BOOTSTRAP${BOOTSTRAP:+,}127.0.0.1:${PORTS[$n]}"
    done
    for n in 0 1 2; do
        "$STRATA" --override node.id=$n --override process.roles=broker,controller \
            --override "controller.quorum.voters=$voters" --override controller.listener.names=CONTROLLER \
            --override "listeners=PLAINTEXT://127.0.0.1:${PORTS[$n]},CONTROLLER://127.0.0.1:${CTLS[$n]}" \
            --override "advertised.listeners=PLAINTEXT://127.0.0.1:${PORTS[$n]}" \
            --override "log.dirs=$RUN/data$n" "${COMMON[@]}" \
            --override "broker.rack=RACK$n" --override "replica.selector.class=$SELECTOR" \
            --override default.replication.factor=3 \
            --override offsets.topic.replication.factor=3 --override transaction.state.log.replication.factor=3 \
            --override transaction.state.log.min.isr=2 >"$RUN/strata$n.log" 2>&1 &
        BROKERS+=($!)
    done
    for n in 0 1 2; do wait_listening "${PORTS[$n]}"; done
    # 0101 creates a topic of replication factor 3 first thing.
    wait_for_brokers "$STRATA" 3 "${PORTS[@]}" || { echo "logs in $RUN" >&2; exit 1; }
fi
printf 'bootstrap.servers=%s\nbroker.address.family=v4\ntest.topic.prefix=strata_%s\n' \
    "$BOOTSTRAP" "$(date +%s)" >"$RUN/test.conf"

# "NNNN [full]" lines of the list (comments after #), or the numbers given.
if [ ${#ONLY[@]} -gt 0 ]; then
    entries=$(for t in "${ONLY[@]}"; do grep -E "^$t( |$)" tests/librdkafka/full.txt || echo "$t"; done | sed 's/#.*//')
else
    entries=$(sed 's/#.*//' "$LIST" | grep -E '^[0-9]{4}')
fi
pass=0 fail=0 skip=0 failed=()
start=$(date +%s)
while read -r test opts; do
    [ -n "$test" ] || continue
    flags="-p1 -E -L -Q" limit=$TIMEOUT
    for o in $opts; do
        case $o in
            full) flags="-p1 -E -L" ;;
            [0-9]*) limit=$o ;;
        esac
    done
    t0=$(date +%s)
    set +e
    (cd "$SRC/tests" && env -u CI TESTS="$test" TEST_KAFKA_VERSION=3.9.0 RDKAFKA_TEST_CONF="$RUN/test.conf" \
        LD_LIBRARY_PATH="$SRC/src:$SRC/src-cpp" timeout -k 10 "$limit" ./test-runner $flags) >"$RUN/$test.log" 2>&1
    rc=$?
    set -e
    secs=$(( $(date +%s) - t0 ))
    # test-runner exits 0 for a test that skipped itself (Test::Skip: a missing feature or
    # setting it checks for), which is no pass: report it apart, with its reason.
    if [ $rc = 0 ] && grep -aq "Test ${test}_[^ ]* SKIPPED" "$RUN/$test.log"; then
        skip=$((skip + 1))
        echo "SKIP $test (${secs}s): $(grep -a -m1 -o 'SKIPPING TEST: .*' "$RUN/$test.log" | cut -c16-200)"
    elif [ $rc = 0 ]; then
        pass=$((pass + 1)); echo "PASS $test (${secs}s)"
    else
        fail=$((fail + 1)); failed+=("$test")
        echo "FAIL $test (${secs}s, rc $rc): $(grep -m1 -E 'FAIL|Test failure' "$RUN/$test.log" | cut -c1-200)"
    fi
done <<<"$entries"
echo "librdkafka suite: $pass passed, $fail failed, $skip skipped in $(( $(date +%s) - start ))s (logs in $RUN)"
for b in "${BROKERS[@]}"; do
    if ! kill -0 "$b" 2>/dev/null; then
        echo "a broker died during the run; the logs: $RUN/strata*.log" >&2
        exit 1
    fi
done
[ $fail = 0 ] || { echo "failed: ${failed[*]}" >&2; exit 1; }
