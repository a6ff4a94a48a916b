"""Go: franz-go's `kgo.GroupTransactSession` (consume-transform-produce, KIP-447) on a 3-node
cluster of real strata processes through broker SIGKILLs.

The `franz_client transact` program (tests/interop/go/franz_client/) copies every record of an
RF-3 input topic to the same partition of an RF-3 output topic, one transaction per poll that
also commits the group's offsets (TxnOffsetCommit), reading read_committed. While librdkafka
keeps writing the input, the broker that is the program's transaction coordinator is SIGKILLed
and restarted, then the one that is its group coordinator. The program must still commit every
input record and exit; then a read_committed librdkafka reader of the output sees each input
value exactly once, in the partition it was written to, and the group's committed offsets are
the input's end offsets (nothing lost, nothing copied twice, no transaction left open). The
cluster fixture's replica audit then checks what the nodes wrote.

franz-go keeps its default incremental fetch sessions (KIP-227). After a failed fetch it reopens
a session with the old session id and epoch 0, which Kafka takes as a full request closing that
session and opening a new one. Strata used to refuse it with INVALID_FETCH_SESSION_EPOCH, and
franz-go then retried at once and never fetched from that broker again: the program stalled
short of EXPECTED (test_fetch_sessions.py pins the reopening alone)."""

from __future__ import annotations

import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AdminClient

import util
import wire
from broker import BrokerDied
from test_replication import create
from txn_util import end_offsets, read_topic, wait_lso_caught_up

pytestmark = pytest.mark.timeout(480)  # may also build the Go programs

PARTS, COUNT, RATE = 3, 3000, 200  # about 15 s of input
GROUP_KEY, TXN_KEY = 0, 1  # FindCoordinator key types


def coordinator_of(port: int, key: str, key_type: int) -> int:
    """The node id FindCoordinator v1 names for a group (key type 0) or transactional id (1)."""
    with wire.Conn(port) as conn:
        body = conn.request(10, 1, wire.string(key) + wire.i8(key_type))
    r = wire.Reader(body)
    r.i32()  # throttle_time_ms
    error = r.i16()
    r.string()  # error_message
    node = r.i32()
    assert error == 0, f"FindCoordinator({key!r}, {key_type}): error {error}"
    return node


class Feeder:
    """Writes "in-<i>" to partition i mod PARTS with librdkafka (idempotent, acks=all), about
    RATE records a second, for i < COUNT; remembers the partition each was acknowledged in."""

    def __init__(self, bootstrap: str, topic: str):
        self.p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                           "message.timeout.ms": 120_000, "log_level": 0})
        self.topic = topic
        self.acked: dict[str, int] = {}
        self.failed: list[str] = []
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        for i in range(COUNT):
            def done(err, msg, value=f"in-{i}"):
                if err is None:
                    self.acked[value] = msg.partition()
                else:
                    self.failed.append(f"{value}: {err}")

            self.p.produce(self.topic, f"in-{i}".encode(), key=f"k{i}".encode(), partition=i % PARTS,
                           on_delivery=done)
            if i % 20 == 19:
                self.p.poll(0)
                time.sleep(20 / RATE)

    def finish(self) -> dict[str, int]:
        self.thread.join(COUNT / RATE + 60)
        assert not self.thread.is_alive(), "the input writer did not finish"
        assert self.p.flush(120) == 0, "input not delivered"
        assert not self.failed, f"{len(self.failed)} input records failed: {self.failed[:5]}"
        return self.acked


def committed_so_far(out: Path) -> int:
    return sum(int(line.split()[1]) for line in out.read_text().splitlines() if line.startswith("committed "))


