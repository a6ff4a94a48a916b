"""Fetching from the closest replica (KIP-392) on a 3-node cluster whose brokers name racks
(`broker.rack` r0, r1, r2) and run Kafka's `RackAwareReplicaSelector`.

Proves: a confluent-kafka (librdkafka) consumer whose `client.rack` names a follower's rack reads
every record from that follower (librdkafka's statistics name the broker it fetches from; on
Strata the follower's consumer bytes-out metric counts the records too, and the leader's stays at
zero for the topic), and so does `strata consume -X client.rack=...` (the Rust client, on Strata);
a consumer in the leader's rack, one without a rack, and any consumer of a cluster without the
selector read from the leader; killing the follower a consumer reads from sends it back to the
leader without losing or repeating a record; `read_committed` from a follower sees committed
transactions only; an unknown `replica.selector.class` stops the broker at startup with an error
naming the key. The same on Apache Kafka (`STRATA_TARGET=kafka`), by the statistics alone.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import util
from broker import ON_KAFKA, free_port, new_broker, strata_bin
from util import wait_until

pytestmark = pytest.mark.timeout(240)

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def rack(i: int) -> str:
    return f"r{i}"


def racked_cluster(cluster_factory, selector: str | None = RACK_AWARE):
    """A started 3-node cluster, node i in rack r<i>, each with a metrics port on Strata (returned)."""
    c = cluster_factory(start=False)
    ports = [free_port() for _ in c.nodes]
    for i, (n, port) in enumerate(zip(c.nodes, ports)):
        n.overrides["broker.rack"] = rack(i)
        if not ON_KAFKA:
            n.overrides["metrics.listener"] = f"http://127.0.0.1:{port}"
        if selector:
            n.overrides["replica.selector.class"] = selector
    c.start()
    return c, ports


def bytes_out(port: int, topic: str) -> float:
    """Record bytes a node sent to consumers (not followers) for `topic` (Strata's metrics; on
    Kafka, where the tests do not read JMX, `served` alone says who served)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        lines = r.read().decode().splitlines()
    total = 0.0
    for ln in lines:
        if ln.startswith("kafka_server_brokertopicmetrics_bytesout") and f'topic="{topic}"' in ln:
            total += float(ln.rsplit(" ", 1)[1])
    return total


def topic_on_three(c, name: str) -> tuple[str, int, list[int]]:
    """Creates a one-partition RF 3 topic; returns it, its leader and its followers, once the
    ISR is whole (so each follower may be offered)."""
    topic = util.unique_topic(name)
    admin = AdminClient({"bootstrap.servers": c.bootstrap, "log_level": 0})
    for f in admin.create_topics([NewTopic(topic, 1, 3)], operation_timeout=20).values():
        f.result(30)
    c.wait_isr(topic, 0, {0, 1, 2})
    leader = c.partition(topic, 0).leader
    return topic, leader, [i for i in range(3) if i != leader]


def produce(c, topic: str, start: int, count: int) -> None:
    p = Producer({"bootstrap.servers": c.live_bootstrap(), "acks": "all", "linger.ms": 5, "log_level": 0})
    for i in range(start, start + count):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i:06d}".encode(), partition=0)
    assert p.flush(30) == 0


def fetched_from(stats: list[dict], topic: str) -> int:
    """The broker librdkafka fetches partition 0 of `topic` from, by its latest statistics."""
    return stats[-1]["topics"][topic]["partitions"]["0"]["broker"]


def stats_consumer(bootstrap: str, client_rack: str | None, extra=None) -> tuple[Consumer, list[dict]]:
    """A consumer with statistics every 100 ms, and the list they are appended to."""
    stats: list[dict] = []
    conf = {"bootstrap.servers": bootstrap, "group.id": util.unique_topic("ffr"), "enable.auto.commit": False,
            "auto.offset.reset": "error", "fetch.wait.max.ms": 100, "log_level": 0,
            "statistics.interval.ms": 100, "stats_cb": lambda s: stats.append(json.loads(s)),
            **({"client.rack": client_rack} if client_rack else {}), **(extra or {})}
    return Consumer(conf), stats


def settled_source(consumer: Consumer, stats: list[dict], topic: str, want: int) -> int:
    """Polls until the statistics say the partition is fetched from `want` (or 10 s pass);
    returns the broker they name last."""
    def there():
        consumer.poll(0.1)
        return stats and fetched_from(stats, topic) == want
    try:
        wait_until(there, 10, f"fetching from node {want}")
    except TimeoutError:
        pass
    return fetched_from(stats, topic) if stats else -1


def read_values(bootstrap: str, topic: str, count: int, client_rack: str | None, extra=None,
                expect_from: int | None = None) -> tuple[list[bytes], int]:
    """The first `count` records, and the broker the consumer fetches from once it has them
    (awaited while it is not `expect_from`)."""
    c, stats = stats_consumer(bootstrap, client_rack, extra)
    got: list[bytes] = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 60
        while len(got) < count:
            assert time.monotonic() < deadline, f"read {len(got)} of {count} records"
            for m in c.consume(num_messages=1000, timeout=0.5):
                assert not m.error(), m.error()
                got.append(m.value())
        return got[:count], settled_source(c, stats, topic, expect_from if expect_from is not None else -2)
    finally:
        c.close()


def expected(start: int, count: int) -> list[bytes]:
    return [f"v{i:06d}".encode() for i in range(start, start + count)]


