"""Leader discovery in Produce and Fetch answers (KIP-951) on a 3-node cluster, on the raw wire.

Proves: a Produce v10+ sent to a broker that does not lead the partition is refused with
NOT_LEADER_OR_FOLLOWER naming the current leader and its epoch, and the answer carries that
leader's endpoint on the listener the request came in on (`NodeEndpoints`), as Kafka's brokers
answer; a Fetch v16 to a broker without the partition does the same; older versions carry no
endpoints (Produce v9, Fetch v15: the fields do not exist there), and answers without a leadership
error carry none either. The Rust client's producer and consumer (`strata produce`, `strata
consume`), still at a partition's old leader after a preferred-leader election, move to the leader
the refusals name and deliver and read there without a single Metadata request reaching any broker.
"""

from __future__ import annotations

import json
import signal
import struct
import subprocess
import urllib.request
import uuid

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic

import wire
from broker import free_port, strata_bin
from util import wait_until
from wire import Reader, compact_string, i8, i16, i32, i64, uvarint

pytestmark = pytest.mark.timeout(180)

NOT_LEADER_OR_FOLLOWER = 6


def compact_bytes(b: bytes | None) -> bytes:
    return uvarint(0) if b is None else uvarint(len(b) + 1) + b


def compact_array(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


NO_TAGS = uvarint(0)


def compact_str(r: Reader) -> str | None:
    n = r.uvarint()
    return None if n == 0 else r.take(n - 1).decode()


def tags(r: Reader) -> dict[int, bytes]:
    """A tagged-field section: tag -> its bytes."""
    out = {}
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        out[tag] = r.take(r.uvarint())
    return out


def leader_and_epoch(raw: bytes | None) -> tuple[int, int] | None:
    if raw is None:
        return None
    r = Reader(raw)
    return r.i32(), r.i32()


def node_endpoints(raw: bytes | None) -> list[tuple[int, str, int, str | None]]:
    if raw is None:
        return []
    r = Reader(raw)
    out = []
    for _ in range(r.uvarint() - 1):
        node, host, port, rack = r.i32(), compact_str(r), r.i32(), compact_str(r)
        tags(r)
        out.append((node, host, port, rack))
    return out


def produce(conn: wire.Conn, version: int, topic: str, partition: int):
    """Produce (flexible, v9+) of one record: (error, current leader or None, node endpoints)."""
    batch = wire.record_batch([(None, b"kip-951", [])])
    body = (
        compact_string(None) + i16(1) + i32(5000)
        + compact_array([compact_string(topic) + compact_array([i32(partition) + compact_bytes(batch) + NO_TAGS])
                         + NO_TAGS])
        + NO_TAGS
    )
    r = Reader(conn.request(wire.PRODUCE, version, body, flexible=True))
    tags(r)  # response header
    (result,) = [_produce_partition(r) for _ in range(r.uvarint() - 1)]
    r.i32()  # throttle_time_ms
    top = tags(r)
    assert r.remaining() == 0
    return result[0], result[1], node_endpoints(top.get(0))


def _produce_partition(r: Reader):
    compact_str(r)
    (p,) = [_one_produce_result(r) for _ in range(r.uvarint() - 1)]
    tags(r)
    return p


def _one_produce_result(r: Reader):
    r.i32()
    error = r.i16()
    r.i64(), r.i64(), r.i64()  # base offset, log append time, log start offset
    for _ in range(r.uvarint() - 1):  # record errors
        r.i32(), compact_str(r), tags(r)
    compact_str(r)  # error message
    return error, leader_and_epoch(tags(r).get(0))


def fetch(conn: wire.Conn, version: int, topic_id: uuid.UUID, partition: int):
    """A consumer's Fetch (v13+, by topic id): (error, current leader or None, node endpoints)."""
    part = i32(partition) + i32(-1) + i64(0) + i32(-1) + i64(-1) + i32(1 << 20) + NO_TAGS
    body = (
        i32(0) + i32(1) + i32(1 << 20) + i8(0) + i32(0) + i32(-1)
        + compact_array([topic_id.bytes + compact_array([part]) + NO_TAGS])
        + compact_array([])  # forgotten topics
        + compact_string("")  # rack id
        + NO_TAGS
    )
    r = Reader(conn.request(wire.FETCH, version, body, flexible=True))
    tags(r)  # response header
    r.i32(), r.i16(), r.i32()  # throttle, error, session id
    results = []
    for _ in range(r.uvarint() - 1):
        r.take(16)
        for _ in range(r.uvarint() - 1):
            r.i32()
            error = r.i16()
            r.i64(), r.i64(), r.i64()
            n = r.uvarint()
            for _ in range(max(n - 1, 0)):  # aborted transactions
                r.i64(), r.i64(), tags(r)
            r.i32()  # preferred read replica
            size = r.uvarint()
            r.take(max(size - 1, 0))
            results.append((error, leader_and_epoch(tags(r).get(1))))
        tags(r)
    top = tags(r)
    assert r.remaining() == 0
    (result,) = results
    return result[0], result[1], node_endpoints(top.get(0))


def topic_id(bootstrap: str, topic: str) -> uuid.UUID:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    desc = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=30)
    tid = desc.topic_id
    msb, lsb = tid.get_most_significant_bits(), tid.get_least_significant_bits()
    return uuid.UUID(bytes=struct.pack(">qq", msb, lsb))