def test_franz_group_transact_session_is_exactly_once_through_coordinator_sigkills(cluster_factory, go_clients,
                                                                                   tmp_path):
    c = cluster_factory()
    in_topic, out_topic = util.unique_topic("franz-ctp-in"), util.unique_topic("franz-ctp-out")
    group, txn_id = util.unique_topic("g-franz-ctp"), util.unique_topic("franz-ctp-txn")
    for t in (in_topic, out_topic):
        create(c.bootstrap, t, partitions=PARTS, config={"min.insync.replicas": "2"})
    out, log = tmp_path / "transact.out", tmp_path / "transact.log"
    with open(out, "wb") as stdout, open(log, "wb") as stderr:
        app = subprocess.Popen([str(go_clients["franz_client"]), "transact", c.bootstrap, in_topic, out_topic,
                                group, txn_id, str(COUNT)], stdout=stdout, stderr=stderr)

    def progress(at_least: int, what: str) -> None:
        def enough() -> bool:
            if app.poll() is not None and committed_so_far(out) < COUNT:  # no point waiting
                raise BrokerDied(f"franz_client exited ({app.returncode}):\n{log.read_text()[-6000:]}")
            return committed_so_far(out) >= at_least

        try:
            util.wait_until(enough, 90, what)
        except TimeoutError as e:
            raise AssertionError(f"{e}; franz_client committed {committed_so_far(out)} (log {log}):\n"
                                 f"{log.read_text()[-6000:]}") from e

    def kill_coordinator(key: str, key_type: int) -> int:
        (node,) = util.wait_until(lambda: (coordinator_of(c.nodes[0].port, key, key_type),), 30,
                                  f"the coordinator of {key}")
        c.kill(node)
        time.sleep(2.0)  # transactions and fetches meet the dead node, and its leaderships move
        c.start_node(node)
        return node

    try:
        feeder = Feeder(c.bootstrap, in_topic)
        progress(300, "300 records copied before the first kill")
        txn_node = kill_coordinator(txn_id, TXN_KEY)
        at = committed_so_far(out)
        progress(at + 300, f"300 more records copied after node {txn_node} (transaction coordinator) restarted")
        group_node = kill_coordinator(group, GROUP_KEY)
        print(f"killed node {txn_node} (transaction coordinator), then node {group_node} (group coordinator)")
        acked = feeder.finish()
        try:
            assert app.wait(150) == 0, f"franz_client failed ({app.returncode}; log {log}):\n{log.read_text()[-6000:]}"
        except subprocess.TimeoutExpired as e:
            raise AssertionError(f"franz_client did not finish; it committed {committed_so_far(out)} of "
                                 f"{COUNT} (log {log}):\n{log.read_text()[-6000:]}") from e
    finally:
        if app.poll() is None:
            app.kill()
            app.wait()

    assert len(acked) == COUNT
    inputs = read_topic(c.bootstrap, in_topic, PARTS, read_committed=False, timeout=60)
    assert sorted((r.value, r.partition) for r in inputs) == sorted(acked.items()), \
        "the input holds each acknowledged record once"
    wait_lso_caught_up(c.bootstrap, out_topic, PARTS, 60)
    outputs = read_topic(c.bootstrap, out_topic, PARTS, read_committed=True, timeout=60)
    copies = Counter(r.value for r in outputs)
    assert [v for v, n in copies.items() if n > 1] == [], "values copied more than once"
    assert set(acked) - set(copies) == set(), "input values missing from the output"
    assert set(copies) - set(acked) == set(), "output values that were never input"
    assert {r.value: r.partition for r in outputs} == acked, "each value copied to its input partition"
    for p in range(PARTS):
        values = [r.value for r in outputs if r.partition == p]
        assert values == sorted(values, key=lambda v: int(v.split("-")[1])), f"partition {p}: input order kept"

    input_ends = end_offsets(c.bootstrap, in_topic, PARTS, read_committed=False)
    a = AdminClient({"bootstrap.servers": c.bootstrap, "log_level": 0})
    committed = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result()
    assert {tp.partition: tp.offset for tp in committed.topic_partitions if tp.topic == in_topic} == input_ends, \
        "the group's committed offsets are the input's end offsets"

    lines = out.read_text().splitlines()
    print(f"{sum(1 for x in lines if x.startswith('committed '))} transactions committed, "
          f"{sum(1 for x in lines if x.startswith('aborted '))} aborted")
    assert lines[-1] == f"done {COUNT}", lines[-5:]
    assert committed_so_far(out) == COUNT, "the program counted each record in one committed transaction"
