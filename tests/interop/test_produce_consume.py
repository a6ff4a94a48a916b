"""Produce and read back with every client and every codec.

Proves that what each client library produces (confluent-kafka/librdkafka, kafka-python,
aiokafka, kafkajs, kcat) with each compression codec (none, gzip, snappy, lz4, zstd) is stored
and served back byte for byte: same keys, values and headers, in order, at dense offsets from 0,
both to the producing client and to a different client. Also: multi-partition topics keep
per-partition order, produce auto-creates a topic, null keys/values and a near-1 MiB record survive.

Record counts (chosen to keep the whole interop suite inside its time budget on 2 cores):
  - confluent-kafka: 100,000 records per codec, read back in full by confluent-kafka;
    the first 20,000 of them are also read by kafka-python, aiokafka, kafkajs and kcat.
  - kafka-python, aiokafka, kafkajs, kcat: 20,000 records per codec, read back by the same
    client and by confluent-kafka.
Consumers use explicit partition assignment (Strata has no consumer groups yet).
"""

from __future__ import annotations

import pytest

import util
from util import CODECS, KCAT_HEADERS, Rec, assert_records, make_records

N_CONFLUENT = 100_000
N_OTHER = 20_000
N_CROSS = 20_000


def _assert_dense_acks(acks: list[tuple[int, int]], what: str) -> None:
    for i, (p, o) in enumerate(acks):
        if (p, o) != (0, i):
            raise AssertionError(f"{what}: record #{i} acknowledged at partition {p} offset {o}, "
                                 f"expected partition 0 offset {i}")


# --------------------------------------------------------------------------------------------
# confluent-kafka: 100k per codec on a shared broker, read by every client
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def confluent_topics(module_broker):
    """codec -> (topic, records), produced once per module by confluent-kafka on demand."""
    cache: dict[str, tuple[str, list[Rec]]] = {}

    def get(codec: str) -> tuple[str, list[Rec]]:
        if codec not in cache:
            topic = util.unique_topic(f"cfk-{codec}")
            util.create_topic(module_broker.bootstrap, topic)
            recs = make_records(N_CONFLUENT, f"cfk-{codec}")
            acks = util.confluent_produce(module_broker.bootstrap, topic, recs, codec=codec)
            _assert_dense_acks(acks, f"confluent {codec}")
            cache[codec] = (topic, recs)
        return cache[codec]

    return get


@pytest.mark.timeout(240)
@pytest.mark.parametrize("codec", CODECS)
def test_confluent_100k_roundtrip(module_broker, confluent_topics, codec):
    topic, recs = confluent_topics(codec)
    assert util.watermarks(module_broker.bootstrap, topic) == (0, N_CONFLUENT)
    got = util.confluent_read(module_broker.bootstrap, topic, 0, N_CONFLUENT, timeout=120)
    assert_records(recs, got, what=f"confluent {codec}")


READERS = ["kafka-python", "aiokafka", "kafkajs", "kcat"]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("codec", CODECS)
def test_other_clients_read_confluent_data(module_broker, confluent_topics, codec, reader, tmp_path):
    topic, recs = confluent_topics(codec)
    b = module_broker.bootstrap
    if reader == "kafka-python":
        got = util.kafka_python_read(b, topic, 0, N_CROSS)
    elif reader == "aiokafka":
        got = util.aiokafka_read(b, topic, 0, N_CROSS)
    elif reader == "kafkajs":
        got = util.kafkajs_read(b, topic, 0, N_CROSS, tmp_path)
    else:
        got = util.kcat_read(b, topic, 0, N_CROSS, with_headers=False)
    # kcat prints headers as text only; these records carry a binary header, so kcat's
    # headers are not compared (keys and values are, byte for byte).
    assert_records(recs[:N_CROSS], got, check_headers=reader != "kcat", what=f"{reader} reading confluent {codec}")


@pytest.mark.timeout(120)
def test_confluent_read_from_middle(module_broker, confluent_topics):
    """A fetch starting inside a (compressed) batch gets exactly the records from that offset."""
    topic, recs = confluent_topics("lz4")
    for start in (1, 777, 54_321, N_CONFLUENT - 1):
        got = util.confluent_read(module_broker.bootstrap, topic, 0, min(1000, N_CONFLUENT - start),
                                  start_offset=start)
        assert_records(recs[start:start + 1000], got, start_offset=start, what=f"from offset {start}")


