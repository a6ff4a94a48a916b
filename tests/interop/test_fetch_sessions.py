"""Incremental fetch sessions (KIP-227) with a real client that uses them: kafka-python 3.0
(`enable_incremental_fetch_sessions`, on by default) consumes a 64-partition topic in a group
while records keep arriving on a few partitions. Every record arrives once, and the broker's
metrics show the consumer's session open with every partition in it, so the fetches were
incremental rather than full.

A session reopened with its own id and epoch 0 (what franz-go sends after a failed fetch) is a
new full session, as in Kafka's FetchManager: the old one is closed, the answer carries a new
session id and no error.

On Apache Kafka (STRATA_TARGET=kafka) the same consumption is checked, but not the session
metrics: Kafka publishes them over JMX only (kafka.server:type=FetchSessionCache), which this
suite does not read; the Prometheus endpoint is Strata's."""

from __future__ import annotations

import time
import urllib.request

from kafka import KafkaConsumer
from confluent_kafka import Producer

from broker import ON_KAFKA, free_port
import util
import wire

PARTITIONS = 64


def metric(port: int, name: str) -> float | None:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
    return None


def test_kafka_python_consumes_through_an_incremental_fetch_session(broker_factory):
    mport = free_port()
    b = broker_factory({"metrics.listener": f"http://127.0.0.1:{mport}", "group.initial.rebalance.delay.ms": "0"})
    topic = util.unique_topic("sessions")
    util.create_topic(b.bootstrap, topic, partitions=PARTITIONS)
    p = Producer({"bootstrap.servers": b.bootstrap})

    def produce(start: int, n: int):
        for i in range(start, start + n):
            p.produce(topic, value=f"v{i}".encode(), partition=i % 5)
        assert p.flush(15) == 0

    produce(0, 100)
    c = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id="g-sessions", auto_offset_reset="earliest",
                      fetch_max_wait_ms=100, enable_auto_commit=False)
    try:
        # kafka-python 3.0.12 can stall for good (no heartbeat, no fetch; the broker has
        # answered everything) when its first join races its first metadata answer and it
        # rejoins at once to take the partitions; knowing the topic first avoids that race.
        util.wait_until(lambda: c.partitions_for_topic(topic), 20, "kafka-python sees the topic")
        c.subscribe([topic])
        seen: list[str] = []
        sessions_seen = False
        deadline = time.monotonic() + 60
        produced = 100
        while len(seen) < 300:
            assert time.monotonic() < deadline, f"read {len(seen)} of 300"
            for records in c.poll(timeout_ms=200).values():
                seen.extend(r.value.decode() for r in records)
            if len(seen) >= produced and produced < 300:
                produce(produced, 100)
                produced += 100
            if ON_KAFKA:
                continue
            if (metric(mport, "kafka_server_fetchsessioncache_numincrementalfetchsessions") or 0) >= 1:
                cached = metric(mport, "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached")
                sessions_seen |= cached == PARTITIONS
        assert sorted(seen) == sorted(f"v{i}" for i in range(300)), "every record once"
        assert sessions_seen or ON_KAFKA, "the consumer's fetches went through a session holding every partition"
    finally:
        c.close()


def fetch_v7(conn: wire.Conn, topic: str, session_id: int, epoch: int, partitions: list[int]) -> tuple[int, int]:
    """Fetch v7 (the first with sessions) of `partitions` from offset 0: (error_code, session_id)."""
    topics = (wire.i32(1) + wire.string(topic) + wire.i32(len(partitions))
              + b"".join(wire.i32(p) + wire.i64(0) + wire.i64(-1) + wire.i32(1 << 20) for p in partitions)
              if partitions else wire.i32(0))
    body = (wire.i32(-1) + wire.i32(10) + wire.i32(0) + wire.i32(1 << 20) + wire.i8(0)
            + wire.i32(session_id) + wire.i32(epoch) + topics + wire.i32(0))  # no forgotten topics
    r = wire.Reader(conn.request(1, 7, body))
    r.i32()  # throttle_time_ms
    return r.i16(), r.i32()


def test_a_session_reopened_with_its_id_and_epoch_0_is_a_new_full_session(broker):
    topic = util.unique_topic("sessions-reopen")
    util.create_topic(broker.bootstrap, topic, partitions=1)
    with wire.Conn(broker.port) as conn:
        error, first = fetch_v7(conn, topic, 0, 0, [0])
        assert (error, first != 0) == (0, True), "a new session"
        assert fetch_v7(conn, topic, first, 1, []) == (0, first), "its first incremental fetch"
        error, second = fetch_v7(conn, topic, first, 0, [0])
        assert (error, second != 0) == (0, True), \
            "epoch 0 with a session id closes that session and opens a new one (not INVALID_FETCH_SESSION_EPOCH)"
        assert fetch_v7(conn, topic, second, 1, []) == (0, second), "the new session is in use"
