"""Builds and runs the Go client programs of tests/interop/go (one Go module: go.mod and go.sum
pin sarama, franz-go and kafka-go; one main package per client), and the librdkafka helpers
that their tests (test_go_*.py) check them with.

The build is offline: scripts/test.sh downloads the modules once (`go mod download`), and here
`GOPROXY=off GOFLAGS=-mod=readonly` makes a missing module or a go.mod that would need changing
fail the build instead of fetching at test time. `GOTOOLCHAIN=local`: never download a Go
toolchain; the newest Go found (the preinstalled /usr/local/go first, then PATH) must be at
least go.mod's `go` line."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

GO_DIR = Path(__file__).parent / "go"
PROGRAMS = ("sarama_client", "franz_client", "kafkago_client")
PREINSTALLED_GO = "/usr/local/go/bin/go"


def _version(text: str) -> tuple[int, ...]:
    m = re.match(r"(?:go)?(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
    assert m, f"not a Go version: {text!r}"
    return tuple(int(g or 0) for g in m.groups())


def required_go() -> tuple[int, ...]:
    """The `go` line of tests/interop/go/go.mod."""
    m = re.search(r"^go\s+(\S+)", (GO_DIR / "go.mod").read_text(), re.M)
    assert m, "go.mod has no go line"
    return _version(m.group(1))


def find_go() -> str:
    """The newest Go toolchain found that is at least go.mod's `go` line; fails naming what was
    found otherwise."""
    found = {}
    for cand in (PREINSTALLED_GO, shutil.which("go")):
        if cand and os.access(cand, os.X_OK) and os.path.realpath(cand) not in found:
            r = subprocess.run([cand, "env", "GOVERSION"], capture_output=True, text=True, timeout=60,
                               env=dict(os.environ, GOTOOLCHAIN="local"))
            if r.returncode == 0:
                found[os.path.realpath(cand)] = (_version(r.stdout), cand)
    want = required_go()
    ok = sorted((v, c) for v, c in found.values() if v >= want)
    assert ok, (f"no Go >= {'.'.join(map(str, want))} (go.mod) found; found "
                f"{[(c, '.'.join(map(str, v))) for v, c in found.values()] or 'none'}; "
                "scripts/test.sh's install step says where to get one")
    return ok[-1][1]


def build(out_dir: Path) -> dict[str, Path]:
    """Builds every program into `out_dir`, offline; returns name -> binary."""
    go = find_go()
    env = dict(os.environ, GOTOOLCHAIN="local", GOPROXY="off", GOFLAGS="-mod=readonly -buildvcs=false",
               GOWORK="off", PATH=f"{Path(go).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if not env.get("HOME") and not env.get("GOCACHE"):
        env["GOCACHE"] = str(out_dir / "gocache")  # Go needs one; HOME's is kept across runs
    r = subprocess.run([go, "build", "-o", f"{out_dir}{os.sep}", *(f"./{p}" for p in PROGRAMS)], cwd=GO_DIR,
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (f"go build (offline: GOPROXY=off) failed; run scripts/test.sh's install step "
                               f"or `go mod download` in {GO_DIR}:\n{r.stderr[-3000:]}")
    return {p: out_dir / p for p in PROGRAMS}


def run(binary: Path, *args: str, timeout: float = 120) -> list[str]:
    """Runs one program (each bounds its own waits to 60 s); returns its stdout lines."""
    r = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{binary.name} {' '.join(args)} failed ({r.returncode}):\n{r.stderr[-3000:]}"
    return r.stdout.splitlines()


def records(lines: list[str]) -> list[tuple[int, int, str]]:
    """(partition, offset, value) of each "partition offset value" line."""
    out = []
    for line in lines:
        p, o, v = line.split(" ", 2)
        out.append((int(p), int(o), v))
    return out


def tagged_json(lines: list[str], tag: str) -> dict:
    """The JSON of the one "TAG {json}" line a program printed."""
    found = [json.loads(line.split(" ", 1)[1]) for line in lines if line.startswith(tag + " ")]
    assert len(found) == 1, f"one {tag!r} line expected in {lines[-5:]}"
    return found[0]


def read_all(bootstrap: str, topic: str, partitions: int, n: int, isolation: str = "read_uncommitted",
             timeout: float = 60) -> list[tuple[int, int, str]]:
    """Reads `n` records from the start of every partition with librdkafka (assigned, no group)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False,
                  "isolation.level": isolation, "fetch.wait.max.ms": 100})
    out = []
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(out) < n:
            assert time.monotonic() < deadline, f"librdkafka ({isolation}) read {len(out)} of {n} in {timeout}s"
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            out.append((m.partition(), m.offset(), m.value().decode()))
    finally:
        c.close()
    return out


def produce_rd(bootstrap: str, topic: str, n: int, partitions: int) -> None:
    """Writes "rd-<i>" to partition i mod `partitions` with librdkafka, for i < `n`."""
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(topic, value=f"rd-{i}".encode(), partition=i % partitions)
    assert p.flush(15) == 0
