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


def _time_retention_settled(n_old: int):
    """Settled state for the old-then-new layout: the first remaining segment holds offset n_old
    (the first recent record), so every segment made only of old records is gone."""
    def settled(bases: list[int], sizes: list[int]) -> bool:
        return bool(bases) and bases[0] <= n_old and (len(bases) == 1 or bases[1] > n_old)
    return settled


def _check_trimmed(broker, topic: str, recs: list[Rec], n_old: int, settled, *, timeout: float = 60) -> int:
    """Waits until retention has settled (`settled(bases, sizes)` over the .log files, and the
    log start offset equal to the first base), then checks the log start offset, the remaining
    records byte for byte, and that the deleted segments' files are gone. Returns the start."""
    b = broker.bootstrap

    def state():
        files = broker.segment_files(topic, 0, ".log")
        bases = [int(p.name[:20]) for p in files]
        sizes = [p.stat().st_size for p in files]
        return bases, sizes

    def done():
        bases, sizes = state()
        return settled(bases, sizes) and bases[0] > 0 and util.watermarks(b, topic)[0] == bases[0]

    wait_until(done, timeout, "retention to delete every expired segment")
    start, end = util.watermarks(b, topic)
    assert end == len(recs)
    assert 0 < start <= n_old, f"log start {start}: records newer than retention were deleted"
    got = util.confluent_read(b, topic, 0, end - start, start_offset=start, timeout=60)
    assert_records(recs[start:], got, start_offset=start, what="after retention")
    assert util.watermarks(b, topic)[0] == start, "log start offset moved again after retention settled"
    wait_until(lambda: not _files_below(broker, topic, start), 30,
               f"files of deleted segments (base < {start}) removed from the partition directory")
    return start


def test_retention_ms(broker_factory):
    broker = broker_factory(RETENTION_CHECK)
    topic = util.unique_topic("ret-ms")
    util.create_topic(broker.bootstrap, topic, config={"segment.bytes": str(SEGMENT_BYTES),
                                                       "retention.ms": str(3600 * 1000)})
    recs, n_old = _produce_old_then_new(broker, topic)
    start = _check_trimmed(broker, topic, recs, n_old, _time_retention_settled(n_old))

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
    _check_trimmed(broker, topic, recs, n_old, _time_retention_settled(n_old))


def test_retention_bytes(broker_factory):
    broker = broker_factory(RETENTION_CHECK)
    topic = util.unique_topic("ret-bytes")
    retention_bytes = 2 * SEGMENT_BYTES
    util.create_topic(broker.bootstrap, topic, config={"segment.bytes": str(SEGMENT_BYTES),
                                                       "retention.bytes": str(retention_bytes)})
    recs = _records(7000, "bytes", None)  # ~7 MiB, all recent
    for i in range(0, len(recs), 1000):
        util.confluent_produce(broker.bootstrap, topic, recs[i:i + 1000])

    def bytes_settled(bases: list[int], sizes: list[int]) -> bool:
        # Kafka deletes the oldest segment while the log without it still holds >= retention.bytes.
        return len(sizes) >= 1 and sum(sizes) - sizes[0] < retention_bytes

    start = _check_trimmed(broker, topic, recs, len(recs), bytes_settled)
    log_bytes = sum(p.stat().st_size for p in broker.segment_files(topic, 0, ".log"))
    assert retention_bytes <= log_bytes <= retention_bytes + SEGMENT_BYTES, \
        f"log holds {log_bytes} bytes for retention.bytes={retention_bytes}"
    assert start >= len(recs) // 2, f"log start {start}: too little deleted"
