"""Java: Apache Kafka's own client (kafka-clients, tests/java, built offline by the
`java_clients` fixture) against the real binary, at the newest served 4.x and at the oldest
served 4.0.x (tests/java/kafka-versions), since the Java client is what most Kafka users run and
the one Apache Kafka is specified by.

Each scenario asserts for itself in the JVM (see the class comments in tests/java/src); one JVM
runs a whole group per version and each scenario is reported as its own test here:

- producer: acks 0, 1 and all, idempotence as the default (describeProducers sees the
  idempotent producers' sequences, and no producer for acks 0/1), gzip/snappy/lz4/zstd, headers
  (null values, repeated and empty keys), five requests in flight in send order; the codec topics
  are also read back here with librdkafka;
- transactional producer: consume-transform-produce with `sendOffsetsToTransaction` and the
  consumer's group metadata, an abort (records and offsets invisible to `read_committed`), a
  zombie fenced by a second instance with the same `transactional.id`;
- KafkaConsumer in classic groups: range, round-robin and cooperative-sticky with two members and
  their rebalance listeners, static membership, seek, pause/resume, offsetsForTimes, commitSync
  and commitAsync; a consumer of KIP-848's protocol (`group.protocol=consumer`), whose
  ConsumerGroupHeartbeat Strata does not serve, fails at once with UnsupportedVersionException,
  and so does a KafkaShareConsumer (KIP-932, newest client only).

Admin is in test_java_admin.py, the producer across a leader SIGKILL in test_java_cluster.py."""

from __future__ import annotations

import pytest

from broker import new_broker
import go_util
import java_util

pytestmark = pytest.mark.timeout(600)  # the first test also builds the Java scenarios

VERSIONS = java_util.versions()
PRODUCER = ["acks_0", "acks_1", "acks_all_idempotent_default", "codec_gzip", "codec_snappy", "codec_lz4",
            "codec_zstd", "headers", "max_in_flight_5"]
TXN = ["send_offsets_commit", "abort_then_commit", "zombie_fenced"]
CONSUMER = ["assignor_range", "assignor_roundrobin", "assignor_cooperative_sticky", "static_membership", "seek",
            "pause_resume", "offsets_for_times", "commit_sync_async"]
KIP848 = "group_protocol_consumer"
SHARE = "share_consumer"  # KafkaShareConsumer: newest client only (share groups are 4.1+)
GROUPS = {"producer": PRODUCER, "txn": TXN, "consumer": CONSUMER + [KIP848]}


def names(version: str, group: str) -> list[str]:
    return GROUPS[group] + ([SHARE] if group == "consumer" and version == java_util.NEWEST else [])


@pytest.fixture(scope="module")
def java_broker(tmp_path_factory, strata_starts):
    """One broker for the module; groups rebalance at once (no initial rebalance delay)."""
    if strata_starts is not None:
        pytest.fail(f"could not start a default single-node broker: {strata_starts}", pytrace=False)
    b = new_broker(tmp_path_factory.mktemp("java-broker"), {"group.initial.rebalance.delay.ms": "0"})
    b.start()
    yield b
    if b.alive():
        b.stop()
    else:
        b.kill()


@pytest.fixture(scope="module")
def results(java_broker, java_clients):
    """(version, group) -> name -> RESULT, each group run once per version in one JVM."""
    cache: dict[tuple[str, str], dict[str, dict]] = {}

    def get(version: str, group: str, name: str) -> dict:
        if (version, group) not in cache:
            java_broker.assert_alive()
            cache[(version, group)] = java_clients.run(version, group, java_broker.bootstrap, *names(version, group))
        return cache[(version, group)][name]

    return get


@pytest.mark.parametrize("name", PRODUCER)
@pytest.mark.parametrize("version", VERSIONS)
def test_producer(results, java_broker, version, name):
    res = results(version, "producer", name)
    java_util.assert_ok(res)
    if name.startswith("codec_"):
        # Another client decompresses what the Java client compressed.
        got = go_util.read_all(java_broker.bootstrap, res["topic"], 2, res["records"])
        assert len({v for _, _, v in got}) == res["records"]


@pytest.mark.parametrize("name", TXN)
@pytest.mark.parametrize("version", VERSIONS)
def test_transactions(results, version, name):
    java_util.assert_ok(results(version, "txn", name))


@pytest.mark.parametrize("name", CONSUMER)
@pytest.mark.parametrize("version", VERSIONS)
def test_consumer(results, version, name):
    java_util.assert_ok(results(version, "consumer", name))


@pytest.mark.kafka_xfail("Apache Kafka 4 serves KIP-848's ConsumerGroupHeartbeat")
@pytest.mark.parametrize("version", VERSIONS)
def test_kip848_consumer_fails_fast_with_unsupported_version(results, version):
    res = results(version, "consumer", KIP848)
    java_util.assert_ok(res)
    assert res["outcome"] == "UnsupportedVersionException" and res["after_ms"] < 10_000, res


@pytest.mark.kafka_xfail("Apache Kafka 4.4 serves KIP-932's ShareGroupHeartbeat")
def test_share_consumer_fails_fast_with_unsupported_version(results):
    res = results(java_util.NEWEST, "consumer", SHARE)
    java_util.assert_ok(res)
    assert res["outcome"] == "UnsupportedVersionException" and res["after_ms"] < 10_000, res
