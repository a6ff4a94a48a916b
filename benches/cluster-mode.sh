# Sourced by compare.sh --cluster: the 3-broker workloads, measured in the same run as the
# single-node ones so the ratios hold while the machine drifts. Each run starts a fresh
# cluster of three combined nodes (process.roles=broker,controller) on empty data dirs:
#
#   cluster-produce   1 KiB records, acks=all, replication factor 3, min.insync.replicas 2,
#                     one partition, unthrottled (compared with the single-node acks=1 run);
#   cluster-latency   the same offered 50 MB/s (compared with the single-node latency run);
#   follower-cpu      the leader's CPU per GB ingested while two followers fetch every byte
#                     (RF 3, acks=1, offered FOLLOW_MBPS) ...
#   consumer-cpu      ... and while two consumers tail every byte instead (RF 1, acks=1, the
#                     same offered load): follower fetching should cost the leader no more
#                     than consumer fetching.
#
# The two CPU workloads run each node in a memory cgroup of its own capped at
# FOLLOW_PAGE_CACHE_MB (default 512; 0 leaves them uncapped; skipped where no memory
# cgroup can be made), so each broker writes into pages it recycles from its own page
# cache, as a long-running broker does. Uncapped, every new page comes from the VM's free
# pool, and on this VM (virtio_balloon free page reporting) a page the guest has not
# touched lately costs about ten times a recycled one to write: RF 3 on one machine writes
# three times as many bytes, so the leader's own appends reached cold pages three times as
# fast in the follower workload, and that, not the fetches, was most of the difference
# (the leader's `copy_folio_from_iter_atomic` 26 % of its samples against 4.5 % with
# consumers; 3.5 % capped).
#
# Uses from compare.sh: NICE, STRATA, PERF, WORK, RUNS, DURATION, PRODUCE_OPTS, LATENCY_OPTS,
# LATENCY_RATE, RECORD_SIZE, PAGE_CACHE_MB, free_port, cpu_ticks, cap_memory, calc, log, median.

# shellcheck source=scripts/cluster-ready.sh
. "$ROOT/scripts/cluster-ready.sh"

FOLLOW_MBPS=${FOLLOW_MBPS:-100}
FOLLOW_RATE=$(( FOLLOW_MBPS * 1000000 / RECORD_SIZE ))
FOLLOW_PAGE_CACHE_MB=${FOLLOW_PAGE_CACHE_MB:-512}
CLUSTER_PIDS=()
CLUSTER_PORTS=()
CLUSTER_CGROUPS=()

stop_cluster() {
    for p in "${CLUSTER_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${CLUSTER_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    CLUSTER_PIDS=()
    for g in "${CLUSTER_CGROUPS[@]}"; do rmdir "$g" 2>/dev/null || true; done
    CLUSTER_CGROUPS=()
    rm -rf "$WORK/cluster"
}

# start_cluster [PAGE-CACHE-MB]: three fresh combined nodes, each in a memory cgroup of
# that size when it is given and not 0.
start_cluster() {
    local cap=${1:-0}
    stop_cluster
    mkdir -p "$WORK/cluster"
    local ctl=() voters="" n
    CLUSTER_PORTS=()
    for n in 0 1 2; do
        ctl+=("$(free_port)")
        CLUSTER_PORTS+=("$(free_port)")
        voters="$voters${voters:+,}$n@127.0.0.1:${ctl[$n]}"
    done
    for n in 0 1 2; do
        "${NICE[@]}" "$STRATA" --override node.id=$n --override process.roles=broker,controller \
            --override "controller.quorum.voters=$voters" --override controller.listener.names=CONTROLLER \
            --override "listeners=PLAINTEXT://127.0.0.1:${CLUSTER_PORTS[$n]},CONTROLLER://127.0.0.1:${ctl[$n]}" \
            --override "advertised.listeners=PLAINTEXT://127.0.0.1:${CLUSTER_PORTS[$n]}" \
            --override "log.dirs=$WORK/cluster/node$n" >"$WORK/cluster/node$n.log" 2>&1 &
        CLUSTER_PIDS+=($!)
        if [ "$cap" != 0 ]; then
            local g
            g=$(cap_memory "$!" "$cap")
            if [ -n "$g" ]; then CLUSTER_CGROUPS+=("$g"); else log "no memory cgroup: node $n runs uncapped"; fi
        fi
    done
    for n in 0 1 2; do
        local up=0
        for _ in $(seq 400); do
            (exec 3<>"/dev/tcp/127.0.0.1/${CLUSTER_PORTS[$n]}") 2>/dev/null && { up=1; break; }
            sleep 0.05
        done
        [ "$up" = 1 ] || { cat "$WORK/cluster/node$n.log" >&2; echo "cluster node $n did not start" >&2; exit 1; }
    done
    if ! wait_for_brokers "$STRATA" 3 "${CLUSTER_PORTS[@]}"; then
        cat "$WORK"/cluster/node*.log >&2
        exit 1
    fi
    # strata-perf finds the leaders through the metadata of one bootstrap broker.
    CLUSTER_BOOTSTRAP="127.0.0.1:${CLUSTER_PORTS[0]}"
}

