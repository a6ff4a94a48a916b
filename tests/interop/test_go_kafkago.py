"""Go: segmentio/kafka-go (pinned in tests/interop/go/go.mod; the program is
tests/interop/go/kafkago_client/) against the real binary, checked with librdkafka
(confluent-kafka):

- a kafka.Writer (RequiredAcks all, round-robin) writes records whose reported partitions and
  offsets are dense and are exactly where librdkafka reads them;
- a kafka.Reader with a GroupID reads each record librdkafka wrote once and commits, and the
  committed offsets librdkafka's AdminClient sees are the ends of what it read."""

from __future__ import annotations

from collections import defaultdict

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient

import util
from go_util import produce_rd, read_all, records, run

pytestmark = pytest.mark.timeout(300)  # the first test may also build the Go programs


def test_kafkago_writer_writes_what_librdkafka_reads(broker, go_clients):
    topic, n, parts = util.unique_topic("kafkago-w"), 150, 3
    util.create_topic(broker.bootstrap, topic, partitions=parts)
    acked = records(run(go_clients["kafkago_client"], "produce", broker.bootstrap, topic, str(n)))
    assert sorted(v for _, _, v in acked) == sorted(f"kg-{i}" for i in range(n)), "one ack per record"
    by_partition = defaultdict(list)
    for p, o, _ in acked:
        by_partition[p].append(o)
    assert sorted(by_partition) == list(range(parts)), "round-robin uses every partition"
    for p, offsets in by_partition.items():
        assert sorted(offsets) == list(range(len(offsets))), f"partition {p}: dense offsets from 0"

    got = read_all(broker.bootstrap, topic, parts, n)
    assert sorted(got) == sorted(acked), "librdkafka reads each record where kafka-go was told it went"


def test_kafkago_group_reader_commits_what_it_read(broker, go_clients):
    topic, group, n, parts = util.unique_topic("kafkago-g"), util.unique_topic("g-kafkago"), 90, 3
    util.create_topic(broker.bootstrap, topic, partitions=parts)
    produce_rd(broker.bootstrap, topic, n, parts)

    got = records(run(go_clients["kafkago_client"], "consume", broker.bootstrap, topic, group, str(n)))
    assert sorted(v for _, _, v in got) == sorted(f"rd-{i}" for i in range(n)), "each record once"

    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    committed = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result()
    assert sorted((tp.partition, tp.offset) for tp in committed.topic_partitions) == \
        [(p, n // parts) for p in range(parts)]
