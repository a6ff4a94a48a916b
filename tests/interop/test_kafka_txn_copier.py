"""Kafka's own transaction system test scenario (tests/kafkatest/tests/core/transactions_test.py),
with Kafka's verification clients from kafka-tools 4.4, against a 3-node cluster of the target.

Proves: records that Kafka's `VerifiableProducer` wrote (acks=all, idempotent) to an input topic
are copied to an output topic exactly once by several of Kafka's `TransactionalMessageCopier`s
(one per input partition, read-process-write transactions with the consumed offsets committed
in the transaction through the group metadata API), while the brokers are bounced under them:
first rounds of SIGTERM (a clean shutdown and restart of one node at a time), then rounds of
SIGKILL. Afterwards a read_committed reader finds every input record exactly once in the
output, none missing and none twice, and so does Kafka's `VerifiableConsumer` with
isolation.level=read_committed; the copiers' group has committed the input's end offsets.

The same test with STRATA_TARGET=kafka is the control on Apache Kafka (a 3-node KRaft cluster
from cluster.py). Size, from the environment (CI uses the defaults; scripts/fault-runs.sh runs
a longer one): STRATA_COPIER_RECORDS (6000), STRATA_COPIER_COPIERS (2),
STRATA_COPIER_TERM_ROUNDS (1), STRATA_COPIER_KILL_ROUNDS (1).
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_tools
import txn_util
from util import wait_until

RECORDS = int(os.environ.get("STRATA_COPIER_RECORDS", "6000"))
COPIERS = int(os.environ.get("STRATA_COPIER_COPIERS", "2"))
TERM_ROUNDS = int(os.environ.get("STRATA_COPIER_TERM_ROUNDS", "1"))
KILL_ROUNDS = int(os.environ.get("STRATA_COPIER_KILL_ROUNDS", "1"))
# Per transaction, as Kafka's test: small enough that a bounce lands in the middle of many.
TRANSACTION_SIZE = 50

pytestmark = pytest.mark.timeout(240 + 60 * (TERM_ROUNDS + KILL_ROUNDS) + RECORDS // 200)


def json_lines(path) -> list[dict]:
    out = []
    for line in path.read_text(errors="replace").splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a line cut short by a kill
    return out


def copied(paths) -> int:
    """What the copiers say they have copied and committed so far (their last progress lines)."""
    total = 0
    for p in paths:
        progress = [e for e in json_lines(p) if "totalProcessed" in e]
        total += progress[-1]["totalProcessed"] if progress else 0
    return total


def seed(bootstrap: str, topic: str, log_dir) -> list[str]:
    """RECORDS values from Kafka's VerifiableProducer (acks=all); returns the acknowledged values.
    Keyed (100 repeating keys), so every input partition gets its share: the sticky partitioner
    would put unkeyed records wherever its batches happen to fill."""
    p = kafka_tools.run("verifiable-producer", ["--bootstrap-server", bootstrap, "--topic", topic,
                                                "--max-messages", str(RECORDS), "--acks", "-1",
                                                "--repeating-keys", "100"],
                        log_dir, timeout=120)
    assert p.returncode == 0, f"VerifiableProducer exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
    events = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    acked = [e["value"] for e in events if e.get("name") == "producer_send_success"]
    errors = [e for e in events if e.get("name") == "producer_send_error"]
    assert not errors and len(acked) == RECORDS and len(set(acked)) == RECORDS, \
        f"{len(acked)} acknowledged ({len(set(acked))} distinct), errors: {errors[:5]}"
    return acked


def exactly_once_problems(expected: list[str], got: list[str]) -> list[str]:
    counts = collections.Counter(got)
    missing = [v for v in expected if counts[v] == 0]
    twice = sorted((v for v, n in counts.items() if n > 1), key=str)
    unknown = sorted(set(counts) - set(expected), key=str)
    problems = []
    if missing:
        problems.append(f"{len(missing)} input records missing from the output, e.g. {missing[:10]}")
    if twice:
        problems.append(f"{len(twice)} input records more than once in the output, e.g. {twice[:10]}")
    if unknown:
        problems.append(f"{len(unknown)} output records that were never input, e.g. {unknown[:10]}")
    return problems


def test_transactional_copiers_exactly_once_under_broker_bounces(cluster_factory, tmp_path):
    """Kafka's transaction system test: copiers move input to output transactionally while the
    brokers are bounced (SIGTERM rounds, then SIGKILL rounds); every input record is then in the
    output exactly once under read_committed."""
    c = cluster_factory(3)
    bs = c.bootstrap
    logs = tmp_path / "tools"
    a = AdminClient({"bootstrap.servers": bs, "log_level": 0})
    topics = [NewTopic(t, COPIERS, 3, config={"min.insync.replicas": "2"}) for t in ("copy-in", "copy-out")]
    for t, f in a.create_topics(topics, operation_timeout=30).items():
        f.result(30)
    for t in ("copy-in", "copy-out"):
        for p in range(COPIERS):
            c.wait_isr(t, p, {0, 1, 2})

    values = seed(bs, "copy-in", logs)
    in_ends = txn_util.end_offsets(bs, "copy-in", COPIERS, read_committed=False)
    assert sum(in_ends.values()) == RECORDS and min(in_ends.values()) > 0, in_ends

    outs = [tmp_path / f"copier-{i}.out" for i in range(COPIERS)]
    copiers = []
    for i in range(COPIERS):
        cmd = kafka_tools.command("transactional-message-copier", [
            "--broker-list", bs, "--input-topic", "copy-in", "--input-partition", str(i),
            "--output-topic", "copy-out", "--transactional-id", f"copier-{i}", "--consumer-group", "copiers",
            "--transaction-size", str(TRANSACTION_SIZE), "--transaction-timeout", "30000",
            "--use-group-metadata"], logs)
        with open(outs[i], "wb") as out:
            copiers.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))

    rounds = ["SIGTERM"] * TERM_ROUNDS + ["SIGKILL"] * KILL_ROUNDS
    bounced_mid_copy = 0
    try:
        wait_until(lambda: copied(outs) > 0 or all(p.poll() is not None for p in copiers), 120,
                   "the copiers' first committed transaction")
        for n, how in enumerate(rounds):
            # Spread the rounds over the copy: round n starts once n/len(rounds) of it is done.
            wait_until(lambda: copied(outs) >= RECORDS * n // len(rounds)
                       or all(p.poll() is not None for p in copiers), 180, f"copy progress before round {n}")
            running = any(p.poll() is None for p in copiers)
            node = n % 3
            if how == "SIGTERM":
                c.stop(node)
            else:
                c.kill(node)
            c.start_node(node)
            bounced_mid_copy += running
        for i, p in enumerate(copiers):
            rc = p.wait(timeout=240)
            assert rc == 0, f"copier {i} exited {rc}:\n" + outs[i].read_text(errors="replace")[-3000:]
    finally:
        for p in copiers:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert bounced_mid_copy == len(rounds), (
        f"only {bounced_mid_copy} of {len(rounds)} bounces happened while the copiers ran: raise "
        "STRATA_COPIER_RECORDS so that the test bounces brokers under transactions")

    # Every input record exactly once under read_committed (confluent-kafka, to the LSO).
    txn_util.wait_lso_caught_up(bs, "copy-out", COPIERS, 60)
    out_values = [r.value for r in txn_util.read_topic(bs, "copy-out", COPIERS, read_committed=True, timeout=60)]
    problems = exactly_once_problems(values, out_values)
    assert not problems, "read_committed (confluent-kafka): " + "; ".join(problems)

    # The copiers' consumed offsets, committed in their transactions, are the input's end.
    g = Consumer({"bootstrap.servers": bs, "group.id": "copiers", "log_level": 0})
    try:
        committed = {tp.partition: tp.offset for tp in
                     g.committed([TopicPartition("copy-in", p) for p in range(COPIERS)], timeout=20)}
    finally:
        g.close()
    assert committed == in_ends, f"group copiers committed {committed}, input ends {in_ends}"

    # And Kafka's own VerifiableConsumer under read_committed reads the same.
    conf = tmp_path / "read-committed.properties"
    conf.write_text("isolation.level=read_committed\n")
    p = kafka_tools.run("verifiable-consumer", [
        "--bootstrap-server", bs, "--topic", "copy-out", "--group-id", "verify-out", "--verbose",
        "--max-messages", str(RECORDS), "--reset-policy", "earliest", "--command-config", str(conf)],
        logs, timeout=120)
    assert p.returncode == 0, f"VerifiableConsumer exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
    consumed = [e["value"] for e in (json.loads(line) for line in p.stdout.splitlines() if line.startswith("{"))
                if e.get("name") == "record_data"]
    problems = exactly_once_problems(values, consumed)
    assert not problems, "read_committed (VerifiableConsumer): " + "; ".join(problems)
