"""A Jepsen-style checker for the queue workload, shared by every fault test.

A test records what its producers did (`Send`: a value, the partition and offset the broker
acknowledged, or that the send failed or ended indeterminate, and the transaction it belonged to)
and what its consumers saw (`Poll`: value, partition, offset, which consumer session read it and
under which isolation level), plus the outcome of each transaction (`Txn`). `check()` returns a
`Report` naming every anomaly found, with examples:

- lost-write: an acknowledged write (outside a transaction, or in a committed one) that no reader
  saw although readers read past its offset in its partition (or, with `drained=True`, that the
  test read every partition to its end and still did not see it). Acknowledged writes beyond
  every read are "unseen", which is only an anomaly when drained.
- duplicate: one value stored at two different (partition, offset) positions of one topic, by
  the acknowledgements and the reads together. Reading the same record twice (at-least-once
  redelivery) is not a duplicate.
- inconsistent-offsets: two different values at the same (partition, offset).

Positions are per topic (`topic`, default ""), so a pipeline can be checked end to end: sends to
an input topic, polls of an output topic carrying the input's values (a value must then be read
exactly once in the output, and every acknowledged input value read).
- aborted-read: a `read_committed` consumer saw a value of an aborted transaction (G1a).
- precommitted-read: a `read_committed` consumer saw a value of a transaction before its commit
  was even requested (the poll happened before `Txn.commit_time`), or of a transaction whose
  producer never asked to commit it (`outcome="open"`).
- nonmonotonic-poll: within one consumer session, a partition's offsets went backwards or
  repeated. A session is what the consumer holds between two (re)assignments; a test starts a
  new one at every rebalance, restart or seek.
- nonmonotonic-send: one producer's acknowledged sends to a partition, in the order it made
  them, got offsets that do not increase.
- poll-skip: within one consumer session, two consecutive reads of a partition jumped over an
  offset known (from any acknowledgement or read) to hold a value that consumer should have seen
  (under `read_committed`, only values outside transactions or of committed ones).

A transaction whose outcome the producer does not know (`"unknown"`) counts as committed when
any `read_committed` reader saw one of its values, otherwise as aborted; whichever it is, it must
then be all-or-nothing, which the lost-write and aborted-read checks enforce.

Values are any hashable (bytes or str); a value must be unique across the history.
"""

from __future__ import annotations

import bisect
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Hashable, Iterable

# Send status.
OK = "ok"  # acknowledged at `offset` (None: acknowledged without one, as librdkafka's implicit acks)
FAIL = "fail"  # definitely not written (e.g. refused)
INFO = "info"  # indeterminate: may or may not be in the log

# Transaction outcomes.
COMMIT = "commit"  # EndTxn(commit) acknowledged
ABORT = "abort"  # EndTxn(abort) acknowledged, or the producer was fenced before committing
UNKNOWN = "unknown"  # commit was requested but its result is not known
OPEN = "open"  # the producer never requested a commit (died, hung, or was fenced mid-transaction)

LOST_WRITE = "lost-write"
DUPLICATE = "duplicate"
INCONSISTENT_OFFSETS = "inconsistent-offsets"
ABORTED_READ = "aborted-read"
PRECOMMITTED_READ = "precommitted-read"
NONMONOTONIC_POLL = "nonmonotonic-poll"
NONMONOTONIC_SEND = "nonmonotonic-send"
POLL_SKIP = "poll-skip"
ANOMALIES = (LOST_WRITE, DUPLICATE, INCONSISTENT_OFFSETS, ABORTED_READ, PRECOMMITTED_READ,
             NONMONOTONIC_POLL, NONMONOTONIC_SEND, POLL_SKIP)


@dataclass(frozen=True)
class Send:
    """One send, in the order the producer made it (the order of the list given to `check`)."""

    value: Hashable
    partition: int | None = None
    offset: int | None = None  # the acknowledged offset (status OK; None if the ack named none)
    status: str = OK
    producer: str | None = None  # producer session, for nonmonotonic-send
    txn: str | None = None  # key of a `Txn`
    time: float | None = None  # monotonic seconds when the send was made
    topic: str = ""


@dataclass(frozen=True)
class Poll:
    """One record a consumer received, in the order that consumer received it."""

    consumer: str
    partition: int
    offset: int
    value: Hashable
    session: Hashable = 0  # a new value at every (re)assignment, restart or seek
    read_committed: bool = True
    time: float | None = None  # monotonic seconds when the poll returned
    topic: str = ""


