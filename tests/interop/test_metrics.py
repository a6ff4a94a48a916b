"""The broker's /metrics endpoint scraped by a real Prometheus server (Debian's `prometheus`,
started here on loopback with a scrape config pointing at the broker): after a produce with
confluent-kafka and a group consume, PromQL through Prometheus' HTTP API shows the topic's
bytes in and the group's lag following its commits down to 0.

Burrow is not packaged in Debian, so its cross-check of the lag is not done here."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from broker import free_port
from util import unique_topic

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
    for p in procs:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
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
