"""Duplicates that a librdkafka idempotent producer makes itself, told apart from a broker's.

librdkafka (2.16 and master as of 2026-12) bumps an idempotent producer's epoch when a pipelined
request gets OUT_OF_ORDER_SEQUENCE_NUMBER because the request before it was refused ("skipped
sequence numbers"), and then renumbers every queued message under the new epoch, on every
partition. A message of another partition whose last send was in doubt (its leader was killed
before answering) is then sent again under the new epoch, and if the first send was written, the
value is stored twice: once under the old epoch (never acknowledged) and once under the new one.
No broker can deduplicate across epochs (Kafka's idempotence is per producer epoch), and Apache
Kafka's Java producer retries such requests without bumping. Upstream: confluentinc/librdkafka
issue 4953, pull request 4972.

`explain()` accepts a duplicate as the client's own only when the logs prove it: both copies are
from one producer id, the earlier copy under a lower epoch was never acknowledged (the
acknowledgement, if any, names the later copy), and the producer's librdkafka debug log shows it
bumping exactly that epoch for "skipped sequence numbers". Anything else stays a duplicate.
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import history
import replica_audit

_DRAIN = re.compile(r"Beginning partition drain in state \w+ for PID\{Id:(\d+),Epoch:(\d+)\} epoch bump "
                    r"for \d+ partition\(s\) with in-flight requests: skipped sequence numbers")


def skipped_sequence_bumps(log_text: str) -> set[tuple[int, int]]:
    """(producer id, epoch) pairs the client bumped because of skipped sequence numbers."""
    return {(int(m.group(1)), int(m.group(2))) for m in _DRAIN.finditer(log_text)}


@dataclass(frozen=True)
class Resend:
    value: str
    partition: int
    first: tuple[int, int, int]  # (offset, producer id, epoch) of the unacknowledged copy
    second: tuple[int, int, int]

    def __str__(self) -> str:
        return (f"{self.value} in partition {self.partition}: offset {self.first[0]} (producer {self.first[1]} "
                f"epoch {self.first[2]}, never acknowledged) sent again at offset {self.second[0]} under "
                f"epoch {self.second[2]} after the client bumped epoch {self.first[2]} for skipped sequence "
                f"numbers")


def duplicated_values(positions: dict[str, set[tuple[int, int]]]) -> dict[str, set[tuple[int, int]]]:
    """The values stored at more than one (partition, offset)."""
    return {v: ps for v, ps in positions.items() if len(ps) > 1}


def explain(duplicates: dict[str, set[tuple[int, int]]], acked: dict[str, tuple[int, int]],
            data_dirs: list[Path], topic: str, logs: dict[str, str]) -> tuple[list[Resend], list[str]]:
    """Splits `duplicates` (value -> positions) into the client's proven re-sends and the rest.
    `acked`: value -> the position its acknowledgement named; `data_dirs`: the nodes' log dirs
    (read for producer ids and epochs); `logs`: producer tag (the value's prefix before its last
    "-") -> that producer's librdkafka debug log."""
    cache: dict[tuple[int, Path], dict[int, tuple[bytes | None, int, int]]] = {}

    def record(partition: int, offset: int):
        for d in data_dirs:
            if (partition, d) not in cache:
                path = d / f"{topic}-{partition}"
                cache[(partition, d)] = replica_audit.read_values(path) if path.is_dir() else {}
            r = cache[(partition, d)].get(offset)
            if r is not None:
                return r
        return None

    bumps = {tag: skipped_sequence_bumps(text) for tag, text in logs.items()}
    resends, rest = [], []
    for value, positions in sorted(duplicates.items()):
        why = _why_not(value, positions, acked.get(value), record, bumps)
        if isinstance(why, Resend):
            resends.append(why)
        else:
            rest.append(f"{value} at {sorted(positions)}: {why}")
    return resends, rest


def _why_not(value, positions, acked, record, bumps):
    """A Resend if the logs prove one, else why not."""
    if len(positions) != 2 or len({p for p, _ in positions}) != 1:
        return "not two copies in one partition"
    tag = value.rsplit("-", 1)[0]
    if tag not in bumps:
        return f"no debug log of producer {tag}"
    (partition, o1), (_, o2) = sorted(positions)
    r1, r2 = record(partition, o1), record(partition, o2)
    if r1 is None or r2 is None:
        return "a copy is not in any node's segment files"
    if r1[0] != value.encode() or r2[0] != value.encode():
        return "the segment files hold another value there"
    (_, pid1, e1), (_, pid2, e2) = r1, r2
    if pid1 != pid2 or not e1 < e2:
        return f"copies by producer {pid1} epoch {e1} and producer {pid2} epoch {e2}"
    if acked is not None and acked != (partition, o2):
        return f"the acknowledgement names {acked}, not the later copy"
    if (pid1, e1) not in bumps[tag]:
        return f"{tag}'s log shows no bump of epoch {e1} for skipped sequence numbers"
    return Resend(value, partition, (o1, pid1, e1), (o2, pid2, e2))


def without_resends(report: history.Report, sends, polls, data_dirs, topic: str,
                    debug_logs: dict) -> tuple[history.Report, list]:
    """The report without its duplicates when every one is a value the idempotent producer itself
    sent again under a bumped epoch, as its own debug log and the segment files prove
    (librdkafka issue 4953); otherwise the report as it is. Also returns the re-sends found.
    `debug_logs`: producer tag -> the path of its librdkafka debug log."""
    if not report.counts.get(history.DUPLICATE):
        return report, []
    # An implicit acknowledgement names no offset, so no position.
    acked = {s.value: (s.partition, s.offset) for s in sends if s.status == history.OK and s.offset is not None}
    duplicates = duplicated_values(_positions(polls, acked))
    logs = {tag: path.read_text(errors="replace") for tag, path in debug_logs.items()
            if path is not None and path.exists()}
    resends, rest = explain(duplicates, acked, data_dirs, topic, logs)
    if rest or len(resends) != report.counts[history.DUPLICATE]:
        return report, resends
    return _without_duplicates(report), resends


def without_copied_resends(copy_report: history.Report, resends: list[Resend], out_polls) -> history.Report:
    """The copy's report without its duplicates when each is a proven re-send of the input
    (`resends`) copied once per input copy: two input records, two output records, nothing else
    stored twice. Otherwise the report as it is."""
    if not copy_report.counts.get(history.DUPLICATE) or not resends:
        return copy_report
    duplicated = duplicated_values(_positions(out_polls))
    resent = {r.value for r in resends}
    if set(duplicated) - resent or any(len(ps) != 2 for ps in duplicated.values()):
        return copy_report
    if len(duplicated) != copy_report.counts[history.DUPLICATE]:
        return copy_report
    return _without_duplicates(copy_report)


def _positions(polls, acked: dict | None = None) -> dict:
    """value -> every (partition, offset) the reads and the acknowledgements put it at."""
    positions: dict = defaultdict(set)
    for value, position in (acked or {}).items():
        positions[value].add(position)
    for p in polls:
        positions[p.value].add((p.partition, p.offset))
    return positions


def _without_duplicates(report: history.Report) -> history.Report:
    counts = {k: v for k, v in report.counts.items() if k != history.DUPLICATE}
    anomalies = {k: v for k, v in report.anomalies.items() if k != history.DUPLICATE}
    return dataclasses.replace(report, counts=counts, anomalies=anomalies)
