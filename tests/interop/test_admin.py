"""Admin APIs through two real admin clients: confluent-kafka's AdminClient (librdkafka) and
kafka-python's KafkaAdminClient.

Proves: CreateTopics creates topics (partitions, configs, directories on disk) and rejects
invalid names (INVALID_TOPIC_EXCEPTION 17), existing topics (TOPIC_ALREADY_EXISTS 36), bad or
unknown configs (INVALID_CONFIG 40), zero partitions (INVALID_PARTITIONS 37) and a replication
factor above the number of brokers (INVALID_REPLICATION_FACTOR 38), per topic; Metadata describes
them; DescribeConfigs shows topic overrides and defaults; AlterConfigs (replace all) and
IncrementalAlterConfigs (SET / DELETE) take effect as DescribeConfigs then shows;
CreatePartitions grows a topic and refuses to shrink it; DeleteTopics removes the topic and its
files; DeleteRecords moves the log start offset, after which reads below it get
OFFSET_OUT_OF_RANGE (1) or follow auto.offset.reset; DescribeCluster describes the single node;
DescribeLogDirs (kafka-python) describes its one log dir with each partition's size on disk.
A security setting (a non-PLAINTEXT listener, written so or mapped, `ssl.*`, `sasl.*`, a
listener's JAAS config, `super.users`, ...), from `--override` or a server.properties file, stops
the broker before it serves, with an error naming the key and never its value.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   NewPartitions, NewTopic, ResourceType)

import util
import wire
from broker import Broker, free_port, new_broker, strata_bin
from util import Rec, assert_records, wait_until

pytestmark = pytest.mark.timeout(120)


def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 4})


def kp_admin(broker):
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15_000)


def error_code_of(fut, timeout: float = 30) -> int:
    """0 if the future succeeds, else the Kafka error code it failed with."""
    try:
        fut.result(timeout=timeout)
        return 0
    except KafkaException as e:
        return e.args[0].code()


def topic_configs(a: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    res = ConfigResource(ResourceType.TOPIC, topic)
    return a.describe_configs([res])[res].result(timeout=30)


# --------------------------------------------------------------------------------------------
# confluent-kafka AdminClient
# --------------------------------------------------------------------------------------------


@pytest.mark.kafka_smoke
def test_confluent_create_and_describe_topic(broker):
    a = admin(broker)
    topic = util.unique_topic("adm")
    futs = a.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1,
                                     config={"retention.ms": "3600000", "segment.bytes": "1048576"})])
    assert error_code_of(futs[topic]) == 0

    md = wait_until(lambda: (m := a.list_topics(topic, timeout=5)).topics[topic].error is None and m,
                    20, "topic in metadata")
    t = md.topics[topic]
    assert sorted(t.partitions) == [0, 1, 2]
    for p in t.partitions.values():
        assert p.leader == 0 and p.replicas == [0] and p.isrs == [0] and p.error is None, p
    assert [b.id for b in md.brokers.values()] == [0]
    assert md.brokers[0].host == "127.0.0.1" and md.brokers[0].port == broker.port
    # Kafka's broker creates a partition's log when it applies the topic's metadata record,
    # which may come just after the topic shows in a Metadata answer: awaited, not assumed.
    for p in range(3):
        wait_until(lambda p=p: broker.partition_dir(topic, p).is_dir(), 10, f"{topic}-{p} directory")

    cfg = topic_configs(a, topic)
    assert cfg["retention.ms"].value == "3600000"
    assert cfg["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not cfg["retention.ms"].is_default
    assert cfg["segment.bytes"].value == "1048576"
    # Unset keys are described with their defaults.
    assert cfg["cleanup.policy"].value == "delete" and cfg["cleanup.policy"].is_default
    assert "max.message.bytes" in cfg


@pytest.mark.parametrize("bad_name", ["bad name!", "a" * 250, ".", "..", "slash/topic", "ünïcode"])
def test_confluent_create_topic_invalid_name(broker, bad_name):
    """Kafka topic names: 1-249 characters of [a-zA-Z0-9._-], not "." or ".."."""
    a = admin(broker)
    futs = a.create_topics([NewTopic(bad_name, num_partitions=1, replication_factor=1)])
    assert error_code_of(futs[bad_name]) == KafkaError.TOPIC_EXCEPTION == wire.INVALID_TOPIC_EXCEPTION
    assert bad_name not in a.list_topics(timeout=10).topics
    assert not (broker.data_dir / f"{bad_name}-0").exists(), "a partition directory was created"


def test_confluent_create_topic_errors_are_per_topic(broker):
    a = admin(broker)
    existing, ok = util.unique_topic("exists"), util.unique_topic("ok")
    assert error_code_of(a.create_topics([NewTopic(existing, 1, 1)])[existing]) == 0
    t_badcfg, t_unknowncfg = util.unique_topic("badcfg"), util.unique_topic("unkcfg")
    t_zero, t_rf = util.unique_topic("zero"), util.unique_topic("rf")
    futs = a.create_topics([
        NewTopic(existing, 1, 1),
        NewTopic(ok, 2, 1),
        NewTopic(t_badcfg, 1, 1, config={"retention.ms": "not-a-number"}),
        NewTopic(t_unknowncfg, 1, 1, config={"no.such.config": "1"}),
        NewTopic(t_zero, 0, 1),
        NewTopic(t_rf, 1, 3),
    ])
    assert error_code_of(futs[existing]) == KafkaError.TOPIC_ALREADY_EXISTS == wire.TOPIC_ALREADY_EXISTS
    assert error_code_of(futs[ok]) == 0
    assert error_code_of(futs[t_badcfg]) == KafkaError.INVALID_CONFIG == wire.INVALID_CONFIG
    assert error_code_of(futs[t_unknowncfg]) == KafkaError.INVALID_CONFIG
    assert error_code_of(futs[t_zero]) == KafkaError.INVALID_PARTITIONS == wire.INVALID_PARTITIONS
    assert error_code_of(futs[t_rf]) == KafkaError.INVALID_REPLICATION_FACTOR == 38
    topics = a.list_topics(timeout=10).topics
    assert ok in topics and existing in topics
    for t in (t_badcfg, t_unknowncfg, t_zero, t_rf):
        assert t not in topics, f"{t} was created despite its error"


def test_confluent_validate_only_creates_nothing(broker):
    a = admin(broker)
    topic = util.unique_topic("validate")
    assert error_code_of(a.create_topics([NewTopic(topic, 2, 1)], validate_only=True)[topic]) == 0
    assert topic not in a.list_topics(timeout=10).topics
    assert not broker.partition_dir(topic, 0).exists()


def test_confluent_incremental_and_legacy_alter_configs(broker):
    a = admin(broker)
    topic = util.unique_topic("alter")
    util.create_topic(broker.bootstrap, topic, config={"cleanup.policy": "delete", "retention.ms": "600000"})

    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "1234567", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("max.message.bytes", "2000000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE),
    ])
    assert error_code_of(a.incremental_alter_configs([res])[res]) == 0
    cfg = topic_configs(a, topic)
    assert cfg["retention.ms"].value == "1234567" and not cfg["retention.ms"].is_default
    assert cfg["max.message.bytes"].value == "2000000"
    assert cfg["cleanup.policy"].value == "delete" and cfg["cleanup.policy"].is_default

    # Bad value: INVALID_CONFIG, and nothing changes.
    bad = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)])
    assert error_code_of(a.incremental_alter_configs([bad])[bad]) == wire.INVALID_CONFIG
    assert topic_configs(a, topic)["retention.ms"].value == "1234567"

    # Legacy AlterConfigs replaces the whole set: keys not named go back to their defaults.
    legacy = ConfigResource(ResourceType.TOPIC, topic, set_config={"retention.ms": "7654321"})
    with pytest.warns(DeprecationWarning):
        fut = a.alter_configs([legacy])[legacy]
    assert error_code_of(fut) == 0
    cfg = topic_configs(a, topic)
    assert cfg["retention.ms"].value == "7654321"
    assert cfg["max.message.bytes"].is_default, cfg["max.message.bytes"]

    missing = ConfigResource(ResourceType.TOPIC, util.unique_topic("missing"), incremental_configs=[
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
    assert error_code_of(a.incremental_alter_configs([missing])[missing]) == wire.UNKNOWN_TOPIC_OR_PARTITION


def test_confluent_describe_broker_configs(broker):
    a = admin(broker)
    res = ConfigResource(ResourceType.BROKER, "0")
    cfg = a.describe_configs([res])[res].result(timeout=30)
    assert cfg, "no broker configs described"
    assert "log.dirs" in cfg or "log.dir" in cfg, sorted(cfg)[:50]


@pytest.mark.kafka_xfail("Kafka 4.4 does not describe a listener-prefixed key set in server.properties "
                         "(DescribeConfigs BROKER has no listener.name.plaintext.max.connections); "
                         "Strata describes it as a dynamic static-file config")
def test_a_listeners_own_connection_limit_is_described_as_a_broker_config_from_the_file(broker_factory):
    b = broker_factory({"listener.name.plaintext.max.connections": "1000"})
    a = admin(b)
    res = ConfigResource(ResourceType.BROKER, "0")
    cfg = a.describe_configs([res])[res].result(timeout=30)
    entry = cfg.get("listener.name.plaintext.max.connections")
    assert entry is not None, sorted(k for k in cfg if k.startswith("listener"))
    assert entry.value == "1000" and not entry.is_read_only, entry  # dynamic, as in Kafka
    assert entry.source == ConfigSource.STATIC_BROKER_CONFIG.value, entry


def test_rack_and_replica_selector_are_described_as_static_broker_configs_null_when_unset(broker_factory):
    # librdkafka's 0101 (fetch from follower) reads each broker's rack this way.
    selector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
    racked = broker_factory({"broker.rack": "RACK0", "replica.selector.class": selector})
    res = ConfigResource(ResourceType.BROKER, "0")
    a = admin(racked)
    cfg = a.describe_configs([res])[res].result(timeout=30)
    for key, value in (("broker.rack", "RACK0"), ("replica.selector.class", selector)):
        entry = cfg.get(key)
        assert entry is not None, sorted(cfg)
        assert entry.value == value and entry.is_read_only, entry
        assert entry.source == ConfigSource.STATIC_BROKER_CONFIG.value, entry

    plain = broker_factory()
    a = admin(plain)
    cfg = a.describe_configs([res])[res].result(timeout=30)
    for key in ("broker.rack", "replica.selector.class"):
        entry = cfg.get(key)
        assert entry is not None and entry.value is None, entry
        assert entry.is_default and entry.source == ConfigSource.DEFAULT_CONFIG.value, entry
    assert cfg["replica.lag.time.max.ms"].value == "30000"


@pytest.mark.kafka_xfail("Kafka 4.4 describes log.cleaner.backoff.ms and producer.id.expiration.ms as "
                         "dynamic (read_only false); Strata describes them read-only")
def test_every_key_the_broker_reads_is_described_with_kafkas_default(broker_factory):
    # Kafka describes every broker key but its internal ones (producer.id.expiration.check.
    # interval.ms is internal: Kafka 4.4 does not describe it); the coordinators' and the
    # cleaner's were once missing.
    b = broker_factory({"transaction.max.timeout.ms": "60000", "log.retention.hours": "24"})
    res = ConfigResource(ResourceType.BROKER, "0")
    a = admin(b)
    cfg = a.describe_configs([res])[res].result(timeout=30)
    defaults = {
        "offsets.topic.num.partitions": "50", "offsets.topic.segment.bytes": "104857600",
        "offsets.retention.minutes": "10080", "offsets.commit.timeout.ms": "5000",
        "offset.metadata.max.bytes": "4096", "group.min.session.timeout.ms": "6000",
        "group.max.session.timeout.ms": "1800000", "group.max.size": "2147483647",
        "transaction.state.log.num.partitions": "50", "transactional.id.expiration.ms": "604800000",
        "log.cleaner.enable": "true",
        "log.cleaner.backoff.ms": "15000", "log.roll.hours": "168", "producer.id.expiration.ms": "86400000",
    }
    for key, value in defaults.items():
        entry = cfg.get(key)
        assert entry is not None, (key, sorted(cfg))
        assert (entry.value, entry.source, entry.is_read_only) == (value, ConfigSource.DEFAULT_CONFIG.value, True), entry
    for key, value in (("transaction.max.timeout.ms", "60000"), ("log.retention.hours", "24")):
        entry = cfg[key]
        assert (entry.value, entry.source) == (value, ConfigSource.STATIC_BROKER_CONFIG.value), entry
    # The id in use while node.id is unset, and a null default described as null.
    assert cfg["node.id"].value == "0", cfg["node.id"]
    assert cfg["log.retention.minutes"].value is None, cfg["log.retention.minutes"]


@pytest.mark.parametrize("key,value", [
    ("transaction.max.timeout.ms", "fifteen-minutes"),
    pytest.param("group.initial.rebalance.delay.ms", "-1", marks=pytest.mark.kafka_xfail(
        "Kafka 4.4 starts with group.initial.rebalance.delay.ms=-1 (no validator); Strata refuses it")),
    ("log.cleaner.dedupe.buffer.size", "10")])
def test_a_bad_coordinator_or_cleaner_setting_stops_the_broker_naming_the_key(tmp_path, key, value):
    # These were once read leniently: a value that was no number fell back to the default.
    b = new_broker(tmp_path / "bad")
    b.overrides = {key: value}
    b.spawn()
    try:
        rc = wait_until(lambda: b.proc.poll() is not None and (b.proc.returncode,), 30,
                        "the broker refuses to start")[0]
    finally:
        b.kill()  # a broker that serves instead must not outlive the test
    assert rc != 0
    log = b.log_text()
    assert key in log and value in log, log[-2000:]



# A broker given Kafka's security settings once started, warned "unknown configuration key
# ignored" for each, and served every listener in plaintext without authentication.
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="jaas-s3cret";'


def stderr_without_command_line(b: Broker) -> str:
    """The broker's log without the `$ strata --override ...` line the harness writes first,
    which repeats the values given."""
    return "\n".join(line for line in b.log_text().splitlines() if not line.startswith("$ "))


@pytest.mark.parametrize("overrides,named", [
    ({"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"}, ["listeners", "SSL://127.0.0.1:0"]),
    ({"listeners": "PLAINTEXT://127.0.0.1:0,CLIENT://127.0.0.1:0",
      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENT:SASL_SSL"},
     ["listeners", "CLIENT://127.0.0.1:0", "SASL_SSL"]),
    ({"security.inter.broker.protocol": "SASL_PLAINTEXT"}, ["security.inter.broker.protocol"]),
    ({"ssl.keystore.location": "/etc/kafka/broker.jks"}, ["ssl.keystore.location"]),
    ({"listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS},
     ["listener.name.sasl_plaintext.plain.sasl.jaas.config"]),
    ({"super.users": "User:admin"}, ["super.users"]),
], ids=["ssl-listener", "mapped-listener", "inter-broker", "ssl-key", "jaas", "super-users"])
@pytest.mark.strata_only("Strata has no TLS, SASL or ACLs yet and refuses their settings; Kafka serves them")
def test_a_security_setting_stops_the_broker_naming_the_key(tmp_path, overrides, named):
    b = Broker(tmp_path / "secured")
    b.overrides = overrides
    b.spawn()
    try:
        rc = b.proc.wait(timeout=30)  # a broker that serves instead fails the test here
    finally:
        b.kill()
    assert rc != 0, b.log_text()[-2000:]
    log = stderr_without_command_line(b)
    assert "not supported yet" in log, log[-2000:]
    for name in named:
        assert name in log, (name, log[-2000:])
    assert "jaas-s3cret" not in log, "a secret was printed"


@pytest.mark.strata_only("Strata has no TLS, SASL or ACLs yet and refuses their settings; Kafka serves them")
def test_kafkas_secured_server_properties_stop_the_broker_before_it_serves(tmp_path):
    ports = [free_port() for _ in range(3)]
    props = tmp_path / "server.properties"
    props.write_text(f"""