@dataclass(frozen=True)
class Txn:
    id: str
    outcome: str
    commit_time: float | None = None  # monotonic seconds when commit was requested


@dataclass
class Report:
    anomalies: dict[str, list] = field(default_factory=dict)  # name -> examples (at most `examples`)
    counts: dict[str, int] = field(default_factory=dict)  # name -> number found
    unseen: list = field(default_factory=list)  # acknowledged, beyond every read (not drained)
    stats: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.counts.values())

    def found(self) -> set[str]:
        return {k for k, n in self.counts.items() if n}

    def __str__(self) -> str:
        lines = [f"history: {json.dumps(self.stats, sort_keys=True)}"]
        if self.ok:
            lines.append("no anomalies")
        for name in ANOMALIES:
            n = self.counts.get(name, 0)
            if n:
                lines.append(f"{name}: {n}, e.g.")
                lines += [f"    {ex}" for ex in self.anomalies[name]]
        if self.unseen:
            lines.append(f"unseen (acknowledged, beyond every read): {len(self.unseen)}, e.g. {self.unseen[:5]}")
        return "\n".join(lines)

    def assert_ok(self, what: str = "") -> None:
        if not self.ok:
            raise AssertionError((f"{what}: " if what else "") + "history anomalies\n" + str(self))


class _Collector:
    def __init__(self, limit: int):
        self.limit = limit
        self.anomalies: dict[str, list] = {n: [] for n in ANOMALIES}
        self.counts: dict[str, int] = {n: 0 for n in ANOMALIES}

    def add(self, name: str, example) -> None:
        self.counts[name] += 1
        if len(self.anomalies[name]) < self.limit:
            self.anomalies[name].append(example)


