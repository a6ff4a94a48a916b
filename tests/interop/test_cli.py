"""The `strata` command-line tools (topic, group, cluster) against a real broker, checked with
confluent-kafka (librdkafka).

Proves: `strata topic create/list/describe/alter-config/delete` do what they say, as
confluent-kafka's AdminClient then sees it, with per-topic errors (TOPIC_ALREADY_EXISTS,
INVALID_CONFIG) reported and a non-zero exit status; `strata group describe` shows a live
confluent-kafka consumer with its assignment, committed offsets and lag; `strata group
reset-offsets` refuses an active group, changes nothing on a dry run and commits with
`--execute` (as `committed()` then shows); `strata cluster info` describes the node; every
`--format json` output parses; bad command lines exit with status 2. `strata config
describe/alter` shows and changes a topic's, one broker's and every broker's default configs as
confluent-kafka then describes them (sources included), refusals exit 1 with Kafka's error, and
a reader closing the pipe early ends the tools without a panic. `strata produce` puts keyed
lines where confluent-kafka's murmur2_random partitioner puts the same keys, compresses with every
codec under every acks, and with `--transactional-id` commits all of stdin at EOF or aborts it
all when a record fails; `strata consume` prints exactly what confluent-kafka produced (`-n`,
`--exit-at-end`, `--offset`, `--partition`, JSON and templates), commits exactly the printed
records for a `--group` (as `committed()` shows), commits and leaves the group on SIGINT, and
under `--isolation-level read_committed` skips a transaction confluent-kafka aborted. The broker
itself is started by the same binary with the unchanged `strata --override k=v` command line (the
fixtures).
"""

from __future__ import annotations

import json
import signal
import subprocess

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

import txn_util
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


def described(broker, *entity: str, all: bool = False) -> dict:
    doc, _ = strata_json(broker, "config", "describe", *entity, *(["--all"] if all else []))
    return {e["name"]: (e["value"], e["source"]) for e in doc}


