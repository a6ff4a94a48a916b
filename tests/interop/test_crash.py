"""Crash safety: SIGKILL the broker under continuous produce, restart it on the same data dir.

Proves, for acks=1 and acks=all and several kill points (including two kills in one run): every
record the broker acknowledged is in the log after recovery exactly once, at the offset its
acknowledgement gave, byte for byte; offsets are dense from 0 in every partition; acknowledged
records keep their production order per partition; nothing is duplicated at all; the restarted
broker accepts and acknowledges new writes that continue the same offset sequence.

Records not acknowledged (in flight at the kill) may or may not be in the log; that is allowed.
The producer runs with retries disabled and no idempotence (Strata has no InitProducerId yet), so
each record is sent at most once and any duplicate is the broker's doing. A record's value encodes
its sequence number, which identifies it in the log.
"""

from __future__ import annotations

import random
import threading
import time

import pytest
from confluent_kafka import Producer

import util
from util import wait_until

PARTITIONS = 3
AFTER_LAST_KILL = 10_000  # records produced after the last restart


def _value(seq: int) -> bytes:
    return f"seq-{seq:09d}|".encode() + random.Random(seq).randbytes(60)


def _seq_of(value: bytes) -> int:
    return int(value[4:13])


class ContinuousProducer:
    """Produces records (seq i to partition i % PARTITIONS) from a background thread at about
    RATE records/s, so that production is still going on when the broker is killed, until
    `total` (which the test sets after its last kill), and keeps every delivery report."""

    RATE = 40_000
    CHUNK = 100

    def __init__(self, bootstrap: str, topic: str, acks: str):
        self.topic = topic
        self.total = 10**9  # lowered by the test once the last kill is done
        self.acked: dict[int, tuple[int, int]] = {}  # seq -> (partition, offset)
        self.failed: dict[int, str] = {}
        self.produced = 0
        self.error: BaseException | None = None
        self.stopping = False
        self.p = Producer({
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "enable.idempotence": False,
            "retries": 0,  # at most one send per record: a duplicate can only come from the broker
            "linger.ms": 2,
            "batch.num.messages": 500,
            "message.timeout.ms": 60_000,
            "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 200,
            "log_level": 2,  # connection-refused noise while the broker is down
        })
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _cb(self, err, msg):
        seq = _seq_of(msg.value())
        if err is None:
            assert msg.offset() >= 0
            self.acked[seq] = (msg.partition(), msg.offset())
        else:
            self.failed[seq] = str(err)

    def _run(self):
        try:
            next_chunk_at = time.monotonic()
            seq = 0
            while seq < self.total:
                if self.stopping:
                    return
                if seq % self.CHUNK == 0:
                    # Pace to RATE without catching up after a stall (so production keeps going
                    # through every kill), and bound the backlog while the broker is down.
                    while not self.stopping and (len(self.p) > 5_000 or time.monotonic() < next_chunk_at):
                        self.p.poll(0.002)
                    next_chunk_at = time.monotonic() + self.CHUNK / self.RATE
                self.p.produce(self.topic, key=f"k{seq}".encode(), value=_value(seq),
                               partition=seq % PARTITIONS, on_delivery=self._cb)
                self.produced = seq + 1
                seq += 1
                self.p.poll(0)
            left = self.p.flush(90)
            if left:
                raise AssertionError(f"{left} records still undelivered 90 s after the last produce")
        except BaseException as e:  # surfaced by join()
            self.error = e

    def start(self):
        self.thread.start()

    def join(self, timeout: float):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "producer thread did not finish"
        if self.error:
            raise self.error

    def stop(self):
        """Stops producing (on test failure) so nothing keeps running after the test."""
        self.stopping = True
        self.thread.join(10)
        self.p.purge()
        self.p.flush(0)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kills", [(3_000,), (20_000,), (5_000, 15_000)], ids=["kill@3k", "kill@20k", "kill@5k+15k"])
