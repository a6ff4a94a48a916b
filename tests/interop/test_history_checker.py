"""Unit tests of history.py, the queue-workload checker the fault tests rely on.

Each anomaly has a small crafted history that must be flagged and a near miss that must pass, so
the checker is known to catch what the fault tests claim it catches, and not to cry wolf over
what Kafka allows (redelivery at the same offset, offsets taken by transaction markers or
aborted records, reads that have not reached the end of a partition).
"""

from __future__ import annotations

import pytest

import history as h
from history import Poll, Send, Txn

pytestmark = pytest.mark.timeout(30)


def sends_dense(values, partition=0, producer="p", start=0, txn=None):
    return [Send(v, partition, start + i, producer=producer, txn=txn) for i, v in enumerate(values)]


def reads(values_offsets, consumer="c", partition=0, session=0, read_committed=True, time=None):
    return [Poll(consumer, partition, o, v, session=session, read_committed=read_committed, time=time)
            for v, o in values_offsets]


def test_clean_history_passes():
    s = sends_dense(["a", "b", "c"]) + sends_dense(["x", "y"], partition=1)
    p = reads([("a", 0), ("b", 1), ("c", 2)]) + reads([("x", 0), ("y", 1)], partition=1)
    # At-least-once redelivery by another consumer, at the same offsets, is not a duplicate.
    p += reads([("b", 1), ("c", 2)], consumer="c2")
    r = h.check(s, p, drained=True)
    assert r.ok, str(r)
    assert r.stats["acked"] == 5 and r.stats["distinct_read"] == 5


def test_transactions_with_markers_and_aborts_pass():
    # Offsets: t1 a@0 b@1, commit marker @2; t2 c@3, abort marker @4; d@5 (no txn).
    s = [Send("a", 0, 0, txn="t1"), Send("b", 0, 1, txn="t1"), Send("c", 0, 3, txn="t2"), Send("d", 0, 5)]
    txns = [Txn("t1", h.COMMIT, commit_time=1.0), Txn("t2", h.ABORT)]
    committed = reads([("a", 0), ("b", 1), ("d", 5)], time=2.0)
    uncommitted = reads([("a", 0), ("b", 1), ("c", 3), ("d", 5)], consumer="u", read_committed=False)
    r = h.check(s, committed + uncommitted, txns, drained=True)
    assert r.ok, str(r)


def test_lost_write_flagged_only_when_readers_passed_it():
    s = sends_dense(["a", "b", "c", "d"])
    r = h.check(s, reads([("a", 0), ("c", 2)]))
    assert r.found() == {h.LOST_WRITE, h.POLL_SKIP}, str(r)
    assert r.anomalies[h.LOST_WRITE][0]["value"] == "b"
    assert [u["value"] for u in r.unseen] == ["d"]
    # d lies beyond every read: not lost unless the test drained the partition.
    r = h.check(s, reads([("a", 0), ("b", 1), ("c", 2)]))
    assert r.ok, str(r)
    r = h.check(s, reads([("a", 0), ("b", 1), ("c", 2)]), drained=True)
    assert r.found() == {h.LOST_WRITE} and r.anomalies[h.LOST_WRITE][0]["value"] == "d"


def test_failed_and_indeterminate_sends_are_not_lost():
    s = [Send("a", 0, 0), Send("b", status=h.FAIL), Send("c", status=h.INFO), Send("d", 0, 1)]
    r = h.check(s, reads([("a", 0), ("d", 1)]), drained=True)
    assert r.ok, str(r)
    # An indeterminate send that did land is fine too.
    r = h.check(s, reads([("a", 0), ("d", 1), ("c", 2)]), drained=True)
    assert r.ok, str(r)


def test_duplicate_value_at_two_offsets_flagged():
    s = sends_dense(["a", "b"])
    p = reads([("a", 0), ("b", 1), ("a", 2)])
    r = h.check(s, p)
    assert h.DUPLICATE in r.found(), str(r)
    assert r.anomalies[h.DUPLICATE][0] == {"value": "a", "positions": [(0, 0), (0, 2)]}
    # Acknowledged at one offset, read at another: a duplicate as well.
    r = h.check([Send("a", 0, 0)], reads([("a", 3)]))
    assert h.DUPLICATE in r.found(), str(r)


