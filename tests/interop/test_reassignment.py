"""Partition reassignment (KIP-455) on a 3-node cluster of real strata processes, driven by the
admin clients of kafka-python and kafkajs. Proves:

- a partition moved to another broker under continuous idempotent acks=all produce (its leader
  among the replicas moved away) ends on the target replicas with the target as its ISR, the new
  replica holds the records, the broker it left deletes its copy, and no acknowledged record is
  lost, duplicated or reordered (history checker, drained);
- a move that cannot finish (its new replica is down) is listed by ListPartitionReassignments
  with its adding and removing replicas, by kafka-python and by kafkajs, until it is cancelled,
  which puts the partition back on its original replicas;
- a cancel with nothing in progress, a target naming an unknown broker and an unknown partition
  get NO_REASSIGNMENT_IN_PROGRESS, INVALID_REPLICA_ASSIGNMENT and UNKNOWN_TOPIC_OR_PARTITION;
- `strata partition reassign --wait` moves partitions (`--throttle`: throttled, the throttle
  removed at the end) and returns once they moved, `strata
  partition reassignments` lists a stuck move as the admin clients do, a cancel with nothing in
  progress exits 1 naming Kafka's error, and `strata partition elect-leaders` gives a partition
  back to its preferred replica;
- a move throttled as `kafka-reassign-partitions.sh --throttle` throttles it (the topic's
  `leader/follower.replication.throttled.replicas` and every broker's
  `leader/follower.replication.throttled.rate`) copies at about the rate, and finishes once the
  rates are removed.
"""

from __future__ import annotations

import json
import random
import subprocess
import time

import pytest
from confluent_kafka.admin import AdminClient
from kafka import TopicPartition as KafkaPythonTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import (InvalidReplicationAssignmentError, NoReassignmentInProgressError,
                          UnknownTopicOrPartitionError)

import util
from groups_util import PacedProducer
from test_dynamic_configs import broker_configs, set_broker
from test_replication import assert_drained, create
from broker import strata_bin
from util import wait_until


def admin(c) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=c.live_bootstrap().split(","), request_timeout_ms=30_000)


