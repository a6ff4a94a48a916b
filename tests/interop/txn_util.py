"""Helpers for test_transactions.py: reading a topic under either isolation level, the last stable
offset through ListOffsets, the broker's advertised APIs, and raw idempotent produce (InitProducerId
v0 and a RecordBatch v2 carrying a producer id, epoch and sequence, which wire.record_batch leaves
at -1).
"""

from __future__ import annotations

import struct
import time
import uuid
from dataclasses import dataclass

import wire
from broker import ON_KAFKA, wait_until

INIT_PRODUCER_ID = 22
TXN_OFFSET_COMMIT = 28
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
INVALID_PRODUCER_EPOCH = 47

TXN_BROKER = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.num.partitions": "5",
    "group.min.session.timeout.ms": "2000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
    # Small internal segments and an eager cleaner: compaction of __consumer_offsets and
    # __transaction_state (aborted offset commits removed, markers after their data)
    # runs while the transaction tests commit, abort and kill.
    # Apache Kafka 4.x refuses a topic's segment.bytes below 1 MiB, so __transaction_state is
    # never created with 16 KiB there (Strata accepts it: docs/compatibility.md); on Kafka the
    # segments are the smallest it allows.
    "offsets.topic.segment.bytes": "1048576" if ON_KAFKA else "16384",
    "transaction.state.log.segment.bytes": "1048576" if ON_KAFKA else "16384",
    "log.cleaner.backoff.ms": "200",
    "log.cleaner.delete.retention.ms": "1000",
}


def advertised(port: int) -> dict[int, tuple[int, int]]:
    with wire.Conn(port) as c:
        return wire.api_versions(c, 3).apis


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rec:
    partition: int
    offset: int
    value: str


def read_committed(bootstrap: str, topic: str, partitions: int, *, reset: str = "error", timeout: float = 60):
    """Yields every committed record of `topic` up to its read_committed end offsets (taken
    first), in offset order per partition. `reset` is the reader's auto.offset.reset: "error"
    where the log must start at 0, "earliest" where it may have been compacted or trimmed."""
    from confluent_kafka import Consumer, TopicPartition

    from util import unique_topic

    ends = end_offsets(bootstrap, topic, partitions, read_committed=True)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_topic("committed-read"),
                  "enable.auto.commit": False, "isolation.level": "read_committed",
                  "auto.offset.reset": reset, "fetch.wait.max.ms": 100, "log_level": 0})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        position = {p: 0 for p in range(partitions)}
        deadline = time.monotonic() + timeout
        while any(position[p] < ends[p] for p in range(partitions)):
            assert time.monotonic() < deadline, f"{topic} not read to {ends}: at {position}"
            m = c.poll(0.2)
            if m is None or m.error():
                # Past the last record only control records (commit markers) may remain.
                for tp in c.position([TopicPartition(topic, p) for p in range(partitions)]):
                    if tp.offset >= 0:
                        position[tp.partition] = max(position[tp.partition], tp.offset)
                continue
            position[m.partition()] = m.offset() + 1
            yield m
    finally:
        c.close()


def end_offsets(bootstrap: str, topic: str, partitions: int, *, read_committed: bool) -> dict[int, int]:
    """ListOffsets latest through librdkafka's AdminClient: the high watermark, or under
    read_committed the last stable offset."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    a = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    iso = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
    futs = a.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)},
                          isolation_level=iso, request_timeout=10)
    return {tp.partition: f.result(timeout=20).offset for tp, f in futs.items()}


def read_topic(bootstrap: str, topic: str, partitions: int, *, read_committed: bool,
               timeout: float = 30.0) -> list[Rec]:
    """Every record of every partition, from 0 up to the end offset under the isolation level
    (asked first), in offset order per partition."""
    from confluent_kafka import Consumer, TopicPartition

    ends = end_offsets(bootstrap, topic, partitions, read_committed=read_committed)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"txn-read-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "enable.partition.eof": True, "fetch.wait.max.ms": 100,
                  "isolation.level": "read_committed" if read_committed else "read_uncommitted",
                  "auto.offset.reset": "error", "log_level": 3})
    out: list[Rec] = []
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        done = {p for p in range(partitions) if ends[p] == 0}
        deadline = time.monotonic() + timeout
        while len(done) < partitions:
            if time.monotonic() > deadline:
                raise AssertionError(f"read {len(out)} records of {topic} within {timeout}s; partitions done: "
                                     f"{sorted(done)}, ends {ends}")
            for m in c.consume(1000, timeout=0.5):
                if m.error():
                    if m.error().code() == -191:  # _PARTITION_EOF: position reached the end offset
                        if m.offset() >= ends[m.partition()]:
                            done.add(m.partition())
                        continue
                    raise AssertionError(f"consumer error: {m.error()}")
                out.append(Rec(m.partition(), m.offset(), m.value().decode()))
    finally:
        c.close()
    return sorted(out, key=lambda r: (r.partition, r.offset))


# --------------------------------------------------------------------------------------------
# Raw idempotent produce
# --------------------------------------------------------------------------------------------


def init_producer_id(conn: wire.Conn, transactional_id: str | None = None, timeout_ms: int = -1
                     ) -> tuple[int, int, int]:
    """InitProducerId v0: (error_code, producer_id, producer_epoch)."""
    body = wire.string(transactional_id) + wire.i32(timeout_ms)
    r = wire.Reader(conn.request(INIT_PRODUCER_ID, 0, body))
    r.i32()  # throttle_time_ms
    err, pid, epoch = r.i16(), r.i64(), r.i16()
    if r.remaining():
        raise ValueError(f"{r.remaining()} trailing bytes in InitProducerId v0 response")
    return err, pid, epoch


def idempotent_batch(values: list[bytes], producer_id: int, producer_epoch: int, base_sequence: int,
                     *, transactional: bool = False, base_timestamp: int | None = None) -> bytes:
    """An uncompressed v2 batch of `values` (no keys or headers) from an idempotent producer."""
    ts = int(time.time() * 1000) if base_timestamp is None else base_timestamp
    recs = b"".join(wire.encode_record(i, 0, None, v) for i, v in enumerate(values))
    attributes = 0x10 if transactional else 0
    after_crc = (
        wire.i16(attributes)
        + wire.i32(len(values) - 1)  # lastOffsetDelta
        + wire.i64(ts)
        + wire.i64(ts)
        + wire.i64(producer_id)
        + wire.i16(producer_epoch)
        + wire.i32(base_sequence)
        + wire.i32(len(values))
        + recs
    )
    rest = wire.i32(-1) + wire.i8(2) + struct.pack(">I", wire.crc32c(after_crc)) + after_crc
    return wire.i64(0) + wire.i32(len(rest)) + rest


def wait_lso_caught_up(bootstrap: str, topic: str, partitions: int, timeout: float) -> dict[int, int]:
    """Waits until the last stable offset equals the high watermark on every partition (no
    transaction open on the topic); returns the end offsets."""

    def caught_up():
        hw = end_offsets(bootstrap, topic, partitions, read_committed=False)
        lso = end_offsets(bootstrap, topic, partitions, read_committed=True)
        return hw if hw == lso else None

    return wait_until(caught_up, timeout, f"the LSO of {topic} to reach the high watermark", interval=0.2)
