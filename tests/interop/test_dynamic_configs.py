"""`compression.type` and dynamic broker configs, through confluent-kafka's AdminClient and
real producers and consumers.

Proves: a topic whose `compression.type` names a codec stores every batch in that codec
whatever the producer sent (the segment files are read to check), and `producer` keeps the
producer's; IncrementalAlterConfigs on a BROKER resource (`""` for the cluster default, a node
id for one broker) changes the broker-level defaults at run time, DescribeConfigs shows them
with their source (DYNAMIC_DEFAULT_BROKER_CONFIG / DYNAMIC_BROKER_CONFIG) on the broker and on
the topics that inherit them, a static key and a bad value are refused with INVALID_REQUEST (42)
(Kafka's "Invalid config value for resource"), and the changes survive a SIGKILL and restart. Every record produced
reads back intact with librdkafka and kafka-python.

`max.connections.per.ip.overrides` and `max.connections` change at run time (one broker's
value, the cluster default): a connection past the new per-address limit is closed, one past
`max.connections` waits in the backlog until the limit is lifted (a limit that is not positive is
refused at run time, as Kafka's listeners refuse it), connections already open stay
served, and DescribeConfigs shows each with its source beside the static ones. A security key
(`ssl.*`, a listener's SASL JAAS config, `super.users`, `authorizer.class.name`) is refused at run
time with INVALID_CONFIG (40), through IncrementalAlterConfigs and AlterConfigs, and not stored.
`max.connection.creation.rate` paces new connections (from server.properties, then one broker's
dynamic value) and refuses a negative rate with INVALID_REQUEST. A listener's own
`listener.name.plaintext.max.connections` and `.max.connection.creation.rate` change at run time
too: a connection past the listener's new limit waits until it is raised, the listener's rate
paces its new connections, and DescribeConfigs shows them as dynamic broker configs.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType

import util
import wire
from test_admin import error_code_of, topic_configs
from util import assert_records, wait_until

pytestmark = pytest.mark.timeout(180)

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def stored_codecs(broker, topic: str) -> list[str]:
    """The codec of every batch in the partition's segment files, in log order."""
    out = []
    for seg in sorted(broker.segment_files(topic, 0)):
        data = Path(seg).read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            (length,) = struct.unpack_from(">i", data, pos + 8)
            if length <= 0 or pos + 12 + length > len(data):
                break
            (attributes,) = struct.unpack_from(">h", data, pos + 21)
            if not attributes & 0x20:  # control batches (markers) are never compressed
                out.append(CODECS[attributes & 0x07])
            pos += 12 + length
    return out


def set_broker(a: AdminClient, name: str, key: str, value: str | None, port: int = 0) -> int:
    if name == "":
        with wire.Conn(port) as conn:
            return wire.incremental_alter_configs_v0(conn, 4, "", [(key, 0 if value is not None else 1, value)])[0]
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    res = ConfigResource(ResourceType.BROKER, name,
                         incremental_configs=[ConfigEntry(key, value or "", incremental_operation=op)])
    return error_code_of(a.incremental_alter_configs([res])[res])


def broker_configs(a: AdminClient, name: str):
    res = ConfigResource(ResourceType.BROKER, name)
    return a.describe_configs([res])[res].result(timeout=30)


