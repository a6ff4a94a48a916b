"""Starts and stops the real `strata` binary for the interop tests.

A `Broker` owns a data directory and a loopback port. `start()` spawns the binary with Kafka's
config keys as `--override`s, sends its stderr to a log file next to the data dir, and waits (with
a deadline) until it answers ApiVersions on a fresh connection and a real client's Metadata call.
`stop()` sends SIGTERM and expects a clean exit; `kill()` sends SIGKILL; `start()` again reuses the
same port and data dir, which is how the crash tests restart it.

`STRATA_TARGET=kafka` runs the suite against Apache Kafka instead: `new_broker()` (used by the
fixtures and cluster.py) then makes a `kafka_broker.KafkaBroker`, the same interface over Kafka's
own process (scripts/kafka.sh).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import wire

REPO_ROOT = Path(__file__).resolve().parents[2]
# Which broker the suite runs against: "strata" (the default) or "kafka" (Apache Kafka, the
# specification; tests that only make sense on Strata are marked strata_only).
TARGET = os.environ.get("STRATA_TARGET", "strata")
if TARGET not in ("strata", "kafka"):
    raise ValueError(f"STRATA_TARGET must be strata or kafka, not {TARGET!r}")
ON_KAFKA = TARGET == "kafka"

# A JVM that formats, starts and forms its one-node quorum takes longer than strata on a busy
# machine, and a clean Kafka shutdown waits for its controlled-shutdown steps.
READY_TIMEOUT_S = 60.0 if ON_KAFKA else 30.0
STOP_TIMEOUT_S = 40.0 if ON_KAFKA else 20.0


def strata_bin() -> Path:
    """STRATA_BIN, else target/release/strata. Raises (never skips) if it does not exist."""
    p = Path(os.environ.get("STRATA_BIN", REPO_ROOT / "target" / "release" / "strata"))
    if not p.is_file():
        raise FileNotFoundError(
            f"strata binary not found at {p}; build it with "
            "`cargo build --release -p strata-broker --bin strata` or set STRATA_BIN"
        )
    return p


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A loopback port that was free a moment ago and that this process has not handed out
    before: the kernel may give the same ephemeral port to two binds in a row once the first
    is released, and a cluster asks for several ports before any node binds them."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


class BrokerDied(AssertionError):
    """The strata process exited when it should be running; never retried by wait_until."""


def wait_until(cond, timeout: float, what: str, interval: float = 0.05):
    """Polls `cond()` until it returns a truthy value, which is returned; exceptions other than
    BrokerDied count as not yet. Raises TimeoutError naming `what` and the last exception after
    `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while True:
        try:
            v = cond()
            if v:
                return v
        except BrokerDied:
            raise
        except Exception as e:  # noqa: BLE001 - any other failure means "not yet"
            last_exc = e
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.1f}s waiting for {what}"
                               + (f" (last error: {last_exc!r})" if last_exc else ""))
        time.sleep(interval)


class Broker:
    # Names its log files; a subclass running another broker says which.
    process_name = "strata"
    # Exit codes that count as a clean shutdown after SIGTERM.
    clean_exit_codes: tuple[int, ...] = (0,)

    def __init__(self, workdir: Path, overrides: dict[str, str] | None = None):
        self.workdir = Path(workdir)
        self.data_dir = self.workdir / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.overrides = dict(overrides or {})
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.log_paths: list[Path] = []

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        listener = f"PLAINTEXT://127.0.0.1:{self.port}"
        base = {
            "node.id": "0",
            "listeners": listener,
            "advertised.listeners": listener,
            "log.dirs": str(self.data_dir),
            # No metrics endpoint unless a test asks for one (many brokers share the default port).
            "metrics.listener": "",
        }
        base.update(self.overrides)
        cmd = [str(strata_bin())]
        for k, v in base.items():
            cmd += ["--override", f"{k}={v}"]
        return cmd

    def env(self) -> dict[str, str]:
        return {**os.environ, "RUST_BACKTRACE": "1", "NO_COLOR": "1"}

    def before_spawn(self) -> None:
        """Anything the process needs done before each start (Kafka formats its storage)."""

    def start(self, ready_timeout: float = READY_TIMEOUT_S) -> "Broker":
        self.spawn()
        try:
            self.wait_ready(ready_timeout)
        except Exception:
            self.kill()
            raise
        return self

    def spawn(self) -> "Broker":
        """Starts the process without waiting for it to serve (a cluster node needs the other
        voters up before its client listener accepts)."""
        assert self.proc is None, "broker already running"
        self.before_spawn()
        cmd = self.command()
        self.starts += 1
        log_path = self.workdir / f"{self.process_name}-{self.starts}.log"
        self.log_paths.append(log_path)
        with open(log_path, "wb") as log:
            log.write(("$ " + " ".join(cmd) + "\n").encode())
            log.flush()
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         cwd=self.workdir, env=self.env())
        return self

    def wait_ready(self, timeout: float = READY_TIMEOUT_S, brokers: int = 1) -> None:
        """Waits until the broker answers ApiVersions and a real client's Metadata call lists at
        least `brokers` brokers."""
        deadline = time.monotonic() + timeout

        def answers_api_versions():
            self.assert_alive()
            return wire.api_versions_ok(self.port, timeout=2.0)

        wait_until(answers_api_versions, timeout,
                   f"{self.process_name} to answer ApiVersions on {self.bootstrap}")
        # Then a real client's Metadata call (librdkafka).
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})

        def metadata_ok():
            self.assert_alive()
            md = admin.list_topics(timeout=2)
            return len(md.brokers) >= brokers

        wait_until(metadata_ok, max(1.0, deadline - time.monotonic()),
                   f"a Metadata answer from {self.process_name}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def assert_alive(self) -> None:
        if self.proc is None:
            raise BrokerDied("broker is not running")
        rc = self.proc.poll()
        if rc is not None:
            raise BrokerDied(f"{self.process_name} exited with code {rc}; log tail:\n{self.log_tail()}")

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM; waits for exit and asserts exit code 0."""
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.process_name} did not exit within {timeout}s of SIGTERM")
        self.proc = None
        if rc not in self.clean_exit_codes:
            raise AssertionError(f"{self.process_name} exited with code {rc} after SIGTERM; "
                                 f"log tail:\n{self.log_tail()}")
        return rc

    def kill(self) -> None:
        """SIGKILL (a crash); the data dir is kept for a restart."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=STOP_TIMEOUT_S)
        self.proc = None

    def restart_after_kill(self) -> "Broker":
        self.kill()
        return self.start()

    def log_text(self) -> str:
        parts = []
        for p in self.log_paths:
            try:
                parts.append(f"---- {p.name} ----\n" + p.read_text(errors="replace"))
            except OSError as e:
                parts.append(f"---- {p.name}: {e} ----")
        return "\n".join(parts)

    def log_tail(self, lines: int = 200) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def partition_dir(self, topic: str, partition: int) -> Path:
        return self.data_dir / f"{topic}-{partition}"

    def segment_files(self, topic: str, partition: int, suffix: str = ".log") -> list[Path]:
        d = self.partition_dir(topic, partition)
        return sorted(p for p in d.iterdir() if p.name.endswith(suffix)) if d.is_dir() else []


def new_broker(workdir: Path, overrides: dict[str, str] | None = None) -> Broker:
    """A broker of the suite's target (STRATA_TARGET): strata, or Apache Kafka."""
    if ON_KAFKA:
        from kafka_broker import KafkaBroker

        return KafkaBroker(workdir, overrides)
    return Broker(workdir, overrides)
