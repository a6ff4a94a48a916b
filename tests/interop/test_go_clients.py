"""Go clients: sarama 1.22 (Debian's golang-github-shopify-sarama-dev, built here with Debian's
Go toolchain from tests/interop/go/sarama_client.go) against the real binary. Its idempotent
producer (and its plain one) writes what librdkafka reads back, densely, in order per
partition; its consumer group reads what librdkafka wrote and commits exactly the offsets it
read (OffsetCommit v1, as sarama sends it).

segmentio/kafka-go is packaged in Debian only at 0.2.1 (2018); it is not tested here."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

import util

GO_SOURCE = Path(__file__).parent / "go" / "sarama_client.go"
SARAMA = Path("/usr/share/gocode/src/github.com/Shopify/sarama")


@pytest.fixture(scope="module")
def sarama_client(tmp_path_factory) -> Path:
    if shutil.which("go") is None or not SARAMA.is_dir():
        pytest.skip("go or sarama is not installed (scripts/test.sh installs them with apt)")
    out = tmp_path_factory.mktemp("go") / "sarama_client"
    env = dict(os.environ, GO111MODULE="off", GOPATH="/usr/share/gocode",
               GOCACHE=str(tmp_path_factory.mktemp("gocache")), GOFLAGS="")
    r = subprocess.run(["go", "build", "-o", str(out), str(GO_SOURCE)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, f"go build failed:\n{r.stderr[-3000:]}"
    return out


def run(client: Path, *args: str, timeout: float = 120) -> list[str]:
    r = subprocess.run([str(client), *args], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"sarama_client {' '.join(args)} failed:\n{r.stderr[-3000:]}"
    return r.stdout.splitlines()


@pytest.mark.parametrize("mode", ["idempotent", "plain"])
def test_sarama_producer_writes_what_librdkafka_reads(broker, sarama_client, mode):
    topic, n = util.unique_topic(f"go-{mode}"), 200
    util.create_topic(broker.bootstrap, topic, partitions=3)
    args = ["produce", broker.bootstrap, topic, str(n)] + (["idempotent"] if mode == "idempotent" else [])
    acks = [tuple(map(int, line.split())) for line in run(sarama_client, *args)]
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


def test_sarama_group_consumer_commits_what_it_read(broker, sarama_client):
    topic, group, n = util.unique_topic("go-group"), "g-sarama", 90
    util.create_topic(broker.bootstrap, topic, partitions=3)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(n):
        p.produce(topic, value=f"rd-{i}".encode(), partition=i % 3)
    assert p.flush(15) == 0

    lines = run(sarama_client, "consume", broker.bootstrap, topic, group, str(n))
    values = [line.split(" ", 2)[2] for line in lines]
    assert sorted(values) == sorted(f"rd-{i}" for i in range(n)), "each record once"

    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    committed = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result()
    assert sorted((tp.partition, tp.offset) for tp in committed.topic_partitions) == [(0, 30), (1, 30), (2, 30)]
