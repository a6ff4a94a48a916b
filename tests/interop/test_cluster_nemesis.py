"""The Jepsen-style queue workload on a 3-broker cluster with a kill -9 nemesis.

Idempotent acks=all producers write to an RF 3 topic (min.insync.replicas=2) while a consumer group
(librdkafka) reads it; a seeded nemesis SIGKILLs a random broker (never more than one at a time),
leaves it down for a random while, and restarts it. At the end every partition is drained and the
history checker must find nothing: no lost or duplicated acknowledged write, no inconsistent
offsets, no reordering within a producer, no non-monotonic or skipping poll within a consumer
session.

The harsher mixed workload (issue: a block of records duplicated under kill -9) writes 4
partitions with fast idempotent producers (linger 2 ms, each value sent once, failures kept as
indeterminate) beside transactional writers aborting 30 % of their transactions and two
consume-transform-produce loops copying the topic to another (read_committed input,
send_offsets_to_transaction, 30 % of transactions aborted on purpose), kills a broker every 2-6 s
without waiting for the ISR to heal, and reads with a group and at the end under both isolation
levels; the copy must hold every committed input value exactly once. Like every cluster test, both end with the replica audit (replica_audit.py): the
in-sync replicas' segment files agree batch by batch below the high watermark and no log holds a
producer batch twice.

CI runs a few short seeds; `scripts/fault-runs.sh` runs many longer ones
(`STRATA_NEMESIS_SEEDS`, `STRATA_NEMESIS_SECONDS`; the harsh workload `STRATA_HARSH_SEEDS`,
`STRATA_HARSH_SECONDS`, `STRATA_HARSH_RATE`, and `STRATA_HARSH_CLIENT_DEBUG=1` to add every produce
request to the idempotent producers' librdkafka log in the test's directory, `STRATA_HARSH_CTP_DEBUG=cgrp`
for the copy loops' consumers, logged to their stderr).

One duplicate is not the broker's: librdkafka bumps an idempotent producer's epoch when a pipelined
request gets OUT_OF_ORDER_SEQUENCE_NUMBER behind a refused one, and sends a message of another
partition that was in doubt again under the new epoch (librdkafka issue 4953; Kafka's Java producer
does not). The harsh workload keeps its producers' EOS log, and a duplicate that the log and the
segment files prove to be such a re-send (client_resends.py) is reported in `history.txt`, not failed.
"""

from __future__ import annotations

import dataclasses
import os
import random
import threading
import time

import pytest
from confluent_kafka import Consumer

import client_resends
import history
from broker import wait_until
from groups_util import App, PacedProducer, python_app
from nemesis_writers import FastProducer, TxnWriter
from test_replication import create
from txn_util import end_offsets, read_topic
from util import unique_topic

PARTS = 3
SEEDS = [int(s) for s in os.environ.get("STRATA_NEMESIS_SEEDS", "1,2").split(",") if s.strip()]
SECONDS = float(os.environ.get("STRATA_NEMESIS_SECONDS", "25"))
HARSH_SEEDS = [int(s) for s in os.environ.get("STRATA_HARSH_SEEDS", "1").split(",") if s.strip()]
HARSH_SECONDS = float(os.environ.get("STRATA_HARSH_SECONDS", "30"))
HARSH_RATE = float(os.environ.get("STRATA_HARSH_RATE", "1000"))
HARSH_PARTS = 4


class GroupReader:
    """A librdkafka group consumer recording every poll; a new session at every assignment."""

    def __init__(self, bootstrap: str, topic: str, group: str, name: str, read_committed: bool = False):
        self.polls: list[history.Poll] = []
        self.read_committed = read_committed
        self.session = 0
        self._stop = threading.Event()
        self.name = name
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                           "enable.auto.commit": True, "auto.commit.interval.ms": 500,
                           "session.timeout.ms": 6000, "log_level": 0, "client.id": name,
                           "isolation.level": "read_committed" if read_committed else "read_uncommitted"})
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
                                           session=(self.name, self.session),
                                           read_committed=self.read_committed))

    def stop(self):
        self._stop.set()
        self._t.join(30)
        # librdkafka's close() waited forever once after a harsh run (its group already Empty
        # on the broker); bounded, so a stuck client cannot hang the test past its verdict.
        closer = threading.Thread(target=self.c.close, daemon=True, name=f"{self.name}-close")
        closer.start()
        closer.join(30)
        if closer.is_alive():
            print(f"{self.name}: consumer close() still blocked after 30 s; left behind")


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


