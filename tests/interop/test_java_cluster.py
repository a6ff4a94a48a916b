"""Java: kafka-clients' idempotent producer (acks=all, max.in.flight 5, retries) on a 3-node
cluster of real strata processes while the leader of its partitions is SIGKILLed: it keeps
writing through the new leader and, after the killed node restarts and rejoins the ISR, every
record it sent is in the topic exactly once and in send order per partition (nothing lost,
nothing duplicated), as librdkafka reads it back. Run with the newest and the oldest served
kafka-clients.

Then (newest client) the Admin calls that need a cluster: a preferred-leader election moves
the partitions the kill left on a non-preferred replica back to their first replica (and answers
ELECTION_NOT_NEEDED for the others), and a partition reassignment moves a replication-factor-2
partition to other brokers with its records readable after."""

from __future__ import annotations

import json
import subprocess
import threading
from collections import defaultdict

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

import java_util
import util
from broker import ON_KAFKA
from txn_util import read_topic

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(ON_KAFKA, reason="the cluster fixtures start strata only"),
]

PARTS, COUNT, RATE = 2, 3000, 300  # about 10 s of writing


def create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    fs = admin.create_topics([NewTopic(topic, num_partitions=PARTS, replication_factor=3,
                                       config={"min.insync.replicas": "2"})], operation_timeout=30)
    for f in fs.values():
        f.result(30)


@pytest.mark.parametrize("version", java_util.versions())
def test_java_idempotent_producer_across_a_leader_sigkill(cluster_factory, java_clients, version):
    c = cluster_factory()
    topic = util.unique_topic("java-kill")
    create(c.bootstrap, topic)
    for p in range(PARTS):
        c.wait_isr(topic, p, {0, 1, 2})
    # The leader of partition 0 (and of whatever else it leads) dies under the producer.
    leader = c.partition(topic, 0).leader
    proc = subprocess.Popen(java_clients.command(version, "paced", c.bootstrap, topic, str(PARTS), str(COUNT),
                                                 str(RATE)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    acked, done, err = [0], [], []
    threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True).start()

    def follow():
        for line in proc.stdout:
            if line.startswith("ACKED "):
                acked[0] = int(line.split()[1])
            elif line.startswith("DONE "):
                done.append(json.loads(line[5:]))

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    try:
        util.wait_until(lambda: acked[0] >= 600, 60, "600 records acknowledged before the kill")
        at_kill = acked[0]
        c.kill(leader)
        c.wait_leader(topic, 0, not_in={leader})
        more = min(at_kill + 600, COUNT)
        util.wait_until(lambda: acked[0] >= more, 60, f"{more - at_kill} more acknowledged after the kill")
        c.start_node(leader)
        for p in range(PARTS):
            c.wait_isr(topic, p, {0, 1, 2})
        assert proc.wait(180) == 0, f"the Java producer failed:\n{''.join(err)[-3000:]}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(10)
    assert done, f"no DONE line:\n{''.join(err)[-3000:]}"
    assert done[0]["errors"] == 0 and done[0]["acked"] == COUNT, done[0]
    got = read_topic(c.bootstrap, topic, PARTS, read_committed=False)
    values = [r.value for r in got]
    dups = sorted({v for v in values if values.count(v) > 1})
    assert not dups, f"duplicated: {dups[:10]}"
    missing = sorted(set(f"j-{i}" for i in range(COUNT)) - set(values))
    assert not missing, f"lost: {missing[:10]} ({len(missing)})"
    per_partition = defaultdict(list)
    for r in got:
        per_partition[r.partition].append(int(r.value[2:]))
    for p, seq in per_partition.items():
        assert seq == sorted(seq), f"partition {p} out of send order"
        assert all(i % PARTS == p for i in seq), f"partition {p} holds another partition's record"
    if version == java_util.NEWEST:
        res = java_clients.run(version, "cluster-admin", c.bootstrap, "elect_preferred", "reassign_move",
                               props={"strata.topic": topic})
        java_util.assert_ok(res["elect_preferred"])
        java_util.assert_ok(res["reassign_move"])
