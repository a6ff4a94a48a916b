"""Idempotent producers and transactions, end to end with real clients (librdkafka, kafka-python,
kafkajs) and raw requests.

Proves:
- transactions committed and aborted in turn (aborted data flushed to the broker first):
  read_committed sees exactly the committed records, in order, read_uncommitted every data
  record; each transaction leaves one control marker in each partition it wrote;
- an open transaction holds read_committed readers at the last stable offset: ListOffsets
  (read_committed) answers the LSO, a read_committed consumer gets nothing past it until the
  commit, then everything;
- a producer that hangs mid-transaction is aborted by the broker once its transaction.timeout.ms
  passed: the LSO moves on, its records stay invisible, and its late commit is refused;
- a second producer with the same transactional.id fences the first, whose transaction is
  aborted;
- consume-transform-produce with send_offsets_to_transaction, the application SIGKILLed at random
  points (also mid-transaction) and restarted: the output holds every input record exactly once
  (history.py), and the group's offsets end at the input's end;
- the broker SIGKILLed while transactions run and restarted: every transaction ends committed or
  aborted, on every partition alike (history.py: no aborted read, no torn transaction), the LSO
  catches up, and offsets sent in a transaction are committed exactly when its data is;
- idempotence on the wire: a duplicate idempotent batch is stored once and answered with its
  original base offset; a sequence gap is refused with OUT_OF_ORDER_SEQUENCE_NUMBER (45).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
import uuid

import pytest

import history
import util
import wire
from groups_util import JS_DIR, App, PacedProducer, node_app, python_app, unique
from txn_util import (OUT_OF_ORDER_SEQUENCE_NUMBER, TXN_BROKER, TXN_OFFSET_COMMIT, advertised, end_offsets,
                      idempotent_batch, init_producer_id, read_topic, wait_lso_caught_up)
from util import wait_until

TXN_LIBS = ["confluent", "kafka-python", "kafkajs"]


def _txn_offset_commit_or_xfail(b, exc: BaseException) -> None:
    """Re-raises `exc` unless the broker does not advertise TxnOffsetCommit yet, in which case
    the test is an expected failure (the API is being finished)."""
    if TXN_OFFSET_COMMIT not in advertised(b.port):
        pytest.xfail(f"TxnOffsetCommit (28) is not advertised by the broker yet: {type(exc).__name__}: "
                     f"{str(exc)[:300]}")
    raise exc


# --------------------------------------------------------------------------------------------
# Commits and aborts interleaved
# --------------------------------------------------------------------------------------------


def _plan(tag: str, partitions: int) -> list[dict]:
    """Twelve transactions of 2..7 records spread over the partitions; every third aborts."""
    plan = []
    for i in range(12):
        k = 2 + (i * 5) % 6
        plan.append({"records": [[(i + j) % partitions, f"{tag}-T{i}-{j}"] for j in range(k)],
                     "commit": i % 3 != 1})
    return plan


def _run_plan_confluent(bootstrap, topic, tid, plan):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "log_level": 3})
    acks, ends = {}, []
    p.init_transactions(30)
    for i, step in enumerate(plan):
        p.begin_transaction()
        for part, v in step["records"]:
            p.produce(topic, value=v.encode(), partition=part,
                      on_delivery=lambda err, m, v=v: acks.__setitem__(v, (err, m.partition(), m.offset())))
        assert p.flush(30) == 0
        if step["commit"]:
            ends.append((i, "commit", time.monotonic()))
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
            ends.append((i, "abort", None))
    bad = {v: a for v, a in acks.items() if a[0] is not None}
    assert not bad, bad
    return {v: (pp, o) for v, (_, pp, o) in acks.items()}, ends


def _run_plan_kafka_python(bootstrap, topic, tid, plan):
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid)
    acks, ends = {}, []
    try:
        p.init_transactions()
        for i, step in enumerate(plan):
            p.begin_transaction()
            futs = {v: p.send(topic, value=v.encode(), partition=part) for part, v in step["records"]}
            p.flush(timeout=30)
            for v, f in futs.items():
                md = f.get(timeout=30)
                acks[v] = (md.partition, md.offset)
            if step["commit"]:
                ends.append((i, "commit", time.monotonic()))
                p.commit_transaction()
            else:
                p.abort_transaction()
                ends.append((i, "abort", None))
    finally:
        p.close(timeout=10)
    return acks, ends


def _run_node(script: str, args: list[str], workdir, timeout: float) -> list[dict]:
    node = shutil.which("node")
    assert node, "node not found on PATH"
    app = App(f"node-{uuid.uuid4().hex[:6]}", [node, str(JS_DIR / script), *args], workdir, cwd=JS_DIR)
    try:
        app.proc.wait(timeout=timeout)
    finally:
        app.stop_quietly()
    app._reader.join(timeout=5)
    evs = app.snapshot()
    assert app.proc.returncode == 0 and any(e["ev"] == "done" for e in evs), \
        f"{script} failed (rc {app.proc.returncode}):\n{app.stderr_tail()}"
    return evs


def _run_plan_kafkajs(bootstrap, topic, tid, plan, workdir):
    conf = {"bootstrap": bootstrap, "topic": topic, "tid": tid, "plan": plan}
    evs = _run_node("txn_producer.mjs", ["plan", json.dumps(conf)], workdir, 90)
    acks = {e["v"]: (e["p"], e["o"]) for e in evs if e["ev"] == "ack"}
    ends = []
    for e in evs:
        if e["ev"] == "committing":
            ends.append((e["txn"], "commit", e["t"]))
        elif e["ev"] == "aborted":
            ends.append((e["txn"], "abort", None))
    return acks, ends


@pytest.mark.timeout(90)
@pytest.mark.parametrize("lib", TXN_LIBS)
def test_commits_and_aborts_interleaved(broker_factory, tmp_path, lib):
    b = broker_factory(TXN_BROKER)
    parts = 3
    topic, tid = unique("txn-mix"), unique("tid")
    util.create_topic(b.bootstrap, topic, parts)
    plan = _plan(tid, parts)
    if lib == "confluent":
        acks, ends = _run_plan_confluent(b.bootstrap, topic, tid, plan)
    elif lib == "kafka-python":
        acks, ends = _run_plan_kafka_python(b.bootstrap, topic, tid, plan)
    else:
        acks, ends = _run_plan_kafkajs(b.bootstrap, topic, tid, plan, tmp_path)
    assert [(i, o) for i, o, _ in ends] == [(i, "commit" if s["commit"] else "abort") for i, s in enumerate(plan)]

    sends, txns = [], []
    for i, step in enumerate(plan):
        for _, v in step["records"]:
            assert v in acks, f"{v} was not acknowledged"
            sends.append(history.Send(v, *acks[v], producer=tid, txn=f"T{i}"))
        txns.append(history.Txn(f"T{i}", history.COMMIT if step["commit"] else history.ABORT,
                                commit_time=ends[i][2]))

    hw = wait_lso_caught_up(b.bootstrap, topic, parts, 20)
    committed = read_topic(b.bootstrap, topic, parts, read_committed=True)
    everything = read_topic(b.bootstrap, topic, parts, read_committed=False)
    polls = ([history.Poll("rc", r.partition, r.offset, r.value, time=time.monotonic()) for r in committed]
             + [history.Poll("ru", r.partition, r.offset, r.value, read_committed=False) for r in everything])
    history.check(sends, polls, txns, drained=True).assert_ok(lib)

    by_offset = sorted(sends, key=lambda s: (s.partition, s.offset))
    want_committed = [(s.partition, s.offset, s.value) for s in by_offset if plan[int(s.txn[1:])]["commit"]]
    assert [(r.partition, r.offset, r.value) for r in committed] == want_committed
    assert [(r.partition, r.offset, r.value) for r in everything] == [(s.partition, s.offset, s.value)
                                                                    for s in by_offset]
    # One control record per transaction in each partition it wrote, nothing else.
    for p in range(parts):
        data = sum(1 for s in sends if s.partition == p)
        markers = sum(1 for step in plan if any(part == p for part, _ in step["records"]))
        assert hw[p] == data + markers, f"partition {p}: high watermark {hw[p]}, {data} records + {markers} markers"


# --------------------------------------------------------------------------------------------
# The last stable offset
# --------------------------------------------------------------------------------------------


def _drain(consumer, want: int, timeout: float) -> tuple[list, list[int]]:
    """Consumes until `want` records arrived (and returns the EOF offsets seen)."""
    got, eofs = [], []
    deadline = time.monotonic() + timeout
    while len(got) < want:
        assert time.monotonic() < deadline, f"got {len(got)} of {want} records: {got}"
        for m in consumer.consume(100, timeout=0.2):
            if m.error():
                assert m.error().code() == -191, m.error()
                eofs.append(m.offset())
            else:
                got.append((m.offset(), m.value().decode()))
    return got, eofs


@pytest.mark.timeout(60)
def test_open_transaction_holds_read_committed_at_the_lso(broker_factory):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from kafka import IsolationLevel, OffsetSpec
    from kafka import TopicPartition as KTP
    from kafka.admin import KafkaAdminClient

    b = broker_factory(TXN_BROKER)
    topic = unique("txn-lso")
    util.create_topic(b.bootstrap, topic, 1)
    plain = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "log_level": 3})

    def plain_write(vals):
        for v in vals:
            plain.produce(topic, value=v.encode(), partition=0)
        assert plain.flush(20) == 0

    plain_write(["before-0", "before-1", "before-2"])  # offsets 0-2
    tp = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": unique("tid"), "log_level": 3})
    tp.init_transactions(30)
    tp.begin_transaction()
    for i in range(4):  # offsets 3-6
        tp.produce(topic, value=f"txn-{i}".encode(), partition=0)
    assert tp.flush(20) == 0
    plain_write(["after-0", "after-1"])  # offsets 7-8, behind the open transaction

    assert end_offsets(b.bootstrap, topic, 1, read_committed=False) == {0: 9}
    assert end_offsets(b.bootstrap, topic, 1, read_committed=True) == {0: 3}, "ListOffsets(read_committed) != LSO"
    kp = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        r = kp.list_partition_offsets({KTP(topic, 0): OffsetSpec.LATEST}, isolation_level=IsolationLevel.READ_COMMITTED)
        assert r[KTP(topic, 0)].offset == 3, r
    finally:
        kp.close()

    def consumer(iso):
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique("rd"), "isolation.level": iso,
                      "enable.partition.eof": True, "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                      "log_level": 3})
        c.assign([TopicPartition(topic, 0, 0)])
        return c

    rc, ru = consumer("read_committed"), consumer("read_uncommitted")
    try:
        got, eofs = _drain(rc, 3, 15)
        assert got == [(0, "before-0"), (1, "before-1"), (2, "before-2")]
        # The reader reports its end at the LSO; watch a moment longer that nothing comes past it.
        wait_until(lambda: eofs or _drain_more(rc, eofs), 10, "end of partition at the LSO")
        assert eofs[0] == 3, eofs
        extra = _poll_for(rc, 1.5)
        assert extra == [], f"read_committed read past the LSO: {extra}"
        got_ru, _ = _drain(ru, 9, 15)
        assert [v for _, v in got_ru] == ["before-0", "before-1", "before-2", "txn-0", "txn-1", "txn-2", "txn-3",
                                          "after-0", "after-1"]

        tp.commit_transaction(30)
        got, _ = _drain(rc, 6, 15)
        assert got == [(3, "txn-0"), (4, "txn-1"), (5, "txn-2"), (6, "txn-3"), (7, "after-0"), (8, "after-1")]
        assert end_offsets(b.bootstrap, topic, 1, read_committed=True) == {0: 10}  # after the commit marker
        assert end_offsets(b.bootstrap, topic, 1, read_committed=False) == {0: 10}
    finally:
        rc.close()
        ru.close()


def _drain_more(c, eofs) -> bool:
    for m in c.consume(100, timeout=0.2):
        if m.error() and m.error().code() == -191:
            eofs.append(m.offset())
        elif not m.error():
            raise AssertionError(f"unexpected record at {m.offset()}: {m.value()!r}")
    return bool(eofs)


def _poll_for(c, seconds: float) -> list:
    """Records received within `seconds` (an observation window: nothing is expected)."""
    got = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for m in c.consume(100, timeout=0.2):
            if not m.error():
                got.append((m.offset(), m.value()))
    return got


# --------------------------------------------------------------------------------------------
# Transaction timeout
# --------------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_hung_transaction_is_aborted_after_its_timeout(broker_factory):
    from confluent_kafka import KafkaException, Producer
    from kafka.admin import KafkaAdminClient

    b = broker_factory(TXN_BROKER)
    topic, tid = unique("txn-timeout"), unique("tid")
    util.create_topic(b.bootstrap, topic, 2)
    timeout_ms = 3000
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": tid, "transaction.timeout.ms": timeout_ms,
                  "log_level": 0})
    p.init_transactions(30)
    kp = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        epoch0 = kp.describe_transactions([tid])[tid].producer_epoch
        p.begin_transaction()
        for i in range(4):
            p.produce(topic, value=f"hung-{i}".encode(), partition=i % 2)
        assert p.flush(20) == 0
        t_open = time.monotonic()
        assert end_offsets(b.bootstrap, topic, 2, read_committed=True) == {0: 0, 1: 0}
        # The producer now hangs: it sends nothing more. The coordinator must abort for it.
        hw = wait_lso_caught_up(b.bootstrap, topic, 2, timeout_ms / 1000 + 15)
        took = time.monotonic() - t_open
        assert took >= timeout_ms / 1000 - 0.5, f"aborted after {took:.1f}s, before its {timeout_ms} ms timeout"
        assert hw == {0: 3, 1: 3}, f"expected 2 records + an abort marker per partition, high watermarks {hw}"
        desc = kp.describe_transactions([tid])[tid]
        assert desc.state.value == "CompleteAbort" and desc.producer_epoch > epoch0, desc
        assert read_topic(b.bootstrap, topic, 2, read_committed=True) == []
        assert len(read_topic(b.bootstrap, topic, 2, read_committed=False)) == 4
        # The producer wakes up and tries to commit: refused.
        with pytest.raises(KafkaException):
            p.commit_transaction(20)
        assert read_topic(b.bootstrap, topic, 2, read_committed=True) == []
    finally:
        kp.close()


# --------------------------------------------------------------------------------------------
# Fencing
# --------------------------------------------------------------------------------------------


def _fence_confluent(bootstrap, topic, tid):
    from confluent_kafka import KafkaException, Producer

    def producer():
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "log_level": 0})
        p.init_transactions(30)
        return p

    a = producer()
    a.begin_transaction()
    for i, part in enumerate([0, 1, 0]):
        a.produce(topic, value=f"A-{i}".encode(), partition=part)
    assert a.flush(20) == 0
    bp = producer()  # fences A
    bp.begin_transaction()
    for i, part in enumerate([0, 1]):
        bp.produce(topic, value=f"B-{i}".encode(), partition=part)
    bp.commit_transaction(30)
    try:
        a.produce(topic, value=b"A-3", partition=1)
        a.commit_transaction(20)
    except KafkaException as e:
        err = e.args[0]
        return f"{err.name()} fatal={err.fatal()}"
    return None


def _fence_kafka_python(bootstrap, topic, tid):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    a = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid)
    bp = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid)
    try:
        a.init_transactions()
        a.begin_transaction()
        for i, part in enumerate([0, 1, 0]):
            a.send(topic, value=f"A-{i}".encode(), partition=part)
        a.flush(timeout=20)
        bp.init_transactions()
        bp.begin_transaction()
        for i, part in enumerate([0, 1]):
            bp.send(topic, value=f"B-{i}".encode(), partition=part)
        bp.commit_transaction()
        try:
            a.send(topic, value=b"A-3", partition=1)
            a.commit_transaction()
        except KafkaError as e:
            return repr(e)
        return None
    finally:
        a.close(timeout=5)
        bp.close(timeout=5)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("lib", TXN_LIBS)
def test_second_producer_fences_the_first(broker_factory, tmp_path, lib):
    b = broker_factory(TXN_BROKER)
    topic, tid = unique("txn-fence"), unique("tid")
    util.create_topic(b.bootstrap, topic, 2)
    if lib == "confluent":
        fenced = _fence_confluent(b.bootstrap, topic, tid)
    elif lib == "kafka-python":
        fenced = _fence_kafka_python(b.bootstrap, topic, tid)
    else:
        evs = _run_node("txn_producer.mjs", ["fence", json.dumps({"bootstrap": b.bootstrap, "topic": topic,
                                                                   "tid": tid})], tmp_path, 60)
        f = [e for e in evs if e["ev"] in ("fenced", "not_fenced")]
        fenced = f[0].get("err") if f and f[0]["ev"] == "fenced" else None
    assert fenced, "the first producer was not fenced: its late commit succeeded"
    wait_lso_caught_up(b.bootstrap, topic, 2, 20)
    values = sorted(r.value for r in read_topic(b.bootstrap, topic, 2, read_committed=True))
    assert values == ["B-0", "B-1"], f"read_committed after fencing ({fenced}): {values}"
    everything = sorted(r.value for r in read_topic(b.bootstrap, topic, 2, read_committed=False))
    assert {"A-0", "A-1", "A-2", "B-0", "B-1"} <= set(everything), everything


# --------------------------------------------------------------------------------------------
# Consume-transform-produce with the application SIGKILLed
# --------------------------------------------------------------------------------------------


def _start_ctp(lib: str, name: str, workdir, conf: dict) -> App:
    if lib == "kafkajs":
        return node_app("txn_ctp.mjs", conf, name, workdir)
    return python_app("txn_ctp.py", {**conf, "lib": lib}, name, workdir)


def _in_txn(app: App) -> bool:
    evs = [e for e in app.snapshot() if e["ev"] in ("begin", "produced", "offsets", "committed", "aborted")]
    return bool(evs) and evs[-1]["ev"] in ("begin", "produced", "offsets")


def _ctp_state(bootstrap: str, prod: PacedProducer, in_topic: str, parts: int, group: str) -> str:
    """What a stalled consume-transform-produce run looked like from outside the application:
    whether its input kept growing, and what its group had committed."""
    lines = [f"input producer: {prod.sent} sent, {len(prod.acks)} acknowledged, ends {prod.end_offsets()}, "
             f"errors {prod.errors[:3]}"]
    try:
        lines.append(f"input high watermarks {end_offsets(bootstrap, in_topic, parts, read_committed=False)}, "
                     f"last stable offsets {end_offsets(bootstrap, in_topic, parts, read_committed=True)}")
        from kafka.admin import KafkaAdminClient

        kp = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            offs = kp.list_group_offsets({group: None})[group]
            lines.append(f"group offsets {sorted((tp.partition, om.offset) for tp, om in offs.items())}")
        finally:
            kp.close()
    except Exception as e:  # a diagnostic only; the test's own error is what matters
        lines.append(f"(broker state not read: {type(e).__name__}: {e})")
    return "\n".join(lines)


@pytest.mark.timeout(150)
@pytest.mark.parametrize("lib,kills", [("confluent", 8), ("kafka-python", 4), ("kafkajs", 4)])
def test_consume_transform_produce_survives_sigkill(broker_factory, tmp_path, lib, kills):
    b = broker_factory(TXN_BROKER)
    parts = 3
    in_topic, out_topic, group = unique("ctp-in"), unique("ctp-out"), unique("ctp-g")
    util.create_topic(b.bootstrap, in_topic, parts)
    util.create_topic(b.bootstrap, out_topic, parts)
    conf = {"bootstrap": b.bootstrap, "in_topic": in_topic, "out_topic": out_topic, "group": group,
            "tid": unique("ctp-tid"), "instance_id": "ctp-0",
            "session_timeout_ms": 3000 if lib == "kafkajs" else 10_000, "max_records": 30, "dwell_ms": 40,
            # librdkafka debug contexts for the confluent app's consumer, e.g. "cgrp,fetch", to look
            # into a run that stalls (they slow it down, so not by default).
            **({"consumer_debug": os.environ["STRATA_CTP_CONSUMER_DEBUG"]}
               if os.environ.get("STRATA_CTP_CONSUMER_DEBUG") else {})}
    rng = random.Random()
    prod = PacedProducer(b.bootstrap, in_topic, parts, rate=120, tag="in")
    apps: list[App] = []
    mid_txn_kills = 0
    try:
        try:
            apps.append(_start_ctp(lib, "ctp-0", tmp_path, conf))
            for k in range(kills):
                app = apps[-1]
                app.wait_for(lambda evs: any(e["ev"] == "committed" for e in evs), 45, "a committed transaction")
                time.sleep(rng.uniform(0.3, 2.5))  # a random kill point, the fault being injected
                if k % 2 == 0:  # every other kill aims inside a transaction
                    app.wait_for(lambda _evs: _in_txn(app), 10, "a transaction in progress")
                app.kill()
                mid_txn_kills += _in_txn(app)  # its last line was begin/produced/offsets
                apps.append(_start_ctp(lib, f"ctp-{k + 1}", tmp_path, conf))
            app = apps[-1]
            app.wait_for(lambda evs: any(e["ev"] == "committed" for e in evs), 45, "a committed transaction")
            sends = [history.Send(s.value, s.partition, s.offset, producer="in", topic="in") for s in prod.stop()]
            ends = prod.end_offsets()

            def caught_up(evs):
                done = {}
                for e in evs:
                    if e["ev"] == "committed":
                        done.update({int(p): o for p, o in e["offsets"].items()})
                return all(done.get(p, 0) >= end for p, end in ends.items())

            app.wait_for(caught_up, 45, f"the application to commit up to the input's end {ends}")
            app.terminate()
        except (AssertionError, TimeoutError) as e:
            # The broker's view of the stall goes with the failure (built, not add_note: any Python 3).
            stalled = AssertionError(f"{e}\n{_ctp_state(b.bootstrap, prod, in_topic, parts, group)}")
            stalled.__cause__ = e
            _txn_offset_commit_or_xfail(b, stalled)
        assert mid_txn_kills >= max(1, kills // 4), f"only {mid_txn_kills} of {kills} kills landed mid-transaction"

        wait_lso_caught_up(b.bootstrap, out_topic, parts, 20)
        polls = [history.Poll("out", r.partition, r.offset, r.value, topic="out")
                 for r in read_topic(b.bootstrap, out_topic, parts, read_committed=True)]
        report = history.check(sends, polls, drained=True)
        report.assert_ok(f"output of {lib} consume-transform-produce after {kills} kills")
        partition_of = {s.value: s.partition for s in sends}
        moved = [p for p in polls if partition_of.get(p.value) != p.partition]
        assert not moved, f"records copied to another partition: {moved[:5]}"

        from kafka.admin import KafkaAdminClient

        kp = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            offs = kp.list_group_offsets({group: None})[group]
        finally:
            kp.close()
        assert {tp.partition: om.offset for tp, om in offs.items()} == ends, "group offsets != input end"
    finally:
        prod.close()
        for a in apps:
            a.stop_quietly()


# --------------------------------------------------------------------------------------------
# The broker SIGKILLed mid-transaction
# --------------------------------------------------------------------------------------------


class TxnWorker:
    """A confluent transactional producer in a thread: transaction i writes two records to every
    partition and (when the broker serves TxnOffsetCommit) sends offset i + 1 of a source
    partition to its own group, then commits, or aborts one time in four. Every outcome is
    recorded; errors are handled as librdkafka documents (retriable: retry; abortable: abort;
    fatal: a new producer, whose init_transactions settles the old transaction)."""

    def __init__(self, bootstrap, topic, parts, name, src_topic, with_offsets, seed):
        import threading

        self.bootstrap, self.topic, self.parts, self.name = bootstrap, topic, parts, name
        self.src_topic, self.with_offsets = src_topic, with_offsets
        self.tid = unique(f"tid-{name}")
        self.group = unique(f"grp-{name}")
        self.rng = random.Random(seed)
        self.sends: list[history.Send] = []
        self.txns: list[history.Txn] = []
        self.acks: dict[str, tuple[int, int]] = {}
        self.errors: list[str] = []
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self.run, name=name, daemon=True)
        self.group_md = _group_metadata(self.group) if with_offsets else None

    def producer(self):
        from confluent_kafka import Producer

        # metadata.recovery.strategy=none: with one broker down, librdkafka 2.x re-bootstraps and
        # decommissions its broker handles, and a decommissioned group coordinator stays cached, so
        # send_offsets_to_transaction hangs for good, whatever its timeout (librdkafka issue #5511).
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.tid, "log_level": 0,
                      "transaction.timeout.ms": 20_000, "message.timeout.ms": 20_000, "linger.ms": 2,
                      "metadata.recovery.strategy": "none"})
        self._retry(lambda: p.init_transactions(20))
        return p

    def _retry(self, fn, deadline_s: float = 60.0):
        from confluent_kafka import KafkaException

        end = time.monotonic() + deadline_s
        while True:
            try:
                return fn()
            except KafkaException as e:
                if not e.args[0].retriable() or time.monotonic() > end:
                    raise

    def run(self):
        from confluent_kafka import KafkaException, TopicPartition

        p = self.producer()
        i = 0
        while not self.stop_flag.is_set():
            txn = f"{self.name}-T{i}"
            values = [f"{txn}-{q}-{k}" for q in range(self.parts) for k in range(2)]
            commit = self.rng.random() >= 0.25
            outcome, commit_time = history.OPEN, None
            try:
                p.begin_transaction()
                for v in values:
                    self.sends.append(history.Send(v, txn=txn, status=history.INFO))
                    p.produce(self.topic, value=v.encode(), partition=int(v.split("-")[-2]),
                              on_delivery=lambda err, m, v=v: err is None and self.acks.__setitem__(
                                  v, (m.partition(), m.offset())))
                if self.with_offsets:
                    p.send_offsets_to_transaction([TopicPartition(self.src_topic, 0, i + 1)], self.group_md, 30)
                if commit:
                    commit_time = time.monotonic()
                    outcome = history.UNKNOWN
                    self._retry(lambda: p.commit_transaction(30))
                    outcome = history.COMMIT
                else:
                    p.flush(30)  # so that the aborted records are in the log
                    self._retry(lambda: p.abort_transaction(30))
                    outcome = history.ABORT
            except KafkaException as e:
                err = e.args[0]
                self.errors.append(f"{txn}: {err.name()} fatal={err.fatal()} abortable={err.txn_requires_abort()}")
                try:
                    if err.txn_requires_abort():
                        self._retry(lambda: p.abort_transaction(30))
                        outcome = history.ABORT
                    else:
                        p = self.producer()  # fatal: a new session settles the old transaction
                except KafkaException as e2:
                    self.errors.append(f"{txn}: settling: {e2.args[0].name()}")
                    p = self.producer()
            self.txns.append(history.Txn(txn, outcome, commit_time=commit_time))
            i += 1
        p.flush(10)

    def history(self) -> list[history.Send]:
        out = []
        for s in self.sends:
            if s.value in self.acks:
                out.append(history.Send(s.value, *self.acks[s.value], txn=s.txn, producer=self.tid))
            else:
                out.append(s)
        return out


def _group_metadata(group: str):
    """librdkafka's ConsumerGroupMetadata for a group without a live member (generation -1)."""
    from confluent_kafka import Consumer

    c = Consumer({"group.id": group, "bootstrap.servers": "127.0.0.1:1", "log_level": 0})
    try:
        return c.consumer_group_metadata()
    finally:
        c.close()


