"""Unit tests of client_resends.py: a duplicate is the producer's own re-send under a bumped epoch
only when the segment files and the client's debug log both prove it (the pattern of the harsh
workload's seed 3, librdkafka issue 4953); every near miss stays a duplicate."""

from __future__ import annotations

import dataclasses

from pathlib import Path

import pytest

import client_resends as cr
import history
import replica_audit as ra
from test_replica_audit import batch, write_node

pytestmark = pytest.mark.timeout(30)

BUMP = ("%7|1765000000.000|DRAIN|rdkafka#producer-1| [thrd:127.0.0.1:4/4]: Beginning partition drain in "
        "state Assigned for PID{Id:1001,Epoch:0} epoch bump for 2 partition(s) with in-flight requests: "
        "skipped sequence numbers\n")
TIMEOUT_BUMP = BUMP.replace("skipped sequence numbers", "3 message(s) timed out on t [0]")


def seed3_log(root: Path) -> list[Path]:
    """Seed 3's partition: s3f0-3 written under epoch 0 (in doubt), then again as the first
    record of epoch 1, followed by the producer's next value."""
    batches = [batch(0, [b"s3f0-1", b"s3f0-2"], producer_id=1001, base_sequence=0),
               batch(2, [b"s3f0-3"], producer_id=1001, base_sequence=2, leader_epoch=5),
               batch(3, [b"s3f0-3", b"s3f0-4"], producer_id=1001, producer_epoch=1, base_sequence=0,
                     leader_epoch=6)]
    return [write_node(root, n, batches) for n in range(2)]


def test_values_are_read_with_their_producer_and_epoch(tmp_path):
    dirs = seed3_log(tmp_path)
    values = ra.read_values(dirs[0] / "t-0")
    assert values == {0: (b"s3f0-1", 1001, 0), 1: (b"s3f0-2", 1001, 0), 2: (b"s3f0-3", 1001, 0),
                      3: (b"s3f0-3", 1001, 1), 4: (b"s3f0-4", 1001, 1)}


def test_an_unacknowledged_copy_before_a_proven_bump_is_the_clients_resend(tmp_path):
    dirs = seed3_log(tmp_path)
    dups = cr.duplicated_values({"s3f0-3": {(0, 2), (0, 3)}, "s3f0-4": {(0, 4)}})
    assert list(dups) == ["s3f0-3"]
    resends, rest = cr.explain(dups, {"s3f0-3": (0, 3)}, dirs, "t", {"s3f0": BUMP})
    assert rest == [] and [(r.first, r.second) for r in resends] == [((2, 1001, 0), (3, 1001, 1))]
    assert "never acknowledged" in str(resends[0])
    # Never acknowledged at all (indeterminate) is the same.
    resends, rest = cr.explain(dups, {}, dirs, "t", {"s3f0": BUMP})
    assert rest == [] and len(resends) == 1


@pytest.mark.parametrize("acked, logs, why", [
    ((0, 2), {"s3f0": BUMP}, "not the later copy"),  # the broker acknowledged the first copy
    ((0, 3), {"s3f0": TIMEOUT_BUMP}, "no bump of epoch 0"),  # another reason to bump
    ((0, 3), {"s3f0": BUMP.replace("Epoch:0", "Epoch:1")}, "no bump of epoch 0"),
    ((0, 3), {}, "no debug log"),
])
def test_anything_unproven_stays_a_duplicate(tmp_path, acked, logs, why):
    dirs = seed3_log(tmp_path)
    resends, rest = cr.explain({"s3f0-3": {(0, 2), (0, 3)}}, {"s3f0-3": acked}, dirs, "t", logs)
    assert resends == [] and len(rest) == 1 and why in rest[0], rest


def test_a_duplicate_within_one_epoch_is_never_the_clients(tmp_path):
    batches = [batch(0, [b"s3f0-1"], producer_id=1001, base_sequence=0),
               batch(1, [b"s3f0-1"], producer_id=1001, base_sequence=1)]
    dirs = [write_node(tmp_path, 0, batches)]
    resends, rest = cr.explain({"s3f0-1": {(0, 0), (0, 1)}}, {}, dirs, "t", {"s3f0": BUMP})
    assert resends == [] and "epoch 0 and producer 1001 epoch 0" in rest[0], rest


def test_copies_in_two_partitions_or_missing_from_the_files_stay_duplicates(tmp_path):
    dirs = seed3_log(tmp_path)
    _, rest = cr.explain({"s3f0-3": {(0, 2), (1, 2)}}, {}, dirs, "t", {"s3f0": BUMP})
    assert "not two copies in one partition" in rest[0]
    _, rest = cr.explain({"s3f0-3": {(0, 2), (0, 9)}}, {}, dirs, "t", {"s3f0": BUMP})
    assert "not in any node's segment files" in rest[0]


def test_the_report_loses_its_duplicates_only_when_every_one_is_proven(tmp_path):
    dirs = seed3_log(tmp_path)
    log = tmp_path / "producer0.log"
    log.write_text(BUMP)
    sends = [history.Send("s3f0-1", 0, 0), history.Send("s3f0-2", 0, 1), history.Send("s3f0-3", 0, 3),
             history.Send("s3f0-4", 0, 4)]
    polls = [history.Poll("drain", 0, o, v) for o, v in enumerate(["s3f0-1", "s3f0-2", "s3f0-3", "s3f0-3", "s3f0-4"])]
    report = history.check(sends, polls, drained=True)
    assert report.found() == {history.DUPLICATE}
    clean, resends = cr.without_resends(report, sends, polls, dirs, "t", {"s3f0": log})
    assert clean.ok and len(resends) == 1, clean
    # The same history with a lost write beside it keeps the lost write.
    lost = sends + [history.Send("s3f0-9", 0, 9)]
    clean, _ = cr.without_resends(history.check(lost, polls, drained=True), lost, polls, dirs, "t",
                                  {"s3f0": log})
    assert clean.found() == {history.LOST_WRITE}
    # Without the log's proof nothing is taken away.
    kept, resends = cr.without_resends(report, sends, polls, dirs, "t", {"s3f0": tmp_path / "missing.log"})
    assert kept.found() == {history.DUPLICATE} and resends == []


def test_the_copy_of_a_resent_value_may_hold_it_once_per_input_copy(tmp_path):
    dirs = seed3_log(tmp_path)
    resends, _ = cr.explain({"s3f0-3": {(0, 2), (0, 3)}}, {}, dirs, "t", {"s3f0": BUMP})
    sends = [history.Send(v, 0, o) for o, v in enumerate(["s3f0-1", "s3f0-2", "s3f0-3"])]
    out = [history.Poll("out", 1, o, v, topic="out") for o, v in enumerate(["s3f0-1", "s3f0-2", "s3f0-3", "s3f0-3"])]
    copy = history.check([dataclasses.replace(s, topic="in") for s in sends], out, drained=True)
    assert copy.found() == {history.DUPLICATE}
    assert cr.without_copied_resends(copy, resends, out).ok
    # Three output copies, or a value that was not re-sent, stay duplicates.
    three = out + [history.Poll("out", 1, 4, "s3f0-3", topic="out")]
    copy3 = history.check([dataclasses.replace(s, topic="in") for s in sends], three, drained=True)
    assert cr.without_copied_resends(copy3, resends, three).found() == {history.DUPLICATE}
    other = out[:3] + [history.Poll("out", 1, 3, "s3f0-1", topic="out")]
    copy_other = history.check([dataclasses.replace(s, topic="in") for s in sends], other, drained=True)
    assert cr.without_copied_resends(copy_other, resends, other).found() == {history.DUPLICATE}