node.id=0
log.dirs={tmp_path / "data"}
metrics.listener=
listeners=PLAINTEXT://127.0.0.1:{ports[0]},SASL_PLAINTEXT://127.0.0.1:{ports[1]},SSL://127.0.0.1:{ports[2]}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL
ssl.keystore.location=/etc/kafka/broker.keystore.jks
ssl.keystore.password=keystore-s3cret
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin
""")
    p = subprocess.run([str(strata_bin()), str(props)], stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=30, env={**os.environ, "NO_COLOR": "1"})
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    # One error naming every key (the first, then the others), never their values.
    assert "configuration key authorizer.class.name" in p.stderr and "not supported yet" in p.stderr, p.stderr
    for key in ("ssl.keystore.location", "ssl.keystore.password", "sasl.enabled.mechanisms",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config", "super.users"):
        assert key in p.stderr, (key, p.stderr)
    assert "s3cret" not in p.stderr, p.stderr


def test_confluent_create_partitions(broker):
    a = admin(broker)
    topic = util.unique_topic("grow")
    util.create_topic(broker.bootstrap, topic, partitions=1)
    assert error_code_of(a.create_partitions([NewPartitions(topic, 3)])[topic]) == 0
    wait_until(lambda: len(a.list_topics(topic, timeout=5).topics[topic].partitions) == 3, 20, "3 partitions")
    assert broker.partition_dir(topic, 2).is_dir()
    recs = [Rec(b"k", b"to partition 2", partition=2)]
    util.confluent_produce(broker.bootstrap, topic, recs)
    assert_records(recs, util.confluent_read(broker.bootstrap, topic, 2, 1))
    # Shrinking or keeping the count is refused.
    assert error_code_of(a.create_partitions([NewPartitions(topic, 2)])[topic]) == wire.INVALID_PARTITIONS
    assert error_code_of(a.create_partitions([NewPartitions(topic, 3)])[topic]) == wire.INVALID_PARTITIONS
    missing = util.unique_topic("missing")
    assert error_code_of(a.create_partitions([NewPartitions(missing, 2)])[missing]) == wire.UNKNOWN_TOPIC_OR_PARTITION


def test_confluent_delete_topic(broker_factory):
    # Kafka renames a deleted partition's directory at once and removes it after
    # log.segment.delete.delay.ms (60 s by default), so the test shortens that delay.
    broker = broker_factory({"log.segment.delete.delay.ms": "100"})
    a = admin(broker)
    topic = util.unique_topic("del")
    util.create_topic(broker.bootstrap, topic, partitions=2)
    util.confluent_produce(broker.bootstrap, topic, util.make_records(200, topic))
    assert broker.partition_dir(topic, 0).is_dir()
    assert error_code_of(a.delete_topics([topic], operation_timeout=10)[topic]) == 0
    wait_until(lambda: topic not in a.list_topics(timeout=5).topics, 20, "topic gone from metadata")
    # Files go (Kafka renames to <topic>-<p>.<id>-delete and removes them asynchronously).
    wait_until(lambda: not any(p.name.startswith(f"{topic}-") for p in broker.data_dir.iterdir()),
               30, f"{topic} partition directories removed")
    missing = util.unique_topic("missing")
    assert error_code_of(a.delete_topics([missing])[missing]) == wire.UNKNOWN_TOPIC_OR_PARTITION
    # The name can be reused, and the new topic starts empty at offset 0.
    util.create_topic(broker.bootstrap, topic, partitions=1)
    assert util.watermarks(broker.bootstrap, topic) == (0, 0)


def test_confluent_delete_records(broker):
    a = admin(broker)
    b, topic = broker.bootstrap, util.unique_topic("delrec")
    util.create_topic(b, topic)
    recs = util.make_records(100, topic)
    util.confluent_produce(b, topic, recs[:50])
    util.confluent_produce(b, topic, recs[50:], codec="gzip")
    res = a.delete_records([TopicPartition(topic, 0, 40)])
    deleted = list(res.values())[0].result(timeout=30)
    assert deleted.low_watermark == 40
    assert util.watermarks(b, topic) == (40, 100)
    # Reading from 40 gives the rest; reading from below it is out of range.
    assert_records(recs[40:], util.confluent_read(b, topic, 0, 60, start_offset=40), start_offset=40)
    assert_records(recs[40:], util.confluent_read(b, topic, 0, 60, start_offset=10,
                                                  extra={"auto.offset.reset": "earliest"}), start_offset=40)
    with pytest.raises(AssertionError, match="(?i)out of range|offset_out_of_range|reset"):
        util.confluent_read(b, topic, 0, 1, start_offset=5, timeout=10)
    # ListOffsets EARLIEST reports the new log start offset to other clients too.
    out = util.kafkajs_offsets(b, topic)
    assert out["offsets"][0]["low"] == "40" and out["offsets"][0]["high"] == "100", out
    # Beyond the high watermark: OFFSET_OUT_OF_RANGE; -1 means "up to the high watermark".
    bad = a.delete_records([TopicPartition(topic, 0, 1000)])
    assert error_code_of(list(bad.values())[0]) == wire.OFFSET_OUT_OF_RANGE
    all_ = a.delete_records([TopicPartition(topic, 0, -1)])
    assert list(all_.values())[0].result(timeout=30).low_watermark == 100
    assert util.watermarks(b, topic) == (100, 100)


def test_delete_records_fetch_below_start_is_offset_out_of_range(broker):
    """kafka-python with auto_offset_reset='none' surfaces the broker's OFFSET_OUT_OF_RANGE."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    from kafka.errors import OffsetOutOfRangeError

    b, topic = broker.bootstrap, util.unique_topic("oor")
    util.create_topic(b, topic)
    util.confluent_produce(b, topic, util.make_records(30, topic))
    a = admin(broker)  # keep the client alive until its future completes
    (fut,) = a.delete_records([TopicPartition(topic, 0, 20)]).values()
    assert fut.result(timeout=30).low_watermark == 20
    assert util.watermarks(b, topic) == (20, 30)
    c = KafkaConsumer(bootstrap_servers=b, group_id=None, enable_auto_commit=False, auto_offset_reset="none")
    try:
        tp = KTP(topic, 0)
        c.assign([tp])
        c.seek(tp, 3)
        with pytest.raises(OffsetOutOfRangeError):
            for _ in range(40):
                c.poll(timeout_ms=250)
    finally:
        c.close()


