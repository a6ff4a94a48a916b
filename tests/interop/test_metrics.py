"""The broker's /metrics endpoint scraped by a real Prometheus server (Debian's `prometheus`,
started here on loopback with a scrape config pointing at the broker): after a produce with
confluent-kafka and a group consume, PromQL through Prometheus' HTTP API shows the topic's
bytes in and the group's lag following its commits down to 0. On a 3-node cluster, the
leader's replication metrics: a killed follower makes the partition under-replicated and
counts an ISR shrink; its return clears it and counts an expand; the quorum state shows one
active controller; the leader's death makes the active controller count a leader election.

Burrow is not packaged in Debian, so its cross-check of the lag is not done here."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from broker import free_port
from confluent_kafka.admin import AdminClient, NewTopic

from util import stop_processes, unique_topic, wait_until

DEADLINE_S = 30.0


@pytest.fixture
def prometheus(tmp_path):
    """Starts a Prometheus server scraping `target` every second; yields (start, query)."""
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus is not installed (scripts/test.sh installs it)")
    procs = []
    port = free_port()

    def start(target: str) -> None:
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: strata\n    static_configs:\n"
            f"      - targets: ['{target}']\n"
        )
        log = open(tmp_path / "prometheus.log", "wb")
        procs.append(subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))

    def query(promql: str):
        url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return [float(s["value"][1]) for s in body["data"]["result"]]

    yield start, query
    stop_processes(procs)
    log_path = tmp_path / "prometheus.log"
    if log_path.exists():
        print(log_path.read_text()[-4000:])


def await_query(query, promql: str, ok, what: str):
    deadline = time.monotonic() + DEADLINE_S
    last = None
    while time.monotonic() < deadline:
        try:
            last = query(promql)
        except OSError as e:  # Prometheus still starting
            last = e
        else:
            if ok(last):
                return last
        time.sleep(0.25)
    pytest.fail(f"{what}: {promql} gave {last!r}")


def test_prometheus_scrapes_bytes_in_and_group_lag_to_zero(broker_factory, prometheus):
    start, query = prometheus
    mport = free_port()
    b = broker_factory({"metrics.listener": f"http://127.0.0.1:{mport}", "group.initial.rebalance.delay.ms": "0"})
    start(f"127.0.0.1:{mport}")
    await_query(query, 'up{job="strata"}', lambda v: v == [1.0], "Prometheus scrapes the broker")

    topic, group, n = unique_topic("prom"), "g-prom", 40
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    for i in range(n):
        p.produce(topic, value=f"value-{i:05}".encode())
    assert p.flush(15) == 0
    value_bytes = n * len("value-00000")
    await_query(query, f'kafka_server_brokertopicmetrics_bytesin_total{{topic="{topic}"}}',
                lambda v: len(v) == 1 and v[0] >= value_bytes, "bytes in of the topic")
    await_query(query, f'kafka_server_brokertopicmetrics_messagesin_total{{topic="{topic}"}}',
                lambda v: v == [float(n)], "messages in of the topic")

    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        got = 0
        deadline = time.monotonic() + DEADLINE_S
        while got < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got += 1
        assert got == n, f"consumed {got} of {n}"
        lag = f'kafka_consumergroup_lag{{consumergroup="{group}",topic="{topic}",partition="0"}}'
        c.commit(offsets=[TopicPartition(topic, 0, 10)], asynchronous=False)
        await_query(query, lag, lambda v: v == [float(n - 10)], "lag after committing offset 10")
        c.commit(asynchronous=False)
        await_query(query, lag, lambda v: v == [0.0], "lag after committing everything")
        await_query(query, f'sum(kafka_consumergroup_lag{{consumergroup="{group}"}})', lambda v: v == [0.0],
                    "the group's total lag")
    finally:
        c.close()


def scrape(port: int) -> dict[str, float]:
    """The samples of the broker's exposition, `name{labels}` -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            assert re.fullmatch(r"[a-z_]+(\{.*\})?", series), line
            out[series] = float(value)
    return out


def test_cluster_metrics_show_under_replication_and_isr_changes(cluster_factory):
    c = cluster_factory(start=False)
    ports = [free_port() for _ in c.nodes]
    for n, port in zip(c.nodes, ports):
        n.overrides["metrics.listener"] = f"http://127.0.0.1:{port}"
    c.start()
    topic = unique_topic("urp")
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(timeout=15)
    c.wait_isr(topic, 0, {0, 1, 2})
    leader = c.partition(topic, 0).leader
    follower = next(i for i in range(3) if i != leader)

    def samples(i):
        return scrape(ports[i])

    active = wait_until(
        lambda: [i for i in range(3)
                 if samples(i).get("kafka_controller_kafkacontroller_activecontrollercount") == 1.0] or None,
        30, "one active controller")
    assert len(active) == 1, active
    states = [samples(i) for i in range(3)]
    assert sum(s.get('kafka_server_raft_metrics_current_state{state="leader"}', 0) for s in states) == 1
    assert {s["kafka_server_raft_metrics_current_leader"] for s in states} == {float(active[0])}
    before = samples(leader)
    assert before["kafka_server_replicamanager_underreplicatedpartitions"] == 0
    shrinks = before["kafka_server_replicamanager_isrshrinks_total"]

    c.kill(follower)
    c.wait_isr(topic, 0, {0, 1, 2} - {follower})
    wait_until(lambda: samples(leader)["kafka_server_replicamanager_underreplicatedpartitions"] >= 1 or None,
               30, "the leader reports the partition under-replicated")
    assert samples(leader)["kafka_server_replicamanager_isrshrinks_total"] >= shrinks + 1
    # Records written while the follower is down put it that far behind, in the leader's view.
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "1"})
    for i in range(10):
        p.produce(topic, value=f"v{i}".encode(), partition=0)
    assert p.flush(30) == 0
    lag = f'kafka_server_replicamanager_followerlag{{topic="{topic}",partition="0",replica="{follower}"}}'
    assert samples(leader)[lag] >= 10

    expands = samples(leader)["kafka_server_replicamanager_isrexpands_total"]
    c.start_node(follower)
    c.wait_isr(topic, 0, {0, 1, 2})
    wait_until(lambda: samples(leader)["kafka_server_replicamanager_underreplicatedpartitions"] == 0 or None,
               30, "under-replication cleared")
    assert samples(leader)["kafka_server_replicamanager_isrexpands_total"] >= expands + 1
    wait_until(lambda: samples(leader)[lag] == 0 or None, 30, "the returned follower caught up")

    # The leader's death elects another; the active controller counts the election.
    def elections_on_active():
        for i in (i for i in range(3) if i != leader):
            s = samples(i)
            if s.get("kafka_controller_kafkacontroller_activecontrollercount") == 1.0:
                return s.get("kafka_controller_controllerstats_leaderelections_total")
        return None

    c.kill(leader)
    wait_until(lambda: c.partition(topic, 0).leader not in (-1, leader) or None, 30, "a new leader")
    wait_until(lambda: (elections_on_active() or 0) >= 1 or None, 30, "the active controller counts the election")
