"""Kafka Connect's exactly-once source support (KIP-618, `exactly.once.source.support=enabled`) on
one node and on a 3-node cluster, through SIGKILLs of the workers and of brokers, and the
compacted config, offset and status topics read back after compaction (issue 31, the Connect
part).

Two distributed workers (Kafka Connect's own `ConnectDistributed`, connect-runtime) in one group
run the sequence source of tests/java-connect: task i writes the values 1, 2, ..., n under key
`t<i>`, each record carrying as its source offset the next value to write. With exactly-once
support each poll's records and their offsets go to the broker in one transaction, the offsets to
the worker's offset topic; the group's leader fences the tasks' transactional producers through
the Admin API (`fenceProducers`, InitProducerId) before a new generation of tasks starts, and the
workers' config topic writes are themselves transactional. Exactly-once here rests on the
broker: transactions spanning the output and the offset topic, aborted ones hidden from
read_committed readers (the workers read their offsets read_committed), producer fencing, and
compaction that keeps what a restarted worker needs.

While the tasks write, a driver SIGKILLs a worker (and starts it again) or a broker (and starts
it again) at random points. Then, once the offset topic has been compacted, both workers are
killed at once (and, on three nodes, a broker too) and started again: the whole Connect cluster
comes back from the compacted topics alone. The checker reads the output read_committed: every
task's values must be exactly 1, 2, ..., n, in order, each once - a value written twice after a
kill shows as a repeat, a lost one as a gap.

`STRATA_CONNECT_EOS=disabled` runs the same workers without exactly-once support (offsets flushed
every second, apart from the records): the checker's negative control, which fails with repeated
values after a worker's SIGKILL. `STRATA_CONNECT_RECORDS` (per task) and `STRATA_CONNECT_KILLS`
scale the run (scripts/fault-runs.sh runs a long one); `STRATA_CONNECT_SEED` repeats a run's
choice of victims and timings.
"""

from __future__ import annotations

import json
import os
import random
import time

import pytest

from connect_util import CONNECTOR_CLASS, ConnectApp, Worker, connector_status
from test_exactly_once_cluster import PARTS, committed_words
from test_kafka_streams import bounce_broker, in_sync_everywhere
from test_replication import create
from txn_util import read_committed, wait_lso_caught_up
from util import unique_topic, wait_until

TASKS = 3


@pytest.fixture(scope="module")
def connect_app(tmp_path_factory) -> ConnectApp:
    """The connector compiled once against connect-runtime's classpath (resolved offline)."""
    return ConnectApp(tmp_path_factory.mktemp("java-connect")).build()


def offset_records(bootstrap: str, topic: str, connector: str) -> dict[str, list[int]]:
    """The committed records of `connector` in the worker's offset topic, per task: the `next`
    value of each, in offset order. Read from the beginning, so after compaction the earliest of
    each task are gone."""
    out: dict[str, list[int]] = {}
    for m in read_committed(bootstrap, topic, 5, reset="earliest"):
        name, partition = json.loads(m.key())
        if name == connector and m.value() is not None:
            out.setdefault(partition["task"], []).append(json.loads(m.value())["next"])
    return out


