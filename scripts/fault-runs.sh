#!/usr/bin/env bash
# The longer cluster fault runs: the kill -9 nemesis workload over many seeds and longer runs,
# then the harsh mixed workload over many seeds, then the replication and coordinator-failover
# tests repeated. CI runs the same tests at a small size (two queue seeds of 25 s, one harsh seed
# of 30 s, each test once) inside scripts/test.sh; this is for a soak before a
# release or after touching replication.
#
# Usage: scripts/fault-runs.sh [SEEDS] [SECONDS] [REPEATS] [HARSH_SEEDS] [HARSH_SECONDS]
#   SEEDS          nemesis seeds, a count (first N from 1) or a comma list   (default 20)
#   SECONDS        nemesis duration per seed                                 (default 60)
#   REPEATS        times to repeat test_replication + test_cluster_coordinators (default 3)
#   HARSH_SEEDS    seeds of the harsh mixed workload (4 partitions, fast idempotent and
#                  transactional writers, a kill every 2-6 s), a count or a list (default 50)
#   HARSH_SECONDS  its duration per seed                                     (default 120)
# Env: STRATA_HARSH_RATE records/s per idempotent producer (default 2000), STRATA_HARSH_DIR where
# its per-seed reports go (default a new temp dir); STRATA_COPIER_RECORDS,
# STRATA_COPIER_COPIERS, STRATA_COPIER_TERM_ROUNDS, STRATA_COPIER_KILL_ROUNDS size the copier run.
#      STRATA_STREAMS_RUNS runs of the Kafka Streams exactly-once word count (default 5), each with
#      STRATA_STREAMS_LINES lines (default 20000) and STRATA_STREAMS_KILLS kills (default 12) of
#      its instances and of brokers, on one node and on three (CI: 3000 lines, 4 kills).
#      STRATA_FLINK_RUNS runs of the Flink exactly-once word count (default 5), each with
#      STRATA_FLINK_LINES lines (default 10000), STRATA_FLINK_KILLS job and node kills on one
#      node (default 12) and STRATA_FLINK_CLUSTER_KILLS job and broker kills on three nodes
#      (default 12) (CI: 1200 lines, 3 kills each).
#      STRATA_CONNECT_RUNS runs of Kafka Connect's exactly-once source (default 5), each on one
#      node and on three with STRATA_CONNECT_RECORDS values per task (default 4000) and
#      STRATA_CONNECT_KILLS kills of workers and brokers (default 12) (CI: 1000 values, 3 kills).
# Every cluster test ends with the replica audit (tests/interop/replica_audit.py).
# Needs what scripts/test.sh installs (.venv, kcat); builds the release broker.
set -uo pipefail
cd "$(dirname "$0")/.."
SEEDS=${1:-20}
SECONDS_PER_SEED=${2:-60}
REPEATS=${3:-3}
HARSH_SEEDS=${4:-50}
HARSH_SECONDS=${5:-120}
if [[ "$SEEDS" =~ ^[0-9]+$ ]]; then
    SEEDS=$(seq -s, 1 "$SEEDS")
fi
if [[ "$HARSH_SEEDS" =~ ^[0-9]+$ ]]; then
    HARSH_SEEDS=$(seq -s, 1 "$HARSH_SEEDS")
fi

cargo build --release -p strata-broker --bin strata || exit 1
export STRATA_BIN="$PWD/target/release/strata"
[ -x .venv/bin/python ] || { echo "run scripts/test.sh once first (it creates .venv)" >&2; exit 1; }

FAILED=0
echo "==> nemesis: seeds $SEEDS, ${SECONDS_PER_SEED}s each"
STRATA_NEMESIS_SEEDS=$SEEDS STRATA_NEMESIS_SECONDS=$SECONDS_PER_SEED \
    .venv/bin/python -m pytest tests/interop/test_cluster_nemesis.py -k queue_workload -p no:cacheprovider -ra || FAILED=1
