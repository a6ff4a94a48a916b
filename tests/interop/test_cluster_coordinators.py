"""Coordinators on a 3-node cluster: the group and transaction coordinators live on the leaders of
their `__consumer_offsets` / `__transaction_state` partitions (RF 3) and move when those leaders
move. Proves that with every broker restarted in turn (SIGKILL, and separately SIGTERM) under
load, coordinators included:

- a consume-transform-produce application (librdkafka, transactional, static membership) keeps
  its output exactly-once: every acknowledged input value is in the output once, nothing aborted
  is read under read_committed (history checker, drained), and the group's committed offsets end
  at the input's end;
- the transaction coordinator's producer ids stay unique across brokers (blocks come from the
  controller), and no last stable offset stays behind a transaction after its coordinator moved.
"""

from __future__ import annotations

import time

import pytest

import history
from groups_util import PacedProducer
from test_replication import create
from test_transactions import _start_ctp
from txn_util import read_topic, wait_lso_caught_up
from util import unique_topic, wait_until

PARTS = 3


def _committed_past(app, ends: dict[int, int]) -> bool:
    done: dict[int, int] = {}
    for e in app.snapshot():
        if e["ev"] == "committed":
            done.update({int(p): o for p, o in e["offsets"].items()})
    return all(done.get(p, 0) >= end for p, end in ends.items())


@pytest.mark.timeout(420)
@pytest.mark.parametrize("how", ["sigkill", "sigterm"])
def test_exactly_once_holds_while_every_broker_restarts_in_turn(cluster_factory, tmp_path, how):
    c = cluster_factory()
    in_topic, out_topic = unique_topic("roll-in"), unique_topic("roll-out")
    for t in (in_topic, out_topic):
        create(c.bootstrap, t, config={"min.insync.replicas": "2"})
    conf = {"bootstrap": c.bootstrap, "in_topic": in_topic, "out_topic": out_topic, "group": unique_topic("roll-g"),
            "tid": unique_topic("roll-tid"), "instance_id": "roll-0", "session_timeout_ms": 10_000,
            "max_records": 50, "lib": "confluent",
            # The producer's transaction and protocol log, in <tmp>/roll-N.stderr, explains a stall.
            "debug": "eos,protocol"}
    prod = PacedProducer(c.bootstrap, in_topic, PARTS, rate=150, tag="in")
    apps = [_start_ctp("confluent", "roll-0", tmp_path, conf)]
    try:
        apps[-1].wait_for(lambda evs: any(e["ev"] == "committed" for e in evs), 60, "a first transaction")
        for node in range(3):
            if how == "sigkill":
                c.kill(node)
            else:
                c.stop(node)
            # The application keeps committing with the node down (its coordinators move).
            seen = len([e for e in apps[-1].snapshot() if e["ev"] == "committed"])
            if not apps[-1].alive():
                apps.append(_start_ctp("confluent", f"roll-{len(apps)}", tmp_path, conf))
                seen = 0
            apps[-1].wait_for(lambda evs, seen=seen: len([e for e in evs if e["ev"] == "committed"]) > seen + 3,
                              90, f"transactions committed while node {node} is down")
            c.start_node(node)
            for t in (in_topic, out_topic):
                for p in range(PARTS):
                    c.wait_isr(t, p, {0, 1, 2}, timeout=90)
        sends = [history.Send(s.value, s.partition, s.offset, producer="in", topic="in") for s in prod.stop(60)]
        ends = {p: 0 for p in range(PARTS)}
        for s in sends:
            ends[s.partition] = max(ends[s.partition], s.offset + 1)
        if not apps[-1].alive():
            apps.append(_start_ctp("confluent", f"roll-{len(apps)}", tmp_path, conf))
        wait_until(lambda: _committed_past(apps[-1], ends), 90, f"the application to commit up to {ends}")
        apps[-1].terminate()
    finally:
        prod.close()
        for a in apps:
            if a.alive():
                a.kill()

    wait_lso_caught_up(c.bootstrap, out_topic, PARTS, 60)
    polls = [history.Poll("out", r.partition, r.offset, r.value, topic="out")
             for r in read_topic(c.bootstrap, out_topic, PARTS, read_committed=True, timeout=60)]
    history.check(sends, polls, drained=True).assert_ok(f"consume-transform-produce through a rolling {how}")

    from kafka.admin import KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=c.bootstrap)
    try:
        offs = kp.list_group_offsets({conf["group"]: None})[conf["group"]]
    finally:
        kp.close()
    assert {tp.partition: om.offset for tp, om in offs.items()} == ends, "group offsets != input end"


@pytest.mark.timeout(180)
def test_producer_ids_are_unique_across_brokers(cluster_factory):
    """InitProducerId on every broker, before and after each is restarted, never hands out an id
    twice: each broker's block comes from the controller, recorded in the metadata log."""
    import wire
    from txn_util import init_producer_id

    c = cluster_factory()
    pids: list[int] = []
    for round_ in range(3):
        for node in range(3):
            # COORDINATOR_LOAD_IN_PROGRESS (14) just after a start is retried, as clients do
            # (Kafka answers it while its producer id manager waits for its first block).
            def granted():
                with wire.Conn(c.nodes[node].port) as conn:
                    answer = init_producer_id(conn)
                return None if answer[0] == 14 else answer
            error, pid, _epoch = wait_until(granted, 30, f"InitProducerId on node {node}")
            assert error == 0, f"InitProducerId on node {node}: error {error}"
            pids.append(pid)
        c.kill(round_)
        c.start_node(round_)
    assert len(set(pids)) == len(pids), f"producer ids handed out twice: {sorted(pids)}"
