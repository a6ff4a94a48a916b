#!/usr/bin/env bash
# Two strata binaries on the same workload, interleaved (A B A B ...), so the machine's
# drift hits both alike: each run starts a fresh broker on an empty data dir, produces
# RECORDS records of SIZE bytes (acks=1, one partition, strata-perf's wire engine), reads
# them back, and stops the broker; /usr/bin/time reports the CPU seconds (user+sys) of the
# whole run, broker included. Prints one line per run and the median of the per-pair
# ratios A/B.
#
# Usage: benches/before-after.sh A_STRATA B_STRATA [--pairs N] [--records N] [--size B]
#                                [-- extra strata-perf produce flags]
set -euo pipefail
A=$1 B=$2; shift 2
PAIRS=10 RECORDS=1000000 SIZE=1024 EXTRA=()
while [ $# -gt 0 ]; do
    case $1 in
        --pairs) PAIRS=$2; shift 2 ;;
        --records) RECORDS=$2; shift 2 ;;
        --size) SIZE=$2; shift 2 ;;
        --) shift; EXTRA=("$@"); break ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PERF=${PERF:-$ROOT/target/release/strata-perf}
[ -x "$PERF" ] || cargo build --release -p strata-benches --bin strata-perf
WORK=$(mktemp -d /tmp/strata-before-after.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# one STRATA: CPU seconds of a whole run.
one() {
    local port=$(( 20000 + RANDOM % 40000 ))
    rm -rf "$WORK/data"; mkdir -p "$WORK/data"
    /usr/bin/time -f '%U %S' -o "$WORK/time" bash -c '
        "$1" --override "listeners=PLAINTEXT://127.0.0.1:$2" --override "advertised.listeners=PLAINTEXT://127.0.0.1:$2" \
            --override "log.dirs=$3" --override metrics.listener= >"$3/../strata.log" 2>&1 &
        pid=$!
        for _ in $(seq 200); do (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null && break; sleep 0.05; done
        "$4" produce --bootstrap "127.0.0.1:$2" --topic b --partitions 1 --records "$5" --record-size "$6" \
            --acks 1 --engine wire --quiet "${@:7}" >/dev/null
        "$4" consume --bootstrap "127.0.0.1:$2" --topic b --records "$5" --quiet >/dev/null
        kill $pid; wait $pid || true' _ "$1" "$port" "$WORK/data" "$PERF" "$RECORDS" "$SIZE" "${EXTRA[@]}"
    awk '{ printf "%.3f", $1 + $2 }' "$WORK/time"
}

ratios=()
for i in $(seq "$PAIRS"); do
    a=$(one "$A"); b=$(one "$B")
    r=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.4f", a / b }')
    echo "pair $i: A ${a}s B ${b}s A/B $r"
    ratios+=("$r")
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "median A/B CPU over %d pairs: %.3f (min %.3f, max %.3f)\n", NR, m, v[1], v[NR] }'
