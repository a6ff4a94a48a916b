"""Apache Kafka in place of `strata` for the interop suite (`STRATA_TARGET=kafka`).

Apache Kafka's behaviour is the specification Strata follows; running the same tests against it
shows whether their expectations hold on the real thing. `KafkaBroker` is a `Broker` whose process
is Kafka's (scripts/kafka.sh, which resolves it from Maven Central):

- the same Kafka config keys the tests pass as `--override`s go into a `server.properties`, except
  the Strata-only keys in `STRATA_ONLY_KEYS` (skipped; the tests that need them are marked
  `strata_only`);
- a single broker is one KRaft node, `process.roles=broker,controller`, with its own CONTROLLER
  listener on a second loopback port and the internal topics at replication factor 1; a cluster
  (cluster.py) passes its own listeners and voters, as it does to strata, and shares one cluster
  id, because Kafka, unlike Strata, formats each data dir before the first start
  (kafka.tools.StorageTool, which `scripts/kafka.sh run` calls when the dir is not formatted
  yet, in the same process and log); a restart after `kill()` reuses the formatted dir;
- `stop()` accepts exit code 143 as clean: the JVM exits 128+SIGTERM after its shutdown hook has
  shut the broker down in order.
"""

from __future__ import annotations

import base64
import os
import subprocess
import uuid
from pathlib import Path

from broker import REPO_ROOT, Broker, free_port

KAFKA_SH = REPO_ROOT / "scripts" / "kafka.sh"

# Smaller than kafka-server-start.sh's 1 GiB: tests start many brokers on small machines. C1 only
# and the serial collector: most of a test broker's life is start-up, on two shared cores.
TEST_HEAP_OPTS = "-Xmx512m -Xms64m"
TEST_JVM_OPTS = "-server -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true"

# Keys the tests pass that are Strata's own, not Kafka's: left out of server.properties.
# (Kafka would only warn "supplied but not used" for an unknown key; skipping keeps the file honest.)
STRATA_ONLY_KEYS = {
    # Strata serves Prometheus metrics itself; Kafka exposes JMX (tests reading /metrics are
    # marked strata_only).
    "metrics.listener",
}

# Exit codes of a clean shutdown: 0, or 143 when the JVM ran its shutdown hook on SIGTERM.
CLEAN_EXIT = (0, 143)


def new_cluster_id() -> str:
    """A KRaft cluster id: a random UUID in Kafka's URL-safe base64 (22 characters), never one
    starting with "-" (as Kafka's Uuid.randomUuid: the storage tool would take it for an option)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def ensure_installed() -> None:
    """`scripts/kafka.sh install` (a no-op once the jars are resolved). Raises with mvn's output."""
    p = subprocess.run([str(KAFKA_SH), "install"], capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"scripts/kafka.sh install failed:\n{p.stdout}\n{p.stderr}")


class KafkaBroker(Broker):
    process_name = "kafka"
    clean_exit_codes = CLEAN_EXIT

    def __init__(self, workdir: Path, overrides: dict[str, str] | None = None):
        super().__init__(workdir, overrides)
        self.controller_port = free_port()
        self.cluster_id = new_cluster_id()
        self.config_path = self.workdir / "server.properties"

    def properties(self) -> dict[str, str]:
        listener = f"PLAINTEXT://127.0.0.1:{self.port}"
        controller = f"CONTROLLER://127.0.0.1:{self.controller_port}"
        base = {
            "process.roles": "broker,controller",
            "node.id": "0",
            "listeners": f"{listener},{controller}",
            "advertised.listeners": listener,
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": f"0@127.0.0.1:{self.controller_port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
        }
        base.update(self.overrides)
        voters = [v for v in base["controller.quorum.voters"].split(",") if v]
        if len(voters) < 3:
            # Kafka's internal topics default to replication factor 3 (min ISR 2); Strata sizes
            # them to the brokers it has. A one-node Kafka needs them said.
            for k in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                      "share.coordinator.state.topic.replication.factor"):
                base.setdefault(k, str(len(voters)))
            for k in ("transaction.state.log.min.isr", "share.coordinator.state.topic.min.isr"):
                base.setdefault(k, "1")
        return {k: v for k, v in base.items() if k not in STRATA_ONLY_KEYS}

    def write_config(self) -> Path:
        lines = [f"{k}={v}" for k, v in self.properties().items()]
        self.config_path.write_text("\n".join(lines) + "\n")
        return self.config_path

    def command(self) -> list[str]:
        return [str(KAFKA_SH), "run", str(self.write_config())]

    def env(self) -> dict[str, str]:
        return {**os.environ,
                "KAFKA_HEAP_OPTS": os.environ.get("KAFKA_HEAP_OPTS", TEST_HEAP_OPTS),
                "KAFKA_JVM_PERFORMANCE_OPTS": os.environ.get("KAFKA_JVM_PERFORMANCE_OPTS", TEST_JVM_OPTS),
                # `kafka.sh run` formats the data dir with it on the first start only.
                "KAFKA_CLUSTER_ID": self.cluster_id}
