"""The Jepsen-style queue workload on a 3-broker cluster with a kill -9 nemesis.

Idempotent acks=all producers write to an RF 3 topic (min.insync.replicas=2) while a consumer group
(librdkafka) reads it; a seeded nemesis SIGKILLs a random broker (never more than one at a time),
leaves it down for a random while, and restarts it. At the end every partition is drained and the
history checker must find nothing: no lost or duplicated acknowledged write, no inconsistent
offsets, no reordering within a producer, no non-monotonic or skipping poll within a consumer
session.

CI runs a few short seeds; `scripts/fault-runs.sh` runs many longer ones
(`STRATA_NEMESIS_SEEDS`, `STRATA_NEMESIS_SECONDS`).
"""

from __future__ import annotations

import os
import random
import threading
import time

import pytest
from confluent_kafka import Consumer

import history
from groups_util import PacedProducer
from test_replication import create
from txn_util import read_topic
from util import unique_topic

PARTS = 3
SEEDS = [int(s) for s in os.environ.get("STRATA_NEMESIS_SEEDS", "1,2").split(",") if s.strip()]
SECONDS = float(os.environ.get("STRATA_NEMESIS_SECONDS", "25"))


class GroupReader:
    """A librdkafka group consumer recording every poll; a new session at every assignment."""

    def __init__(self, bootstrap: str, topic: str, group: str, name: str):
        self.polls: list[history.Poll] = []
        self.session = 0
        self._stop = threading.Event()
        self.name = name
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                           "enable.auto.commit": True, "auto.commit.interval.ms": 500,
                           "session.timeout.ms": 6000, "log_level": 0, "client.id": name})
        self.c.subscribe([topic], on_assign=self._assigned)
        self._t = threading.Thread(target=self._run, daemon=True, name=name)
        self._t.start()

    def _assigned(self, _consumer, _partitions):
        self.session += 1

    def _run(self):
        while not self._stop.is_set():
            m = self.c.poll(0.2)
            if m is None or m.error():
                continue
            self.polls.append(history.Poll(self.name, m.partition(), m.offset(), m.value().decode(),
                                           session=(self.name, self.session), read_committed=False))

    def stop(self):
        self._stop.set()
        self._t.join(30)
        self.c.close()


@pytest.mark.timeout(int(SECONDS) + 240)
@pytest.mark.parametrize("seed", SEEDS)
def test_queue_workload_under_a_kill_9_nemesis(cluster_factory, seed):
    rng = random.Random(seed)
    c = cluster_factory()
    topic = unique_topic(f"nemesis-{seed}")
    create(c.bootstrap, topic, config={"min.insync.replicas": "2"})
    producers = [PacedProducer(c.bootstrap, topic, PARTS, rate=150, tag=f"s{seed}p{i}") for i in range(2)]
    readers = [GroupReader(c.bootstrap, topic, unique_topic("nemesis-g"), f"r{i}") for i in range(2)]
    kills = 0
    try:
        deadline = time.monotonic() + SECONDS
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(1.0, 4.0))
            victim = rng.randrange(3)
            c.kill(victim)
            kills += 1
            time.sleep(rng.uniform(0.5, 4.0))
            c.start_node(victim)
            # Let the restarted broker rejoin before the next kill, so at most one is missing.
            for p in range(PARTS):
                c.wait_isr(topic, p, {0, 1, 2}, timeout=90)
        sends = []
        for i, p in enumerate(producers):
            sends += [history.Send(s.value, s.partition, s.offset, producer=f"p{i}") for s in p.stop(90)]
        time.sleep(2)
    finally:
        for p in producers:
            p.close()
        for r in readers:
            r.stop()
    polls = [p for r in readers for p in r.polls]
    drain = [history.Poll("drain", r.partition, r.offset, r.value, session="drain", read_committed=False)
             for r in read_topic(c.bootstrap, topic, PARTS, read_committed=False, timeout=90)]
    report = history.check(sends, polls + drain, drained=True)
    report.assert_ok(f"seed {seed}, {kills} kills")
    assert kills >= 2 and len(sends) > 1000, f"too little happened: {kills} kills, {len(sends)} sends"