@pytest.mark.timeout(150)
def test_broker_killed_mid_transaction(broker_factory):
    b = broker_factory(TXN_BROKER)
    parts = 3
    topic, src = unique("txn-crash"), unique("txn-src")
    util.create_topic(b.bootstrap, topic, parts)
    util.create_topic(b.bootstrap, src, 1)
    with_offsets = TXN_OFFSET_COMMIT in advertised(b.port)
    workers = [TxnWorker(b.bootstrap, topic, parts, f"w{j}", src, with_offsets, seed=j) for j in range(3)]
    for w in workers:
        w.thread.start()
    try:
        def commits(w):
            return sum(t.outcome == history.COMMIT for t in w.txns)

        for kill in range(3):
            marks = [commits(w) for w in workers]
            wait_until(lambda: all(commits(w) >= m + 3 for w, m in zip(workers, marks)), 60,
                       "every worker committing")
            # The workers run transactions back to back: a kill at any moment lands inside some.
            time.sleep(random.uniform(0.0, 0.3))
            b.kill()
            b.start()
        marks = [commits(w) for w in workers]
        wait_until(lambda: all(commits(w) >= m + 3 for w, m in zip(workers, marks)), 60,
                   "every worker committing after the last restart")
    finally:
        for w in workers:
            w.stop_flag.set()
        for w in workers:
            w.thread.join(timeout=60)
    assert not any(w.thread.is_alive() for w in workers), "a worker is stuck"

    # Every transaction ends: none open or preparing, and the LSO catches up with the HW.
    from kafka.admin import KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        def settled():
            listed = [t for ts in kp.list_transactions().values() for t in ts
                      if t.transactional_id in {w.tid for w in workers}]
            return all(t.state.value in ("Empty", "CompleteCommit", "CompleteAbort") for t in listed) and listed

        wait_until(settled, 40, "every transaction to complete")
        wait_lso_caught_up(b.bootstrap, topic, parts, 40)
        sends = [s for w in workers for s in w.history()]
        txns = [t for w in workers for t in w.txns]
        polls = [history.Poll("rc", r.partition, r.offset, r.value)
                 for r in read_topic(b.bootstrap, topic, parts, read_committed=True)]
        polls += [history.Poll("ru", r.partition, r.offset, r.value, read_committed=False)
                  for r in read_topic(b.bootstrap, topic, parts, read_committed=False)]
        report = history.check(sends, polls, txns, drained=True)
        report.assert_ok("transactions across broker kills")
        assert report.stats["txns_committed"] >= 30, report.stats
        # A transaction's values are all visible or none (torn transactions show as lost writes
        # above); check it directly per transaction as well, under read_committed.
        visible = {p.value for p in polls if p.read_committed}
        for w in workers:
            for t in w.txns:
                vs = [s.value for s in w.sends if s.txn == t.id]
                seen = [v for v in vs if v in visible]
                assert not seen or len(seen) == len(vs), f"{t.id} ({t.outcome}) partly visible: {seen}"
        if with_offsets:
            from kafka import TopicPartition as KTP

            for w in workers:
                last = max((int(t.id.split("T")[-1]) for t in w.txns
                            if any(s.value in visible for s in w.sends if s.txn == t.id)), default=-1)
                offs = kp.list_group_offsets({w.group: None})[w.group]
                got = offs.get(KTP(src, 0))
                assert (got.offset if got else 0) == last + 1, \
                    f"{w.group}: committed offset {got}, last committed transaction {last}"
    finally:
        kp.close()
    if not with_offsets:
        pytest.xfail("TxnOffsetCommit (28) is not advertised yet: the data side passed; offsets in "
                     "transactions were not exercised")