# --------------------------------------------------------------------------------------------
# The other producers: 20k per codec, read by themselves and by confluent-kafka
# --------------------------------------------------------------------------------------------


@pytest.mark.timeout(240)
@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_roundtrip(module_broker, codec):
    b, topic = module_broker.bootstrap, util.unique_topic(f"kp-{codec}")
    util.create_topic(b, topic)
    recs = make_records(N_OTHER, f"kp-{codec}")
    _assert_dense_acks(util.kafka_python_produce(b, topic, recs, codec=codec), f"kafka-python {codec}")
    assert_records(recs, util.kafka_python_read(b, topic, 0, N_OTHER), what="kafka-python reading itself")
    assert_records(recs, util.confluent_read(b, topic, 0, N_OTHER), what="confluent reading kafka-python")


@pytest.mark.timeout(240)
@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_roundtrip(module_broker, codec):
    b, topic = module_broker.bootstrap, util.unique_topic(f"aio-{codec}")
    util.create_topic(b, topic)
    recs = make_records(N_OTHER, f"aio-{codec}")
    _assert_dense_acks(util.aiokafka_produce(b, topic, recs, codec=codec), f"aiokafka {codec}")
    assert_records(recs, util.aiokafka_read(b, topic, 0, N_OTHER), what="aiokafka reading itself")
    assert_records(recs, util.confluent_read(b, topic, 0, N_OTHER), what="confluent reading aiokafka")


@pytest.mark.kafka_smoke
@pytest.mark.timeout(240)
@pytest.mark.parametrize("codec", CODECS)
def test_kafkajs_roundtrip(module_broker, codec, tmp_path):
    b, topic = module_broker.bootstrap, util.unique_topic(f"js-{codec}")
    util.create_topic(b, topic)
    recs = make_records(N_OTHER, f"js-{codec}")
    util.kafkajs_produce(b, topic, recs, tmp_path, codec=codec)
    assert util.watermarks(b, topic) == (0, N_OTHER)
    assert_records(recs, util.kafkajs_read(b, topic, 0, N_OTHER, tmp_path), what="kafkajs reading itself")
    assert_records(recs, util.confluent_read(b, topic, 0, N_OTHER), what="confluent reading kafkajs")


@pytest.mark.timeout(240)
@pytest.mark.parametrize("codec", CODECS)
def test_kcat_roundtrip(module_broker, codec):
    b, topic = module_broker.bootstrap, util.unique_topic(f"kcat-{codec}")
    util.create_topic(b, topic)
    recs = make_records(N_OTHER, f"kcat-{codec}", text_only=True, headers=False)
    for r in recs:
        r.headers = list(KCAT_HEADERS)
    util.kcat_produce(b, topic, recs, codec=codec)
    assert util.watermarks(b, topic) == (0, N_OTHER)
    assert_records(recs, util.kcat_read(b, topic, 0, N_OTHER), what="kcat reading itself")
    assert_records(recs, util.confluent_read(b, topic, 0, N_OTHER), what="confluent reading kcat")


# --------------------------------------------------------------------------------------------
# Partitions, auto-creation, edge-case records
# --------------------------------------------------------------------------------------------

PARTITIONS = 4
N_MULTI = 8_000


