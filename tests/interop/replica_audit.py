"""Replica audit: reads every partition's segment files on every node of a stopped cluster and
checks two invariants that no client-side history can see whole:

- agreement: replicas that were in the ISR hold the same batches (base offset, length, leader
  epoch, CRC) below the partition's high watermark, batch by batch;
- no duplicate batch: no producer's (producer id, epoch, base sequence) is stored at two offsets of
  one log (an idempotent retry appended twice, or a range re-appended by a new leader); not
  checked on the coordinators' own topics, whose transactional offset commits reuse a sequence.

It reads Kafka's on-disk format directly (a segment is a sequence of v2 record batches; the
`replication-offset-checkpoint` in each log dir holds the high watermarks), so it checks what the
brokers wrote, not what they serve. `audit()` is run by the cluster fixture after every cluster
test (conftest.py) and by the nemesis workloads.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

# baseOffset i64, batchLength i32, partitionLeaderEpoch i32, magic i8, crc u32, attributes i16,
# lastOffsetDelta i32, baseTimestamp i64, maxTimestamp i64, producerId i64, producerEpoch i16,
# baseSequence i32, recordCount i32.
_HEADER = struct.Struct(">qiibIhiqqqhii")
_CONTROL = 0x20
# Internal topics the group and transaction coordinators write themselves.
COORDINATOR_TOPICS = ("__consumer_offsets", "__transaction_state")


@dataclass(frozen=True)
class Batch:
    base_offset: int
    last_offset: int
    size: int
    leader_epoch: int
    crc: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    control: bool
    segment: str

    def key(self) -> tuple:
        """What two replicas of one batch share (the CRC covers everything after the epoch)."""
        return (self.base_offset, self.last_offset, self.size, self.leader_epoch, self.crc)


def _segment_batches(partition_dir: Path):
    """(segment name, header fields, data, position) of every whole batch of the partition's
    segments, in offset order (a torn tail is ignored)."""
    for path in sorted(partition_dir.glob("*.log")):
        data = path.read_bytes()
        pos = 0
        while pos + _HEADER.size <= len(data):
            header = _HEADER.unpack_from(data, pos)
            length, magic = header[1], header[3]
            size = 12 + length
            if length <= 0 or magic != 2 or pos + size > len(data):
                break
            yield path.name, header, data, pos
            pos += size


def read_batches(partition_dir: Path) -> list[Batch]:
    """Every whole batch of the partition's segments, in offset order (a torn tail is ignored)."""
    out: list[Batch] = []
    for name, header, _data, _pos in _segment_batches(partition_dir):
        (base, length, epoch, _magic, crc, attrs, last_delta, _bts, _mts, pid, pepoch, seq, _count) = header
        out.append(Batch(base, base + last_delta, 12 + length, epoch, crc, pid, pepoch, seq,
                         bool(attrs & _CONTROL), name))
    return out


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint at `pos`: (value, next position)."""
    raw = shift = 0
    while True:
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def read_values(partition_dir: Path) -> dict[int, tuple[bytes | None, int, int]]:
    """offset -> (value, producer id, producer epoch) of every record of the uncompressed data
    batches of the partition's segments (control batches and compressed ones are skipped)."""
    out: dict[int, tuple[bytes | None, int, int]] = {}
    for _name, header, data, pos in _segment_batches(partition_dir):
        base, attrs, pid, pepoch, count = header[0], header[5], header[9], header[10], header[12]
        if attrs & _CONTROL or attrs & 0x07:
            continue
        r = pos + _HEADER.size
        for _ in range(count):
            rec_len, r = _varint(data, r)
            end = r + rec_len
            r += 1  # attributes
            _, r = _varint(data, r)  # timestamp delta
            delta, r = _varint(data, r)
            key_len, r = _varint(data, r)
            r += max(key_len, 0)
            value_len, r = _varint(data, r)
            out[base + delta] = (data[r:r + value_len] if value_len >= 0 else None, pid, pepoch)
            r = end
    return out


def read_high_watermarks(log_dir: Path) -> dict[tuple[str, int], int]:
    """The `replication-offset-checkpoint` of a log dir (empty if missing or malformed)."""
    try:
        lines = (log_dir / "replication-offset-checkpoint").read_text().splitlines()
    except OSError:
        return {}
    if len(lines) < 2 or lines[0].strip() != "0":
        return {}
    out = {}
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3:
            out[(parts[0], int(parts[1]))] = int(parts[2])
    return out


def _partition_dirs(log_dir: Path) -> dict[tuple[str, int], Path]:
    out = {}
    if not log_dir.is_dir():
        return out
    for d in log_dir.iterdir():
        topic, sep, index = d.name.rpartition("-")
        if d.is_dir() and sep and index.isdigit():
            out[(topic, int(index))] = d
    return out