def test_refused_produce_and_fetch_name_the_leader_and_its_endpoint(cluster_factory):
    c = cluster_factory(size=3)
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic("kip951", 1, 2)])["kip951"].result(timeout=30)
    # A partition just created may be named before its leader is (leader -1); wait until
    # every replica is in sync and every node names the same leader.
    meta = c.partition("kip951", 0)
    meta = c.wait_isr("kip951", 0, set(meta.replicas))
    leader = meta.leader
    for node in range(3):
        c.wait_isr("kip951", 0, set(meta.replicas), via=node)
        wait_until(lambda: c.partition("kip951", 0, via=node).leader == leader, 30, f"node {node} names leader {leader}")
    follower = next(r for r in meta.replicas if r != leader)
    outsider = next(n for n in range(3) if n not in meta.replicas)
    leader_endpoint = (leader, "127.0.0.1", c.nodes[leader].port, None)

    # The leader takes it: no leadership error, nothing else in the answer.
    with wire.Conn(c.nodes[leader].port) as conn:
        error, current, endpoints = produce(conn, 10, "kip951", 0)
        assert (error, current, endpoints) == (0, None, [])
    for node in (follower, outsider):
        with wire.Conn(c.nodes[node].port) as conn:
            error, current, endpoints = produce(conn, 10, "kip951", 0)
            assert error == NOT_LEADER_OR_FOLLOWER, f"node {node}"
            assert current is not None and current[0] == leader and current[1] >= 0, current
            assert endpoints == [leader_endpoint], f"node {node}"
            # Before v10 neither field exists.
            assert produce(conn, 9, "kip951", 0) == (NOT_LEADER_OR_FOLLOWER, None, [])

    tid = topic_id(c.bootstrap, "kip951")
    with wire.Conn(c.nodes[outsider].port) as conn:
        error, current, endpoints = fetch(conn, 16, tid, 0)
        assert error == NOT_LEADER_OR_FOLLOWER
        assert current is not None and current[0] == leader, current
        assert endpoints == [leader_endpoint]
        # v12-15 carry the field but leave it unset (Kafka names the leader from v16 only).
        assert fetch(conn, 15, tid, 0) == (NOT_LEADER_OR_FOLLOWER, None, [])
    with wire.Conn(c.nodes[leader].port) as conn:
        error, current, endpoints = fetch(conn, 16, tid, 0)
        assert (error, current, endpoints) == (0, None, [])


