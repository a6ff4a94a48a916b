"""Apache Flink exactly-once on Strata through crashes of the job and of brokers (issue 31, the
Flink part).

The application is a real Flink job (tests/java-flink, Flink 2.2.1 with flink-connector-kafka
5.0.0-2.2) in a local mini cluster inside one JVM: a KafkaSource reading lines read_committed,
with its offsets in Flink's checkpoints -> words keyed by word -> a running count in keyed
ValueState -> a KafkaSink with DeliveryGuarantee.EXACTLY_ONCE, which writes each checkpoint
interval in a Kafka transaction (transactional id `<prefix>-<subtask>-<checkpoint>`), flushes
it at the barrier and commits it when the checkpoint completes. Checkpoints are taken every
300 ms into a local directory and retained. While a feeder produces lines, the driver crashes
the JVM and starts it again from the newest retained checkpoint (`execution.state-recovery.path`):
first right after a checkpoint completed and before the sink committed it (the job halts itself
on the driver's signal, HaltBeforeCommit.java), then by SIGKILL at random points. On one node
with both of the sink's transaction naming strategies, the node itself SIGKILLed too (the whole
cluster down: the job fails over inside its JVM until the node is back); on three (RF 3,
min.insync.replicas 2) with SIGKILLs of the broker coordinating the open transaction.

On the broker this rests on: InitProducerId per transactional id; a prepared transaction
committed after the restart by a producer resumed from its id and epoch (EndTxn with no
InitProducerId first); the lingering transactions of checkpoints that never completed, found
by probing ids with InitProducerId (INCREMENTING) or with ListTransactions (POOLING), and
aborted; aborted records hidden from read_committed readers.

The checker is Kafka Streams' (test_kafka_streams.py): the output read read_committed must hold,
per word, exactly 1, 2, ..., n in order, each once, with n the word's count in the acknowledged
input. A replay after a kill that escaped a transaction shows as a repeated value, a lost commit
as a gap.

`STRATA_FLINK_GUARANTEE=AT_LEAST_ONCE` runs the same job with a non-transactional sink, the
checker's negative control: under kills it fails with repeated counts.

`STRATA_FLINK_LINES`, `STRATA_FLINK_KILLS` (one node) and `STRATA_FLINK_CLUSTER_KILLS` scale the
run (scripts/fault-runs.sh runs a long one); `STRATA_FLINK_SEED` repeats a run's choice of kill
timings.
"""

from __future__ import annotations

import os
import random
import time

import pytest

from flink_util import FlinkApp, FlinkJob, completed_checkpoints, latest_checkpoint
from test_exactly_once_cluster import PARTS, committed_words, coordinator_of
from test_kafka_streams import LineFeeder, check_word_counts, in_sync_everywhere
from test_replication import create
from txn_util import wait_lso_caught_up
from util import unique_topic, wait_until


@pytest.fixture(scope="module")
def flink_app(tmp_path_factory) -> FlinkApp:
    """The job compiled once against Flink's classpath (resolved offline)."""
    return FlinkApp(tmp_path_factory.mktemp("java-flink")).build()


def run_word_count(bootstrap: str, flink_app: FlinkApp, tmp_path, kills: int, create_topic, broker_kill=None) -> None:
    """Creates the job's topics with `create_topic(name)`, feeds lines while crashing the job
    `kills` times at random points, and checks the committed output once every word is counted.
    The first crash comes right after a checkpoint completed and before the sink committed it
    (the job halts itself, HaltBeforeCommit.java; with EXACTLY_ONCE only, the other guarantees
    having nothing to commit), the others are SIGKILLs. Where `broker_kill` is given, it is
    called instead for about half of the kills after the first (it SIGKILLs and restarts a
    broker)."""
    exactly_once = os.environ.get("STRATA_FLINK_GUARANTEE", "EXACTLY_ONCE") == "EXACTLY_ONCE"
    lines = int(os.environ.get("STRATA_FLINK_LINES", "1200"))
    seed = int(os.environ.get("STRATA_FLINK_SEED") or random.randrange(1 << 30))
    print(f"seed {seed} (STRATA_FLINK_SEED={seed} repeats its choices)")
    rng = random.Random(seed)

    name = unique_topic("flink-wc")
    in_topic, out_topic = f"{name}-in", f"{name}-out"
    for t in (in_topic, out_topic):
        create_topic(t)
    job = FlinkJob(flink_app, "job", tmp_path, (bootstrap, name, in_topic, out_topic))

    def log() -> str:
        return f"--- the job (started {job.starts} times), log tail ---\n{job.tail(8000)}"

    def check_alive() -> None:
        """A job that exits by itself (not killed by the driver) is a failure: Flink restarts a
        failed job inside the JVM from its latest checkpoint, a broker's death included."""
        assert job.alive(), f"the job exited by itself ({job.proc.returncode}) (seed {seed})\n{log()}"

    def wait_for(cond, timeout: float, what: str) -> None:
        """wait_until(cond), ending early if the job exits (wait_until counts an exception in
        `cond` as not yet)."""
        wait_until(lambda: not job.alive() or cond(), timeout, what)
        check_alive()

    def wait_running(what: str) -> None:
        """Until the job has completed a checkpoint since its start."""
        wait_for(job.running, 180, what)

    t0 = time.monotonic()
    broker_kills = 0
    try:
        job.start()
        wait_running("the job's first checkpoint")
        feeder = LineFeeder(bootstrap, in_topic, lines, rate=lines / (8.0 * kills + 10), rng=rng)
        for k in range(kills):
            # Random on purpose: where in the input and in the checkpoint cycle each kill lands.
            time.sleep(rng.uniform(1.0, 5.0))
            check_alive()
            if broker_kill is not None and k > 0 and (k == 1 or rng.random() < 0.5):
                broker_kills += 1
                broker_kill(k, feeder, job, rng)
                continue
            if k == 0 and exactly_once:
                # The deterministic crash: after a checkpoint completed, before its commit.
                prepared = job.halt_before_commit()
                print(f"kill {k}: the job halted at line {feeder.sent} before committing {prepared}")
            else:
                newest = latest_checkpoint(job.state_dir)
                print(f"kill {k}: SIGKILL the job at line {feeder.sent}, newest checkpoint {newest}")
                job.kill()
                time.sleep(rng.uniform(0.2, 2.0))
            job.start()
            assert job.restored_from is not None, f"restart {k} found no checkpoint\n{log()}"
            wait_running(f"a checkpoint after restart {k}")
            if k == 0 and exactly_once:
                resumed = [t for t in prepared if f"Attempting to resume transaction {t} " in job.current_log()]
                assert resumed == prepared, f"the restored job did not resume {prepared} (only {resumed})\n{log()}"
        wait_until(feeder.done, 300, "the input acknowledged")
        expected = feeder.result()
        total = sum(expected.values())

        def all_counted() -> bool:
            return sum(map(len, committed_words(bootstrap, out_topic).values())) >= total

        try:
            wait_for(all_counted, 180, f"all {total} words counted in the output")
        except TimeoutError as e:
            raise AssertionError(f"{e} (seed {seed})\n{log()}") from e
    finally:
        job.kill()
    print(f"{lines} lines, {total} words, {kills} kills ({broker_kills} of a broker), {job.starts} job starts, "
          f"{time.monotonic() - t0:.0f} s")

    wait_lso_caught_up(bootstrap, out_topic, PARTS, 60)
    check_word_counts(committed_words(bootstrap, out_topic), expected, seed)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("naming", ["INCREMENTING", "POOLING"])