def test_confluent_describe_cluster(broker):
    a = admin(broker)
    d = a.describe_cluster(request_timeout=10).result(timeout=30)
    assert d.cluster_id, "empty cluster id"
    assert [n.id for n in d.nodes] == [0]
    assert d.nodes[0].host == "127.0.0.1" and d.nodes[0].port == broker.port
    assert d.controller is not None and d.controller.id == 0
    # The cluster id is stable across a restart on the same data dir (meta.properties).
    broker.stop()
    broker.start()
    a2 = admin(broker)
    assert a2.describe_cluster().result(timeout=30).cluster_id == d.cluster_id


# --------------------------------------------------------------------------------------------
# kafka-python KafkaAdminClient
# --------------------------------------------------------------------------------------------


def _kp_codes(result: dict) -> dict[str, int]:
    return {t["name"]: t["error_code"] for t in result["topics"]}


def test_kafka_python_create_describe_delete(broker_factory):
    # As test_confluent_delete_topic: deleted directories go after log.segment.delete.delay.ms.
    broker = broker_factory({"log.segment.delete.delay.ms": "100"})
    a = kp_admin(broker)
    try:
        topic = util.unique_topic("kpadm")
        res = a.create_topics({topic: {"num_partitions": 2, "replication_factor": 1,
                                       "configs": {"retention.ms": "86400000"}}})
        assert _kp_codes(res) == {topic: 0}, res
        wait_until(lambda: topic in a.list_topics(), 20, "topic listed")
        (desc,) = a.describe_topics([topic])
        assert desc["error_code"] == 0 and len(desc["partitions"]) == 2, desc
        assert all(p["leader_id"] == 0 for p in desc["partitions"]), desc

        names = {"bad name!": wire.INVALID_TOPIC_EXCEPTION, topic: wire.TOPIC_ALREADY_EXISTS}
        res = a.create_topics({n: {"num_partitions": 1, "replication_factor": 1} for n in names},
                              raise_errors=False)
        assert _kp_codes(res) == names, res
        t_cfg, t_zero = util.unique_topic("kpbadcfg"), util.unique_topic("kpzero")
        res = a.create_topics({t_cfg: {"num_partitions": 1, "replication_factor": 1,
                                       "configs": {"segment.bytes": "-5"}},
                               t_zero: {"num_partitions": 0, "replication_factor": 1}}, raise_errors=False)
        assert _kp_codes(res) == {t_cfg: wire.INVALID_CONFIG, t_zero: wire.INVALID_PARTITIONS}, res

        res = a.delete_topics([topic])
        assert {t["name"]: t["error_code"] for t in res["topics"]} == {topic: 0}, res
        wait_until(lambda: topic not in a.list_topics(), 20, "topic gone")
        wait_until(lambda: not any(p.name.startswith(f"{topic}-") for p in broker.data_dir.iterdir()),
                   30, "partition directories removed")
    finally:
        a.close()