def metadata_requests(port: int) -> float:
    """Metadata requests a node has handled, from its Prometheus metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        lines = r.read().decode().splitlines()
    return sum(float(ln.rsplit(" ", 1)[1]) for ln in lines
               if ln.startswith("kafka_network_requestmetrics_requests") and 'request="Metadata"' in ln)


def partition_tool(bootstrap: str, *args: str):
    p = subprocess.run([str(strata_bin()), "partition", *args, "-b", bootstrap, "--format", "json"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"strata partition {' '.join(args)}: {p.stdout}\n{p.stderr}"
    return json.loads(p.stdout)


@pytest.mark.strata_only("counts Metadata requests in Strata's metrics and drives Strata's CLI")
def test_the_rust_clients_move_to_the_named_leader_without_a_metadata_request(cluster_factory):
    # No automatic rebalance: the election below is the only leadership change.
    c = cluster_factory(size=3, start=False, overrides={"auto.leader.rebalance.enable": "false"})
    ports = [free_port() for _ in c.nodes]
    for n, port in zip(c.nodes, ports):
        n.overrides["metrics.listener"] = f"http://127.0.0.1:{port}"
    c.start()
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic("moving", 1, 3)])["moving"].result(timeout=30)
    meta = c.wait_isr("moving", 0, {0, 1, 2})
    old = meta.leader
    new, third = [r for r in meta.replicas if r != old]
    producer = subprocess.Popen(
        [str(strata_bin()), "produce", "moving", "-b", c.bootstrap, "--acks", "all", "-X", "linger.ms=0"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        producer.stdin.write("one\n")
        producer.stdin.flush()
        with wire.Conn(c.nodes[old].port) as conn:
            def delivered():
                # ListOffsets v1, latest: the high watermark.
                body = i32(-1) + i32(1) + wire.string("moving") + i32(1) + i32(0) + i64(-1)
                r = Reader(conn.request(2, 1, body))
                r.i32(), r.string(), r.i32(), r.i32(), r.i16(), r.i64()
                return r.i64() == 1
            wait_until(delivered, 30, "the first record acknowledged")
        consumer = subprocess.Popen(
            [str(strata_bin()), "consume", "moving", "-b", c.bootstrap, "--offset", "beginning", "-n", "2"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert consumer.stdout.readline() == "one\n", "the consumer reads from the old leader first"
        # Held still while leadership moves, so it meets the move only after the count below.
        consumer.send_signal(signal.SIGSTOP)
        # The leadership moves to the next replica: a reorder, then a preferred election.
        moved = partition_tool(c.bootstrap, "reassign", f"moving:0={new},{old},{third}", "--wait")
        assert [m["error"] for m in moved] == [None], moved
        elected = partition_tool(c.bootstrap, "elect-leaders", "moving")
        assert [e["error"] for e in elected] == [None], elected
        wait_until(lambda: all(c.partition("moving", 0, via=i).leader == new for i in range(3)), 30,
                   f"every node knowing node {new} leads")
        before = [metadata_requests(p) for p in ports]
        consumer.send_signal(signal.SIGCONT)
        # The producer still believes the old leader: its send is refused there, naming the new one.
        producer.stdin.write("two\n")
        producer.stdin.close()
        assert producer.wait(timeout=60) == 0, producer.stderr.read()
        # The consumer's fetch at the old leader carries the old epoch: FENCED_LEADER_EPOCH,
        # naming the new leader, where it reads the second record.
        assert consumer.stdout.readline() == "two\n"
        assert consumer.wait(timeout=60) == 0, consumer.stderr.read()
        after = [metadata_requests(p) for p in ports]
        assert after == before, f"Metadata requests during the move: {before} -> {after}"
    finally:
        for p in (producer, locals().get("consumer")):
            if p is not None and p.poll() is None:
                p.kill()
    with wire.Conn(c.nodes[new].port) as conn:
        body = i32(-1) + i32(1) + wire.string("moving") + i32(1) + i32(0) + i64(-1)
        r = Reader(conn.request(2, 1, body))
        r.i32(), r.string(), r.i32(), r.i32()
        assert (r.i16(), r.i64(), r.i64()) == (0, -1, 2), "both records on the new leader"
