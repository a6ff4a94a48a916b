#!/usr/bin/env bash
# Measures Strata against this machine's limits, in one run:
#
#   1. the limits: loopback TCP bandwidth (strata-perf loopback), the latency floor
#      (p99 of a null server offered 50 MB/s over loopback, strata-perf loopback
#      --latency-at-mbps) and sequential write bandwidth to the data dir (dd with
#      conv=fdatasync), and the CPU floor: kernel CPU seconds per GB of buffered file
#      writes (dd) and of loopback TCP (sender and receiver);
#   2. a release strata broker on a temp dir, idle RSS with a 100-partition topic;
#   3. the workloads, each --runs times (medians reported), Strata restarted on an empty
#      data dir before each run and before the latency workload, so that none inherits
#      the dirty pages of the ones before it:
#        produce   1 KiB records, acks=1, one partition, unthrottled;
#        consume   read back what that produce run wrote;
#        latency   1 KiB records, acks=1, one partition, offered 50 MB/s (64 KiB
#                  batches, linger 1 ms); p99 measured from each record's scheduled
#                  send time;
#      sampling the broker's CPU seconds (/proc/<pid>/stat utime+stime) and peak RSS
#      (VmHWM, reset before each run through /proc/<pid>/clear_refs);
#   4. every figure printed with its ratio to the machine limit and its target.
#
# With --bootstrap host:port (repeatable) the same workloads also run against those
# brokers, printed side by side (no CPU or RSS figures for brokers not started here).
#
# --nice N runs every measurement (limits included) under `nice -n N`; a negative N
# (root only) shields a run from background builds on a shared machine.
#
# --sustained S adds one unthrottled produce run of S seconds on a fresh broker, long
# enough to outgrow the kernel's dirty-page budget: it shows the rate the disk
# sustains, printed with its ratio to the sequential write bandwidth.
#
# --cluster adds the 3-broker workloads (benches/cluster-mode.sh): RF 3 acks=all produce
# and its p99 at 50 MB/s against the single-node acks=1 figures of the same run, and the
# leader's CPU per GB with two followers against two tailing consumers.
#
# --page-cache-mb N runs every broker of the throughput and latency workloads (the single
# node and each cluster node) in a memory cgroup of N MB, so it writes into page-cache
# pages it recycles, as a long-running broker does. Uncapped, each run writes into pages
# fresh from the VM's free pool, which on this machine (virtio_balloon free page
# reporting) cost several times as much to write, and RF 3 writes three times the bytes:
# the uncapped ratio measures the host's page pool as much as the brokers.
#
# STRATA_BIN=path measures another strata binary (a before/after with the same script).
#
# Usage: benches/compare.sh [--runs N] [--duration S] [--bootstrap host:port]...
#                           [--data-dir DIR] [--no-build] [--json FILE] [--nice N]
#                           [--sustained S] [--cluster] [--page-cache-mb N]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

RUNS=3
DURATION=5
BOOTSTRAPS=()
DATA_PARENT=""
BUILD=1
JSON_OUT=""
NICE=()
SUSTAINED=0
CLUSTER=0
PAGE_CACHE_MB=0
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) RUNS=$2; shift 2 ;;
        --duration) DURATION=$2; shift 2 ;;
        --bootstrap) BOOTSTRAPS+=("$2"); shift 2 ;;
        --data-dir) DATA_PARENT=$2; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        --json) JSON_OUT=$2; shift 2 ;;
        --nice) NICE=(nice -n "$2"); shift 2 ;;
        --sustained) SUSTAINED=$2; shift 2 ;;
        --cluster) CLUSTER=1; shift ;;
        --page-cache-mb) PAGE_CACHE_MB=$2; shift 2 ;;
        -h|--help) sed -n '2,48p' "$0"; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

# Offered load of the latency workload: 50 MB/s of 1 KiB records.
LATENCY_MBPS=50
RECORD_SIZE=1024
LATENCY_RATE=$(( LATENCY_MBPS * 1000000 / RECORD_SIZE ))
# Producer settings of the throughput workload (Kafka's defaults except a larger batch,
# as throughput benchmarks of Kafka usually set).
PRODUCE_OPTS=(--record-size "$RECORD_SIZE" --acks 1 --partitions 1 --batch-size 131072 --linger-ms 5)
# Producer settings of the latency workload. Not Kafka's 16 KiB batches: with 5 requests
# in flight those cap a one-partition producer at 5 x 16 KiB per round trip, 50 MB/s
# needs round trips under 1.6 ms, and on a busy machine the queue then builds in the
# producer rather than in the broker. 64 KiB batches sealed after 1 ms leave room for
# round trips up to ~6 ms, so the p99 shows the broker.
LATENCY_OPTS=(--record-size "$RECORD_SIZE" --acks 1 --partitions 1 --batch-size 65536 --linger-ms 1)
FLOOR_MESSAGE_SIZE=65536