def test_topic_compression_type_recompresses_and_dynamic_broker_defaults_apply(broker_factory):
    b = broker_factory({})
    a = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 4})
    zstd, plain = util.unique_topic("zstd"), util.unique_topic("plain")
    util.create_topic(b.bootstrap, zstd, config={"compression.type": "zstd"})
    util.create_topic(b.bootstrap, plain)

    sent = {zstd: [], plain: []}

    def produce(topic: str, codec: str, n: int = 200):
        recs = util.make_records(n, f"{topic}-{codec}-{len(sent[topic])}")
        util.confluent_produce(b.bootstrap, topic, recs, codec=codec)
        sent[topic].extend(recs)

    produce(zstd, "none")
    produce(zstd, "gzip")
    produce(plain, "snappy")
    assert set(stored_codecs(b, zstd)) == {"zstd"}, stored_codecs(b, zstd)
    assert set(stored_codecs(b, plain)) == {"snappy"}, "compression.type=producer keeps the producer's"

    # The cluster-wide default changes at run time; topics without an override follow it.
    assert set_broker(a, "", "compression.type", "lz4", b.port) == 0
    wait_until(lambda: topic_configs(a, plain)["compression.type"].value == "lz4", 20, "topic sees lz4")
    entry = topic_configs(a, plain)["compression.type"]
    assert entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value, entry
    assert topic_configs(a, zstd)["compression.type"].value == "zstd", "a topic override still wins"
    before = len(stored_codecs(b, plain))
    produce(plain, "gzip")
    assert set(stored_codecs(b, plain)[before:]) == {"lz4"}, stored_codecs(b, plain)

    # One broker's own value ranks above the cluster default.
    assert set_broker(a, "0", "log.retention.ms", "123456789") == 0
    wait_until(lambda: topic_configs(a, plain)["retention.ms"].value == "123456789", 20, "retention.ms")
    assert topic_configs(a, plain)["retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    cfg = broker_configs(a, "0")
    assert cfg["compression.type"].value == "lz4"
    assert cfg["compression.type"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert not cfg["compression.type"].is_read_only
    assert cfg["log.dirs"].is_read_only

    # Static keys and bad values are refused and change nothing.
    assert set_broker(a, "0", "log.dirs", "/elsewhere") == wire.INVALID_REQUEST
    assert set_broker(a, "", "compression.type", "brotli", b.port) == wire.INVALID_REQUEST
    with wire.Conn(b.port) as conn:
        code, _ = wire.incremental_alter_configs_v0(conn, 4, "not-a-node", [("compression.type", 0, "gzip")])
    assert code == wire.INVALID_REQUEST
    assert broker_configs(a, "0")["compression.type"].value == "lz4"
    # KIP-390 levels are dynamic too, within Kafka's ranges.
    assert set_broker(a, "0", "compression.zstd.level", "19") == 0
    assert set_broker(a, "0", "compression.zstd.level", "23") == wire.INVALID_REQUEST
    wait_until(lambda: topic_configs(a, plain)["compression.zstd.level"].value == "19", 20, "zstd level 19")

    # Dynamic configs live in the metadata log: they survive a SIGKILL.
    b.kill()
    b.restart_after_kill()
    a = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 4})
    wait_until(lambda: broker_configs(a, "0")["compression.type"].value == "lz4", 30, "lz4 after restart")
    assert topic_configs(a, plain)["retention.ms"].value == "123456789"
    before = len(stored_codecs(b, plain))
    produce(plain, "none")
    assert set(stored_codecs(b, plain)[before:]) == {"lz4"}

    # DELETE takes the key back to server.properties / Kafka's default.
    assert set_broker(a, "", "compression.type", None, b.port) == 0
    wait_until(lambda: topic_configs(a, plain)["compression.type"].value == "producer", 20, "back to producer")
    before = len(stored_codecs(b, plain))
    produce(plain, "gzip")
    assert set(stored_codecs(b, plain)[before:]) == {"gzip"}

    # Whatever the codec on disk, every record reads back intact.
    for topic, recs in sent.items():
        assert_records(recs, util.confluent_read(b.bootstrap, topic, 0, len(recs)))
        assert_records(recs, util.kafka_python_read(b.bootstrap, topic, 0, len(recs)))



@pytest.mark.strata_only("Strata has no TLS, SASL or ACLs yet and refuses their keys; Kafka stores and serves them")
def test_a_security_key_is_refused_at_run_time_and_never_stored(broker_factory):
    # Strata serves neither TLS nor SASL nor ACLs: a security key set at run time would be
    # stored and ignored, so it is refused as one in server.properties stops the broker.
    b = broker_factory({})
    a = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 4})
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b";'
    for key, value in (("ssl.keystore.location", "/etc/kafka/broker.jks"),
                       ("listener.name.plaintext.plain.sasl.jaas.config", jaas),
                       ("super.users", "User:admin"),
                       ("authorizer.class.name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer")):
        assert set_broker(a, "0", key, value) == wire.INVALID_CONFIG, key
        with wire.Conn(b.port) as conn:
            code, message = wire.incremental_alter_configs_v0(conn, 4, "", [(key, 0, value)])
        assert code == wire.INVALID_CONFIG and key in message and "not supported yet" in message, (code, message)
        # Legacy AlterConfigs (replace all) too.
        legacy = ConfigResource(ResourceType.BROKER, "0", set_config={key: value})
        assert error_code_of(a.alter_configs([legacy])[legacy]) == wire.INVALID_CONFIG, key
        entry = broker_configs(a, "0").get(key)
        assert entry is None or entry.value in (None, ""), entry
    # A dynamic key beside them still works.
    assert set_broker(a, "0", "log.retention.ms", "3600000") == 0
    wait_until(lambda: broker_configs(a, "0")["log.retention.ms"].value == "3600000", 20, "retention set")