# One pytest per seed, so that a failed seed's report is written when it fails (a run of 50
# seeds takes about three hours), each seed's workdir under $HARSH_DIR/s<seed>, its output in
# $HARSH_DIR/seed-<seed>.log and one line per seed in $HARSH_DIR/summary.txt. The idempotent
# producers' full librdkafka log is kept for failed seeds only.
HARSH_DIR=${STRATA_HARSH_DIR:-$(mktemp -d -t strata-harsh-XXXXXX)}
echo "==> harsh mixed workload: seeds $HARSH_SEEDS, ${HARSH_SECONDS}s each (reports in $HARSH_DIR)"
for seed in ${HARSH_SEEDS//,/ }; do
    STRATA_HARSH_SEEDS=$seed STRATA_HARSH_SECONDS=$HARSH_SECONDS STRATA_HARSH_RATE=${STRATA_HARSH_RATE:-2000} \
        STRATA_HARSH_CLIENT_DEBUG=1 .venv/bin/python -m pytest tests/interop/test_cluster_nemesis.py -k harsh \
        -p no:cacheprovider -ra --basetemp "$HARSH_DIR/s$seed" > "$HARSH_DIR/seed-$seed.log" 2>&1
    rc=$?
    echo "seed $seed: $([ $rc = 0 ] && echo passed || echo "FAILED (rc $rc)") $(date +%H:%M:%S)" | tee -a "$HARSH_DIR/summary.txt"
    if [ $rc = 0 ]; then rm -f "$HARSH_DIR/s$seed"/*/producer*.log; else FAILED=1; fi
done
# Kafka's transaction system test with Kafka's verification clients (test_kafka_txn_copier.py),
# longer than CI's: more records, 4 copiers, 3 SIGTERM rounds then 3 SIGKILL rounds.
echo "==> Kafka's transactional copiers under bounces: ${STRATA_COPIER_RECORDS:-60000} records"
STRATA_COPIER_RECORDS=${STRATA_COPIER_RECORDS:-60000} STRATA_COPIER_COPIERS=${STRATA_COPIER_COPIERS:-4} \
    STRATA_COPIER_TERM_ROUNDS=${STRATA_COPIER_TERM_ROUNDS:-3} STRATA_COPIER_KILL_ROUNDS=${STRATA_COPIER_KILL_ROUNDS:-3} \
    .venv/bin/python -m pytest tests/interop/test_kafka_txn_copier.py -p no:cacheprovider -ra || FAILED=1
for i in $(seq 1 "$REPEATS"); do
    echo "==> replication and coordinator failover, round $i of $REPEATS"
    .venv/bin/python -m pytest tests/interop/test_replication.py tests/interop/test_cluster_coordinators.py \
        -p no:cacheprovider -ra || FAILED=1
done
STREAMS_RUNS=${STRATA_STREAMS_RUNS:-5}
for i in $(seq 1 "$STREAMS_RUNS"); do
    echo "==> Kafka Streams exactly-once word count, run $i of $STREAMS_RUNS"
    STRATA_STREAMS_LINES=${STRATA_STREAMS_LINES:-20000} STRATA_STREAMS_KILLS=${STRATA_STREAMS_KILLS:-12} \
        .venv/bin/python -m pytest tests/interop/test_kafka_streams.py -p no:cacheprovider -ra || FAILED=1
done
FLINK_RUNS=${STRATA_FLINK_RUNS:-5}
for i in $(seq 1 "$FLINK_RUNS"); do
    echo "==> Flink exactly-once word count, run $i of $FLINK_RUNS"
    STRATA_FLINK_LINES=${STRATA_FLINK_LINES:-10000} STRATA_FLINK_KILLS=${STRATA_FLINK_KILLS:-12} \
        STRATA_FLINK_CLUSTER_KILLS=${STRATA_FLINK_CLUSTER_KILLS:-12} \
        .venv/bin/python -m pytest tests/interop/test_flink.py -p no:cacheprovider -ra || FAILED=1
done
CONNECT_RUNS=${STRATA_CONNECT_RUNS:-5}
for i in $(seq 1 "$CONNECT_RUNS"); do
    echo "==> Kafka Connect exactly-once source, run $i of $CONNECT_RUNS"
    STRATA_CONNECT_RECORDS=${STRATA_CONNECT_RECORDS:-4000} STRATA_CONNECT_KILLS=${STRATA_CONNECT_KILLS:-12} \
        .venv/bin/python -m pytest tests/interop/test_kafka_connect.py -p no:cacheprovider -ra || FAILED=1
done
[ "$FAILED" = 0 ] && echo "all fault runs passed" || { echo "FAILED: see above"; exit 1; }