def strata(bootstrap: str, *args: str, status: int = 0):
    """The JSON output of a `strata partition` command, which must exit with `status`."""
    p = subprocess.run([str(strata_bin()), "partition", *args, "-b", bootstrap, "--format", "json"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == status, f"strata partition {' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
    return json.loads(p.stdout)


def state(c, topic: str):
    """(replicas, isr, leader) of partition 0 as a live broker's metadata has it."""
    p = c.metadata().topics[topic].partitions[0]
    return list(p.replicas), set(p.isrs), p.leader


@pytest.mark.timeout(240)
def test_a_partition_moved_under_acks_all_load_keeps_every_record_and_leaves_its_old_broker(
        cluster_factory):
    c = cluster_factory()
    topic = util.unique_topic("move")
    create(c.bootstrap, topic, partitions=1, rf=2, config={"min.insync.replicas": "2"})
    replicas, _, _ = state(c, topic)
    c.wait_isr(topic, 0, set(replicas))
    leaving = replicas[0]  # the preferred replica, so the leader moves too
    (arriving,) = {0, 1, 2} - set(replicas)
    target = [arriving, replicas[1]]
    prod = PacedProducer(c.bootstrap, topic, 1, rate=300, tag="mv")
    try:
        prod.wait_acked(600, 60)
        kp = admin(c)
        try:
            tp = KafkaPythonTopicPartition(topic, 0)
            assert kp.alter_partition_reassignments({tp: target}) == {tp: None}
            wait_until(lambda: kp.list_partition_reassignments() == {}, 60, "the move to finish")
        finally:
            kp.close()
        wait_until(lambda: state(c, topic)[:2] == (target, set(target)), 30,
                   f"replicas and ISR {target} in the metadata")
        assert state(c, topic)[2] in target, "a target replica leads"
        wait_until(lambda: not c.nodes[leaving].partition_dir(topic, 0).exists(), 30,
                   f"node {leaving} to delete the partition it left")
        prod.wait_acked(len(prod.acks) + 600, 60)
        sends = prod.stop(60)
    finally:
        prod.close()
    assert not prod.errors, prod.errors[:5]
    assert_drained(c.bootstrap, topic, sends, f"after moving {replicas} to {target}", partitions=1)
    stored = b"".join(seg.read_bytes() for seg in c.nodes[arriving].segment_files(topic, 0))
    assert stored.count(b"mv-") >= len(sends), f"node {arriving} holds every record"


@pytest.mark.timeout(240)
def test_a_move_that_cannot_finish_is_listed_until_cancelled_and_bad_requests_get_kafkas_errors(
        cluster_factory, tmp_path):
    c = cluster_factory()
    topic = util.unique_topic("stuck")
    create(c.bootstrap, topic, partitions=1, rf=2)
    replicas, _, _ = state(c, topic)
    c.wait_isr(topic, 0, set(replicas))
    (down,) = {0, 1, 2} - set(replicas)
    c.kill(down)
    # Fenced first, so no admin client picks the dead broker from the metadata to ask.
    wait_until(lambda: down not in c.metadata().brokers, 60, f"node {down} fenced")
    util.confluent_produce(c.live_bootstrap(), topic, util.make_records(50, "STUCK"), acks="all")

    # kafkajs starts it; the new replica is down, so it stays in progress.
    listed = util.kafkajs_reassign(c.live_bootstrap(), topic, 0, [down, replicas[0]])
    (t,) = listed["topics"]
    (p,) = t["partitions"]
    assert (t["name"], p["addingReplicas"], p["removingReplicas"]) == (topic, [down], [replicas[1]]), listed
    assert p["replicas"] == [down, replicas[0], replicas[1]], listed
    assert strata(c.live_bootstrap(), "reassignments", topic) == [{
        "topic": topic, "partition": 0, "replicas": [down, replicas[0], replicas[1]], "adding": [down],
        "removing": [replicas[1]]}]
    tp = KafkaPythonTopicPartition(topic, 0)
    kp = admin(c)
    try:
        assert kp.list_partition_reassignments() == {tp: {
            "replicas": [down, replicas[0], replicas[1]],
            "adding_replicas": [down],
            "removing_replicas": [replicas[1]],
        }}
        assert state(c, topic)[1] == set(replicas), "the ISR waits for the new replica"
        # Cancelled: back on the original replicas.
        assert kp.alter_partition_reassignments({tp: None}) == {tp: None}
        wait_until(lambda: kp.list_partition_reassignments() == {}, 30, "the cancel")
        wait_until(lambda: state(c, topic)[:2] == (replicas, set(replicas)), 30, "the original replicas")
        # Kafka's errors.
        assert kp.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}
        assert kp.alter_partition_reassignments({tp: [replicas[0], 99]}) == {tp: InvalidReplicationAssignmentError}
        ghost = KafkaPythonTopicPartition(topic, 7)
        assert kp.alter_partition_reassignments({ghost: replicas}) == {ghost: UnknownTopicOrPartitionError}
    finally:
        kp.close()
    got = util.kafkajs_read(c.live_bootstrap(), topic, 0, 50, tmp_path)
    assert [g.value for g in got] == [r.value for r in util.make_records(50, "STUCK")]


@pytest.mark.timeout(180)
def test_the_command_line_tool_moves_partitions_and_elects_their_leaders(cluster_factory, tmp_path):
    # No automatic rebalance: the preferred election is the tool's.
    c = cluster_factory(overrides={"auto.leader.rebalance.enable": "false"})
    topic = util.unique_topic("climove")
    create(c.bootstrap, topic, partitions=2, rf=1)
    before = {p: c.metadata().topics[topic].partitions[p].replicas[0] for p in (0, 1)}
    util.confluent_produce(c.bootstrap, topic, util.make_records(40, "CLI", partitions=2), acks="all")
    # Partition 0 to two other brokers, partition 1 to the next broker.
    others = [n for n in (0, 1, 2) if n != before[0]]
    target = {0: others, 1: [(before[1] + 1) % 3]}
    moved = strata(c.bootstrap, "reassign", f"{topic}:0={target[0][0]},{target[0][1]}",
                   f"{topic}:1={target[1][0]}", "--wait", "--wait-timeout-ms", "60000", "--throttle", "50000000")
    assert moved == [{"topic": topic, "partition": p, "error": None} for p in (0, 1)], moved
    # The throttle is gone once the moves finished.
    a = AdminClient({"bootstrap.servers": c.bootstrap, "log_level": 4})
    for n in range(3):
        # Unset: a dynamic-only key is left out of the description (as Kafka 4.4 does).
        assert "leader.replication.throttled.rate" not in broker_configs(a, str(n)), n
    [described] = json.loads(subprocess.run([str(strata_bin()), "topic", "describe", topic, "-b", c.bootstrap,
                                             "--format", "json"], capture_output=True, text=True,
                                            timeout=60, check=True).stdout)
    assert described["configs"] == {}, described["configs"]
    for p in (0, 1):
        wait_until(lambda: list(c.metadata().topics[topic].partitions[p].replicas) == target[p], 30,
                   f"partition {p} on {target[p]}")
    assert strata(c.bootstrap, "reassignments") == []
    cancelled = strata(c.bootstrap, "cancel-reassignment", f"{topic}:0", status=1)
    assert [r["error"] for r in cancelled] == ["NO_REASSIGNMENT_IN_PROGRESS"], cancelled

    # The leader of partition 0 moved off its preferred replica by a move, then elected back.
    wait_until(lambda: set(c.metadata().topics[topic].partitions[0].isrs) == set(target[0]), 30, "both in sync")
    reversed_ = [target[0][1], target[0][0]]
    strata(c.bootstrap, "reassign", f"{topic}:0={reversed_[0]},{reversed_[1]}", "--wait")
    wait_until(lambda: list(c.metadata().topics[topic].partitions[0].replicas) == reversed_, 30, "reordered")
    assert c.metadata().topics[topic].partitions[0].leader == target[0][0], "a reorder keeps the leader"
    elected = strata(c.bootstrap, "elect-leaders", topic)
    assert {r["partition"]: r["error"] for r in elected} == {0: None, 1: "ELECTION_NOT_NEEDED"}, elected
    wait_until(lambda: c.metadata().topics[topic].partitions[0].leader == reversed_[0], 30,
               f"node {reversed_[0]} leading partition 0")
    for p in (0, 1):
        got = util.kafkajs_read(c.bootstrap, topic, p, 20, tmp_path)
        assert len(got) == 20, f"partition {p} kept its records: {len(got)}"


@pytest.mark.timeout(240)
def test_a_throttled_move_waits_for_its_quota_and_finishes_once_the_throttle_is_lifted(cluster_factory):
    c = cluster_factory()
    topic = util.unique_topic("throttle")
    create(c.bootstrap, topic, partitions=1, rf=1)
    (source,) = state(c, topic)[0]
    arriving = (source + 1) % 3
    rng = random.Random(7)
    values = [rng.randbytes(8192) for _ in range(1000)]  # 8 MB, incompressible
    util.confluent_produce(c.bootstrap, topic, [util.Rec(key=None, value=v, partition=0) for v in values], acks="all")

    # What kafka-reassign-partitions.sh --throttle sets: the topic's throttled replicas, and a
    # rate on every broker (100 KB/s each way).
    a = AdminClient({"bootstrap.servers": c.bootstrap, "log_level": 4})
    kp = admin(c)
    try:
        for key in ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas"):
            assert strata_topic_config(c.bootstrap, topic, key, "*") == 0
        assert strata_topic_config(c.bootstrap, topic, "leader.replication.throttled.replicas", "0:x") != 0, \
            "a malformed replica list is refused"
        for node in range(3):
            for key in ("leader.replication.throttled.rate", "follower.replication.throttled.rate"):
                assert set_broker(a, str(node), key, "100000") == 0
        wait_until(lambda: all(
            broker_configs(a, str(n))["leader.replication.throttled.rate"].value == "100000" for n in range(3)),
            30, "every broker to apply the rate")
        tp = KafkaPythonTopicPartition(topic, 0)
        assert kp.alter_partition_reassignments({tp: [source, arriving]}) == {tp: None}

        # A negative, so a fixed look: unthrottled, 8 MB moves on loopback in well under a second.
        time.sleep(3)
        copied = sum(f.stat().st_size for f in c.nodes[arriving].segment_files(topic, 0))
        assert kp.list_partition_reassignments() != {}, "the throttled move is still in progress"
        assert copied < 3_000_000, f"{copied} bytes copied in 3 s at 100 KB/s"

        for node in range(3):
            for key in ("leader.replication.throttled.rate", "follower.replication.throttled.rate"):
                assert set_broker(a, str(node), key, None) == 0
        wait_until(lambda: kp.list_partition_reassignments() == {}, 60, "the move to finish unthrottled")
    finally:
        kp.close()
    wait_until(lambda: state(c, topic)[:2] == ([source, arriving], {source, arriving}), 30, "both in sync")
    stored = b"".join(seg.read_bytes() for seg in c.nodes[arriving].segment_files(topic, 0))
    assert all(v in stored for v in (values[0], values[-1])), "the new replica holds the records"


def strata_topic_config(bootstrap: str, topic: str, key: str, value: str) -> int:
    """Sets a topic config with `strata topic alter-config`; its exit status."""
    p = subprocess.run([str(strata_bin()), "topic", "alter-config", topic, "--set", f"{key}={value}",
                        "-b", bootstrap], capture_output=True, text=True, timeout=60)
    return p.returncode
