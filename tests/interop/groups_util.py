"""Helpers for the consumer-group and transaction interop tests (test_groups.py,
test_transactions.py): client processes the tests can SIGKILL, a paced background producer, and
the checks of what a group of consumers read.

`App` runs one of the scripts in apps/ or js/ as its own process and collects the JSON lines it
prints (each with `t`, CLOCK_MONOTONIC seconds, comparable with this process's time.monotonic()).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path

import history
from broker import wait_until

HERE = Path(__file__).parent
APPS_DIR = HERE / "apps"
JS_DIR = HERE / "js"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# --------------------------------------------------------------------------------------------
# Client processes
# --------------------------------------------------------------------------------------------


class App:
    """One client process; its stdout JSON lines are collected into `events` by a thread."""

    def __init__(self, name: str, argv: list[str], workdir: Path, cwd: Path | None = None):
        self.name = name
        self.argv = argv
        self.stderr_path = Path(workdir) / f"{name}.stderr"
        self.stdout_path = Path(workdir) / f"{name}.stdout"
        self.events: list[dict] = []
        self.killed_at: float | None = None
        self._termed = False
        self._lock = threading.Lock()
        env = {**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1", "PYTHONUNBUFFERED": "1"}
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                         cwd=cwd or HERE, env=env, text=True, bufsize=1)
        self._reader = threading.Thread(target=self._read, name=f"app-{name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        with open(self.stdout_path, "w") as copy:  # the whole story of a failed run, kept
            for line in self.proc.stdout:
                copy.write(line)
                copy.flush()
                self._take(line.strip())

    def _take(self, line: str) -> None:
        if not line:
            return
        try:
            ev = json.loads(line)
        except ValueError:
            ev = {"ev": "garbage", "line": line[:500], "t": time.monotonic()}
        ev["app"] = self.name
        with self._lock:
            self.events.append(ev)

    def snapshot(self, kind: str | None = None) -> list[dict]:
        with self._lock:
            evs = list(self.events)
        return evs if kind is None else [e for e in evs if e["ev"] == kind]

    def stderr_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def assert_alive(self) -> None:
        rc = self.proc.poll()
        if rc is not None:
            raise AssertionError(f"{self.name} exited with {rc}; stderr:\n{self.stderr_tail()}")

    def wait_for(self, cond, timeout: float, what: str, interval: float = 0.05):
        """Waits until cond(events) is truthy and returns it; fails at once if the process died.

        Polls at a jittered interval: a fixed one can fall into step with an application's own
        period (a ~200 ms poll loop is four 50 ms polls plus their overhead) and keep sampling
        the same phase of it, missing a short state such as an open transaction for good."""
        deadline = time.monotonic() + timeout
        while True:
            v = cond(self.snapshot())
            if v:
                return v
            self.assert_alive()
            if time.monotonic() >= deadline:
                raise AssertionError(f"timed out after {timeout:.1f}s waiting for {self.name}: {what}; last "
                                     f"events: {self.snapshot()[-3:]}\nstderr:\n{self.stderr_tail()}")
            time.sleep(interval * random.uniform(0.5, 1.5))

    def kill(self) -> float:
        """SIGKILL; returns the time of the kill."""
        self.killed_at = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._reader.join(timeout=5)
        return self.killed_at

    def terminate(self, timeout: float = 30.0, expect_clean: bool = True) -> None:
        """SIGTERM and wait; with `expect_clean`, the app must exit 0 after printing "closed"."""
        self.sigterm()
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError(f"{self.name} did not exit within {timeout}s of SIGTERM; stderr:\n"
                                 f"{self.stderr_tail()}")
        self._reader.join(timeout=5)
        if expect_clean:
            assert rc == 0 and self.snapshot("closed"), \
                f"{self.name} did not close cleanly (rc {rc}, printed closed: {bool(self.snapshot('closed'))}); " \
                f"stderr:\n{self.stderr_tail()}"

    def sigterm(self) -> None:
        """Sends SIGTERM once (a second one could land while Python finalizes, after it restored
        the default handler)."""
        if not self._termed and self.proc.poll() is None:
            self._termed = True
            self.proc.send_signal(signal.SIGTERM)

    def stop_quietly(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def terminate_all(apps: list[App], timeout: float = 30.0) -> None:
    """SIGTERM to every live app at once, then waits for each to close cleanly."""
    live = [a for a in apps if a.alive()]
    for a in live:
        a.sigterm()
    for a in live:
        a.terminate(timeout)


def python_app(script: str, conf: dict, name: str, workdir: Path) -> App:
    return App(name, [sys.executable, str(APPS_DIR / script), json.dumps(conf)], workdir)


def node_app(script: str, conf: dict, name: str, workdir: Path) -> App:
    node = shutil.which("node")
    assert node, "node not found on PATH"
    assert (JS_DIR / "node_modules" / "kafkajs").is_dir(), f"kafkajs not installed: run `npm ci` in {JS_DIR}"
    return App(name, [node, str(JS_DIR / script), json.dumps(conf)], workdir, cwd=JS_DIR)


CONSUMER_LIBS = ["confluent", "kafka-python", "aiokafka", "kafkajs"]


def start_consumer(lib: str, name: str, workdir: Path, *, bootstrap: str, topic: str, group: str,
                   session_timeout_ms: int, heartbeat_interval_ms: int = 1000, instance_id: str | None = None,
                   max_records: int = 20, commit_every_ms: int = 0) -> App:
    conf = {"lib": lib, "bootstrap": bootstrap, "topic": topic, "group": group,
            "session_timeout_ms": session_timeout_ms, "heartbeat_interval_ms": heartbeat_interval_ms,
            "instance_id": instance_id, "max_records": max_records, "commit_every_ms": commit_every_ms}
    if lib == "kafkajs":
        assert instance_id is None, "kafkajs has no static membership"
        return node_app("groups_consumer.mjs", conf, name, workdir)
    return python_app("group_consumer.py", conf, name, workdir)


def last_assignment(app: App) -> list[int] | None:
    a = app.snapshot("assign")
    return a[-1]["parts"] if a else None


def stable_assignment(apps: list[App], partitions: int) -> dict[str, list[int]] | None:
    """The apps' latest assignments if they cover 0..partitions-1 exactly once, each app holds
    at least one partition, and each has read a record since (so it is consuming)."""
    got = {}
    for a in apps:
        evs = a.snapshot()
        assigns = [i for i, e in enumerate(evs) if e["ev"] == "assign"]
        if not assigns or not evs[assigns[-1]]["parts"]:
            return None
        if not any(e["ev"] == "rec" for e in evs[assigns[-1]:]):
            return None
        got[a.name] = evs[assigns[-1]]["parts"]
    flat = sorted(p for ps in got.values() for p in ps)
    return got if flat == list(range(partitions)) else None


# --------------------------------------------------------------------------------------------
# A paced producer
# --------------------------------------------------------------------------------------------


class PacedProducer:
    """Produces "<tag>-<n>" round-robin over `partitions` at about `rate` records/s from a thread
    (idempotent, acks=all), keeping every acknowledgement as a history.Send."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float = 200.0, tag: str | None = None):
        from confluent_kafka import Producer

        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.tag = tag or uuid.uuid4().hex[:6]
        self.sent = 0
        self.acks: dict[int, tuple[int, int]] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self.p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                           "linger.ms": 5, "log_level": 0})
        self._t = threading.Thread(target=self._run, name="paced-producer", daemon=True)
        self._t.start()

    def value(self, n: int) -> str:
        return f"{self.tag}-{n}"

    def _cb(self, n):
        def cb(err, msg):
            if err is not None:
                self.errors.append(f"{self.value(n)}: {err}")
            else:
                self.acks[n] = (msg.partition(), msg.offset())
        return cb

    def _run(self) -> None:
        start = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - start) * self.rate) + 1
            while self.sent < due:
                n = self.sent
                self.p.produce(self.topic, value=self.value(n).encode(), partition=n % self.partitions,
                               on_delivery=self._cb(n))
                self.sent += 1
            self.p.poll(0.01)

    def wait_acked(self, n: int, timeout: float = 30.0) -> None:
        wait_until(lambda: len(self.acks) >= n, timeout, f"{n} acknowledged records")

    def stop(self, timeout: float = 30.0) -> list[history.Send]:
        """Stops producing, flushes, and returns the sends (all must be acknowledged)."""
        self._stop.set()
        self._t.join(timeout=10)
        left = self.p.flush(timeout)
        assert left == 0 and not self.errors, f"producer: {left} unflushed, errors {self.errors[:5]}"
        assert len(self.acks) == self.sent
        return [history.Send(self.value(n), *self.acks[n], producer="paced") for n in range(self.sent)]

    def close(self) -> None:
        """Stops producing and drops what is unsent (for cleanup after a failure)."""
        self._stop.set()
        self._t.join(timeout=10)
        self.p.purge()
        self.p.flush(1)

    def end_offsets(self) -> dict[int, int]:
        ends: dict[int, int] = defaultdict(int)
        for p, o in self.acks.values():
            ends[p] = max(ends[p], o + 1)
        return dict(ends)