def duplicate_batches(batches: list[Batch]) -> list[str]:
    """Producer batches stored at two offsets of one log."""
    seen: dict[tuple[int, int, int], Batch] = {}
    problems = []
    for b in batches:
        if b.control or b.producer_id < 0 or b.base_sequence < 0:
            continue
        k = (b.producer_id, b.producer_epoch, b.base_sequence)
        first = seen.get(k)
        if first is None:
            seen[k] = b
        elif first.base_offset != b.base_offset:
            problems.append(f"producer {b.producer_id} epoch {b.producer_epoch} sequence {b.base_sequence} "
                            f"at offsets {first.base_offset} and {b.base_offset} "
                            f"(epochs {first.leader_epoch} and {b.leader_epoch})")
    return problems


def _dense(batches: list[Batch]) -> bool:
    """No offset gap between consecutive batches (none was compacted away)."""
    return all(x.last_offset + 1 == y.base_offset for x, y in zip(batches, batches[1:]))


def disagreement(a: list[Batch], b: list[Batch], upto: int) -> str | None:
    """The first batch below `upto` where two replicas differ, described; None if they agree. A
    replica whose log ends earlier only lags: the common prefix is compared. A replica whose log
    starts later had its log start offset moved (DeleteRecords, as Kafka Streams does on its
    repartition topics, or retention) and deleted its old segments on its own schedule: only
    the offsets both still hold are compared."""
    start = max(a[0].base_offset if a else 0, b[0].base_offset if b else 0)
    ka = [x for x in a if start <= x.base_offset < upto]
    kb = [x for x in b if start <= x.base_offset < upto]
    for x, y in zip(ka, kb):
        if x.key() != y.key():
            return (f"first difference at offset {min(x.base_offset, y.base_offset)}: "
                    f"{x} vs {y}")
    return None


def audit(log_dirs: dict[int, Path], in_sync: dict[tuple[str, int], set[int]] | None = None,
          topics: set[str] | None = None) -> list[str]:
    """Checks the logs of stopped nodes (`log_dirs`: node id -> its log dir). Agreement is
    checked among the nodes `in_sync` names for a partition (its ISR when the test ended; none for
    a partition it does not name; every hosting node if it is None), below the largest checkpointed high watermark any node holds for
    it (the leader's, after a clean stop). Duplicates are checked in every log. Returns the
    problems found, each naming the partition and the nodes."""
    problems: list[str] = []
    hosted: dict[tuple[str, int], dict[int, Path]] = defaultdict(dict)
    hws: dict[tuple[str, int], int] = defaultdict(lambda: -1)
    for node, d in log_dirs.items():
        for tp, pdir in _partition_dirs(d).items():
            if topics is None or tp[0] in topics:
                hosted[tp][node] = pdir
        for tp, hw in read_high_watermarks(d).items():
            hws[tp] = max(hws[tp], hw)
    for tp in sorted(hosted):
        logs = {node: read_batches(p) for node, p in sorted(hosted[tp].items())}
        # The coordinators' own transactional writes to their topics (TxnOffsetCommit) carry
        # the producer's id but no sequence of its own: Kafka writes sequence 0 every time.
        for node, batches in logs.items() if tp[0] not in COORDINATOR_TOPICS else ():
            for p in duplicate_batches(batches)[:5]:
                problems.append(f"{tp[0]}-{tp[1]} on node {node}: duplicate batch: {p}")
        members = sorted(n for n in logs if in_sync is None or n in in_sync.get(tp, ()))
        hw = hws[tp]
        # The log cleaner rewrites each replica's segments on its own schedule (leaving offset
        # gaps), so compacted replicas are compared only while no cleaning has happened.
        members = [n for n in members if _dense(logs[n])]
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                d = disagreement(logs[a], logs[b], hw)
                if d:
                    problems.append(f"{tp[0]}-{tp[1]}: nodes {a} and {b} disagree below the high watermark {hw}: {d}")
    return problems


def summary(log_dirs: dict[int, Path], topics: set[str] | None = None) -> str:
    """One line per partition and node: batches, log end offset, checkpointed high watermark."""
    lines = []
    for node, d in sorted(log_dirs.items()):
        hws = read_high_watermarks(d)
        for tp, pdir in sorted(_partition_dirs(d).items()):
            if topics is not None and tp[0] not in topics:
                continue
            b = read_batches(pdir)
            lines.append(f"node {node} {tp[0]}-{tp[1]}: {len(b)} batches, end {b[-1].last_offset + 1 if b else '-'}, "
                         f"hw {hws.get(tp, '-')}")
    return "\n".join(lines)
