"""Unit tests of replica_audit.py, the check every cluster test ends with: crafted segment files
that it must flag (a producer batch stored twice, in-sync replicas that differ below the high
watermark) and near misses it must pass (a lagging replica, a diverged tail above the high
watermark, a replica out of the ISR, a compacted log)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

import replica_audit as ra
import txn_util

pytestmark = pytest.mark.timeout(30)


def batch(base_offset: int, values: list[bytes], *, leader_epoch: int = 0, producer_id: int = 7,
          producer_epoch: int = 0, base_sequence: int = 0) -> bytes:
    b = bytearray(txn_util.idempotent_batch(values, producer_id, producer_epoch, base_sequence, base_timestamp=1))
    struct.pack_into(">q", b, 0, base_offset)
    struct.pack_into(">i", b, 12, leader_epoch)  # not covered by the CRC, as in Kafka
    return bytes(b)


def write_node(root: Path, node: int, batches: list[bytes], hw: int | None = None, topic: str = "t") -> Path:
    log_dir = root / f"node{node}"
    pdir = log_dir / f"{topic}-0"
    pdir.mkdir(parents=True)
    (pdir / f"{0:020d}.log").write_bytes(b"".join(batches))
    if hw is not None:
        (log_dir / "replication-offset-checkpoint").write_text(f"0\n1\n{topic} 0 {hw}\n")
    return log_dir


def three_batches(epoch_of_last: int = 0) -> list[bytes]:
    return [batch(0, [b"a", b"b"], base_sequence=0), batch(2, [b"c"], base_sequence=2),
            batch(3, [b"d", b"e"], base_sequence=3, leader_epoch=epoch_of_last)]


def test_batches_are_read_back_as_written_and_a_torn_tail_is_ignored(tmp_path):
    d = write_node(tmp_path, 0, three_batches() + [batch(5, [b"f"], base_sequence=5)[:30]])
    got = ra.read_batches(d / "t-0")
    assert [(b.base_offset, b.last_offset, b.producer_id, b.base_sequence) for b in got] == [
        (0, 1, 7, 0), (2, 2, 7, 2), (3, 4, 7, 3)]


def test_agreeing_replicas_pass_and_a_lagging_one_is_only_behind(tmp_path):
    dirs = {0: write_node(tmp_path, 0, three_batches(), hw=5), 1: write_node(tmp_path, 1, three_batches()),
            2: write_node(tmp_path, 2, three_batches()[:2])}
    assert ra.audit(dirs, {("t", 0): {0, 1, 2}}) == []


def test_a_batch_stored_twice_is_flagged_in_any_log(tmp_path):
    logs = three_batches() + [batch(5, [b"c"], base_sequence=2)]
    dirs = {0: write_node(tmp_path, 0, logs, hw=6)}
    problems = ra.audit(dirs, {})
    assert len(problems) == 1 and "sequence 2 at offsets 2 and 5" in problems[0], problems


def test_in_sync_replicas_differing_below_the_high_watermark_are_flagged(tmp_path):
    dirs = {0: write_node(tmp_path, 0, three_batches(), hw=5), 1: write_node(tmp_path, 1, three_batches(1))}
    problems = ra.audit(dirs, {("t", 0): {0, 1}})
    assert len(problems) == 1 and "disagree below the high watermark 5" in problems[0], problems


def test_a_diverged_tail_above_the_high_watermark_or_out_of_the_isr_passes(tmp_path):
    dirs = {0: write_node(tmp_path, 0, three_batches(), hw=3), 1: write_node(tmp_path, 1, three_batches(1))}
    assert ra.audit(dirs, {("t", 0): {0, 1}}) == [], "the difference starts at the high watermark"
    dirs2 = {0: write_node(tmp_path / "b", 0, three_batches(), hw=5),
             1: write_node(tmp_path / "b", 1, three_batches(1))}
    assert ra.audit(dirs2, {("t", 0): {0}}) == [], "node 1 is not in the ISR"


def test_compacted_replicas_are_not_compared(tmp_path):
    compacted = [batch(0, [b"a", b"b"], base_sequence=0), batch(3, [b"d", b"e"], base_sequence=3)]
    dirs = {0: write_node(tmp_path, 0, three_batches(), hw=5), 1: write_node(tmp_path, 1, compacted)}
    assert ra.audit(dirs, {("t", 0): {0, 1}}) == []


def test_a_replica_whose_old_segments_were_deleted_is_compared_where_both_hold_offsets(tmp_path):
    """Each replica deletes the segments below a moved log start offset (DeleteRecords,
    retention) on its own schedule; that is no disagreement, but a difference after it is."""
    dirs = {0: write_node(tmp_path, 0, three_batches()[1:], hw=5), 1: write_node(tmp_path, 1, three_batches())}
    assert ra.audit(dirs, {("t", 0): {0, 1}}) == []
    dirs2 = {0: write_node(tmp_path / "b", 0, three_batches()[1:], hw=5),
             1: write_node(tmp_path / "b", 1, three_batches(1))}
    problems = ra.audit(dirs2, {("t", 0): {0, 1}})
    assert len(problems) == 1 and "first difference at offset 3" in problems[0], problems
