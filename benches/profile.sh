#!/usr/bin/env bash
# Profiles a release strata broker under one strata-perf workload with
# `perf record -e cpu-clock` (DWARF call graphs: release builds keep no frame pointers)
# and prints where the broker's CPU goes: the hottest functions by self time, then the
# broker's own frames by inclusive time. Installs linux-perf with apt when perf is
# missing. The broker runs on a temp dir, removed at the end with the perf data
# unless --keep DIR is given.
#
# Usage: benches/profile.sh [produce|consume|latency] [--duration S] [--keep DIR] [--no-build]
#   produce  1 KiB records, acks=1, one partition, unthrottled, 128 KiB batches
#   consume  reads back what a produce run of the same duration wrote
#   latency  1 KiB records offered at 50 MB/s (64 KiB batches, linger 1 ms)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

WORKLOAD=produce
DURATION=4
KEEP=""
BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
        produce|consume|latency) WORKLOAD=$1; shift ;;
        --duration) DURATION=$2; shift 2 ;;
        --keep) KEEP=$2; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done

log() { printf '==> %s\n' "$*" >&2; }

if ! command -v perf >/dev/null 2>&1; then
    log "installing linux-perf (apt)"
    apt-get update -qq && apt-get install -y -qq --no-install-recommends linux-perf >/dev/null
fi
if [ "$BUILD" = 1 ]; then
    cargo build --release -q -p strata-broker --bin strata
    cargo build --release -q -p strata-benches --bin strata-perf
fi
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
STRATA=$TARGET_DIR/release/strata
PERF=$TARGET_DIR/release/strata-perf

WORK=$(mktemp -d "${TMPDIR:-/tmp}/strata-profile.XXXXXX")
BROKER_PID=""
cleanup() {
    if [ -n "$BROKER_PID" ] && kill -0 "$BROKER_PID" 2>/dev/null; then
        kill "$BROKER_PID" 2>/dev/null || true
        wait "$BROKER_PID" 2>/dev/null || true
    fi
    if [ -n "$KEEP" ]; then
        mkdir -p "$KEEP"
        cp "$WORK"/perf.data "$WORK"/strata.log "$KEEP"/ 2>/dev/null || true
        log "kept perf.data and the broker log in $KEEP"
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

PORT=$(( 20000 + RANDOM % 40000 ))
"$STRATA" --override node.id=0 \
    --override "listeners=PLAINTEXT://127.0.0.1:$PORT" \
    --override "advertised.listeners=PLAINTEXT://127.0.0.1:$PORT" \
    --override "log.dirs=$WORK/data" >"$WORK/strata.log" 2>&1 &
BROKER_PID=$!
for _ in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
    sleep 0.05
done
BOOT=127.0.0.1:$PORT
PRODUCE=(produce --bootstrap "$BOOT" --topic prof --duration "$DURATION" --record-size 1024
    --acks 1 --partitions 1 --batch-size 131072 --linger-ms 5 --quiet)
case "$WORKLOAD" in
    produce) RUN=("${PRODUCE[@]}") ;;
    consume)
        log "writing the data to read back"
        "$PERF" "${PRODUCE[@]}" >/dev/null
        RUN=(consume --bootstrap "$BOOT" --topic prof --quiet) ;;
    latency) RUN=(produce --bootstrap "$BOOT" --topic prof-lat --duration "$DURATION" --rate 48828
        --record-size 1024 --acks 1 --partitions 1 --batch-size 65536 --linger-ms 1 --quiet) ;;
esac

log "recording the broker (pid $BROKER_PID) during: strata-perf ${RUN[*]}"
perf record -q -e cpu-clock --call-graph dwarf,16384 -F 999 -p "$BROKER_PID" -o "$WORK/perf.data" &
PERF_PID=$!
sleep 0.3
"$PERF" "${RUN[@]}"
kill -INT "$PERF_PID"
wait "$PERF_PID" 2>/dev/null || true

echo
echo "== hottest functions (self time, % of broker samples)"
perf report -i "$WORK/perf.data" --no-children --sort dso,symbol --stdio -g none 2>/dev/null \
    | grep '%' | head -25 | cut -c1-150 || true  # head closes the pipe early
echo
echo "== broker frames by inclusive time"
perf report -i "$WORK/perf.data" --children --sort symbol --stdio -g none 2>/dev/null \
    | grep '%' | grep -E 'strata_|__libc_(write|recv|pread)|sendto|epoll_wait|memset|memmove' \
    | grep -v 'tokio::' | head -30 | cut -c1-150 || true