@pytest.mark.timeout(900)
@pytest.mark.parametrize("size", [1, 3], ids=["one-node", "three-nodes"])
def test_kafka_connect_exactly_once_source_through_worker_and_broker_kills(cluster_factory, connect_app, tmp_path,
                                                                          size):
    records = int(os.environ.get("STRATA_CONNECT_RECORDS", "1000"))
    kills = int(os.environ.get("STRATA_CONNECT_KILLS", "3"))
    seed = int(os.environ.get("STRATA_CONNECT_SEED") or random.randrange(1 << 30))
    eos = os.environ.get("STRATA_CONNECT_EOS", "enabled") == "enabled"
    batch_max = 20
    print(f"seed {seed} (STRATA_CONNECT_SEED={seed} repeats its choices)")
    rng = random.Random(seed)

    # The cleaner looks for work every half second, so the compacted topics are compacted soon.
    overrides = {"log.cleaner.backoff.ms": "500"}
    if size == 1:
        overrides |= {"offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
                      "transaction.state.log.min.isr": "1"}
    c = cluster_factory(size=size, overrides=overrides)
    isr = "2" if size == 3 else "1"
    group = unique_topic("connect")
    topics = {k: f"{group}-{k}" for k in ("config", "offset", "status")}
    # Connect's internal topics, created as its docs ask (compacted; one partition for the
    # config topic), with segments rolled every second so that the cleaner has work.
    compact = {"cleanup.policy": "compact", "segment.ms": "1000", "min.cleanable.dirty.ratio": "0.01",
               "min.insync.replicas": isr}
    create(c.bootstrap, topics["config"], partitions=1, rf=size, config=compact)
    create(c.bootstrap, topics["offset"], partitions=5, rf=size, config=compact)
    create(c.bootstrap, topics["status"], partitions=3, rf=size, config=compact)
    out_topic = unique_topic("seq-out")
    create(c.bootstrap, out_topic, partitions=PARTS, rf=size, config={"min.insync.replicas": isr})
    workers = [Worker(connect_app, f"worker{i}", tmp_path, c.bootstrap, group, topics, size, eos) for i in range(2)]
    name = "sequence"

    def logs() -> str:
        return "\n".join(f"--- {w.name} (started {w.starts} times), log tail ---\n{w.tail()}" for w in workers)

    def check_alive() -> None:
        """A worker that exits by itself (not killed by the driver) is a failure: Connect
        survives a broker's death and a rebalance."""
        for w in workers:
            assert w.alive(), f"{w.name} exited by itself ({w.proc.returncode}) (seed {seed})\n{logs()}"

    def all_running() -> bool:
        """The connector and its TASKS tasks are RUNNING; a FAILED task fails the test (Connect
        does not restart it by itself), but for one way a kill of ours makes Connect fail a task:
        a task starting in a new generation asks the group's leader, over REST, to fence its
        predecessors' producers first, and when the leader was SIGKILLed after assigning the task,
        that request is refused and the task fails for good. An operator restarts it, and so does
        the driver (as Connect's docs say, through the REST API)."""
        check_alive()
        status = connector_status(workers, name)
        if status is None:
            return False
        for t in status.get("tasks", []):
            if t["state"] != "FAILED":
                continue
            trace = t.get("trace", "")
            if "IO Error trying to forward REST request" in trace and "fenceZombieSourceTasks" in trace:
                print(f"task {t['id']} failed to reach the killed leader for fencing: restarting it")
                for w in (w for w in workers if w.alive()):
                    try:
                        if w.rest("POST", f"/connectors/{name}/tasks/{t['id']}/restart")[0] in (200, 202, 204):
                            break
                    except OSError:
                        continue
                return False
            raise AssertionError(f"task {t['id']} FAILED (seed {seed}): {trace[:3000]}\n{logs()}")
        return (status["connector"]["state"] == "RUNNING" and len(status["tasks"]) == TASKS
                and all(t["state"] == "RUNNING" for t in status["tasks"]) and all(map(serving, workers)))

    def serving(w: Worker) -> bool:
        """The worker's REST resources answer: it has found the Kafka cluster and read its
        internal topics (before that its REST server answers 404). A worker still starting when
        its only broker dies exits ("Failed to connect to and describe Kafka cluster"), as it
        does on Apache Kafka, so a kill waits for this."""
        try:
            return w.rest("GET", "/connectors")[0] == 200
        except OSError:
            return False

    def wait_running(what: str) -> None:
        try:
            wait_until(all_running, 180, what)
        except TimeoutError as e:
            raise AssertionError(f"{e} (seed {seed}): {connector_status(workers, name)}\n{logs()}") from e

    def progress() -> int:
        return sum(map(len, committed_words(c.bootstrap, out_topic).values()))

    try:
        for w in workers:
            w.start()

        def created() -> bool:
            check_alive()
            config = {"connector.class": CONNECTOR_CLASS, "tasks.max": str(TASKS), "topic": out_topic,
                      "records.per.task": str(records), "batch.max": str(batch_max),
                      "rate": str(records / (9.0 * kills + 15))}
            if eos:
                config |= {"exactly.once.support": "required", "transaction.boundary": "poll"}
            try:
                code, body = workers[0].rest("POST", "/connectors", {"name": name, "config": config})
            except OSError:
                return False  # the REST server is not up yet
            # 404 until the worker's REST resources are initialized; 409 while it rebalances.
            assert code in (201, 404, 409, 500, 503), f"creating the connector: {code} {body}\n{logs()}"
            return code == 201 or (code == 409 and "already exists" in str(body))

        wait_until(created, 180, "the connector created")
        wait_running("the connector and its tasks RUNNING")

        # The waits between kills are random on purpose (where in the sequence each kill lands);
        # every recovery is awaited on a condition.
        def restart_worker(k: int) -> None:
            """SIGKILL a worker, let it stay dead a while (its tasks move to the other after the
            session timeout and the scheduled rebalance delay, or come back to it), start it
            again."""
            victim = rng.choice(workers)
            print(f"kill {k}: SIGKILL {victim.name}")
            victim.kill()
            time.sleep(rng.uniform(0.5, 8.0))
            victim.start()
            wait_running(f"all tasks RUNNING after {victim.name}'s restart")

        def restart_broker(k: int) -> None:
            node = bounce_broker(c, rng, workers, {out_topic, group}, lambda step: print(f"kill {k}: {step}"),
                                 check_alive)
            wait_running(f"all tasks RUNNING after broker {node}'s restart")

        for k in range(kills):
            time.sleep(rng.uniform(1.0, 5.0))
            check_alive()
            if k == 0 or (k > 1 and rng.random() < 0.5):
                restart_worker(k)
            else:
                restart_broker(k)

        if eos:
            # The offset topic compacted: each task's earliest offset records (next values of
            # at most batch.max + 1 apart, from 2 up) are gone, only later ones remain.
            def compacted() -> bool:
                check_alive()
                got = offset_records(c.bootstrap, topics["offset"], name)
                return len(got) == TASKS and all(v[0] > batch_max + 1 for v in got.values())

            wait_until(compacted, 120, "the offset topic compacted")
        # The whole Connect cluster down at once (and a broker, on three nodes), then back: it
        # must find its connector, task configs and offsets in the compacted topics alone.
        print(f"killing both workers at {progress()} values")
        for w in workers:
            w.kill()
        if size > 1:
            node = rng.randrange(c.size)
            c.kill(node)
            time.sleep(1.0)
            c.start_node(node)
            wait_until(lambda: in_sync_everywhere(c, {out_topic, group}), 120, f"broker {node} back in every ISR")
        for w in workers:
            w.start()
        wait_running("all tasks RUNNING after the whole Connect cluster restarted")

        total = records * TASKS
        try:
            wait_until(lambda: (check_alive(), progress() >= total)[1], 300, f"all {total} values written")
        except TimeoutError as e:
            raise AssertionError(f"{e} (seed {seed})\n{logs()}") from e
        for w in workers:
            problem = w.stop()
            assert problem is None, f"{problem}\n{logs()}"
    finally:
        for w in workers:
            w.kill()

    wait_lso_caught_up(c.bootstrap, out_topic, PARTS, 60)
    output = committed_words(c.bootstrap, out_topic)
    starts = sorted(s for w in workers for s in w.started_tasks())
    print(f"task starts (task, first value): {starts}")
    assert set(output) == {f"t{i}" for i in range(TASKS)}, f"keys in the output: {sorted(output)} (seed {seed})"
    for key, got in sorted(output.items()):
        assert got == list(range(1, records + 1)), (
            f"values of {key} (seed {seed}): {len(got)} values for {records}; first difference at "
            f"{next((j for j, (a, b) in enumerate(zip(got, range(1, records + 1))) if a != b), min(len(got), records))}"
            f"; task starts {starts}")
    # Every task was stopped and resumed at least once (the kills reached them).
    restarted = {t for t, first in starts if first > 1}
    assert restarted, f"no task ever resumed from a committed offset: {starts}"
    print(f"checked {records * TASKS} values of {TASKS} tasks: each task's 1..n, in order, once")