def test_flink_word_count_is_exactly_once_through_job_and_broker_kills_on_one_node(cluster_factory, flink_app,
                                                                                   tmp_path, monkeypatch, naming):
    """One node. The sink's transaction naming strategies find the lingering transactions of a
    crashed job differently: INCREMENTING (a new transactional id per checkpoint) probes ids
    with InitProducerId, POOLING (ids reused from a pool) lists them with ListTransactions. The
    node is SIGKILLed too: every open transaction, the coordinator's state and the group are
    recovered from its logs alone."""
    monkeypatch.setenv("STRATA_FLINK_NAMING", naming)
    c = cluster_factory(size=1, overrides={"offsets.topic.replication.factor": "1",
                                           "transaction.state.log.replication.factor": "1",
                                           "transaction.state.log.min.isr": "1"})

    def kill_node(k: int, feeder, job, rng) -> None:
        newest = latest_checkpoint(job.state_dir)
        print(f"kill {k}: SIGKILL the node at line {feeder.sent}, newest checkpoint {newest}")
        c.kill(0)
        time.sleep(rng.uniform(0.5, 4.0))
        job_too = rng.random() < 0.3
        if job_too:
            print(f"kill {k}: and SIGKILL the job while the node is down")
            job.kill()
        c.start_node(0)
        back = time.time()
        if job_too:
            job.start()
        # Checkpoints complete again: the job reaches the node and its sink commits.
        wait_until(lambda: not job.alive() or any(mtime >= back for mtime, _, _ in completed_checkpoints(job.state_dir)),
                   180, f"a checkpoint after the node's restart {k}")

    run_word_count(c.bootstrap, flink_app, tmp_path, int(os.environ.get("STRATA_FLINK_KILLS", "3")),
                   lambda t: create(c.bootstrap, t, partitions=PARTS, rf=1), kill_node)


@pytest.mark.timeout(900)
def test_flink_word_count_is_exactly_once_through_job_and_broker_kills_on_three_nodes(cluster_factory, flink_app,
                                                                                     tmp_path):
    """RF 3, min.insync.replicas 2: the job and single brokers are SIGKILLed in turn. The broker
    killed is the transaction coordinator of the transaction subtask 0 has open (its id names the
    checkpoint after the newest one), so a prepared transaction's commit after the checkpoint,
    or the abort of a lingering one after a job kill, often goes to the coordinator's successor."""
    c = cluster_factory()

    def kill_coordinator(k: int, feeder, job, rng) -> None:
        newest = latest_checkpoint(job.state_dir)
        open_txn = f"{job.args[1]}-0-{int(newest.name[4:]) + 1 if newest else 1}"
        node = coordinator_of(c.nodes[0].port, open_txn)
        print(f"kill {k}: SIGKILL broker {node} (transaction coordinator of {open_txn}) at line {feeder.sent}")
        c.kill(node)
        time.sleep(rng.uniform(0.5, 4.0))
        if rng.random() < 0.3:
            print(f"kill {k}: and SIGKILL the job while broker {node} is down")
            job.kill()
            job.start()
        c.start_node(node)
        # Back in the ISR of the job's topics and of the transaction log, so that the next kill
        # leaves two replicas in sync everywhere the sink writes.
        wait_until(lambda: in_sync_everywhere(c, {job.args[2], job.args[3], "__transaction_state"}), 120,
                   f"broker {node} back in every ISR")

    run_word_count(c.bootstrap, flink_app, tmp_path, int(os.environ.get("STRATA_FLINK_CLUSTER_KILLS", "3")),
                   lambda t: create(c.bootstrap, t, partitions=PARTS, config={"min.insync.replicas": "2"}),
                   kill_coordinator)
