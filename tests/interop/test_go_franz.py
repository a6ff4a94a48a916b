"""Go: twmb/franz-go (kgo and kadm, pinned in tests/interop/go/go.mod; the program is
tests/interop/go/franz_client/) against the real binary, checked with librdkafka
(confluent-kafka):

- kgo's default producer (idempotent, acks=all) writes what librdkafka reads back exactly once,
  densely and in send order per partition;
- a kgo.ConsumerGroup member (cooperative-sticky) reads what librdkafka wrote; DescribeGroups
  shows it Stable with every partition; the offsets it commits are what librdkafka's
  AdminClient and Consumer.committed see;
- a kgo.TransactionalID producer commits, aborts and commits a transaction: a read_committed
  librdkafka consumer sees exactly the committed records, in order, and a read_uncommitted one
  all three;
- kadm creates and lists a topic, lists start and end offsets, fetches a group's committed
  offsets and describes the (empty) group."""

from __future__ import annotations

from collections import defaultdict

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

import util
from go_util import produce_rd, read_all, records, run, tagged_json

pytestmark = pytest.mark.timeout(300)  # the first test may also build the Go programs


def franz(go_clients, *args: str) -> list[str]:
    return run(go_clients["franz_client"], *args)


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"hw-{topic}"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        c.close()


def test_franz_idempotent_producer_writes_what_librdkafka_reads(broker, go_clients):
    topic, n, parts = util.unique_topic("franz-idem"), 300, 3
    util.create_topic(broker.bootstrap, topic, partitions=parts)
    acked = records(franz(go_clients, "produce", broker.bootstrap, topic, str(n), str(parts)))
    assert [v for _, _, v in acked] == [f"fr-{i}" for i in range(n)], "one ack per record, in send order"
    sent = defaultdict(list)
    for p, o, v in acked:
        sent[p].append((o, v))
    for p in range(parts):
        want = [f"fr-{i}" for i in range(p, n, parts)]
        assert sent[p] == list(enumerate(want)), f"partition {p}: dense offsets from 0 in send order"

    got = read_all(broker.bootstrap, topic, parts, n)
    assert len(set((p, o) for p, o, _ in got)) == n, "each offset read once"
    by_partition = defaultdict(list)
    for p, o, v in got:
        by_partition[p].append((o, v))
    assert dict(by_partition) == dict(sent), "librdkafka reads exactly what franz-go wrote, in order"
    assert high_watermarks(broker.bootstrap, topic, parts) == {p: n // parts for p in range(parts)}, \
        "nothing written twice (the idempotent producer's retries, if any, were deduplicated)"


def test_franz_group_consumer_commits_what_it_read(broker, go_clients):
    topic, group, n, parts = util.unique_topic("franz-group"), util.unique_topic("g-franz"), 90, 3
    util.create_topic(broker.bootstrap, topic, partitions=parts)
    produce_rd(broker.bootstrap, topic, n, parts)

    lines = franz(go_clients, "consume", broker.bootstrap, topic, group, str(n))
    got = records([line for line in lines if not line.startswith("group ")])
    assert sorted(v for _, _, v in got) == sorted(f"rd-{i}" for i in range(n)), "each record once"
    g = tagged_json(lines, "group")
    assert (g["state"], g["protocol_type"], g["protocol"], g["members"]) == \
        ("Stable", "consumer", "cooperative-sticky", 1), g
    assert sorted(g["assigned"].get(topic, [])) == list(range(parts)), g

    want = [(p, n // parts) for p in range(parts)]
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    committed = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result()
    assert sorted((tp.partition, tp.offset) for tp in committed.topic_partitions) == want
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(parts)], timeout=10)
        assert sorted((tp.partition, tp.offset) for tp in tps) == want
    finally:
        c.close()


def test_franz_transactions_read_committed_sees_only_committed(broker, go_clients):
    topic, n = util.unique_topic("franz-txn"), 20
    util.create_topic(broker.bootstrap, topic, partitions=1)
    lines = franz(go_clients, "txn", broker.bootstrap, topic, str(n))
    written = defaultdict(list)
    for line in lines:
        verb, p, o, v = line.split(" ", 3)
        written[verb].append((int(o), v))
    c1, aborted, c2 = written["commit"][:n], written["abort"], written["commit"][n:]
    assert [len(c1), len(aborted), len(c2)] == [n, n, n], lines[-5:]
    assert max(o for o, _ in c1) < min(o for o, _ in aborted) <= max(o for o, _ in aborted) < min(o for o, _ in c2)

    committed = read_all(broker.bootstrap, topic, 1, 2 * n, isolation="read_committed")
    assert [(o, v) for _, o, v in committed] == c1 + c2, "read_committed: the committed records only, in order"
    everything = read_all(broker.bootstrap, topic, 1, 3 * n)
    assert [(o, v) for _, o, v in everything] == c1 + aborted + c2, "read_uncommitted also sees the aborted ones"


def test_franz_kadm_admin(broker, go_clients):
    topic, group, parts = util.unique_topic("franz-kadm"), util.unique_topic("g-kadm"), 3
    created = tagged_json(franz(go_clients, "admin-create", broker.bootstrap, topic, str(parts)), "created")
    assert (created["topic"], created["partitions"], created["listed_partitions"]) == (topic, parts, parts)
    assert created["topic_id"] != "AAAAAAAAAAAAAAAAAAAAAA", "a topic id is listed"
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert len(a.list_topics(topic, timeout=10).topics[topic].partitions) == parts

    produce_rd(broker.bootstrap, topic, 30, parts)
    want_committed = {0: 4, 1: 7, 2: 10}
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        # The first commit creates __consumer_offsets; until its partition is loaded the
        # coordinator answers COORDINATOR_LOAD_IN_PROGRESS (retriable, as in Kafka).
        util.wait_until(lambda: c.commit(offsets=[TopicPartition(topic, p, o) for p, o in want_committed.items()],
                                         asynchronous=False), 30, "librdkafka commits the group's offsets")
    finally:
        c.close()

    d = tagged_json(franz(go_clients, "admin-describe", broker.bootstrap, topic, group), "described")
    assert d["start"] == {str(p): 0 for p in range(parts)}
    assert d["end"] == {str(p): 10 for p in range(parts)}
    assert d["committed"] == {str(p): o for p, o in want_committed.items()}
    assert d["group"]["state"] == "Empty" and d["group"]["members"] == 0, d["group"]
