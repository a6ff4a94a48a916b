#!/usr/bin/env bash
# The client producer against the hand-written one and librdkafka's: strata-perf
# produce with --engine client, with --engine wire, and rdkafka_performance, on the
# same workload (N records of B bytes, acks=1, one partition, linger.ms=5,
# batch.size=131072), interleaved: every repetition runs each producer once per record
# size, in an order rotated from one repetition to the next, each against a fresh
# broker on an emptied data dir (so no run inherits another's dirty pages). Prints
# one line per run, then per size the median records/s and MB/s of each producer,
# the producer process's CPU (user+sys) per million records, and the medians of the
# same-repetition ratios client/wire and client/rdkafka.
#
# librdkafka runs twice: `rdkafka` with its own default of 1,000,000 requests in flight
# per connection, and `rdkafka-5` with 5, the limit strata-perf gives both engines
# (--max-in-flight) and Kafka's default, so that one compares like with like.
#
# Usage: benches/engines.sh [--reps N] [--sizes "1024 100"] [--records-1024 N]
#                           [--records-100 N] [--no-build]
# Needs release builds of strata and strata-perf (built unless --no-build; STRATA_BIN
# overrides the broker) and rdkafka_performance (benches/rdkafka-perf.sh --build-only;
# skipped with a note when it is missing).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=5
SIZES="1024 100"
RECORDS_1024=500000
RECORDS_100=3000000
BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
        --reps) REPS=$2; shift 2 ;;
        --sizes) SIZES=$2; shift 2 ;;
        --records-1024) RECORDS_1024=$2; shift 2 ;;
        --records-100) RECORDS_100=$2; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
TARGET_DIR=${CARGO_TARGET_DIR:-$(pwd)/target}
if [ "$BUILD" = 1 ]; then
    cargo build --release -q -p strata-broker --bin strata -p strata-benches --bin strata-perf
fi
STRATA=${STRATA_BIN:-$TARGET_DIR/release/strata}
PERF=$TARGET_DIR/release/strata-perf
RDK=$TARGET_DIR/rdkafka/bin/rdkafka_performance
PRODUCERS="wire client"
if [ -x "$RDK" ]; then
    PRODUCERS="$PRODUCERS rdkafka rdkafka-5"
else
    echo "note: $RDK missing (benches/rdkafka-perf.sh --build-only builds it); comparing the two engines only" >&2
fi
WORK=$(mktemp -d /tmp/strata-engines.XXXXXX)
PORT=$(( 20000 + RANDOM % 40000 ))
BROKER_PID=""
stop_broker() {
    if [ -n "$BROKER_PID" ]; then
        kill "$BROKER_PID" 2>/dev/null || true
        wait "$BROKER_PID" 2>/dev/null || true
        BROKER_PID=""
    fi
}
trap 'stop_broker; rm -rf "$WORK"' EXIT
start_broker() {
    stop_broker
    rm -rf "$WORK/data"
    mkdir -p "$WORK/data"
    "$STRATA" --override node.id=0 --override "listeners=PLAINTEXT://127.0.0.1:$PORT" \
        --override "advertised.listeners=PLAINTEXT://127.0.0.1:$PORT" \
        --override "log.dirs=$WORK/data" >"$WORK/strata.log" 2>&1 &
    BROKER_PID=$!
    for _ in $(seq 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "strata did not listen on $PORT" >&2
    exit 1
}

# run PRODUCER SIZE RECORDS: prints "records_per_s cpu_s".
run() {
    local who=$1 size=$2 records=$3 b=127.0.0.1:$PORT rate
    "$PERF" produce --bootstrap "$b" --topic e --partitions 1 --records 1 --record-size 16 \
        --engine wire --quiet >/dev/null
    case "$who" in
        wire|client)
            /usr/bin/time -f '%U %S' -o "$WORK/time" "$PERF" produce --bootstrap "$b" --topic e \
                --engine "$who" --records "$records" --record-size "$size" --acks 1 \
                --batch-size 131072 --linger-ms 5 --quiet --json >"$WORK/out"
            rate=$(grep -o '"records_per_sec": *[0-9.]*' "$WORK/out" | grep -o '[0-9.]*$')
            ;;
        rdkafka|rdkafka-5)
            local in_flight=1000000
            [ "$who" = rdkafka-5 ] && in_flight=5
            /usr/bin/time -f '%U %S' -o "$WORK/time" "$RDK" -P -t e -p 0 -b "$b" -s "$size" \
                -c "$records" -a 1 -u -X linger.ms=5 -X batch.size=131072 \
                -X max.in.flight.requests.per.connection=$in_flight >"$WORK/out" 2>&1
            rate=$(grep -E '^\| +[0-9]' "$WORK/out" | tail -1 | awk -F'|' '{print $7+0}')
            ;;
    esac
    echo "$rate $(awk '{print $1 + $2}' "$WORK/time")"
}

median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

: >"$WORK/results"
for rep in $(seq "$REPS"); do
    for size in $SIZES; do
        records=$RECORDS_100
        [ "$size" = 1024 ] && records=$RECORDS_1024
        set -- $PRODUCERS
        order=("$@")
        shift_by=$(( (rep - 1) % ${#order[@]} ))
        order=("${order[@]:$shift_by}" "${order[@]:0:$shift_by}")
        for who in "${order[@]}"; do
            start_broker
            read -r rate cpu < <(run "$who" "$size" "$records")
            stop_broker
            echo "$rep $size $who $rate $cpu $records" | tee -a "$WORK/results"
        done
    done
done

echo
echo "size  producer  records/s (median)  MB/s   CPU s per M records   client/it (median of same-rep ratios)"
for size in $SIZES; do
    for who in $PRODUCERS; do
        rate=$(awk -v s="$size" -v w="$who" '$2 == s && $3 == w {print $4}' "$WORK/results" | median)
        cpu=$(awk -v s="$size" -v w="$who" '$2 == s && $3 == w {print $5 / $6 * 1e6}' "$WORK/results" | median)
        ratio=$(awk -v s="$size" -v w="$who" '$2 == s && $3 == "client" {c[$1] = $4} $2 == s && $3 == w {o[$1] = $4}
            END {for (r in c) if (r in o && o[r] > 0) print c[r] / o[r]}' "$WORK/results" | median)
        printf '%-5s %-9s %-19.0f %-6.1f %-21.2f %s\n' "$size" "$who" "$rate" \
            "$(awk -v r="$rate" -v s="$size" 'BEGIN {print r * s / 1e6}')" "$cpu" "$ratio"
    done
done