# --------------------------------------------------------------------------------------------
# Idempotence on the wire
# --------------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_idempotent_duplicate_and_sequence_gap_on_the_wire(broker_factory):
    b = broker_factory(TXN_BROKER)
    topic = unique("idem-raw")
    util.create_topic(b.bootstrap, topic, 1)
    with wire.Conn(b.port) as c:
        # Apache Kafka 4.4 answered this first idempotent InitProducerId, sent just after
        # start-up, with COORDINATOR_LOAD_IN_PROGRESS (14): a retriable error, which clients
        # retry, so the test does too.
        err, pid, epoch = wait_until(lambda: (r := init_producer_id(c))[0] != 14 and r, 20,
                                     "InitProducerId past COORDINATOR_LOAD_IN_PROGRESS")
        assert err == 0 and pid >= 0 and epoch >= 0, (err, pid, epoch)

        def send(values, seq):
            return wire.produce_v3(c, topic, 0, idempotent_batch([v.encode() for v in values], pid, epoch, seq))

        first = send(["a0", "a1", "a2"], 0)
        assert (first.error_code, first.base_offset) == (0, 0), first
        dup = send(["a0", "a1", "a2"], 0)
        assert (dup.error_code, dup.base_offset) == (0, 0), f"duplicate batch answered {dup}"
        second = send(["b0", "b1"], 3)
        assert (second.error_code, second.base_offset) == (0, 3), second
        older = send(["a0", "a1", "a2"], 0)  # a retry of an earlier batch, still among the last five
        assert (older.error_code, older.base_offset) == (0, 0), f"retried older batch answered {older}"
        gap = send(["c0"], 7)  # 5 expected
        assert gap.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER, f"sequence gap answered {gap}"
        third = send(["c0", "c1"], 5)
        assert (third.error_code, third.base_offset) == (0, 5), third

    got = util.confluent_read_all(b.bootstrap, topic, 0)
    assert [(g.offset, g.value) for g in got] == list(enumerate([b"a0", b"a1", b"a2", b"b0", b"b1", b"c0", b"c1"]))
    from kafka import TopicPartition as KTP
    from kafka.admin import KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        state = kp.describe_producers([KTP(topic, 0)])[KTP(topic, 0)]
        (prod,) = [s for s in state.active_producers if s.producer_id == pid]
        assert prod.last_sequence == 6 and prod.producer_epoch == epoch, prod
    finally:
        kp.close()