# leader_pid TOPIC: the pid of the node leading partition 0 of TOPIC (from the logs).
leader_pid() {
    local n
    for n in 0 1 2; do
        if grep -q "became leader topic=$1 partition=0 " "$WORK/cluster/node$n.log"; then
            echo "${CLUSTER_PIDS[$n]}"
            return
        fi
    done
    echo "no leader found for $1" >&2
    exit 1
}

# cluster_workload NAME TOPIC RF ACKS PERF-ARGS... : creates TOPIC (a short warm-up run, so
# followers are fetching before the measured one), then runs the measured produce and
# records the leader's CPU seconds with the summary in $WORK/NAME.jsonl.
cluster_workload() {
    local name=$1 topic=$2 rf=$3 acks=$4
    shift 4
    # Create the topic (min.insync.replicas is the broker default, 1; acks=all still waits for
    # every in-sync replica) and let the followers start fetching.
    "${NICE[@]}" "$PERF" produce --bootstrap "$CLUSTER_BOOTSTRAP" --topic "$topic" --partitions 1 \
        --replication-factor "$rf" --acks "$acks" --duration 1 --rate 1000 --record-size "$RECORD_SIZE" --quiet >/dev/null
    local pid cpu0 cpu1 out
    pid=$(leader_pid "$topic")
    cpu0=$(cpu_ticks "$pid")
    out=$("${NICE[@]}" "$PERF" produce --bootstrap "$CLUSTER_BOOTSTRAP" --topic "$topic" --partitions 1 \
        --replication-factor "$rf" --acks "$acks" --duration "$DURATION" --json --quiet "$@")
    cpu1=$(cpu_ticks "$pid")
    echo "$out" | jq -c --argjson cpu "$(calc "($cpu1 - $cpu0) / $CLK_TCK")" '. + {leader_cpu_s: $cpu}' >>"$WORK/$name.jsonl"
}