def test_a_consumer_reads_from_the_follower_in_its_rack_and_others_from_the_leader(cluster_factory):
    c, ports = racked_cluster(cluster_factory)
    topic, leader, followers = topic_on_three(c, "ffr")
    produce(c, topic, 0, 300)
    near = followers[0]

    # librdkafka in a follower's rack: every record from that follower, none from the leader.
    assert read_values(c.bootstrap, topic, 300, rack(near), expect_from=near) == (expected(0, 300), near)
    other = followers[1]
    if not ON_KAFKA:
        assert bytes_out(ports[near], topic) > 0, "the follower in the consumer's rack served it"
        assert bytes_out(ports[leader], topic) == 0, "the leader only pointed at the follower"
        assert bytes_out(ports[other], topic) == 0

        # The Rust client (strata consume) in the other follower's rack.
        p = subprocess.run([str(strata_bin()), "consume", topic, "-b", c.bootstrap, "--offset", "beginning",
                            "-n", "300", "-X", f"client.rack={rack(other)}"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert p.stdout.split() == [v.decode() for v in expected(0, 300)]
        assert bytes_out(ports[other], topic) > 0, "the Rust client read from the follower in its rack"
        assert bytes_out(ports[leader], topic) == 0

    # In the leader's rack, or in none: the leader serves.
    before = {i: bytes_out(ports[i], topic) for i in range(3)} if not ON_KAFKA else {}
    assert read_values(c.bootstrap, topic, 300, rack(leader), expect_from=leader) == (expected(0, 300), leader)
    assert read_values(c.bootstrap, topic, 300, None, expect_from=leader) == (expected(0, 300), leader)
    if not ON_KAFKA:
        assert bytes_out(ports[leader], topic) > 0
        assert all(bytes_out(ports[f], topic) == before[f] for f in followers), "no follower served these"


def test_without_the_selector_every_consumer_reads_from_the_leader(cluster_factory):
    c, ports = racked_cluster(cluster_factory, selector=None)
    topic, leader, followers = topic_on_three(c, "ffr-off")
    produce(c, topic, 0, 100)
    assert read_values(c.bootstrap, topic, 100, rack(followers[0]), expect_from=leader) == (expected(0, 100), leader)
    if not ON_KAFKA:
        assert bytes_out(ports[leader], topic) > 0
        assert all(bytes_out(ports[f], topic) == 0 for f in followers)


def test_killing_the_follower_a_consumer_reads_from_sends_it_back_to_the_leader(cluster_factory):
    c, ports = racked_cluster(cluster_factory)
    topic, leader, followers = topic_on_three(c, "ffr-kill")
    near = followers[0]
    produce(c, topic, 0, 200)
    consumer, stats = stats_consumer(c.bootstrap, rack(near))
    got: list[bytes] = []

    def read_until(n: int, timeout: float):
        deadline = time.monotonic() + timeout
        while len(got) < n:
            assert time.monotonic() < deadline, f"read {len(got)} of {n} records"
            for m in consumer.consume(num_messages=1000, timeout=0.5):
                if m.error():
                    assert not m.error().fatal(), m.error()
                    continue  # transport errors while the follower is down
                got.append(m.value())

    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        read_until(200, 60)
        assert settled_source(consumer, stats, topic, near) == near
        if not ON_KAFKA:
            assert bytes_out(ports[near], topic) > 0 and bytes_out(ports[leader], topic) == 0
        c.kill(near)
        produce(c, topic, 200, 200)
        read_until(400, 90)
        assert got == expected(0, 400), "nothing lost or repeated across the move back to the leader"
        assert settled_source(consumer, stats, topic, leader) == leader, "back to the leader"
        if not ON_KAFKA:
            assert bytes_out(ports[leader], topic) > 0, "the leader served what the dead follower could not"
    finally:
        consumer.close()


def test_read_committed_from_a_follower_sees_committed_transactions_only(cluster_factory):
    c, ports = racked_cluster(cluster_factory)
    topic, leader, followers = topic_on_three(c, "ffr-txn")
    tp = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": util.unique_topic("tid"), "log_level": 0})
    tp.init_transactions(30)
    for i, commit in enumerate((True, False, True)):
        tp.begin_transaction()
        for j in range(50):
            tp.produce(topic, value=f"t{i}-{j}".encode(), partition=0)
        if commit:
            tp.commit_transaction(30)
        else:
            tp.abort_transaction(30)
    produce(c, topic, 0, 1)  # ends the read: the last transaction's marker is below it
    want = [f"t{i}-{j}".encode() for i in (0, 2) for j in range(50)] + expected(0, 1)
    got = read_values(c.bootstrap, topic, len(want), rack(followers[1]), extra={"isolation.level": "read_committed"},
                      expect_from=followers[1])
    assert got == (want, followers[1])
    if not ON_KAFKA:
        assert bytes_out(ports[followers[1]], topic) > 0 and bytes_out(ports[leader], topic) == 0


def test_an_unknown_replica_selector_stops_the_broker_with_a_clear_error(tmp_path):
    b = new_broker(tmp_path / "bad-selector", {"replica.selector.class": "com.example.NearestReplicaSelector"})
    b.spawn()
    wait_until(lambda: b.proc.poll() is not None, 30, "the broker refuses to start")
    assert b.proc.returncode != 0
    log = b.log_text()
    assert "replica.selector.class" in log and "com.example.NearestReplicaSelector" in log, log[-2000:]
