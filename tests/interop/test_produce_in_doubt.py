"""Idempotent writes left in doubt by a shrinking ISR are not written twice (issue 36).

The cause of the duplicated range of issue 36, forced deterministically on a 3-node cluster. A
librdkafka idempotent producer (acks=all) keeps up to five produce requests in flight on its
connection to the leader. With `min.insync.replicas` = RF = 3 and a follower SIGKILLed, the
high watermark stops, so the first request waits for replication. Kafka handles one request of
a connection at a time (the connection is muted until the response is sent), so the requests
behind it are handled only after it is answered: by then the ISR has shrunk and they are
refused before anything is appended. Strata used to go on with the next request while the
first one waited, so all five were appended; then all five were answered
NOT_ENOUGH_REPLICAS_AFTER_APPEND, every retry NOT_ENOUGH_REPLICAS (the minimum-ISR check comes
before de-duplication, as in Kafka), which librdkafka takes for "not written"; once the first
messages reached `message.timeout.ms` librdkafka bumped its epoch and sent the later ones again
under the new epoch, which the broker cannot recognise: the same values at two offsets, a
block of consecutive batches repeated further on, as issue 36 saw.

The test produces steadily, lowers `min.insync.replicas` to 2 once the first messages timed out
(so the re-sent ones are accepted), then reads the partition: no value may be there twice, and
every value acknowledged must be there. It runs on Apache Kafka too (STRATA_TARGET=kafka), the
control."""

from __future__ import annotations

import collections
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from util import confluent_read_all, wait_until

TOPIC = "in-doubt"
# Long enough that the pipelined requests are appended before the killed follower leaves the
# ISR; the session outlives the lag so the ISR shrinks for lag, not for fencing.
OVERRIDES = {"replica.lag.time.max.ms": "4000", "broker.session.timeout.ms": "7000"}
MESSAGE_TIMEOUT_MS = 8000
# Far enough apart that the five requests in flight do not all time out at one scan of
# librdkafka's queue: only then are some left to send again after the epoch bump.
SPACING_S = 0.4


def strict_topic(c, topic: str) -> tuple[AdminClient, int]:
    """One partition of RF 3 with `min.insync.replicas` 3, its ISR whole: an admin client and a
    follower to SIGKILL (its death then stops the high watermark until the ISR shrinks)."""
    admin = AdminClient({"bootstrap.servers": c.bootstrap, "log_level": 4})
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "3"})])[topic].result(30)
    leader = c.wait_leader(topic, 0)
    c.wait_isr(topic, 0, {0, 1, 2})
    return admin, next(i for i in range(3) if i != leader)


def delivery_recorder() -> tuple[dict[str, str | None], object]:
    """Each value's delivery outcome (None: acknowledged, else the error's name) and the callback."""
    reports: dict[str, str | None] = {}

    def on_delivery(err, msg):
        reports[msg.value().decode()] = err.name() if err else None
    return reports, on_delivery


def test_writes_refused_after_a_shrink_are_not_sent_again_under_a_new_epoch(cluster_factory):
    c = cluster_factory(overrides=OVERRIDES)
    admin, follower = strict_topic(c, TOPIC)
    reports, on_delivery = delivery_recorder()

    producer = Producer({"bootstrap.servers": c.bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 0, "message.timeout.ms": MESSAGE_TIMEOUT_MS, "retry.backoff.ms": 100,
                         "retry.backoff.max.ms": 100,
                         "log_level": 4})
    producer.produce(TOPIC, b"first", on_delivery=on_delivery)
    assert producer.flush(30) == 0 and reports["first"] is None, reports

    c.kill(follower)
    sent = 0
    deadline = time.monotonic() + MESSAGE_TIMEOUT_MS / 1000 + 30
    # Steadily, so several requests are in flight when the high watermark stops.
    next_send = time.monotonic()
    while not any(reports.values()):
        assert time.monotonic() < deadline, "no message timed out: the scenario did not happen"
        if time.monotonic() >= next_send:
            producer.produce(TOPIC, f"v{sent}".encode(), on_delivery=on_delivery)
            sent += 1
            next_send += SPACING_S
        producer.poll(0.05)
    # The first messages timed out and librdkafka bumped its epoch; let the rest in.
    res = ConfigResource("topic", TOPIC, incremental_configs=[
        ConfigEntry("min.insync.replicas", "2", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(30)
    assert producer.flush(60) == 0, "messages still queued"
    c.start_node(follower)
    c.wait_isr(TOPIC, 0, {0, 1, 2})

    outcome = collections.Counter(reports.values())
    assert outcome["_MSG_TIMED_OUT"] > 0, outcome
    acked = {v for v, err in reports.items() if err is None}
    assert acked, f"nothing acknowledged after the minimum ISR was lowered: {outcome}"

    def read():
        got = confluent_read_all(c.bootstrap, TOPIC, 0)
        return got if acked <= {g.value.decode() for g in got} else None

    got = wait_until(read, 60, "every acknowledged value readable")
    offsets = collections.defaultdict(list)
    for g in got:
        offsets[g.value.decode()].append(g.offset)
    twice = {v: o for v, o in offsets.items() if len(o) > 1}
    assert not twice, (f"{len(twice)} values at two offsets (sent {sent}, {dict(outcome)}): "
                       f"{sorted(twice.items(), key=lambda kv: kv[1])[:10]}")