log() { printf '==> %s\n' "$*" >&2; }

if ! command -v jq >/dev/null 2>&1 || [ ! -x /usr/bin/time ]; then
    log "installing jq and time (apt)"
    apt-get update -qq && apt-get install -y -qq --no-install-recommends jq time >/dev/null
fi

if [ "$BUILD" = 1 ]; then
    log "building release strata and strata-perf"
    cargo build --release -q -p strata-broker --bin strata
    cargo build --release -q -p strata-benches --bin strata-perf
fi
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
STRATA=${STRATA_BIN:-$TARGET_DIR/release/strata}
PERF=$TARGET_DIR/release/strata-perf
[ -x "$STRATA" ] || { echo "missing $STRATA" >&2; exit 1; }
[ -x "$PERF" ] || { echo "missing $PERF" >&2; exit 1; }

WORK=$(mktemp -d "${DATA_PARENT:-${TMPDIR:-/tmp}}/strata-compare.XXXXXX")
BROKER_PID=""
BROKER_CGROUP=""
# stop_strata: stops the single broker (if running) and removes its memory cgroup.
stop_strata() {
    if [ -n "$BROKER_PID" ] && kill -0 "$BROKER_PID" 2>/dev/null; then
        kill "$BROKER_PID" 2>/dev/null || true
        wait "$BROKER_PID" 2>/dev/null || true
    fi
    if [ -n "$BROKER_CGROUP" ]; then rmdir "$BROKER_CGROUP" 2>/dev/null || true; fi
    BROKER_CGROUP=""
}
cleanup() {
    stop_strata
    rm -rf "$WORK"
}
trap '[ "$CLUSTER" = 1 ] && stop_cluster; cleanup' EXIT
# shellcheck source=benches/cluster-mode.sh
[ "$CLUSTER" = 1 ] && . "$ROOT/benches/cluster-mode.sh"