def test_config_describes_and_alters_a_topic_a_broker_and_the_broker_defaults(broker):
    t = util.unique_topic("cli-config")
    strata(broker, "topic", "create", t)
    strata(broker, "config", "alter", "--topic", t, "--set", "retention.ms=123456", "--set", "cleanup.policy=compact")
    assert described(broker, "--topic", t) == {"retention.ms": ("123456", "DYNAMIC_TOPIC_CONFIG"),
                                               "cleanup.policy": ("compact", "DYNAMIC_TOPIC_CONFIG")}
    assert topic_configs(broker, t)["retention.ms"][0] == "123456"
    strata(broker, "config", "alter", "--topic", t, "--delete", "cleanup.policy")
    assert list(described(broker, "--topic", t)) == ["retention.ms"]

    # One broker's own value, then every broker's default: confluent-kafka sees both with their
    # sources, and `--all` lists the static and default configs beside them.
    res = ConfigResource(ResourceType.BROKER, "0")
    a = admin(broker)
    try:
        strata(broker, "config", "alter", "--broker", "0", "--set", "follower.replication.throttled.rate=5000")
        strata(broker, "config", "alter", "--broker-defaults", "--set", "log.retention.ms=604800001")
        assert described(broker, "--broker", "0") == {
            "follower.replication.throttled.rate": ("5000", "DYNAMIC_BROKER_CONFIG")}
        assert described(broker, "--broker-defaults") == {
            "log.retention.ms": ("604800001", "DYNAMIC_DEFAULT_BROKER_CONFIG")}
        entries = a.describe_configs([res])[res].result(timeout=30)
        assert entries["follower.replication.throttled.rate"].value == "5000"
        every = described(broker, "--broker", "0", all=True)
        assert every["log.retention.ms"] == ("604800001", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        assert every["advertised.listeners"] == (f"PLAINTEXT://127.0.0.1:{broker.port}", "STATIC_BROKER_CONFIG")
        # A dynamic-only key is described only when set (as Kafka does).
        assert "leader.replication.throttled.rate" not in every
        text = strata(broker, "config", "describe", "--broker", "0").stdout
        assert "follower.replication.throttled.rate" in text and "DYNAMIC_BROKER_CONFIG" in text

        # Refusals: Kafka's error, exit status 1, nothing changed.
        bad, rc = strata_json(broker, "config", "alter", "--broker", "0", "--set", "no.such.key=1", check=False)
        assert rc == 1 and bad["error"] == "INVALID_REQUEST", bad
        bad, rc = strata_json(broker, "config", "alter", "--broker-defaults", "--set", "log.retention.ms=soon",
                              check=False)
        # A bad broker value is INVALID_REQUEST in Kafka (test_dynamic_configs checks it there).
        assert rc == 1 and bad["error"] == "INVALID_REQUEST", bad
        bad, rc = strata_json(broker, "config", "alter", "--topic", t + "-missing", "--set", "retention.ms=1",
                              check=False)
        assert rc == 1 and bad["error"] == "UNKNOWN_TOPIC_OR_PARTITION", bad
        p = strata(broker, "config", "describe", "--broker", "0", "--broker-defaults", check=False)
        assert p.returncode == 2 and p.stderr
        assert described(broker, "--broker-defaults")["log.retention.ms"][0] == "604800001"

        # A reader that stops early (`| head`) ends the tool quietly.
        piped = subprocess.run(f"'{strata_bin()}' config describe --broker 0 --all -b {broker.bootstrap} | head -1",
                               shell=True, capture_output=True, text=True, timeout=60)
        assert piped.stdout.startswith("Configs of broker 0"), piped.stdout
        assert "panicked" not in piped.stderr, piped.stderr
    finally:
        strata(broker, "config", "alter", "--broker", "0", "--delete", "follower.replication.throttled.rate")
        strata(broker, "config", "alter", "--broker-defaults", "--delete", "log.retention.ms")
    assert described(broker, "--broker", "0") == {} and described(broker, "--broker-defaults") == {}
    assert "follower.replication.throttled.rate" not in a.describe_configs([res])[res].result(timeout=30)


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


# --------------------------------------------------------------------------------------------
# strata produce / strata consume
# --------------------------------------------------------------------------------------------


def strata_io(broker, *args: str, stdin: str = "", check: bool = True, timeout: float = 60
              ) -> subprocess.CompletedProcess:
    """Runs `strata ARGS -b BROKER` with `stdin`; with `check`, a non-zero exit fails the test."""
    p = subprocess.run([str(strata_bin()), *args, "-b", broker.bootstrap], input=stdin, capture_output=True,
                       text=True, timeout=timeout)
    if check:
        assert p.returncode == 0, f"strata {' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
    return p


def consume_json(broker, topic: str, *args: str) -> list[dict]:
    p = strata_io(broker, "consume", topic, "--format", "json", *args)
    return [json.loads(line) for line in p.stdout.splitlines()]


def test_produce_with_keys_partitions_as_librdkafka_murmur2_does(broker):
    """Keyed lines land in the partition confluent-kafka's murmur2_random partitioner picks for
    the same key (the Java client's partitioner); a line without the separator has a null key."""
    ours, theirs = util.unique_topic("cli-keys"), util.unique_topic("cli-keys-rdk")
    for t in (ours, theirs):
        util.create_topic(broker.bootstrap, t, partitions=6)
    keys = [f"user-{i}" for i in range(60)]
    lines = "".join(f"{k}::{k}-value::{i}\n" for i, k in enumerate(keys)) + "no separator here\n"
    p = strata_io(broker, "produce", ours, "--key-separator", "::", stdin=lines)
    value_bytes = sum(len(f"{k}{k}-value::{i}") for i, k in enumerate(keys)) + len("no separator here")
    assert f"produced 61 records ({value_bytes} bytes) to {ours}" in p.stderr

    from confluent_kafka import Producer
    rdk = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random", "log_level": 4})
    expected = {}

    def record(err, msg):
        assert err is None, err
        expected[msg.key().decode()] = msg.partition()

    for k in keys:
        rdk.produce(theirs, key=k.encode(), value=b"x", on_delivery=record)
    assert rdk.flush(30) == 0

    got = {}
    null_keyed = []
    for partition in range(6):
        for m in util.confluent_read_all(broker.bootstrap, ours, partition):
            if m.key is None:
                null_keyed.append(m.value)
            else:
                i = keys.index(m.key.decode())
                assert m.value == f"{m.key.decode()}-value::{i}".encode(), "split at the first separator only"
                got[m.key.decode()] = partition
    assert got == expected
    assert len(set(got.values())) > 1
    assert null_keyed == [b"no separator here"]


@pytest.mark.parametrize("codec,acks", [("gzip", "all"), ("snappy", "1"), ("lz4", "0"), ("zstd", "all")])
def test_produce_compressed_to_one_partition_with_each_acks(broker, codec, acks):
    t = util.unique_topic(f"cli-{codec}")
    util.create_topic(broker.bootstrap, t, partitions=3)
    values = [f"{codec}-{i}-" + "abc" * (i % 50) for i in range(300)]
    p = strata_io(broker, "produce", t, "--compression", codec, "--acks", acks, "--partition", "2",
                  "-X", "linger.ms=20", "--format", "json", stdin="\n".join(values))  # no final newline
    assert json.loads(p.stdout) == {"topic": t, "records": 300, "bytes": sum(map(len, values)), "failed": 0,
                                    "committed": False}
    got = util.confluent_read(broker.bootstrap, t, 2, 300)
    assert [m.value.decode() for m in got] == values
    assert [m.offset for m in got] == list(range(300))
    assert util.watermarks(broker.bootstrap, t, 0)[1] == 0 and util.watermarks(broker.bootstrap, t, 1)[1] == 0


def test_consume_prints_what_confluent_produced(broker):
    t = util.unique_topic("cli-consume")
    util.create_topic(broker.bootstrap, t, partitions=3)
    recs = [util.Rec(key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"%d" % i)], partition=i % 3)
            for i in range(30)]
    offsets = util.confluent_produce(broker.bootstrap, t, recs)

    # Every record, as JSON, from the beginning up to the end as it was at the start.
    docs = consume_json(broker, t, "--offset", "beginning", "--exit-at-end")
    by_value = {d["value"]: d for d in docs}
    assert len(docs) == 30 and len(by_value) == 30
    for i, (partition, offset) in enumerate(offsets):
        d = by_value[f"v{i}"]
        assert (d["topic"], d["partition"], d["offset"], d["key"]) == (t, partition, offset, f"k{i}")
        assert d["headers"] == [{"key": "h", "value": str(i)}]
        assert isinstance(d["timestamp"], int) and d["timestamp"] > 0
    for partition in range(3):
        assert [d["offset"] for d in docs if d["partition"] == partition] == list(range(10)), "in offset order"

    # --from-beginning without a group is the same start; -n stops after COUNT records.
    p = strata_io(broker, "consume", t, "--from-beginning", "-n", "4")
    assert len(p.stdout.splitlines()) == 4
    assert all(line.startswith("v") for line in p.stdout.splitlines())

    # An offset in one partition, with a kcat-style template.
    p = strata_io(broker, "consume", t, "--partition", "1", "--offset", "7", "-e", "--format", "%t|%p|%o|%k|%s|%h\\n")
    assert p.stdout.splitlines() == [f"{t}|1|{o}|k{3 * o + 1}|v{3 * o + 1}|h={3 * o + 1}" for o in range(7, 10)]

    # -N: the last N of every partition; end: nothing that is already there.
    docs = consume_json(broker, t, "--offset", "-2", "--exit-at-end")
    assert sorted((d["partition"], d["offset"]) for d in docs) == [(p, o) for p in range(3) for o in (8, 9)]
    assert consume_json(broker, t, "--offset", "end", "--exit-at-end") == []

    # --exit-at-end stops at the end known at the start, even while more is produced.
    util.confluent_produce(broker.bootstrap, t, [util.Rec(key=None, value=b"late", partition=0)])
    docs = consume_json(broker, t, "--partition", "0", "--offset", "beginning", "-e")
    assert [d["value"] for d in docs][-1] == "late" and len(docs) == 11

    missing = strata_io(broker, "consume", "no-such-topic-here", "-e", check=False)
    assert missing.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr


def test_transactional_produce_is_committed_at_eof_or_aborted(broker):
    t = util.unique_topic("cli-txn")
    util.create_topic(broker.bootstrap, t, partitions=2)
    lines = [f"k{i}:v{i}" for i in range(40)]
    p = strata_io(broker, "produce", t, "-K", ":", "--transactional-id", util.unique_topic("cli-tid"),
                  stdin="\n".join(lines) + "\n")
    assert "produced 40 records" in p.stderr
    committed_values = sorted(r.value for r in txn_util.read_topic(broker.bootstrap, t, 2, read_committed=True))
    assert committed_values == sorted(f"v{i}" for i in range(40))

    # A record the producer refuses in the middle: the two before it were written, then aborted.
    too_big = "z" * 300
    p = strata_io(broker, "produce", t, "--transactional-id", util.unique_topic("cli-tid"),
                  "-X", "max.request.size=200", stdin=f"a1\na2\n{too_big}\na3\n", check=False)
    assert p.returncode == 1, p.stderr
    assert "aborted 2 records" in p.stderr and "transaction was aborted" in p.stderr
    assert "MESSAGE_TOO_LARGE" in p.stderr
    after = txn_util.read_topic(broker.bootstrap, t, 2, read_committed=True)
    assert sorted(r.value for r in after) == committed_values, "nothing of the aborted transaction is visible"
    raw = txn_util.read_topic(broker.bootstrap, t, 2, read_committed=False)
    assert {"a1", "a2"} <= {r.value for r in raw}, "the aborted records were written"
    assert "a3" not in {r.value for r in raw}