@pytest.mark.timeout(180)
@pytest.mark.parametrize("producer", ["confluent", "kafka-python", "aiokafka", "kafkajs"])
def test_multi_partition(module_broker, producer, tmp_path):
    """Records spread over 4 partitions by explicit partition number: each partition holds its
    share in order at dense offsets, read back per partition by confluent-kafka."""
    b, topic = module_broker.bootstrap, util.unique_topic(f"multi-{producer}")
    util.create_topic(b, topic, partitions=PARTITIONS)
    recs = make_records(N_MULTI, f"multi-{producer}", partitions=PARTITIONS, seed=7)
    codec = {"confluent": "lz4", "kafka-python": "gzip", "aiokafka": "zstd", "kafkajs": "snappy"}[producer]
    if producer == "confluent":
        util.confluent_produce(b, topic, recs, codec=codec)
    elif producer == "kafka-python":
        util.kafka_python_produce(b, topic, recs, codec=codec)
    elif producer == "aiokafka":
        util.aiokafka_produce(b, topic, recs, codec=codec)
    else:
        util.kafkajs_produce(b, topic, recs, tmp_path, codec=codec)
    for p, expected in util.by_partition(recs).items():
        assert util.watermarks(b, topic, p) == (0, len(expected)), f"partition {p}"
        got = util.confluent_read(b, topic, p, len(expected))
        assert all(g.partition == p for g in got)
        assert_records(expected, got, what=f"{producer} partition {p}")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("producer", ["confluent", "kafka-python", "kafkajs", "kcat"])
def test_auto_create_topic_on_produce(broker, producer, tmp_path):
    """Producing to a topic that does not exist creates it (auto.create.topics.enable defaults to
    true) with num.partitions (default 1) partitions, and the records are there."""
    b, topic = broker.bootstrap, util.unique_topic(f"auto-{producer}")
    n = 500
    if producer == "kcat":
        recs = make_records(n, topic, text_only=True, headers=False)
        for r in recs:
            r.headers = list(KCAT_HEADERS)
        util.kcat_produce(b, topic, recs)
    else:
        recs = make_records(n, topic)
        if producer == "confluent":
            util.confluent_produce(b, topic, recs)
        elif producer == "kafka-python":
            util.kafka_python_produce(b, topic, recs)
        else:
            util.kafkajs_produce(b, topic, recs, tmp_path)
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": b}).list_topics(topic, timeout=10)
    assert topic in md.topics and md.topics[topic].error is None, md.topics.get(topic)
    assert len(md.topics[topic].partitions) == 1
    assert (broker.data_dir / f"{topic}-0").is_dir(), "partition directory not created"
    assert_records(recs, util.confluent_read(b, topic, 0, n), what="auto-created topic")


@pytest.mark.timeout(120)
def test_null_key_null_value_empty_value_and_header_edge_cases(broker):
    """Null key, null value (tombstone), empty key/value, a header with a null value, duplicate
    header names, many headers: kept distinct and exact, read by confluent-kafka and kafka-python."""
    b, topic = broker.bootstrap, util.unique_topic("edge")
    util.create_topic(b, topic)
    recs = [
        Rec(None, b"null key", [("h", b"1")]),
        Rec(b"null value", None, [("h", b"2")]),
        Rec(b"", b"", []),
        Rec(b"empty value", b"", [("h", b"")]),
        Rec(b"dup headers", b"x", [("a", b"1"), ("a", b"2"), ("b", b"3")]),
        Rec(b"many headers", b"y", [(f"h{i}", bytes([i])) for i in range(50)]),
        Rec(b"\x00\xff binary key", bytes(range(256)) * 4, [("bin", b"\x00\x01\xfe\xff")]),
    ]
    for codec in ("none", "zstd"):
        util.confluent_produce(b, topic, recs, codec=codec)
    expected = recs + recs
    assert_records(expected, util.confluent_read(b, topic, 0, len(expected)), what="confluent")
    assert_records(expected, util.kafka_python_read(b, topic, 0, len(expected)), what="kafka-python")


@pytest.mark.timeout(120)
def test_large_record(broker):
    """A single ~900 KiB record (under the 1 MiB default max.message.bytes) round-trips, alone and
    next to small ones, compressed and not."""
    import random

    b, topic = broker.bootstrap, util.unique_topic("large")
    util.create_topic(b, topic)
    big = random.Random(3).randbytes(900 * 1024)
    recs = [Rec(b"before", b"small"), Rec(b"big", big), Rec(b"after", b"small")]
    util.confluent_produce(b, topic, recs, codec="none", extra={"message.max.bytes": 2_000_000})
    util.confluent_produce(b, topic, recs, codec="zstd", extra={"message.max.bytes": 2_000_000})
    assert_records(recs + recs, util.confluent_read(b, topic, 0, 6), what="large records")