def test_kafka_python_configs(broker):
    from kafka.admin import AlterConfigOp, ConfigResource as KConfigResource, ConfigResourceType

    a = kp_admin(broker)
    try:
        topic = util.unique_topic("kpcfg")
        util.create_topic(broker.bootstrap, topic, config={"retention.ms": "500000"})

        def describe() -> dict:
            res = a.describe_configs([KConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
            return res["topic"][topic]

        cfg = describe()
        assert cfg["retention.ms"]["value"] == "500000", cfg["retention.ms"]
        assert cfg["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert cfg["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"

        a.alter_configs([KConfigResource(ConfigResourceType.TOPIC, topic,
                                         configs={"retention.ms": "999999",
                                                  "segment.ms": "3600000"})], incremental=True)
        cfg = describe()
        assert cfg["retention.ms"]["value"] == "999999" and cfg["segment.ms"]["value"] == "3600000"

        a.alter_configs([KConfigResource(ConfigResourceType.TOPIC, topic,
                                         configs={"segment.ms": (AlterConfigOp.DELETE, None)})], incremental=True)
        cfg = describe()
        assert cfg["segment.ms"]["config_source"] == "DEFAULT_CONFIG", cfg["segment.ms"]
        assert cfg["retention.ms"]["value"] == "999999"

        # Non-incremental AlterConfigs (the client re-sends the other modified keys itself).
        a.alter_configs([KConfigResource(ConfigResourceType.TOPIC, topic,
                                         configs={"retention.ms": "111111"})], incremental=False)
        assert describe()["retention.ms"]["value"] == "111111"
    finally:
        a.close()


def test_kafka_python_partitions_records_cluster(broker):
    from kafka import TopicPartition as KTP

    a = kp_admin(broker)
    try:
        topic = util.unique_topic("kpparts")
        util.create_topic(broker.bootstrap, topic, partitions=1)
        a.create_partitions({topic: 4})
        wait_until(lambda: len(a.describe_topics([topic])[0]["partitions"]) == 4, 20, "4 partitions")
        res = a.create_partitions({topic: 2}, raise_errors=False)
        assert [r.error_code for r in res.results] == [wire.INVALID_PARTITIONS], res

        util.confluent_produce(broker.bootstrap, topic, util.make_records(50, topic))
        out = a.delete_records({KTP(topic, 0): 25})
        assert out[KTP(topic, 0)]["low_watermark"] == 25, out
        assert util.watermarks(broker.bootstrap, topic) == (25, 50)

        d = a.describe_cluster()
        assert d["cluster_id"], d
        assert [n["broker_id"] for n in d["brokers"]] == [0], d
        assert d["controller_id"] == 0, d
    finally:
        a.close()


def test_kafka_python_describe_log_dirs(broker):
    """DescribeLogDirs through kafka-python: the broker's one log dir, each partition sized by
    its segment files (growing after a produce), with the volume's space."""
    from kafka import KafkaProducer

    a = kp_admin(broker)
    try:
        topic = util.unique_topic("kplogdirs")
        assert _kp_codes(a.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}})) == {topic: 0}
        p = KafkaProducer(bootstrap_servers=broker.bootstrap)
        for i in range(30):
            p.send(topic, f"v{i}".encode(), partition=0)
        p.flush()
        p.close()
        [node] = a.describe_log_dirs()
        assert node["broker"] == 0
        [d] = node["log_dirs"]
        assert d["error_code"] == 0 and d["log_dir"] == str(broker.data_dir.resolve()), d
        st = os.statvfs(broker.data_dir)
        assert d["total_bytes"] == st.f_blocks * st.f_frsize and 0 < d["usable_bytes"] <= d["total_bytes"], d
        [t] = [t for t in d["topics"] if t["name"] == topic]
        on_disk = sum(f.stat().st_size for f in (broker.data_dir / f"{topic}-0").glob("*.log"))
        assert on_disk > 0
        assert t["partitions"] == [{"partition_index": 0, "partition_size": on_disk, "offset_lag": 0,
                                    "is_future_key": False}], t
    finally:
        a.close()
