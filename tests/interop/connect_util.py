"""Builds and runs Kafka Connect's distributed worker (connect-runtime, the newest served 4.x) with
the sequence source connector of tests/java-connect, as separate JVM processes, so that a test can
SIGKILL and restart each worker; and talks to the workers' REST API.

The build is offline like streams_util.py's (the module's classpath is resolved once by
scripts/test.sh's install step); the worker is Kafka's own `ConnectDistributed`, finding the
connector on its classpath."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

from broker import free_port
from java_util import JVM_FLAGS
from streams_util import JvmProcess, ModuleApp

CONNECT_DIR = Path(__file__).parent.parent / "java-connect"
MAIN = "org.apache.kafka.connect.cli.ConnectDistributed"
CONNECTOR_CLASS = "dev.strata.connect.SequenceSource"


class ConnectApp(ModuleApp):
    """The compiled connector and Connect's classpath."""

    MODULE_DIR = CONNECT_DIR
    WHAT = "Kafka Connect"

    def command(self, properties: Path) -> list[str]:
        cp = f"{self.classes}:{self.lib}/*"
        # Connect's own INFO lines say what each rebalance, fencing and task start did: kept in
        # the worker's log for a failing run, the clients' chatter left out.
        flags = [f for f in JVM_FLAGS if "defaultLogLevel" not in f and not f.startswith("-Xmx")]
        return ["java", "-Xmx384m", *flags, "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
                "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients=warn",
                "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.common=warn",
                "-Dorg.slf4j.simpleLogger.log.org.eclipse.jetty=warn",
                "-Dorg.slf4j.simpleLogger.log.org.reflections=warn",
                "-cp", cp, MAIN, str(properties)]


def worker_properties(bootstrap: str, group: str, port: int, topics: dict[str, str], replication: int,
                      eos: bool) -> str:
    """A distributed worker's config. `topics` names the config, offset and status topics (the
    test creates them, compacted). Short session and rebalance delays, so that a SIGKILLed
    worker's tasks move or come back in seconds rather than Connect's default five minutes."""
    props = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "listeners": f"http://127.0.0.1:{port}",
        "rest.advertised.host.name": "127.0.0.1",
        "rest.advertised.port": str(port),
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "config.storage.topic": topics["config"],
        "offset.storage.topic": topics["offset"],
        "status.storage.topic": topics["status"],
        "config.storage.replication.factor": str(replication),
        "offset.storage.replication.factor": str(replication),
        "status.storage.replication.factor": str(replication),
        "exactly.once.source.support": "enabled" if eos else "disabled",
        "session.timeout.ms": "6000",
        "heartbeat.interval.ms": "1000",
        "scheduled.rebalance.max.delay.ms": "3000",
        "offset.flush.interval.ms": "1000",
        "task.shutdown.graceful.timeout.ms": "3000",
        # A broker down for a few seconds is retried through, not a task failure.
        "producer.delivery.timeout.ms": "120000",
        "producer.max.block.ms": "120000",
        "producer.transaction.timeout.ms": "30000",
        "plugin.discovery": "hybrid_warn",
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


class Worker(JvmProcess):
    """One distributed worker process on a fixed REST port: started, SIGKILLed and started again
    with the same config."""

    def __init__(self, app: ConnectApp, name: str, workdir: Path, bootstrap: str, group: str,
                 topics: dict[str, str], replication: int, eos: bool):
        super().__init__(name, workdir / f"{name}.log")
        self.app = app
        self.port = free_port()
        self.properties = workdir / f"{name}.properties"
        self.properties.write_text(worker_properties(bootstrap, group, self.port, topics, replication, eos))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        return self.app.command(self.properties)

    def stop(self, timeout: float = 60) -> str | None:
        """SIGTERM: Connect's shutdown hook stops the worker (its tasks, the group membership).
        None if the JVM exited within `timeout` after its hooks ran (128 + SIGTERM), else what
        went wrong."""
        rc, error = self.terminate(timeout)
        if error is not None:
            return error
        return None if rc in (0, 128 + 15, 143) else f"{self.name} exited {rc} after SIGTERM"

    def rest(self, method: str, path: str, body: dict | None = None, timeout: float = 10):
        """One REST call: (status, parsed JSON body or None). Connection errors raise OSError."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                raw = r.read()
                return r.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw) if raw else None
            except ValueError:
                return e.code, raw.decode(errors="replace")

    def started_tasks(self) -> list[tuple[str, int]]:
        """(task id, first value) of every `TASK id START next` line the worker's tasks logged,
        across its restarts: where each task resumed."""
        if not self.log.exists():
            return []
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            if line.startswith("TASK "):
                _, task, _, nxt = line.split()
                out.append((task, int(nxt)))
        return out

    def tail(self, chars: int = 6000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


def connector_status(workers: list[Worker], name: str) -> dict | None:
    """The connector's status from the first worker that answers, or None."""
    for w in workers:
        if not w.alive():
            continue
        try:
            code, body = w.rest("GET", f"/connectors/{name}/status")
        except OSError:
            continue
        if code == 200:
            return body
    return None
