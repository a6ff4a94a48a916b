"""Time- and size-based retention on a broker that checks often (log.retention.check.interval.ms=500).

Proves: with 1 MiB segments (segment.bytes), segments whose newest record is older than
retention.ms are removed from the partition directory (all their files, after
log.segment.delete.delay.ms) and the log start offset (ListOffsets
EARLIEST) moves forward to a segment boundary, while every newer record stays readable byte for
byte from there; a retention.ms set later through IncrementalAlterConfigs takes effect; with
retention.bytes the log is trimmed from the oldest segment down to about that size; the new log
start offset survives a restart.

Records carry explicit CreateTime timestamps, so "old" data is old without waiting: batch A is
stamped two hours ago, batch B now. Retention never deletes the active segment's newest data.
"""

from __future__ import annotations

import random
import time

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

import util
from util import Rec, assert_records, wait_until

pytestmark = pytest.mark.timeout(180)

SEGMENT_BYTES = 1 << 20
# Check retention every 500 ms, and remove a deleted segment's files 100 ms after it is dropped
# (Kafka first renames them to *.deleted, then removes them after log.segment.delete.delay.ms).
RETENTION_CHECK = {"log.retention.check.interval.ms": "500", "log.segment.delete.delay.ms": "100"}


def _records(n: int, tag: str, ts: int | None) -> list[Rec]:
    rnd = random.Random(tag)
    return [Rec(f"{tag}-{i}".encode(), rnd.randbytes(1000), [("i", str(i).encode())], timestamp=ts)
            for i in range(n)]


def _segment_bases(broker, topic: str) -> list[int]:
    """Base offsets of the .log segment files in the partition directory (not *.deleted)."""
    return [int(p.name[:-4]) for p in broker.segment_files(topic, 0, ".log")]


def _files_below(broker, topic: str, offset: int) -> list[str]:
    """Files of the partition directory belonging to segments with a base offset below `offset`
    (.log, .index, .timeindex, .txnindex, also renamed *.deleted ones; producer-state
    snapshots are not segment files and are left out)."""
    d = broker.partition_dir(topic, 0)
    return sorted(p.name for p in d.iterdir()
                  if p.name[:20].isdigit() and int(p.name[:20]) < offset and not p.name.endswith(".snapshot"))


def _produce_old_then_new(broker, topic: str) -> tuple[list[Rec], int]:
    old_ts = int(time.time() * 1000) - 2 * 3600 * 1000
    a = _records(6000, "old", old_ts)  # ~6 MiB: several full segments
    b = _records(300, "new", None)
    util.confluent_produce(broker.bootstrap, topic, a)
    util.confluent_produce(broker.bootstrap, topic, b)
    return a + b, len(a)


def _check_trimmed(broker, topic: str, recs: list[Rec], n_old: int, *, timeout: float = 60) -> int:
    """Waits until the log start offset has moved past 0 and the first segment file is gone;
    returns the new log start offset after checking what remains is exact."""
    b = broker.bootstrap
    wait_until(lambda: util.watermarks(b, topic)[0] > 0, timeout, "log start offset to move forward")
    wait_until(lambda: 0 not in _segment_bases(broker, topic), timeout, "first segment file removed")
    start, end = util.watermarks(b, topic)
    assert end == len(recs)
    assert 0 < start <= n_old, f"log start {start}: records newer than retention were deleted"
    bases = _segment_bases(broker, topic)
    assert bases and min(bases) == start, f"log start {start} is not the first segment's base {bases}"
    got = util.confluent_read(b, topic, 0, end - start, start_offset=start, timeout=60)
    assert_records(recs[start:], got, start_offset=start, what="after retention")
    wait_until(lambda: not _files_below(broker, topic, start), 30,
               f"files of deleted segments (base < {start}) removed from the partition directory")
    return start


def test_retention_ms(broker_factory):
    broker = broker_factory(RETENTION_CHECK)
    topic = util.unique_topic("ret-ms")
    util.create_topic(broker.bootstrap, topic, config={"segment.bytes": str(SEGMENT_BYTES),
                                                       "retention.ms": str(3600 * 1000)})
    recs, n_old = _produce_old_then_new(broker, topic)
    start = _check_trimmed(broker, topic, recs, n_old)

    # The log start offset survives a clean restart.
    broker.stop()
    broker.start()
    assert util.watermarks(broker.bootstrap, topic) == (start, len(recs))


def test_retention_ms_set_later_takes_effect(broker_factory):
    broker = broker_factory(RETENTION_CHECK)
    topic = util.unique_topic("ret-alter")
    util.create_topic(broker.bootstrap, topic, config={"segment.bytes": str(SEGMENT_BYTES)})
    recs, n_old = _produce_old_then_new(broker, topic)
    bases = _segment_bases(broker, topic)
    assert len(bases) >= 5, f"expected several 1 MiB segments, got {bases}"
    # Under the default retention (7 days) nothing goes. A negative check cannot await a
    # condition: give the broker six retention checks' worth of time.
    time.sleep(3)
    assert util.watermarks(broker.bootstrap, topic)[0] == 0
    assert _segment_bases(broker, topic) == bases

    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", str(3600 * 1000), incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([res])[res].result(timeout=30)
    _check_trimmed(broker, topic, recs, n_old)


def test_retention_bytes(broker_factory):
    broker = broker_factory(RETENTION_CHECK)
    topic = util.unique_topic("ret-bytes")
    retention_bytes = 2 * SEGMENT_BYTES
    util.create_topic(broker.bootstrap, topic, config={"segment.bytes": str(SEGMENT_BYTES),
                                                       "retention.bytes": str(retention_bytes)})
    recs = _records(7000, "bytes", None)  # ~7 MiB, all recent
    for i in range(0, len(recs), 1000):
        util.confluent_produce(broker.bootstrap, topic, recs[i:i + 1000])

    def log_bytes() -> int:
        return sum(p.stat().st_size for p in broker.segment_files(topic, 0, ".log"))

    # Kafka deletes the oldest segment while the log minus that segment is still >= retention.bytes,
    # so the log ends between retention.bytes and retention.bytes + one segment.
    wait_until(lambda: log_bytes() <= retention_bytes + SEGMENT_BYTES, 60,
               f"log trimmed to retention.bytes ({retention_bytes}) + one segment")
    start = _check_trimmed(broker, topic, recs, len(recs))
    assert log_bytes() >= retention_bytes - SEGMENT_BYTES, "trimmed far below retention.bytes"
    assert start >= len(recs) // 2, f"log start {start}: too little deleted"