def test_inconsistent_offsets_flagged():
    s = sends_dense(["a", "b"])
    r = h.check(s, reads([("a", 0), ("z", 1)], consumer="c1") + reads([("a", 0), ("b", 1)], consumer="c2"))
    assert h.INCONSISTENT_OFFSETS in r.found(), str(r)
    ex = r.anomalies[h.INCONSISTENT_OFFSETS][0]
    assert (ex["partition"], ex["offset"]) == (0, 1)


def test_aborted_read_flagged_only_under_read_committed():
    s = [Send("a", 0, 0, txn="t1"), Send("b", 0, 2)]
    txns = [Txn("t1", h.ABORT)]
    r = h.check(s, reads([("a", 0), ("b", 2)]), txns)
    assert r.found() == {h.ABORTED_READ}, str(r)
    r = h.check(s, reads([("a", 0), ("b", 2)], read_committed=False), txns)
    assert r.ok, str(r)


def test_precommitted_read_flagged():
    s = [Send("a", 0, 0, txn="t1")]
    r = h.check(s, reads([("a", 0)], time=5.0), [Txn("t1", h.COMMIT, commit_time=6.0)])
    assert r.found() == {h.PRECOMMITTED_READ}, str(r)
    r = h.check(s, reads([("a", 0)], time=7.0), [Txn("t1", h.COMMIT, commit_time=6.0)])
    assert r.ok, str(r)
    # Never asked to commit, yet visible to read_committed.
    r = h.check(s, reads([("a", 0)]), [Txn("t1", h.OPEN)])
    assert r.found() == {h.PRECOMMITTED_READ}, str(r)


def test_unknown_outcome_must_be_all_or_nothing():
    s = [Send("a", 0, 0, txn="t1"), Send("b", 1, 0, txn="t1"), Send("c", 0, 2)]
    txns = [Txn("t1", h.UNKNOWN, commit_time=1.0)]
    # Nothing of t1 visible: it aborted, fine.
    r = h.check(s, reads([("c", 2)]) + reads([], partition=1), txns, drained=True)
    assert r.ok and r.stats["txns_committed"] == 0, str(r)
    # All of t1 visible: it committed, fine.
    r = h.check(s, reads([("a", 0), ("c", 2)], time=2.0) + reads([("b", 0)], partition=1, time=2.0), txns,
                drained=True)
    assert r.ok and r.stats["txns_committed"] == 1, str(r)
    # Visible on partition 0 only: torn, reported as a lost write of its partition-1 value.
    r = h.check(s, reads([("a", 0), ("c", 2)], time=2.0), txns, drained=True)
    assert r.found() == {h.LOST_WRITE}, str(r)
    assert r.anomalies[h.LOST_WRITE][0]["value"] == "b"


def test_nonmonotonic_poll_flagged_within_a_session_only():
    s = sends_dense(["a", "b", "c"])
    r = h.check(s, reads([("a", 0), ("b", 1), ("c", 2), ("b", 1)]))
    assert r.found() == {h.NONMONOTONIC_POLL}, str(r)
    # A new session (rebalance) may start again from the committed offset.
    p = reads([("a", 0), ("b", 1), ("c", 2)]) + reads([("b", 1), ("c", 2)], session=1)
    r = h.check(s, p)
    assert r.ok, str(r)


def test_nonmonotonic_send_flagged():
    s = [Send("a", 0, 5, producer="p1"), Send("b", 0, 4, producer="p1"), Send("c", 0, 3, producer="p2")]
    r = h.check(s, [])
    assert r.found() == {h.NONMONOTONIC_SEND}, str(r)
    assert r.counts[h.NONMONOTONIC_SEND] == 1
    # Different partitions are independent.
    r = h.check([Send("a", 0, 5, producer="p1"), Send("b", 1, 0, producer="p1")], [])
    assert r.ok, str(r)