@pytest.mark.parametrize("acks", ["1", "all"], ids=["acks1", "acksall"])
def test_acked_records_survive_sigkill(broker, acks, kills):
    topic = util.unique_topic(f"crash-{acks}")
    util.create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    # Every partition led before the first send: a batch refused because its new partition was not
    # led yet (Kafka takes a moment after the topic shows in Metadata) is sent again after the ones
    # behind it, which would reorder the log with no broker fault.
    for p in range(PARTITIONS):
        wait_until(lambda: util.watermarks(broker.bootstrap, topic, p) == (0, 0), 30, f"partition {p} led")
    prod = ContinuousProducer(broker.bootstrap, topic, acks)
    prod.start()
    produced_at_last_kill = 0
    outstanding_at_kills = []
    try:
        for k in kills:
            wait_until(lambda: len(prod.acked) >= k or prod.error, 120, f"{k} acknowledged records", interval=0.005)
            if prod.error:
                break
            # Prefer a moment with records outstanding, so some requests are cut off mid-way
            # (best effort: after 1 s, kill anyway).
            try:
                wait_until(lambda: len(prod.p) >= 100, 1.0, "records outstanding", interval=0.001)
            except TimeoutError:
                pass
            outstanding_at_kills.append(len(prod.p))  # queued or in flight when the broker dies
            produced_at_last_kill = prod.produced
            broker.kill()
            broker.start()
        prod.total = prod.produced + AFTER_LAST_KILL
        prod.join(150)
    finally:
        if prod.thread.is_alive():
            prod.stop()

    acked_after_kill = sum(1 for s in prod.acked if s >= produced_at_last_kill)
    summary = (f"produced {prod.produced}, acked {len(prod.acked)}, failed {len(prod.failed)}, "
               f"outstanding at kills {outstanding_at_kills}, acked among those produced after the last kill "
               f"{acked_after_kill}")
    assert acked_after_kill >= AFTER_LAST_KILL // 2, "restarted broker acknowledged too little: " + summary

    for p in range(PARTITIONS):
        low, high = util.watermarks(broker.bootstrap, topic, p)
        assert low == 0, f"partition {p}: log start offset {low}"
        got = util.confluent_read(broker.bootstrap, topic, p, high, timeout=120)
        where: dict[int, int] = {}
        for i, g in enumerate(got):
            assert g.offset == i, f"partition {p}: offsets not dense at index {i}: {g.offset}"
            seq = _seq_of(g.value)
            assert seq % PARTITIONS == p, f"seq {seq} found in partition {p}"
            assert g.value == _value(seq) and g.key == f"k{seq}".encode(), f"seq {seq} corrupted at offset {i}"
            assert seq not in where, f"partition {p}: seq {seq} at offsets {where[seq]} and {i} (duplicate)"
            where[seq] = i
        acked_here = sorted((s, o) for s, (pp, o) in prod.acked.items() if pp == p)
        lost = [(s, o) for s, o in acked_here if s not in where]
        assert not lost, f"partition {p}: {len(lost)} acknowledged records lost, first {lost[:5]}; {summary}"
        moved = [(s, o, where[s]) for s, o in acked_here if where[s] != o]
        assert not moved, f"partition {p}: acknowledged at one offset, found at another: {moved[:5]}"
        offsets_in_seq_order = [o for _, o in acked_here]
        assert offsets_in_seq_order == sorted(offsets_in_seq_order), f"partition {p}: acked records reordered"
    print(summary)


@pytest.mark.timeout(180)
def test_sigkill_while_idle_then_restart_keeps_everything(broker, tmp_path):
    """After acknowledged writes settle, SIGKILL + restart loses nothing, keeps offsets and the
    topic's metadata/configs, and new writes continue at the next offset. Repeated three times."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    b, topic = broker.bootstrap, util.unique_topic("idle-kill")
    util.create_topic(b, topic, partitions=2, config={"retention.ms": "86400000"})
    expected: dict[int, list] = {0: [], 1: []}
    for round_ in range(3):
        recs = util.make_records(2000, f"{topic}-{round_}", partitions=2)
        util.confluent_produce(b, topic, recs, codec=["none", "lz4", "zstd"][round_])
        for p, rs in util.by_partition(recs).items():
            expected[p] += rs
        broker.kill()
        broker.start()
        for p in (0, 1):
            got = util.confluent_read(b, topic, p, len(expected[p]))
            util.assert_records(expected[p], got, what=f"round {round_} partition {p}")
            assert util.watermarks(b, topic, p) == (0, len(expected[p]))
    a = AdminClient({"bootstrap.servers": b})
    res = ConfigResource(ResourceType.TOPIC, topic)
    assert a.describe_configs([res])[res].result(timeout=30)["retention.ms"].value == "86400000"


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_a_restarted_broker_answers_its_first_requests_as_leader(broker, how):
    """A clean shutdown leaves every partition leaderless (its one ISR member went away) and the
    restart elects it again; the listener opens only once that election is applied, so the
    first ListOffsets after the restart, for every partition, is answered by the leader (no
    NOT_LEADER_OR_FOLLOWER while the broker catches up with its own metadata)."""
    b, topic = broker.bootstrap, util.unique_topic("first-answer")
    parts = 24
    util.create_topic(b, topic, partitions=parts)
    util.confluent_produce(b, topic, util.make_records(240, topic, partitions=parts))
    for _ in range(2):
        broker.stop() if how == "sigterm" else broker.kill()
        broker.start()
        assert [util.watermarks(b, topic, p)[1] for p in range(parts)] == [10] * parts