@pytest.mark.timeout(int(HARSH_SECONDS) + 420)
@pytest.mark.parametrize("seed", HARSH_SEEDS)
def test_mixed_workload_under_a_harsh_kill_9_nemesis(cluster_factory, tmp_path, seed):
    workdir = tmp_path
    rng = random.Random(seed)
    c = cluster_factory()
    topic = unique_topic(f"harsh-{seed}")
    create(c.bootstrap, topic, partitions=HARSH_PARTS, config={"min.insync.replicas": "2"})
    # Each idempotent producer's librdkafka EOS log is kept (a few lines): a duplicate it made
    # itself by re-sending under a bumped epoch is told apart from a broker's by it.
    debug = "eos,msg" if os.environ.get("STRATA_HARSH_CLIENT_DEBUG") == "1" else "eos"
    producers = [FastProducer(c.bootstrap, topic, HARSH_PARTS, HARSH_RATE, f"s{seed}f{i}",
                              debug_log=workdir / f"producer{i}.log", debug=debug) for i in range(2)]
    writers = [TxnWriter(c.bootstrap, topic, HARSH_PARTS, f"s{seed}t{i}", seed * 10 + i) for i in range(2)]
    readers = [GroupReader(c.bootstrap, topic, unique_topic("harsh-g"), "r0", read_committed=True)]
    # Two consume-transform-produce loops (one group) copy the topic to `out_topic`, each value to
    # its own partition, 30 % of their transactions aborted on purpose; one that gives up (the
    # nemesis can outlast its retries) is started again, as an operator's supervisor would.
    out_topic = unique_topic(f"harsh-{seed}-out")
    create(c.bootstrap, out_topic, partitions=HARSH_PARTS, config={"min.insync.replicas": "2"})
    ctp_conf = {"lib": "confluent", "bootstrap": c.bootstrap, "in_topic": topic, "out_topic": out_topic,
                "group": unique_topic("harsh-ctp"), "session_timeout_ms": 6000, "max_records": 200,
                "abort_ratio": 0.3, "max_aborts": 20,
                **({"consumer_debug": os.environ["STRATA_HARSH_CTP_DEBUG"]}
                   if os.environ.get("STRATA_HARSH_CTP_DEBUG") else {})}
    ctps: dict[int, list[App]] = {}

    def start_ctp(i: int) -> None:
        runs = ctps.setdefault(i, [])
        runs.append(python_app("txn_ctp.py", {**ctp_conf, "tid": f"harsh-{seed}-ctp{i}", "instance_id": f"ctp{i}"},
                               f"ctp{i}-{len(runs)}", workdir))
    for i in range(2):
        start_ctp(i)

    def supervise() -> None:
        for i, runs in ctps.items():
            if not runs[-1].alive():
                start_ctp(i)
    kills = 0
    try:
        deadline = time.monotonic() + HARSH_SECONDS
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(2.0, 6.0))
            victim = rng.randrange(3)
            c.kill(victim)
            kills += 1
            time.sleep(rng.uniform(0.2, 3.0))
            c.start_node(victim)
            supervise()
        for p in range(HARSH_PARTS):
            c.wait_isr(topic, p, {0, 1, 2}, timeout=120)
        sends, txns = [], []
        for p in producers:
            sends += p.stop(90)
        for w in writers:
            s, t = w.stop()
            sends += s
            txns += t
        ends = end_offsets(c.bootstrap, topic, HARSH_PARTS, read_committed=True)

        def copied(_evs=None) -> bool:
            supervise()
            done: dict[int, int] = {}
            for runs in ctps.values():
                for app in runs:
                    for e in app.snapshot("committed"):
                        for q, o in e["offsets"].items():
                            done[int(q)] = max(done.get(int(q), 0), o)
                    # Idle with its position at the end: the offsets left past its last commit
                    # hold no committed records (aborted ones, markers), nothing to copy.
                    for e in app.snapshot("idle"):
                        for q, o in e["parts"]:
                            done[int(q)] = max(done.get(int(q), 0), o)
            return all(done.get(q, 0) >= end for q, end in ends.items())

        wait_until(copied, 180, f"the consume-transform-produce loops to commit up to {ends}", interval=0.5)
    finally:
        for p in producers:
            p.close()
        for r in readers:
            r.stop()
        for a in [a for runs in ctps.values() for a in runs]:
            a.stop_quietly()
    polls = [p for r in readers for p in r.polls]
    for read_committed in (False, True):
        polls += [history.Poll("drain", r.partition, r.offset, r.value, session=f"drain-{read_committed}",
                               read_committed=read_committed)
                  for r in read_topic(c.bootstrap, topic, HARSH_PARTS, read_committed=read_committed, timeout=120)]
    report = history.check(sends, polls, txns, drained=True)
    report, resends = client_resends.without_resends(report, sends, polls, [n.data_dir for n in c.nodes], topic,
                                                     {p.tag: p.debug_log for p in producers})
    acked = sum(s.status == history.OK for s in sends)
    # The copy: every committed input value exactly once in the output, in its own partition.
    out_polls = [history.Poll("out", r.partition, r.offset, r.value, topic="out")
                 for r in read_topic(c.bootstrap, out_topic, HARSH_PARTS, read_committed=True, timeout=120)]
    in_sends = [dataclasses.replace(s, topic="in") for s in sends]
    copy_report = history.check(in_sends, out_polls, txns, drained=True)
    # An input value the producer stored twice (a proven re-send) is copied once per copy.
    copy_report = client_resends.without_copied_resends(copy_report, resends, out_polls)
    # Both reports beside the run's logs, so a failed seed of a long run can be studied while
    # the others still run (pytest prints failures only at the end).
    resent = "".join(f"\n    {r}" for r in resends)
    (workdir / "history.txt").write_text(f"input:\n{report}\n\ncopy:\n{copy_report}\n"
                                         + (f"\nre-sent by the client under a new epoch (librdkafka 4953): "
                                            f"{len(resends)}{resent}\n" if resends else ""))
    copy_report.assert_ok(f"seed {seed}: the consume-transform-produce output")
    partition_of = {s.value: s.partition for s in sends if s.status == history.OK}
    moved = [p for p in out_polls if partition_of.get(p.value, p.partition) != p.partition]
    assert not moved, f"records copied to another partition: {moved[:5]}"
    report.assert_ok(f"seed {seed}, {kills} kills, {acked} of {len(sends)} sends acknowledged, "
                     f"{len(txns)} transactions")
    assert kills >= 2 and acked > 1000, f"too little happened: {kills} kills, {acked} acknowledged sends"
