"""Go: IBM/sarama (the version pinned in tests/interop/go/go.mod, built offline by the
`go_clients` fixture from tests/interop/go/sarama_client/) against the real binary, configured
as for Kafka 4.0 (`Config.Version`), so it sends current request versions. Its idempotent
producer (and its plain one) writes what librdkafka reads back, densely, in order per
partition; its consumer group reads what librdkafka wrote and commits exactly the offsets it
read.

franz-go is tested in test_go_franz.py and segmentio/kafka-go in test_go_kafkago.py."""

from __future__ import annotations

from collections import defaultdict

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

import util
from go_util import run

pytestmark = pytest.mark.timeout(300)  # the first test also builds the Go programs


@pytest.mark.parametrize("mode", ["idempotent", "plain"])
def test_sarama_producer_writes_what_librdkafka_reads(broker, go_clients, mode):
    topic, n = util.unique_topic(f"go-{mode}"), 200
    util.create_topic(broker.bootstrap, topic, partitions=3)
    args = ["produce", broker.bootstrap, topic, str(n)] + (["idempotent"] if mode == "idempotent" else [])
    acks = [tuple(map(int, line.split())) for line in run(go_clients["sarama_client"], *args)]
    assert len(acks) == n
    by_partition = defaultdict(list)
    for partition, offset in acks:
        by_partition[partition].append(offset)
    for partition, offsets in by_partition.items():
        assert offsets == list(range(len(offsets))), f"partition {partition}: dense offsets in send order"

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"check-{topic}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(3)])
        seen = {}
        while len(seen) < n:
            m = c.poll(10)
            assert m is not None, f"read {len(seen)} of {n}"
            assert m.error() is None, m.error()
            seen[(m.partition(), m.offset())] = m.value().decode()
        assert sorted(seen.values()) == sorted(f"go-{i}" for i in range(n))
    finally:
        c.close()


def test_sarama_group_consumer_commits_what_it_read(broker, go_clients):
    topic, group, n = util.unique_topic("go-group"), "g-sarama", 90
    util.create_topic(broker.bootstrap, topic, partitions=3)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(n):
        p.produce(topic, value=f"rd-{i}".encode(), partition=i % 3)
    assert p.flush(15) == 0

    lines = run(go_clients["sarama_client"], "consume", broker.bootstrap, topic, group, str(n))
    values = [line.split(" ", 2)[2] for line in lines]
    assert sorted(values) == sorted(f"rd-{i}" for i in range(n)), "each record once"

    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    committed = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result()
    assert sorted((tp.partition, tp.offset) for tp in committed.topic_partitions) == [(0, 30), (1, 30), (2, 30)]