measure_cluster() {
    local run topic
    for run in $(seq "$RUNS"); do
        topic="cluster-$run-$$"
        start_cluster "$PAGE_CACHE_MB"
        log "[cluster] run $run/$RUNS: produce RF 3 acks=all (${DURATION}s unthrottled)"
        cluster_workload cluster-produce "$topic" 3 -1 --record-size "$RECORD_SIZE" --batch-size 131072 --linger-ms 5
        start_cluster "$PAGE_CACHE_MB"
        log "[cluster] run $run/$RUNS: produce RF 3 acks=all at ${LATENCY_MBPS} MB/s offered"
        cluster_workload cluster-latency "$topic-lat" 3 -1 --rate "$LATENCY_RATE" --record-size "$RECORD_SIZE" \
            --batch-size 65536 --linger-ms 1
        start_cluster "$FOLLOW_PAGE_CACHE_MB"
        log "[cluster] run $run/$RUNS: leader CPU with two followers (RF 3, acks=1, ${FOLLOW_MBPS} MB/s)"
        cluster_workload follower-cpu "$topic-f" 3 1 --rate "$FOLLOW_RATE" --record-size "$RECORD_SIZE" \
            --batch-size 65536 --linger-ms 1
        start_cluster "$FOLLOW_PAGE_CACHE_MB"
        log "[cluster] run $run/$RUNS: leader CPU with two tailing consumers (RF 1, acks=1, ${FOLLOW_MBPS} MB/s)"
        local t="$topic-c" c1 c2
        "${NICE[@]}" "$PERF" produce --bootstrap "$CLUSTER_BOOTSTRAP" --topic "$t" --partitions 1 \
            --replication-factor 1 --acks 1 --duration 1 --rate 1000 --record-size "$RECORD_SIZE" --quiet >/dev/null
        "${NICE[@]}" "$PERF" consume --bootstrap "$CLUSTER_BOOTSTRAP" --topic "$t" --from latest \
            --duration "$(( DURATION + 2 ))" --quiet >/dev/null 2>&1 &
        c1=$!
        "${NICE[@]}" "$PERF" consume --bootstrap "$CLUSTER_BOOTSTRAP" --topic "$t" --from latest \
            --duration "$(( DURATION + 2 ))" --quiet >/dev/null 2>&1 &
        c2=$!
        sleep 1
        cluster_workload consumer-cpu "$t" 1 1 --rate "$FOLLOW_RATE" --record-size "$RECORD_SIZE" \
            --batch-size 65536 --linger-ms 1
        wait "$c1" "$c2" 2>/dev/null || true
    done
    stop_cluster
}

report_cluster() {
    local single_p single_l
    single_p=$(med strata-produce .mb_per_sec)
    single_l=$(med strata-latency .latency_ms.p99)
    local cp cl fcpu ccpu
    cp=$(med cluster-produce .mb_per_sec)
    cl=$(med cluster-latency .latency_ms.p99)
    fcpu=$(med follower-cpu '.leader_cpu_s / (.bytes / 1e9)')
    ccpu=$(med consumer-cpu '.leader_cpu_s / (.bytes / 1e9)')
    echo
    echo "== 3-broker cluster (three combined nodes on this machine; medians of $RUNS)"
    row "figure (median)" "value" "ratio" "target" "runs (min..max)"
    row "produce RF 3 acks=all (MB/s)" "$cp" "$(calc "$cp / $single_p")" ">= 0.5 of single acks=1" \
        "$(spread cluster-produce .mb_per_sec)"
    row "  leader CPU per GB (s)" "$(med cluster-produce '.leader_cpu_s / (.bytes / 1e9)')" "" "" ""
    row "p99 acks=all at ${LATENCY_MBPS} MB/s (ms)" "$cl" "$(calc "$cl / $single_l")" "<= 2x single-node p99" \
        "$(spread cluster-latency .latency_ms.p99)"
    row "  achieved (MB/s)" "$(med cluster-latency .mb_per_sec)" "" "" ""
    row "leader CPU/GB, 2 followers (s)" "$fcpu" "$(calc "$fcpu / $ccpu")" "<= 1x with 2 consumers" \
        "$(spread follower-cpu '.leader_cpu_s / (.bytes / 1e9)')"
    row "leader CPU/GB, 2 consumers (s)" "$ccpu" "" "" "$(spread consumer-cpu '.leader_cpu_s / (.bytes / 1e9)')"
    echo "(the two CPU workloads: each node's memory capped at ${FOLLOW_PAGE_CACHE_MB} MB, 0 = uncapped; FOLLOW_PAGE_CACHE_MB)"
    echo "(the throughput and latency workloads, single node and cluster: ${PAGE_CACHE_MB} MB per broker, 0 = uncapped; --page-cache-mb)"
    CLUSTER_SUMMARY=$(jq -n --arg p "$cp" --arg l "$cl" --arg f "$fcpu" --arg c "$ccpu" \
        '{rf3_acks_all_mb_per_sec: ($p|tonumber), rf3_acks_all_p99_ms_at_50mbps: ($l|tonumber),
          leader_cpu_s_per_gb_two_followers: ($f|tonumber), leader_cpu_s_per_gb_two_consumers: ($c|tonumber)}')
}
