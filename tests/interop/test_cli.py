"""The `strata` command-line tools (topic, group, cluster) against a real broker, checked with
confluent-kafka (librdkafka).

Proves: `strata topic create/list/describe/alter-config/delete` do what they say, as
confluent-kafka's AdminClient then sees it, with per-topic errors (TOPIC_ALREADY_EXISTS,
INVALID_CONFIG) reported and a non-zero exit status; `strata group describe` shows a live
confluent-kafka consumer with its assignment, committed offsets and lag; `strata group
reset-offsets` refuses an active group, changes nothing on a dry run and commits with
`--execute` (as `committed()` then shows); `strata cluster info` describes the node; every
`--format json` output parses; bad command lines exit with status 2. The broker itself is started
by the same binary with the unchanged `strata --override k=v` command line (the fixtures).
"""

from __future__ import annotations

import json
import subprocess

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

import util
from broker import strata_bin
from util import wait_until

pytestmark = pytest.mark.timeout(120)


def strata(broker, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Runs `strata ARGS -b BROKER`; with `check`, a non-zero exit fails the test."""
    p = subprocess.run([str(strata_bin()), *args, "-b", broker.bootstrap], capture_output=True, text=True,
                       timeout=60)
    if check:
        assert p.returncode == 0, f"strata {' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
    return p


def strata_json(broker, *args: str, check: bool = True):
    p = strata(broker, *args, "--format", "json", check=check)
    return json.loads(p.stdout), p.returncode


def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 4})


def topic_configs(broker, topic: str) -> dict:
    res = ConfigResource(ResourceType.TOPIC, topic)
    a = admin(broker)  # kept alive until the future resolves
    entries = a.describe_configs([res])[res].result(timeout=30)
    return {k: (e.value, e.source) for k, e in entries.items()}


def test_topics_are_created_listed_described_altered_and_deleted(broker):
    t = util.unique_topic("cli")
    p = strata(broker, "topic", "create", t, "--partitions", "3", "--config", "retention.ms=123456")
    assert f"{t}: created" in p.stdout
    md = admin(broker).list_topics(timeout=10)
    assert t in md.topics and len(md.topics[t].partitions) == 3
    assert topic_configs(broker, t)["retention.ms"][0] == "123456"

    # The existing topic fails alone; the new one is created; the exit status says it failed.
    other = util.unique_topic("cli-other")
    again, rc = strata_json(broker, "topic", "create", t, check=False)
    assert rc == 1
    assert again == [{"name": t, "error": "TOPIC_ALREADY_EXISTS", "message": again[0]["message"]}]
    bad, rc = strata_json(broker, "topic", "create", other, "--config", "retention.ms=soon", check=False)
    assert rc == 1 and bad[0]["error"] == "INVALID_CONFIG"
    assert other not in admin(broker).list_topics(timeout=10).topics

    assert t in strata(broker, "topic", "list").stdout.split()
    listed, _ = strata_json(broker, "topic", "list")
    assert t in listed and "__consumer_offsets" not in listed

    text = strata(broker, "topic", "describe", t).stdout
    assert f"Topic: {t}" in text and "PartitionCount: 3" in text and "retention.ms=123456" in text
    [d], _ = strata_json(broker, "topic", "describe", t)
    assert d["name"] == t and d["partition_count"] == 3 and d["replication_factor"] == 1
    assert d["configs"] == {"retention.ms": "123456"}
    assert [(p["partition"], p["leader"], p["replicas"], p["isr"]) for p in d["partitions"]] == [
        (i, 0, [0], [0]) for i in range(3)
    ]
    missing, rc = strata_json(broker, "topic", "describe", "no-such-topic", check=False)
    assert rc == 1 and missing[0]["error"] == "UNKNOWN_TOPIC_OR_PARTITION"

    strata(broker, "topic", "alter-config", t, "--set", "cleanup.policy=compact", "--delete", "retention.ms")
    configs = topic_configs(broker, t)
    assert configs["cleanup.policy"][0] == "compact"
    assert configs["retention.ms"][0] != "123456"
    bad, rc = strata_json(broker, "topic", "alter-config", t, "--set", "retention.ms=never", check=False)
    assert rc == 1 and bad[0]["error"] == "INVALID_CONFIG"

    strata(broker, "topic", "add-partitions", t, "--partitions", "4")
    wait_until(lambda: len(admin(broker).list_topics(t, timeout=5).topics[t].partitions) == 4, 10,
               "four partitions")

    deleted, _ = strata_json(broker, "topic", "delete", t)
    assert deleted == [{"name": t, "error": None}]
    wait_until(lambda: t not in admin(broker).list_topics(timeout=5).topics, 10, "topic gone")
    gone, rc = strata_json(broker, "topic", "delete", t, check=False)
    assert rc == 1 and gone[0]["error"] == "UNKNOWN_TOPIC_OR_PARTITION"


def committed(broker, group: str, topic: str, partitions: int) -> list[int]:
    return committed_at(broker.bootstrap, group, topic, partitions)


def test_a_group_with_a_live_consumer_is_described_and_its_offsets_reset(broker):
    t = util.unique_topic("cli-group")
    group = util.unique_topic("g")
    util.create_topic(broker.bootstrap, t, partitions=2)
    recs = [util.Rec(key=None, value=b"v%d" % i, partition=i % 2) for i in range(20)]
    util.confluent_produce(broker.bootstrap, t, recs)

    c = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "cli-test-consumer",
        "auto.offset.reset": "earliest", "enable.auto.commit": False, "log_level": 4,
    })
    try:
        c.subscribe([t])
        seen = []

        def consumed_some():
            m = c.poll(0.2)
            if m is not None and not m.error():
                seen.append(m)
            return len(seen) >= 6

        wait_until(consumed_some, 30, "six records consumed")
        c.commit(asynchronous=False)
        positions = {tp.partition: tp.offset for tp in c.position(c.assignment())}

        listed, _ = strata_json(broker, "group", "list")
        assert {"group": group, "state": "Stable", "protocol_type": "consumer", "coordinator": 0} in listed
        assert group in strata(broker, "group", "list").stdout

        d, _ = strata_json(broker, "group", "describe", group)
        assert d["state"] == "Stable" and d["protocol_type"] == "consumer"
        [member] = d["members"]
        assert member["client_id"] == "cli-test-consumer"
        assert sorted((a["topic"], a["partition"]) for a in member["assignment"]) == [(t, 0), (t, 1)]
        rows = {r["partition"]: r for r in d["offsets"]}
        for p in (0, 1):
            assert rows[p]["log_end_offset"] == 10
            assert rows[p]["member_id"] == member["member_id"]
            if positions.get(p, -1001) >= 0:
                assert rows[p]["current_offset"] == positions[p]
                assert rows[p]["lag"] == 10 - positions[p]
        text = strata(broker, "group", "describe", group).stdout
        assert "cli-test-consumer" in text and "LAG" in text

        refused = strata(broker, "group", "reset-offsets", group, "--topic", t, "--to-earliest", "--execute",
                         check=False)
        assert refused.returncode == 1 and "inactive" in refused.stderr
        before = committed(broker, group, t, 2)
    finally:
        c.close()

    wait_until(lambda: strata_json(broker, "group", "describe", group)[0]["state"] == "Empty", 30,
               "group empty after close")
    plan, _ = strata_json(broker, "group", "reset-offsets", group, "--topic", t, "--to-earliest")
    assert plan["executed"] is False
    assert sorted((o["partition"], o["offset"]) for o in plan["offsets"]) == [(0, 0), (1, 0)]
    dry = strata(broker, "group", "reset-offsets", group, "--topic", t, "--to-earliest")
    assert "dry run" in dry.stdout
    assert committed(broker, group, t, 2) == before, "a dry run commits nothing"

    done, _ = strata_json(broker, "group", "reset-offsets", group, "--topic", t, "--to-earliest", "--execute")
    assert done["executed"] is True
    assert committed(broker, group, t, 2) == [0, 0]
    strata(broker, "group", "reset-offsets", group, "--topic", t, "--to-offset", "3", "--execute")
    assert committed(broker, group, t, 2) == [3, 3]
    strata(broker, "group", "reset-offsets", group, "--topic", t, "--to-offset", "99", "--execute")
    assert committed(broker, group, t, 2) == [10, 10], "clamped to the log end, as Kafka's tool does"
    strata(broker, "group", "reset-offsets", group, "--topic", t, "--to-latest", "--execute")
    assert committed(broker, group, t, 2) == [10, 10]

    deleted = strata(broker, "group", "delete", group)
    assert f"{group}: deleted" in deleted.stdout
    gone, rc = strata_json(broker, "group", "delete", group, check=False)
    assert rc == 1 and gone[0]["error"] == "GROUP_ID_NOT_FOUND"


def test_cluster_info_describes_the_node(broker):
    info, _ = strata_json(broker, "cluster", "info")
    md = admin(broker).list_topics(timeout=10)
    assert info["cluster_id"] == md.cluster_id
    assert info["controller_id"] == 0
    assert info["brokers"] == [{"id": 0, "host": "127.0.0.1", "port": broker.port, "rack": None}]
    text = strata(broker, "cluster", "info").stdout
    assert f"Cluster ID: {md.cluster_id}" in text and str(broker.port) in text


def test_bad_command_lines_exit_with_status_2(broker):
    for args in (["topic", "create"], ["group", "reset-offsets", "g", "--topic", "t"],
                 ["topic", "list", "-X", "no.such.setting=1"], ["topic", "list", "-X", "request.timeout.ms=soon"]):
        p = strata(broker, *args, check=False)
        assert p.returncode == 2, f"{args}: {p.returncode}\n{p.stderr}"
        assert p.stderr


def strata_at(bootstrap: str, *args: str) -> dict | list:
    p = subprocess.run([str(strata_bin()), *args, "-b", bootstrap, "--format", "json"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, f"strata {' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
    return json.loads(p.stdout)


def test_the_tools_find_leaders_and_coordinators_across_a_three_node_cluster(cluster_factory):
    c = cluster_factory()
    # Only node 0 as bootstrap: the tools learn the others and send each request where it belongs.
    b0 = c.nodes[0].bootstrap
    info = strata_at(b0, "cluster", "info")
    assert sorted(b["id"] for b in info["brokers"]) == [0, 1, 2]
    assert info["controller_id"] in (0, 1, 2)

    t = util.unique_topic("cli-rf3")
    strata_at(b0, "topic", "create", t, "--partitions", "6", "--replication-factor", "3")

    def fully_replicated():
        [d] = strata_at(b0, "topic", "describe", t)
        return d if all(len(p["isr"]) == 3 for p in d["partitions"]) and len(d["partitions"]) == 6 else None

    d = wait_until(fully_replicated, 30, "every partition with three in-sync replicas")
    assert all(sorted(p["replicas"]) == [0, 1, 2] for p in d["partitions"])
    leaders = {p["partition"]: p["leader"] for p in d["partitions"]}
    recs = [util.Rec(key=None, value=b"v%d" % i, partition=i % 6) for i in range(60)]
    util.confluent_produce(c.bootstrap, t, recs)

    # Twelve groups commit offsets (no membership); they hash to coordinators on several nodes.
    groups = [util.unique_topic("cli-g") for _ in range(12)]
    for i, g in enumerate(groups):
        consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": g, "log_level": 4})
        try:
            consumer.commit(offsets=[TopicPartition(t, i % 6, 2)], asynchronous=False)
        finally:
            consumer.close()
    listed = {g["group"]: g for g in strata_at(b0, "group", "list")}
    assert set(groups) <= set(listed)
    coordinators = set()
    for i, g in enumerate(groups):
        d = strata_at(b0, "group", "describe", g)
        assert d["coordinator"] == listed[g]["coordinator"]
        coordinators.add(d["coordinator"])
        # The committed offset is read from the coordinator, the log end from the leader.
        assert [(r["partition"], r["current_offset"], r["log_end_offset"], r["lag"]) for r in d["offsets"]] == [
            (i % 6, 2, 10, 8)
        ]
    assert len(coordinators) > 1, f"twelve groups all on one coordinator: {coordinators}"
    assert len(set(leaders.values())) > 1, f"leaders all on one node: {leaders}"

    g = groups[0]
    plan = strata_at(b0, "group", "reset-offsets", g, "--topic", t, "--to-latest", "--execute")
    assert sorted((o["partition"], o["offset"]) for o in plan["offsets"]) == [(p, 10) for p in range(6)]
    assert committed_at(c.bootstrap, g, t, 6) == [10] * 6
    strata_at(b0, "topic", "delete", t)
    wait_until(lambda: t not in strata_at(b0, "topic", "list"), 20, "topic gone")


def committed_at(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 4})
    try:
        return [tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=20)]
    finally:
        c.close()