@pytest.mark.kafka_xfail("with max.connections=1 a combined Kafka 4.4 node's broker cannot open its connection "
                         "to its own controller listener (counted in the limit), is fenced when its session "
                         "times out, and the test's open connection breaks; Strata leaves the controller "
                         "listener out of max.connections")
def test_connection_limits_change_at_run_time_for_the_connections_accepted_next(broker_factory):
    b = broker_factory({"max.connections.per.ip": "50"})
    a = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 4})
    control = wire.Conn(b.port)  # stays open (and served) through every limit below
    wire.api_versions(control)

    # One broker's per-address override: past it, a connection from that address is closed.
    assert set_broker(a, "0", "max.connections.per.ip.overrides", "127.0.0.2:2") == 0
    # Kafka applies a dynamic config when the broker replays the controller's record, after
    # the answer: wait until the broker describes it before relying on it.
    wait_until(lambda: broker_configs(a, "0")["max.connections.per.ip.overrides"].value == "127.0.0.2:2",
               20, "the override applied")
    held = [wire.Conn(b.port, source="127.0.0.2") for _ in range(2)]
    for c in held:
        wire.api_versions(c)
    assert wire.Conn(b.port, source="127.0.0.2").closed_by_peer(10), "a third from 127.0.0.2 is closed"
    entries = broker_configs(a, "0")
    e = entries["max.connections.per.ip.overrides"]
    assert (e.value, e.source, e.is_read_only) == ("127.0.0.2:2", ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)
    e = entries["max.connections.per.ip"]
    assert (e.value, e.source) == ("50", ConfigSource.STATIC_BROKER_CONFIG.value)
    e = entries["max.connections"]
    assert (e.value, e.source) == ("2147483647", ConfigSource.DEFAULT_CONFIG.value)

    # Removed: the open ones stay, and a third is served.
    assert set_broker(a, "0", "max.connections.per.ip.overrides", None) == 0
    wait_until(lambda: (broker_configs(a, "0")["max.connections.per.ip.overrides"].value or "") == "",
               20, "the override removed")
    third = wire.Conn(b.port, source="127.0.0.2")
    wire.api_versions(third)
    for c in held:
        wire.api_versions(c)

    # Bad values are refused with INVALID_REQUEST, as Kafka's broker refuses them, and change nothing.
    assert set_broker(a, "0", "max.connections", "-1") == wire.INVALID_REQUEST
    assert set_broker(a, "", "max.connections.per.ip.overrides", "127.0.0.2", port=b.port) == wire.INVALID_REQUEST
    assert broker_configs(a, "0")["max.connections"].source == ConfigSource.DEFAULT_CONFIG.value

    # Kafka's listeners refuse a limit that is not positive at run time (server.properties may
    # say 0), as they refuse a creation rate that is not.
    code, message = wire.incremental_alter_configs_v0(control, 4, "", [("max.connections", 0, "0")])
    assert code == wire.INVALID_REQUEST and "max.connections" in message, (code, message)
    # The cluster default max.connections=1, with more open: a new connection waits in the
    # backlog, unserved, while the open ones are still served; lifting it lets the waiting one in.
    code, message = wire.incremental_alter_configs_v0(control, 4, "", [("max.connections", 0, "1")])
    assert code == 0, message
    # Described over a connection open before the limit (librdkafka's admin client may open a
    # new one, which now waits).
    wait_until(lambda: wire.describe_configs_v1(control, 4, "0", ["max.connections"])["max.connections"] == "1",
               20, "max.connections=1 applied")
    waiting = wire.Conn(b.port, source="127.0.0.3")
    waiting.send_request(18, 0, b"")
    assert not waiting.closed_by_peer(2), "a connection past max.connections waits, unanswered"
    wire.api_versions(third)
    code, message = wire.incremental_alter_configs_v0(control, 4, "", [("max.connections", 1, None)])
    assert code == 0, message
    waiting.sock.settimeout(10)
    frame = waiting.recv_frame()
    assert frame[:4] == wire.i32(1), "the waiting connection's ApiVersions is answered"
    for c in [control, third, waiting, *held]:
        c.close()


@pytest.mark.kafka_xfail("Kafka measures max.connection.creation.rate over quota.window.num (11) samples "
                         "of a second, never less than 10 s at first, so a fresh broker lets a burst "
                         "of about 10 s worth through; Strata's token bucket holds one second's worth")
