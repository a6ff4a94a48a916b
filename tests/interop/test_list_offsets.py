"""ListOffsets as five clients use it.

Proves: EARLIEST (-2) and LATEST (-1) give the log start offset and the high watermark; a lookup
by timestamp gives the first offset whose record timestamp is >= the target (across batches, with
timestamps that are not monotonic), or "none" (-1) past the last one; MAX_TIMESTAMP (-3, KIP-734,
ListOffsets v7) gives the offset and timestamp of the record with the largest timestamp, for the
clients that support it (confluent-kafka AdminClient, kafka-python admin). Clients: confluent-kafka
(Consumer and AdminClient), kafka-python, aiokafka, kafkajs admin, kcat -Q. Also an empty topic,
and a LogAppendTime topic where the broker's clock replaces the producer's timestamps.
"""

from __future__ import annotations

import asyncio
import subprocess
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

import util
from util import Rec

pytestmark = pytest.mark.timeout(120)

N = 100
MAX_AT = 57  # the record with the largest timestamp (not the last one)


def _timestamps(t0: int) -> list[int]:
    ts = [t0 + i * 1000 for i in range(N)]
    ts[MAX_AT] = t0 + 200_000
    return ts


@pytest.fixture
def timed_topic(broker):
    """A topic with N records in 4 produce calls (so several batches), record i stamped
    t0 + i s, except record MAX_AT stamped t0 + 200 s. t0 is 10 minutes ago."""
    t0 = (int(time.time()) - 600) * 1000
    topic = util.unique_topic("times")
    util.create_topic(broker.bootstrap, topic)
    recs = util.make_records(N, topic, timestamps=_timestamps(t0))
    for i in range(0, N, 25):
        util.confluent_produce(broker.bootstrap, topic, recs[i:i + 25], codec="zstd" if i % 50 else "none")
    return topic, t0, recs


def expected_offset_for(ts_target: int, t0: int) -> int:
    """First offset whose timestamp is >= ts_target, or -1."""
    for i, ts in enumerate(_timestamps(t0)):
        if ts >= ts_target:
            return i
    return -1


def targets(t0: int) -> list[int]:
    return [t0 - 1, t0, t0 + 10_500, t0 + 20_000, t0 + 57_000, t0 + 99_000, t0 + 150_000, t0 + 200_000,
            t0 + 200_001]


def test_record_timestamps_are_kept(broker, timed_topic):
    topic, t0, recs = timed_topic
    got = util.confluent_read(broker.bootstrap, topic, 0, N)
    util.assert_records(recs, got, check_timestamps=True)


def test_confluent_consumer(broker, timed_topic):
    topic, t0, _ = timed_topic
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lo", "enable.auto.commit": False})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False) == (0, N)
        for ts in targets(t0):
            (tp,) = c.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=10)
            assert tp.error is None
            assert tp.offset == expected_offset_for(ts, t0), f"offsets_for_times({ts - t0:+d} ms from t0)"
    finally:
        c.close()


@pytest.mark.kafka_smoke
def test_confluent_admin_list_offsets(broker, timed_topic):
    topic, t0, _ = timed_topic
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    tp = TopicPartition(topic, 0)

    def one(spec):
        return list(a.list_offsets({tp: spec}, request_timeout=10).values())[0].result(timeout=30)

    assert one(OffsetSpec.earliest()).offset == 0
    assert one(OffsetSpec.latest()).offset == N
    mx = one(OffsetSpec.max_timestamp())
    assert (mx.offset, mx.timestamp) == (MAX_AT, t0 + 200_000)
    for ts in targets(t0):
        r = one(OffsetSpec.for_timestamp(ts))
        exp = expected_offset_for(ts, t0)
        assert r.offset == exp, f"for_timestamp({ts - t0:+d} ms from t0)"
        if exp >= 0:
            assert r.timestamp == _timestamps(t0)[exp]