# --------------------------------------------------------------------------------------------
# What a group read
# --------------------------------------------------------------------------------------------


def group_polls(apps: list[App]) -> list[history.Poll]:
    polls = []
    for a in apps:
        for e in a.snapshot("rec"):
            polls.append(history.Poll(a.name, e["p"], e["o"], e["v"], session=e["s"], read_committed=False,
                                      time=e["t"]))
    return polls


def read_everything(apps: list[App], ends: dict[int, int]) -> bool:
    seen: dict[int, int] = defaultdict(lambda: -1)
    for a in apps:
        for e in a.snapshot("rec"):
            seen[e["p"]] = max(seen[e["p"]], e["o"])
    return all(seen[p] >= end - 1 for p, end in ends.items())


def check_group_reads(apps: list[App], sends: list[history.Send], partitions: int) -> dict:
    """Checks what a group read, against what was produced:

    - the history is clean (history.py, drained): nothing lost or skipped, no value at two
      offsets, offsets only move forward within one consumer's assignment;
    - each partition's first owner starts at offset 0;
    - every later owner of a partition starts at or after the last offset committed (as printed
      by the committing consumer) before it began, and no later than one past the last offset
      read before it began: records are delivered again only from the previous owner's last
      commit on (at-least-once), never from below it, and none are jumped over.

    Returns {"redelivered": {partition: [(from_app, to_app, first, last)]}} for the caller's own
    bounds (e.g. that a graceful handover redelivered nothing)."""
    report = history.check(sends, group_polls(apps), drained=True)
    report.assert_ok("group consumption")

    reads = defaultdict(list)  # partition -> [(t, app, session, offset)]
    commits = defaultdict(list)  # partition -> [(t, app, next_offset)]
    for a in apps:
        for e in a.snapshot():
            if e["ev"] == "rec":
                reads[e["p"]].append((e["t"], a.name, e["s"], e["o"]))
            elif e["ev"] == "commit":
                for p, o in e["offsets"].items():
                    commits[int(p)].append((e["t"], a.name, o))
    redelivered: dict[int, list] = defaultdict(list)
    problems = []
    for p in range(partitions):
        rs = sorted(reads[p])
        if not rs:
            problems.append(f"partition {p}: never read")
            continue
        if rs[0][3] != 0:
            problems.append(f"partition {p}: first read at offset {rs[0][3]}, not 0 ({rs[0][1]})")
        max_before = -1
        prev_owner = None
        i = 0
        while i < len(rs):
            t0, app, sess, first = rs[i]
            j = i
            while j < len(rs) and (rs[j][1], rs[j][2]) == (app, sess):
                j += 1
            if i > 0:
                committed = [c for c in commits[p] if c[0] < t0]
                last_commit = max((c[2] for c in committed), default=0)
                if first < last_commit:
                    problems.append(f"partition {p}: {app} (session {sess}) started at offset {first}, below the "
                                    f"offset {last_commit} committed before it began (by "
                                    f"{max(committed, key=lambda c: c[2])[1]})")
                if first > max_before + 1:
                    problems.append(f"partition {p}: {app} started at {first}, after a gap from {max_before}")
                if first <= max_before:
                    redelivered[p].append((prev_owner, app, first, max_before))
            max_before = max(max_before, max(r[3] for r in rs[i:j]))
            prev_owner = app
            i = j
    assert not problems, "group consumption:\n  " + "\n  ".join(problems)
    return {"redelivered": dict(redelivered), "history": report.stats}


# --------------------------------------------------------------------------------------------
# Admin views
# --------------------------------------------------------------------------------------------


def describe_group(bootstrap: str, group: str) -> dict:
    """DescribeGroups through librdkafka: {"state", "members": {member_id: {...}}}."""
    from confluent_kafka.admin import AdminClient

    a = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    d = a.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=20)
    members = {}
    for m in d.members:
        members[m.member_id] = {"instance": m.group_instance_id, "client_id": m.client_id,
                                "parts": sorted(tp.partition for tp in m.assignment.topic_partitions)}
    return {"state": d.state.name, "members": members, "assignor": d.partition_assignor}