def test_poll_skip_respects_isolation_and_unknown_offsets():
    # a@0, aborted t2 value x@1, abort marker @2 (no value), b@3.
    s = [Send("a", 0, 0), Send("x", 0, 1, txn="t2"), Send("b", 0, 3)]
    txns = [Txn("t2", h.ABORT)]
    r = h.check(s, reads([("a", 0), ("b", 3)]), txns, drained=True)
    assert r.ok, str(r)
    r = h.check(s, reads([("a", 0), ("b", 3)], read_committed=False), txns)
    assert r.found() == {h.POLL_SKIP}, str(r)
    assert r.anomalies[h.POLL_SKIP][0]["skipped"] == [1]
    # The skipped value was seen by another consumer: still a skip for this one.
    s2 = sends_dense(["a", "b", "c"])
    p = reads([("a", 0), ("c", 2)], consumer="c1") + reads([("a", 0), ("b", 1), ("c", 2)], consumer="c2")
    r = h.check(s2, p)
    assert r.found() == {h.POLL_SKIP}, str(r)


def test_report_text_and_assert():
    s = sends_dense(["a", "b"])
    r = h.check(s, reads([("a", 0), ("a", 1)]))
    text = str(r)
    assert "duplicate: 1" in text and "inconsistent-offsets: 1" in text and "'a'" in text
    with pytest.raises(AssertionError, match="history anomalies"):
        r.assert_ok("demo")
    h.check(s, reads([("a", 0), ("b", 1)])).assert_ok()


def test_examples_are_capped_but_counted():
    s = sends_dense([f"v{i}" for i in range(50)])
    r = h.check(s, reads([("v0", 0), ("v49", 49)]), examples=3)
    assert r.counts[h.LOST_WRITE] == 48 and len(r.anomalies[h.LOST_WRITE]) == 3


def test_malformed_history_is_refused():
    with pytest.raises(ValueError, match="sent twice"):
        h.check([Send("a", 0, 0), Send("a", 0, 1)], [])
    with pytest.raises(ValueError, match="unknown transaction"):
        h.check([Send("a", 0, 0, txn="nope")], [])
    with pytest.raises(ValueError, match="without a partition"):
        h.check([Send("a")], [])


def test_an_acknowledgement_without_an_offset_must_still_be_read():
    # librdkafka's implicit ack: success, no offset. Read anywhere: fine; never read once the
    # readers drained everything: lost; not drained: unseen. It orders no other send.
    sends = [Send("a", 0, 0, producer="p"), Send("b", 0, None, producer="p"), Send("c", 0, 2, producer="p")]
    assert h.check(sends, reads([("a", 0), ("b", 1), ("c", 2)]), drained=True).ok
    lost = h.check(sends, reads([("a", 0), ("c", 2)]), drained=True)
    assert lost.found() == {h.LOST_WRITE} and lost.anomalies[h.LOST_WRITE][0]["value"] == "b"
    assert h.check(sends, reads([("a", 0), ("c", 2)])).ok
    # Read at two offsets, it is still a duplicate.
    assert h.check(sends, reads([("a", 0), ("b", 1), ("c", 2), ("b", 3)]), drained=True).found() == {h.DUPLICATE}


def test_pipeline_positions_are_per_topic():
    # Input values acknowledged in "in", read back from "out" by a transform: exactly once.
    s = [Send(v, 0, i, topic="in") for i, v in enumerate(["a", "b", "c"])]
    out = [Poll("c", 0, o, v, topic="out") for v, o in [("a", 0), ("b", 1), ("c", 3)]]
    r = h.check(s, out, drained=True)
    assert r.ok, str(r)
    # Written twice to the output, at two offsets: a duplicate there.
    r = h.check(s, out + [Poll("c", 0, 5, "b", topic="out")], drained=True)
    assert r.found() == {h.DUPLICATE}, str(r)
    assert r.anomalies[h.DUPLICATE][0] == {"topic": "out", "value": "b", "positions": [(0, 1), (0, 5)]}
    # Never reaching the output: lost.
    r = h.check(s, out[:2], drained=True)
    assert r.found() == {h.LOST_WRITE} and r.anomalies[h.LOST_WRITE][0]["value"] == "c", str(r)