def test_max_connection_creation_rate_paces_new_connections_and_changes_at_run_time(broker_factory):
    b = broker_factory({"max.connection.creation.rate": "4"})
    control = wire.Conn(b.port)
    wire.api_versions(control)

    def served_connections(n: int) -> float:
        """Opens n connections one after the other, each answered before the next; seconds taken."""
        start = time.monotonic()
        for _ in range(n):
            with wire.Conn(b.port, source="127.0.0.4") as c:
                wire.api_versions(c)
        return time.monotonic() - start

    # 4 a second with a burst of one second's worth: 12 more take at least 2 s.
    assert served_connections(12) >= 1.5
    # One broker's dynamic value over the file's: 1 a second, so 4 more take about 3 s.
    code, message = wire.incremental_alter_configs_v0(control, 4, "0", [("max.connection.creation.rate", 0, "1")])
    assert code == 0, message
    served_connections(1)  # the bucket may still hold one
    assert served_connections(3) >= 2.0
    code, message = wire.incremental_alter_configs_v0(control, 4, "", [("max.connection.creation.rate", 0, "-1")])
    assert code == wire.INVALID_REQUEST and "Invalid config value for resource" in message, (code, message)
    # Back to the file's 4 a second; the open connection was served all along.
    code, message = wire.incremental_alter_configs_v0(control, 4, "0", [("max.connection.creation.rate", 1, None)])
    assert code == 0, message
    wire.api_versions(control)
    control.close()


@pytest.mark.kafka_xfail("Kafka 4.4 describes a listener's max.connections set for one broker at run time "
                         "as read-only; Strata as dynamic and writable")
def test_a_listeners_own_connection_limit_and_rate_change_at_run_time(broker_factory):
    b = broker_factory({"listener.name.plaintext.max.connections": "100"})
    own, rate = "listener.name.plaintext.max.connections", "listener.name.plaintext.max.connection.creation.rate"
    control = wire.Conn(b.port)  # stays open (and served) through every limit below
    wire.api_versions(control)
    # Its connections opened before the limit, so it can tell when the broker applied it
    # (Kafka replays the controller's record after answering the alter).
    a = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 4})
    broker_configs(a, "0")

    # This broker's value over the file's: the listener holds more than one connection
    # (control, the admin client's), so another waits in the backlog, unanswered, while
    # control is still served.
    code, message = wire.incremental_alter_configs_v0(control, 4, "0", [(own, 0, "1")])
    assert code == 0, message
    wait_until(lambda: broker_configs(a, "0")[own].value == "1", 20, "the listener's limit applied")
    waiting = wire.Conn(b.port)
    waiting.send_request(18, 0, b"")
    assert not waiting.closed_by_peer(2), "a connection past the listener's own limit waits, unanswered"
    wire.api_versions(control)
    # The cluster default is below this broker's own value, which wins once it is raised.
    code, message = wire.incremental_alter_configs_v0(control, 4, "", [(own, 0, "1")])
    assert code == 0, message
    code, message = wire.incremental_alter_configs_v0(control, 4, "0", [(own, 0, "50")])
    assert code == 0, message
    waiting.sock.settimeout(10)
    assert waiting.recv_frame()[:4] == wire.i32(1), "the waiting connection's ApiVersions is answered"

    entries = broker_configs(a, "0")
    e = entries[own]
    assert (e.value, e.source, e.is_read_only) == ("50", ConfigSource.DYNAMIC_BROKER_CONFIG.value, False), e
    assert {s.source for s in e.synonyms.values()} >= {ConfigSource.STATIC_BROKER_CONFIG.value}, e.synonyms

    # Bad values and keys no listener has are refused and change nothing.
    code, _ = wire.incremental_alter_configs_v0(control, 4, "0", [(own, 0, "-1")])
    assert code == wire.INVALID_REQUEST
    code, _ = wire.incremental_alter_configs_v0(control, 4, "0", [("listener.name.plaintext.max.connections.per.ip", 0, "1")])
    assert code == 42
    assert broker_configs(a, "0")[own].value == "50"

    # The listener's own creation rate (cluster default): 1 a second, so 3 more take about 2 s.
    code, message = wire.incremental_alter_configs_v0(control, 4, "", [(rate, 0, "1")])
    assert code == 0, message
    e = broker_configs(a, "0")[rate]  # the cluster default, as this broker describes it
    assert (e.value, e.source) == ("1", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value), e

    def served_connections(n: int) -> float:
        start = time.monotonic()
        for _ in range(n):
            with wire.Conn(b.port) as c:
                wire.api_versions(c)
        return time.monotonic() - start

    served_connections(1)  # the bucket may still hold one
    assert served_connections(3) >= 1.5
    code, message = wire.incremental_alter_configs_v0(control, 4, "", [(rate, 1, None), (own, 1, None)])
    assert code == 0, message
    assert served_connections(5) < 5, "unpaced once the rate is deleted"
    for c in [control, waiting]:
        c.close()