def check(sends: Iterable[Send], polls: Iterable[Poll], txns: Iterable[Txn] = (), *, drained: bool = False,
          examples: int = 10) -> Report:
    """Checks a history; see the module doc. `drained`: the readers read every partition to its
    end, so an acknowledged visible write never read is lost."""
    sends = list(sends)
    polls = list(polls)
    txn_by_id = {t.id: t for t in txns}
    out = _Collector(examples)

    for s in sends:
        if s.status not in (OK, FAIL, INFO):
            raise ValueError(f"bad send status {s.status!r}")
        if s.status == OK and s.partition is None:
            raise ValueError(f"acknowledged send without a partition: {s}")
        if s.txn is not None and s.txn not in txn_by_id:
            raise ValueError(f"send {s.value!r} names unknown transaction {s.txn!r}")
    for t in txn_by_id.values():
        if t.outcome not in (COMMIT, ABORT, UNKNOWN, OPEN):
            raise ValueError(f"bad transaction outcome {t.outcome!r}")

    send_of: dict[Hashable, Send] = {}
    for s in sends:
        if s.value in send_of:
            raise ValueError(f"value {s.value!r} sent twice; values must be unique")
        send_of[s.value] = s

    # Inferred outcome: an unknown transaction committed iff a read_committed reader saw it.
    seen_committed_txns = {send_of[p.value].txn for p in polls
                           if p.read_committed and p.value in send_of and send_of[p.value].txn}
    outcome: dict[str, str] = {}
    for tid, t in txn_by_id.items():
        if t.outcome == UNKNOWN:
            outcome[tid] = COMMIT if tid in seen_committed_txns else ABORT
        else:
            outcome[tid] = t.outcome

    def committed_visible(value) -> bool:
        """Whether a read_committed reader should see `value` once it is in the log."""
        s = send_of.get(value)
        if s is None or s.txn is None:
            return True
        return outcome[s.txn] == COMMIT

    # Positions: (topic, partition, offset) -> values; (topic, value) -> (partition, offset)s.
    at: dict[tuple[str, int, int], set] = defaultdict(set)
    where: dict[tuple[str, Hashable], set[tuple[int, int]]] = defaultdict(set)
    for s in sends:
        if s.status == OK and s.offset is not None:
            at[(s.topic, s.partition, s.offset)].add(s.value)
            where[(s.topic, s.value)].add((s.partition, s.offset))
    for p in polls:
        at[(p.topic, p.partition, p.offset)].add(p.value)
        where[(p.topic, p.value)].add((p.partition, p.offset))

    for pos in sorted(at):
        if len(at[pos]) > 1:
            out.add(INCONSISTENT_OFFSETS, {**({"topic": pos[0]} if pos[0] else {}), "partition": pos[1],
                                           "offset": pos[2], "values": sorted(map(repr, at[pos]))})
    for (topic, value), positions in where.items():
        if len(positions) > 1:
            out.add(DUPLICATE, {**({"topic": topic} if topic else {}), "value": value,
                                "positions": sorted(positions)})

    # Reads: aborted and precommitted.
    read_values = {p.value for p in polls}
    for p in polls:
        s = send_of.get(p.value)
        if not p.read_committed or s is None or s.txn is None:
            continue
        t = txn_by_id[s.txn]
        o = outcome[s.txn]
        ex = {"value": p.value, "topic": p.topic, "partition": p.partition, "offset": p.offset,
              "consumer": p.consumer, "txn": s.txn, "outcome": t.outcome}
        if o == ABORT:
            out.add(ABORTED_READ, ex)
        elif o == OPEN:
            out.add(PRECOMMITTED_READ, {**ex, "why": "its producer never requested a commit"})
        elif p.time is not None and t.commit_time is not None and p.time < t.commit_time:
            out.add(PRECOMMITTED_READ, {**ex, "why": f"read {t.commit_time - p.time:.3f}s before commit was requested"})

    # Lost writes: acknowledged, visible to a committed reader, never read (in any topic: a
    # pipeline reads its input's values from its output).
    max_read: dict[tuple[str, int], int] = {}
    for p in polls:
        max_read[(p.topic, p.partition)] = max(max_read.get((p.topic, p.partition), -1), p.offset)
    unseen = []
    for s in sends:
        if s.status != OK or s.value in read_values or not committed_visible(s.value):
            continue
        ex = {"value": s.value, "partition": s.partition, "offset": s.offset, "txn": s.txn}
        if drained or (s.offset is not None and s.offset < max_read.get((s.topic, s.partition), -1)):
            out.add(LOST_WRITE, ex)
        else:
            unseen.append(ex)

    # Sends: per producer and partition, offsets increase in send order.
    last_sent: dict[tuple[str, int], Send] = {}
    for s in sends:
        if s.status != OK or s.producer is None or s.offset is None:
            continue
        key = (s.producer, s.topic, s.partition)
        prev = last_sent.get(key)
        if prev is not None and s.offset <= prev.offset:
            out.add(NONMONOTONIC_SEND, {"producer": s.producer, "partition": s.partition,
                                        "first": (prev.value, prev.offset), "then": (s.value, s.offset)})
        last_sent[key] = s

    # Polls: per consumer session and partition, offsets increase without skipping visible ones.
    known_offsets: dict[tuple[str, int], list[int]] = defaultdict(list)
    for (topic, part, off) in at:
        known_offsets[(topic, part)].append(off)
    for key in known_offsets:
        known_offsets[key].sort()
    last_poll: dict[tuple, Poll] = {}
    for p in polls:
        key = (p.consumer, p.session, p.topic, p.partition)
        prev = last_poll.get(key)
        last_poll[key] = p
        if prev is None:
            continue
        if p.offset <= prev.offset:
            out.add(NONMONOTONIC_POLL, {"consumer": p.consumer, "session": p.session, "partition": p.partition,
                                        "first": (prev.value, prev.offset), "then": (p.value, p.offset)})
            continue
        if p.offset == prev.offset + 1:
            continue
        missed = []
        for off in _between(known_offsets[(p.topic, p.partition)], prev.offset, p.offset):
            vals = at[(p.topic, p.partition, off)]
            if any((not p.read_committed) or committed_visible(v) for v in vals):
                missed.append(off)
        if missed:
            out.add(POLL_SKIP, {"consumer": p.consumer, "session": p.session, "partition": p.partition,
                                "from": prev.offset, "to": p.offset, "skipped": missed[:10]})

    stats = {
        "sends": len(sends),
        "acked": sum(s.status == OK for s in sends),
        "failed": sum(s.status == FAIL for s in sends),
        "indeterminate": sum(s.status == INFO for s in sends),
        "polls": len(polls),
        "distinct_read": len(read_values),
        "txns": len(txn_by_id),
        "txns_committed": sum(o == COMMIT for o in outcome.values()),
        "txns_unknown": sum(t.outcome == UNKNOWN for t in txn_by_id.values()),
    }
    return Report({k: v for k, v in out.anomalies.items() if v}, {k: v for k, v in out.counts.items() if v},
                  unseen[:examples], stats)


def _between(sorted_offsets: list[int], lo: int, hi: int) -> list[int]:
    """Offsets strictly between lo and hi."""
    i = bisect.bisect_right(sorted_offsets, lo)
    j = bisect.bisect_left(sorted_offsets, hi)
    return sorted_offsets[i:j]
