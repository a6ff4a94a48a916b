"""Leader discovery in Produce and Fetch answers (KIP-951) on a 3-node cluster, on the raw wire.

Proves: a Produce v10+ sent to a broker that does not lead the partition is refused with
NOT_LEADER_OR_FOLLOWER naming the current leader and its epoch, and the answer carries that
leader's endpoint on the listener the request came in on (`NodeEndpoints`), as Kafka's brokers
answer; a Fetch v16 to a broker without the partition does the same; older versions carry no
endpoints (Produce v9, Fetch v15: the fields do not exist there), and answers without a leadership
error carry none either.
"""

from __future__ import annotations

import struct
import uuid

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic

import wire
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
    meta = c.partition("kip951", 0)
    leader = meta.leader
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
        # v12-15 name the leader (CurrentLeader) but carry no endpoints.
        error, current, endpoints = fetch(conn, 15, tid, 0)
        assert (error, endpoints) == (NOT_LEADER_OR_FOLLOWER, []) and current[0] == leader
    with wire.Conn(c.nodes[leader].port) as conn:
        error, current, endpoints = fetch(conn, 16, tid, 0)
        assert (error, current, endpoints) == (0, None, [])
