"""Burrow (Debian's `burrow`, LinkedIn's consumer-lag checker, on sarama), pointed at Strata:
it reads the committed offsets from `__consumer_offsets` in Kafka's format and the partition
ends with ListOffsets, and reports the same lag for a group as Strata's own
`kafka_consumergroup_lag`, as the group commits. Burrow 1.2 needs ZooKeeper for its own
coordination, so Debian's `zookeeper` runs beside it (started here on loopback).

Asking for `__consumer_offsets` before any group exists is what Burrow does first; the topic
must then be created as the group coordinator creates it, not as an ordinary auto-created
topic of one partition."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from broker import free_port
from util import stop_processes, unique_topic, wait_until

ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"


def _zookeeper_ok(port: int):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"srvr")
            return s.recv(64).startswith(b"Zookeeper version") or None
    except OSError:
        return None


@pytest.fixture
def burrow(tmp_path):
    """Starts ZooKeeper and Burrow watching `bootstrap`; yields start(bootstrap) -> lag(group)."""
    if shutil.which("Burrow") is None or shutil.which("java") is None:
        pytest.skip("Burrow, ZooKeeper or java is not installed (scripts/test.sh installs them)")
    procs = []
    zk_port, http_port = free_port(), free_port()

    def start(bootstrap: str):
        (tmp_path / "zk").mkdir()
        zk_log = open(tmp_path / "zookeeper.log", "wb")
        procs.append(subprocess.Popen(
            ["java", "-Xmx128m", "-Dzookeeper.4lw.commands.whitelist=srvr", "-cp", f"/etc/zookeeper/conf:{ZOOKEEPER_JAR}",
             "org.apache.zookeeper.server.ZooKeeperServerMain", str(zk_port), str(tmp_path / "zk")],
            stdout=zk_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        wait_until(lambda: _zookeeper_ok(zk_port), 30, "ZooKeeper answering on loopback")
        (tmp_path / "burrow.toml").write_text(f"""
[general]
pidfile="{tmp_path}/burrow.pid"
[logging]
level="info"
[zookeeper]
servers=["127.0.0.1:{zk_port}"]
timeout=6
root-path="/burrow"
[client-profile.strata]
client-id="burrow"
kafka-version="2.0.0"
[cluster.strata]
class-name="kafka"
servers=["{bootstrap}"]
client-profile="strata"
topic-refresh=2
offset-refresh=1
[consumer.strata]
class-name="kafka"
cluster="strata"
servers=["{bootstrap}"]
client-profile="strata"
start-latest=false
[httpserver.default]
address="127.0.0.1:{http_port}"
[storage.default]
class-name="inmemory"
workers=4
intervals=10
expire-group=604800
min-distance=1
""")
        log = open(tmp_path / "burrow.log", "wb")
        procs.append(subprocess.Popen(["Burrow", "--config-dir", str(tmp_path)], cwd=tmp_path,
                                      stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))

    def topics():
        """The topics Burrow's cluster module knows (it drops commits of topics it does not)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/v3/kafka/strata/topic", timeout=5) as r:
                return json.load(r).get("topics") or []
        except OSError:
            return []

    def lag(group: str):
        """{partition: current_lag} of `topic` in Burrow's view of `group`, or None."""
        url = f"http://127.0.0.1:{http_port}/v3/kafka/strata/consumer/{group}/lag"
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                body = json.load(r)
        except OSError:
            return None
        if body.get("error"):
            return None
        return {(p["topic"], p["partition"]): p["current_lag"] for p in body["status"]["partitions"]}

    yield start, topics, lag
    stop_processes(reversed(procs))
    for name in ("burrow.log", "zookeeper.log"):
        path = tmp_path / name
        if path.exists():
            print(f"---- {name} ----\n" + path.read_text(errors="replace")[-3000:])


def strata_lag(port: int, group: str, topic: str):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    series = f'kafka_consumergroup_lag{{consumergroup="{group}",topic="{topic}",partition="0"}} '
    for line in text.splitlines():
        if line.startswith(series):
            return float(line.rsplit(" ", 1)[1])
    return None


@pytest.mark.strata_only("compares Burrow's lag with Strata's own metrics; and Debian's Burrow 1.2.1 sends ListOffsets v0, "
                        "which Kafka 4 refuses by closing the connection (KIP-896)")
def test_burrow_reports_the_lag_strata_reports(broker_factory, burrow):
    start, burrow_topics, lag = burrow
    mport = free_port()
    b = broker_factory({"metrics.listener": f"http://127.0.0.1:{mport}",
                        "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "8"})
    start(b.bootstrap)
    # Burrow asks for __consumer_offsets first: it exists, with the coordinator's partitions.
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    offsets = wait_until(lambda: admin.list_topics(timeout=5).topics.get("__consumer_offsets"), 30,
                         "Burrow's metadata request creating __consumer_offsets")
    assert len(offsets.partitions) == 8, "created as the group coordinator creates it"

    topic, group, n = unique_topic("burrow"), "g-burrow", 20
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), partition=0)
    assert p.flush(15) == 0
    wait_until(lambda: topic in burrow_topics() or None, 30, "Burrow learning the topic")

    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 30
        while got < n:
            assert time.monotonic() < deadline, f"read {got} of {n}"
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got += 1
        for committed in (5, n):
            c.commit(offsets=[TopicPartition(topic, 0, committed)], asynchronous=False)
            want = n - committed
            wait_until(lambda: strata_lag(mport, group, topic) == want or None, 30,
                       f"Strata's lag at {want}")
            wait_until(lambda: (lag(group) or {}).get((topic, 0)) == want or None, 60,
                       f"Burrow's lag at {want} (it last said {lag(group)})")
    finally:
        c.close()