median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
# calc EXPR: evaluates with awk; 4 significant digits, whole numbers from 1000 up.
calc() { awk "BEGIN { v = $*; if (v >= 1000 || v <= -1000) printf \"%.0f\", v; else printf \"%.4g\", v }"; }
CLK_TCK=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# Milliseconds the process's threads have spent runnable but waiting for a CPU
# (schedstat field 2): how much the machine, not the broker, held a run back.
runq_wait_ms() { cat "/proc/$1"/task/*/schedstat 2>/dev/null | awk '{w += $2} END {printf "%d", w / 1e6}'; }
status_kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }

# ---------------------------------------------------------------------------------------
# Machine limits
# ---------------------------------------------------------------------------------------
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
log "measuring loopback TCP bandwidth"
LOOPBACK_SAMPLES=()
NET_CPU_SAMPLES=()
for _ in $(seq "$RUNS"); do
    json=$(/usr/bin/time -f '%S %U' -o "$WORK/time" "${NICE[@]}" "$PERF" loopback --duration 2 --json)
    LOOPBACK_SAMPLES+=("$(echo "$json" | jq .mb_per_sec)")
    # CPU seconds (sender and receiver together) per GB moved over loopback.
    NET_CPU_SAMPLES+=("$(calc "($(awk '{print $1 + $2}' "$WORK/time")) / ($(echo "$json" | jq .bytes) / 1e9)")")
done
LOOPBACK=$(printf '%s\n' "${LOOPBACK_SAMPLES[@]}" | median)
NET_CPU=$(printf '%s\n' "${NET_CPU_SAMPLES[@]}" | median)

log "measuring the loopback latency floor at ${LATENCY_MBPS} MB/s (null server, 64 KiB messages)"
FLOOR_SAMPLES=()
for _ in $(seq "$RUNS"); do
    FLOOR_SAMPLES+=("$("${NICE[@]}" "$PERF" loopback --latency-at-mbps "$LATENCY_MBPS" --message-size "$FLOOR_MESSAGE_SIZE" --duration 3 --json | jq .latency_ms.p99)")
done
FLOOR_P99=$(printf '%s\n' "${FLOOR_SAMPLES[@]}" | median)

log "measuring sequential write bandwidth of $WORK (dd conv=fdatasync, 512 MiB)"
DISK_SAMPLES=()
for _ in $(seq "$RUNS"); do
    out=$("${NICE[@]}" dd if=/dev/zero of="$WORK/dd.tmp" bs=1M count=512 conv=fdatasync 2>&1 | tail -1)
    rm -f "$WORK/dd.tmp"
    # "536870912 bytes (537 MB, 512 MiB) copied, 0.61 s, 880 MB/s"
    bytes=$(echo "$out" | awk '{print $1}')
    secs=$(echo "$out" | sed -E 's/.*copied, ([0-9.]+) s.*/\1/')
    DISK_SAMPLES+=("$(calc "$bytes / $secs / 1e6")")
done
DISK=$(printf '%s\n' "${DISK_SAMPLES[@]}" | median)

log "measuring the kernel CPU cost of buffered file writes (dd bs=128K, 512 MiB, no sync)"
WRITE_CPU_SAMPLES=()
for _ in $(seq "$RUNS"); do
    /usr/bin/time -f '%S %U' -o "$WORK/time" "${NICE[@]}" dd if=/dev/zero of="$WORK/dd.tmp" bs=128K count=4096 2>/dev/null
    rm -f "$WORK/dd.tmp"
    WRITE_CPU_SAMPLES+=("$(calc "($(awk '{print $1 + $2}' "$WORK/time")) / 0.536870912")")
done
WRITE_CPU=$(printf '%s\n' "${WRITE_CPU_SAMPLES[@]}" | median)
log "loopback ${LOOPBACK} MB/s, latency floor p99 ${FLOOR_P99} ms, disk ${DISK} MB/s"

# ---------------------------------------------------------------------------------------
# Broker under test
# ---------------------------------------------------------------------------------------
free_port() {
    local p
    while :; do
        p=$(( 20000 + RANDOM % 40000 ))
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
    done
}

# cap_memory PID MB: moves PID into a new memory cgroup limited to MB (cgroup v2 or v1);
# prints the cgroup's directory, or nothing where none can be made.
cap_memory() {
    local pid=$1 mb=$2 g
    if [ -w /sys/fs/cgroup/cgroup.subtree_control ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
        g=/sys/fs/cgroup/strata-bench-$$-$pid
        mkdir "$g" 2>/dev/null && echo "${mb}M" >"$g/memory.max" && echo "$pid" >"$g/cgroup.procs" && { echo "$g"; return; }
    elif [ -d /sys/fs/cgroup/memory ]; then
        g=/sys/fs/cgroup/memory/strata-bench-$$-$pid
        mkdir "$g" 2>/dev/null && echo "${mb}M" >"$g/memory.limit_in_bytes" && echo "$pid" >"$g/cgroup.procs" && { echo "$g"; return; }
    fi
    # Not made, or made but not usable (compare.sh runs under set -e: nothing here may fail).
    if [ -n "${g:-}" ]; then rmdir "$g" 2>/dev/null || true; fi
    return 0
}

start_strata() {
    PORT=$(free_port)
    mkdir -p "$WORK/data"
    "${NICE[@]}" "$STRATA" --override node.id=0 \
        --override "listeners=PLAINTEXT://127.0.0.1:$PORT" \
        --override "advertised.listeners=PLAINTEXT://127.0.0.1:$PORT" \
        --override "log.dirs=$WORK/data" >"$WORK/strata.log" 2>&1 &
    BROKER_PID=$!
    if [ "$PAGE_CACHE_MB" != 0 ]; then
        BROKER_CGROUP=$(cap_memory "$BROKER_PID" "$PAGE_CACHE_MB")
        [ -n "$BROKER_CGROUP" ] || log "no memory cgroup: the broker runs uncapped"
    fi
    for _ in $(seq 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && return 0
        kill -0 "$BROKER_PID" 2>/dev/null || { cat "$WORK/strata.log" >&2; exit 1; }
        sleep 0.05
    done
    echo "strata did not listen on $PORT" >&2
    exit 1
}

# run_workload NAME BOOTSTRAP PID ARGS... : runs strata-perf, appending one JSON line
# (the summary plus broker cpu_s and peak_rss_kb when PID is set) to $WORK/NAME.jsonl.
run_workload() {
    local name=$1 bootstrap=$2 pid=$3
    shift 3
    local cpu0=0 cpu1=0 hwm=0 wait0=0 wait1=0
    if [ -n "$pid" ]; then
        echo 5 >"/proc/$pid/clear_refs" 2>/dev/null || true
        cpu0=$(cpu_ticks "$pid")
        wait0=$(runq_wait_ms "$pid")
    fi
    local out
    out=$("${NICE[@]}" "$PERF" "$@" --bootstrap "$bootstrap" --json --quiet) || {
        echo "strata-perf $* failed against $bootstrap" >&2
        return 1
    }
    if [ -n "$pid" ]; then
        cpu1=$(cpu_ticks "$pid")
        wait1=$(runq_wait_ms "$pid")
        hwm=$(status_kb "$pid" VmHWM)
    fi
    echo "$out" | jq -c --argjson cpu "$(calc "($cpu1 - $cpu0) / $CLK_TCK")" --argjson hwm "$hwm" \
        --argjson wait "$(calc "($wait1 - $wait0) / 1000")" \
        '. + {broker_cpu_s: $cpu, broker_peak_rss_kb: $hwm, broker_runq_wait_s: $wait}' >>"$WORK/$name.jsonl"
}

# restart_strata: a fresh broker on an empty data dir. Removing the previous run's
# files also drops their dirty pages, so every run starts with the same page-cache
# state: otherwise each run inherits the gigabytes the previous ones wrote and, once
# dirty data passes the kernel's background threshold (dirty_background_ratio), its
# writes are throttled to the disk's bandwidth and the runs stop being comparable.
restart_strata() {
    stop_strata
    rm -rf "$WORK/data"
    start_strata
    STRATA_BOOTSTRAP="127.0.0.1:$PORT"
}

# measure LABEL BOOTSTRAP PID: all workloads, $RUNS times. Strata restarts on an empty
# data dir before each run after the first and before each latency workload (see
# restart_strata).
measure() {
    local label=$1 bootstrap=$2 pid=$3
    for run in $(seq "$RUNS"); do
        if [ "$label" = strata ] && [ "$run" -gt 1 ]; then
            restart_strata
            bootstrap=$STRATA_BOOTSTRAP
            pid=$BROKER_PID
        fi
        local topic="compare-${label}-${run}-$$"
        log "[$label] run $run/$RUNS: produce (${DURATION}s unthrottled)"
        run_workload "$label-produce" "$bootstrap" "$pid" produce --topic "$topic" \
            --duration "$DURATION" "${PRODUCE_OPTS[@]}"
        log "[$label] run $run/$RUNS: consume"
        run_workload "$label-consume" "$bootstrap" "$pid" consume --topic "$topic"
        if [ "$label" = strata ]; then
            # The throughput run's gigabytes would still be under writeback.
            restart_strata
            bootstrap=$STRATA_BOOTSTRAP
            pid=$BROKER_PID
        fi
        log "[$label] run $run/$RUNS: produce latency at ${LATENCY_MBPS} MB/s offered"
        run_workload "$label-latency" "$bootstrap" "$pid" produce --topic "$topic-lat" \
            --duration "$DURATION" --rate "$LATENCY_RATE" "${LATENCY_OPTS[@]}"
    done
}

# med LABEL-WORKLOAD JQ-EXPR: median of that expression over the runs, 4 significant
# digits; spread LABEL-WORKLOAD JQ-EXPR: "min..max" of it.
med() { calc "$(jq -r "$2" "$WORK/$1.jsonl" | median)"; }
spread() { jq -r "$2" "$WORK/$1.jsonl" | sort -g | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.4g..%.4g", lo, hi}'; }

log "starting strata (release) on a temp dir"
start_strata
STRATA_BOOTSTRAP="127.0.0.1:$PORT"
sleep 1
RSS_START_KB=$(status_kb "$BROKER_PID" VmRSS)
log "creating a 100-partition topic for the idle RSS figure"
"$PERF" produce --bootstrap "$STRATA_BOOTSTRAP" --topic idle-100 --partitions 100 \
    --records 100 --record-size 100 --key-distribution sequential --quiet >/dev/null
sleep 2
RSS_IDLE_KB=$(status_kb "$BROKER_PID" VmRSS)

LABELS=(strata)
measure strata "$STRATA_BOOTSTRAP" "$BROKER_PID"
if [ "$SUSTAINED" -gt 0 ]; then
    restart_strata
    log "[strata] sustained produce (${SUSTAINED}s unthrottled)"
    run_workload "strata-sustained" "$STRATA_BOOTSTRAP" "$BROKER_PID" produce \
        --topic "compare-sustained-$$" --duration "$SUSTAINED" "${PRODUCE_OPTS[@]}"
fi
if [ "$CLUSTER" = 1 ]; then
    stop_strata
    rm -rf "$WORK/data"
    measure_cluster
fi
i=0
for b in "${BOOTSTRAPS[@]}"; do
    i=$((i + 1))
    LABELS+=("other$i")
    measure "other$i" "$b" ""
done

# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------
row() { printf '%-34s %10s %8s   %-22s %s\n' "$@"; }
echo
echo "Machine: $(nproc) cores, loopback $(calc "$LOOPBACK") MB/s, sequential write $(calc "$DISK") MB/s (medians of $RUNS)"
echo "CPU floor: buffered file writes cost $(calc "$WRITE_CPU") core-s/GB; loopback TCP costs $(calc "$NET_CPU") core-s/GB (sender + receiver)"
echo "Latency floor: a null server offered ${LATENCY_MBPS} MB/s in 64 KiB messages over loopback answers with p99 $(calc "$FLOOR_P99") ms"
echo "Load average (1, 5, 15 min) at start: $LOAD_START; at end: $(cut -d' ' -f1-3 /proc/loadavg)"
[ ${#NICE[@]} -gt 0 ] && echo "Priority: every measurement ran under '${NICE[*]}'"
echo "Workloads: ${RECORD_SIZE}-byte records, acks=1, one partition, ${DURATION}s per run, $RUNS runs, medians"
SUMMARY="{}"
for label in "${LABELS[@]}"; do
    if [ "$label" = strata ]; then name="strata ($STRATA_BOOTSTRAP)"; else
        name="${BOOTSTRAPS[$(( ${label#other} - 1 ))]}"; fi
    p_mbps=$(med "$label-produce" .mb_per_sec)
    p_rps=$(med "$label-produce" .records_per_sec)
    c_mbps=$(med "$label-consume" .mb_per_sec)
    l_p99=$(med "$label-latency" .latency_ms.p99)
    l_p50=$(med "$label-latency" .latency_ms.p50)
    l_mbps=$(med "$label-latency" .mb_per_sec)
    echo
    echo "== $name"
    row "figure (median)" "value" "ratio" "target" "runs (min..max)"
    row "produce throughput (MB/s)" "$p_mbps" "$(calc "$p_mbps / $LOOPBACK")" ">= 0.40 of loopback" \
        "$(spread "$label-produce" .mb_per_sec)"
    row "produce throughput (records/s)" "$p_rps" "" "" ""
    row "consume throughput (MB/s)" "$c_mbps" "$(calc "$c_mbps / $LOOPBACK")" ">= 0.60 of loopback" \
        "$(spread "$label-consume" .mb_per_sec)"
    row "latency run achieved (MB/s)" "$l_mbps" "$(calc "$l_mbps / $LATENCY_MBPS")" "of ${LATENCY_MBPS} MB/s offered" ""
    row "produce p50 at ${LATENCY_MBPS} MB/s (ms)" "$l_p50" "" "" "$(spread "$label-latency" .latency_ms.p50)"
    row "produce p99 at ${LATENCY_MBPS} MB/s (ms)" "$l_p99" "$(calc "$l_p99 / 5")" "<= 5 ms" \
        "$(spread "$label-latency" .latency_ms.p99)"
    row "  p99 over the null-server floor" "$(calc "$l_p99 / $FLOOR_P99")" "" "" ""
    entry=$(jq -n --arg p "$p_mbps" --arg c "$c_mbps" --arg l "$l_p99" \
        '{produce_mb_per_sec: ($p|tonumber), consume_mb_per_sec: ($c|tonumber), produce_p99_ms_at_50mbps: ($l|tonumber)}')
    if [ "$label" = strata ]; then
        # CPU per GB: broker CPU seconds over the GB of keys and values moved.
        p_cpu=$(med "$label-produce" '.broker_cpu_s / (.bytes / 1e9)')
        c_cpu=$(med "$label-consume" '.broker_cpu_s / (.bytes / 1e9)')
        p_rss=$(med "$label-produce" '.broker_peak_rss_kb / 1024')
        c_rss=$(med "$label-consume" '.broker_peak_rss_kb / 1024')
        l_rss=$(med "$label-latency" '.broker_peak_rss_kb / 1024')
        row "broker CPU per GB ingested (s)" "$p_cpu" "$(calc "$p_cpu / 0.5")" "<= 0.5 core-s/GB" \
            "$(spread "$label-produce" '.broker_cpu_s / (.bytes / 1e9)')"
        row "  over the write + receive floor" "$(calc "$p_cpu / ($WRITE_CPU + $NET_CPU / 2)")" "" "" ""
        row "broker waiting for a CPU (produce)" "$(med "$label-produce" '.broker_runq_wait_s / .broker_cpu_s')" "" \
            "x its CPU time" "$(spread "$label-produce" '.broker_runq_wait_s / .broker_cpu_s')"
        row "broker CPU per GB served (s)" "$c_cpu" "" "" "$(spread "$label-consume" '.broker_cpu_s / (.bytes / 1e9)')"
        row "RSS at start (MiB)" "$(calc "$RSS_START_KB / 1024")" "" "" ""
        row "RSS idle, 100 partitions (MiB)" "$(calc "$RSS_IDLE_KB / 1024")" "$(calc "$RSS_IDLE_KB / 1024 / 20")" "<= 20 MiB" ""
        row "peak RSS produce (MiB)" "$p_rss" "$(calc "$p_rss / 128")" "<= 128 MiB" ""
        row "peak RSS consume (MiB)" "$c_rss" "$(calc "$c_rss / 128")" "<= 128 MiB" ""
        row "peak RSS latency run (MiB)" "$l_rss" "$(calc "$l_rss / 128")" "<= 128 MiB" ""
        if [ "$SUSTAINED" -gt 0 ]; then
            s_mbps=$(med "$label-sustained" .mb_per_sec)
            row "sustained produce, ${SUSTAINED}s (MB/s)" "$s_mbps" "$(calc "$s_mbps / $DISK")" "of disk write" \
                "$(calc "$s_mbps / $LOOPBACK") of loopback"
            entry=$(echo "$entry" | jq --arg s "$s_mbps" '. + {sustained_produce_mb_per_sec: ($s|tonumber)}')
        fi
        entry=$(echo "$entry" | jq --arg a "$p_cpu" --arg b "$c_cpu" --arg i "$RSS_IDLE_KB" \
            --arg r "$p_rss" --arg s "$c_rss" \
            '. + {cpu_s_per_gb_ingested: ($a|tonumber), cpu_s_per_gb_served: ($b|tonumber),
                  idle_rss_mib_100_partitions: (($i|tonumber)/1024),
                  peak_rss_mib_produce: ($r|tonumber), peak_rss_mib_consume: ($s|tonumber)}')
    fi
    SUMMARY=$(echo "$SUMMARY" | jq --arg k "$name" --argjson v "$entry" '. + {($k): $v}')
done
CLUSTER_SUMMARY="null"
[ "$CLUSTER" = 1 ] && report_cluster
if [ -n "$JSON_OUT" ]; then
    runs=$(for f in "$WORK"/*.jsonl; do jq -c --arg w "$(basename "$f" .jsonl)" '{workload: $w} + .' "$f"; done | jq -s .)
    echo "$SUMMARY" | jq --arg l "$LOOPBACK" --arg d "$DISK" --argjson runs "$runs" \
        --arg f "$FLOOR_P99" \
        --arg w "$WRITE_CPU" --arg n "$NET_CPU" --argjson cl "$CLUSTER_SUMMARY" \
        '{loopback_mb_per_sec: ($l|tonumber), loopback_p99_ms_at_50mbps: ($f|tonumber),
          write_cpu_s_per_gb: ($w|tonumber), loopback_cpu_s_per_gb: ($n|tonumber), disk_write_mb_per_sec: ($d|tonumber), brokers: ., cluster: $cl, runs: $runs}' >"$JSON_OUT"
    log "wrote $JSON_OUT"
fi