def test_a_signal_aborts_an_open_produce_transaction(broker):
    """SIGTERM while stdin is still open: the records sent so far are aborted at once, so the
    last stable offset moves past them instead of waiting out transaction.timeout.ms."""
    t = util.unique_topic("cli-txn-sig")
    util.create_topic(broker.bootstrap, t, partitions=1)
    proc = subprocess.Popen([str(strata_bin()), "produce", t, "--transactional-id", util.unique_topic("cli-tid"),
                             "-X", "transaction.timeout.ms=300000", "-b", broker.bootstrap],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        proc.stdin.write("s1\ns2\ns3\n")
        proc.stdin.flush()
        wait_until(lambda: txn_util.end_offsets(broker.bootstrap, t, 1, read_committed=False) == {0: 3}, 30,
                   "three records written")
        assert txn_util.end_offsets(broker.bootstrap, t, 1, read_committed=True) == {0: 0}, "open transaction"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 1
        err = proc.stderr.read()
        assert "aborted 3 records" in err and "interrupted" in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
    # The abort marker follows the three records; read_committed sees nothing of them.
    assert txn_util.end_offsets(broker.bootstrap, t, 1, read_committed=True) == {0: 4}
    assert txn_util.read_topic(broker.bootstrap, t, 1, read_committed=True) == []


def test_group_consumption_commits_what_it_printed(broker):
    t = util.unique_topic("cli-gc")
    group = util.unique_topic("cli-gc-g")
    util.create_topic(broker.bootstrap, t, partitions=2)
    util.confluent_produce(broker.bootstrap, t, [util.Rec(key=None, value=b"v%d" % i, partition=i % 2)
                                                 for i in range(20)])

    # -n 7 from the beginning: exactly the seven printed records are committed.
    p = strata_io(broker, "consume", t, "--group", group, "--from-beginning", "-n", "7")
    assert len(p.stdout.splitlines()) == 7
    assert sum(committed(broker, group, t, 2)) == 7

    # The next member of the group goes on from there and, at the end, commits it.
    p = strata_io(broker, "consume", t, "--group", group, "--exit-at-end")
    assert len(p.stdout.splitlines()) == 13
    assert committed(broker, group, t, 2) == [10, 10]
    assert {f"v{i}" for i in range(20)} == set(p.stdout.splitlines()) | set(
        strata_io(broker, "consume", t, "--offset", "beginning", "-e").stdout.splitlines())

    # A long-running member stopped by SIGINT commits and leaves the group.
    group2 = util.unique_topic("cli-gc-sig")
    proc = subprocess.Popen([str(strata_bin()), "consume", t, "--group", group2, "--from-beginning",
                             "-b", broker.bootstrap], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        wait_until(lambda: lines.append(proc.stdout.readline()) or len(lines) >= 20, 30, "twenty records printed")
        wait_until(lambda: strata_json(broker, "group", "describe", group2)[0]["state"] == "Stable", 30,
                   "the member is in the group")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert committed(broker, group2, t, 2) == [10, 10]
    d, _ = strata_json(broker, "group", "describe", group2)
    assert d["members"] == [] and d["state"] == "Empty", "the member left on SIGINT"


def test_read_committed_skips_an_aborted_transaction(broker):
    from confluent_kafka import Producer

    t = util.unique_topic("cli-rc")
    util.create_topic(broker.bootstrap, t, partitions=1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": util.unique_topic("cli-rc-tid"),
                  "log_level": 3})
    p.init_transactions(30)
    for values, commit in ((["c1", "c2"], True), (["a1", "a2", "a3"], False), (["c3"], True)):
        p.begin_transaction()
        for v in values:
            p.produce(t, value=v.encode(), partition=0)
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)

    committed_only = strata_io(broker, "consume", t, "--offset", "beginning", "-e",
                               "--isolation-level", "read_committed").stdout.splitlines()
    assert committed_only == ["c1", "c2", "c3"]
    everything = strata_io(broker, "consume", t, "--offset", "beginning", "-e",
                           "--isolation-level", "read_uncommitted").stdout.splitlines()
    assert everything == ["c1", "c2", "a1", "a2", "a3", "c3"]
    # With a group too.
    grouped = strata_io(broker, "consume", t, "--group", util.unique_topic("cli-rc-g"), "--from-beginning", "-e",
                        "--isolation-level", "read_committed").stdout.splitlines()
    assert grouped == ["c1", "c2", "c3"]


def test_bad_produce_and_consume_command_lines_exit_with_status_2(broker):
    for args in (["produce", "t", "--acks", "2"], ["produce", "t", "-X", "no.such.setting=1"],
                 ["produce", "t", "--acks", "1", "--transactional-id", "x"],
                 ["consume", "t", "--group", "g", "--offset", "3"], ["consume", "t", "--format", "%q"],
                 ["consume", "t", "-X", "isolation.level=dirty"]):
        p = strata_io(broker, *args, check=False)
        assert p.returncode == 2, f"{args}: {p.returncode}\n{p.stderr}"
        assert p.stderr