def test_kafka_python(broker, timed_topic):
    from kafka import KafkaConsumer, KafkaAdminClient
    from kafka import TopicPartition as KTP
    from kafka.admin import OffsetSpec as KOffsetSpec

    topic, t0, _ = timed_topic
    tp = KTP(topic, 0)
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    try:
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: N}
        for ts in targets(t0):
            r = c.offsets_for_times({tp: ts})[tp]
            exp = expected_offset_for(ts, t0)
            if exp < 0:
                assert r is None, f"offsets_for_times({ts - t0:+d}): {r}"
            else:
                assert (r.offset, r.timestamp) == (exp, _timestamps(t0)[exp]), f"offsets_for_times({ts - t0:+d})"
    finally:
        c.close()
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        r = a.list_partition_offsets({tp: KOffsetSpec.MAX_TIMESTAMP})[tp]
        assert (r.offset, r.timestamp) == (MAX_AT, t0 + 200_000)
        assert a.list_partition_offsets({tp: KOffsetSpec.EARLIEST})[tp].offset == 0
        assert a.list_partition_offsets({tp: KOffsetSpec.LATEST})[tp].offset == N
    finally:
        a.close()


def test_aiokafka(broker, timed_topic):
    from aiokafka import AIOKafkaConsumer, TopicPartition as ATP

    topic, t0, _ = timed_topic

    async def run():
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
        await c.start()
        try:
            tp = ATP(topic, 0)
            assert await c.beginning_offsets([tp]) == {tp: 0}
            assert await c.end_offsets([tp]) == {tp: N}
            for ts in targets(t0):
                r = (await c.offsets_for_times({tp: ts}))[tp]
                exp = expected_offset_for(ts, t0)
                if exp < 0:
                    assert r is None
                else:
                    assert (r.offset, r.timestamp) == (exp, _timestamps(t0)[exp]), f"{ts - t0:+d}"
        finally:
            await c.stop()

    asyncio.run(run())


def test_kafkajs(broker, timed_topic):
    topic, t0, _ = timed_topic
    out = util.kafkajs_offsets(broker.bootstrap, topic, t0 + 10_500)
    (p,) = out["offsets"]
    assert (p["partition"], p["low"], p["high"], p["offset"]) == (0, "0", str(N), str(N)), out
    assert out["byTimestamp"] == [{"partition": 0, "offset": str(expected_offset_for(t0 + 10_500, t0))}], out


@pytest.mark.kafka_smoke
def test_kcat_query(broker, timed_topic):
    topic, t0, _ = timed_topic
    for ts in (t0 + 20_000, t0 + 150_000):
        p = subprocess.run([util.kcat_bin(), "-Q", "-b", broker.bootstrap, "-t", f"{topic}:0:{ts}"],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        assert f"offset {expected_offset_for(ts, t0)}" in p.stdout, p.stdout


def test_empty_topic(broker):
    topic = util.unique_topic("empty")
    util.create_topic(broker.bootstrap, topic)
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    tp = TopicPartition(topic, 0)
    for spec, exp in [(OffsetSpec.earliest(), 0), (OffsetSpec.latest(), 0),
                      (OffsetSpec.for_timestamp(int(time.time() * 1000)), -1)]:
        r = list(a.list_offsets({tp: spec}).values())[0].result(timeout=30)
        assert r.offset == exp, spec
    assert util.watermarks(broker.bootstrap, topic) == (0, 0)


def test_log_append_time_topic(broker):
    """message.timestamp.type=LogAppendTime: records read back carry the broker's append time
    (timestamp type 2), not the producer's, and time lookups use it."""
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME

    topic = util.unique_topic("lat")
    util.create_topic(broker.bootstrap, topic, config={"message.timestamp.type": "LogAppendTime"})
    old = (int(time.time()) - 3000) * 1000
    before = int(time.time() * 1000)
    util.confluent_produce(broker.bootstrap, topic, [Rec(b"k", b"v", timestamp=old) for _ in range(10)])
    after = int(time.time() * 1000)
    from confluent_kafka import Consumer as C

    c = C({"bootstrap.servers": broker.bootstrap, "group.id": "lat", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        msgs = []
        deadline = time.monotonic() + 20
        while len(msgs) < 10 and time.monotonic() < deadline:
            msgs += [m for m in c.consume(10, timeout=0.5) if not m.error()]
        assert len(msgs) == 10
        for m in msgs:
            kind, ts = m.timestamp()
            assert kind == TIMESTAMP_LOG_APPEND_TIME, m.timestamp()
            assert before - 1000 <= ts <= after + 1000, (ts, before, after)
        (tp,) = c.offsets_for_times([TopicPartition(topic, 0, old + 1000)], timeout=10)
        assert tp.offset == 0, "lookup must use the append time, which is after `old`"
    finally:
        c.close()
