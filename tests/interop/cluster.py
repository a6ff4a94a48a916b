"""A Strata cluster of real `strata` processes on loopback, for the replication tests.

Every node runs `process.roles=broker,controller` from the same configuration as a newcomer's
(three `server.properties` that differ only in `node.id`, listeners and `log.dirs`), on empty
data directories, with no format step. Node `i` listens on:

- `PLAINTEXT` (clients, `node.bootstrap`),
- `INTERNAL` (the inter-broker listener: replica fetches, transaction markers),
- `CONTROLLER` (the quorum).

With `proxies=True`, the other nodes reach node `i`'s `INTERNAL` and `CONTROLLER` listeners only
through fault proxies (`faultproxy.py`): its advertised `INTERNAL` endpoint is a proxy, and each
node's `controller.quorum.voters` names a proxy of its own per other voter. `isolate(i)` then cuts
node `i` off from the rest of the cluster (the others cannot fetch from it or reach its
controller, and its controller and broker cannot reach theirs) while clients still reach it
directly; `heal(i)` restores it.

Timeouts are shortened (`broker.session.timeout.ms`, `replica.lag.time.max.ms`, ...) so failures
are detected in seconds; `overrides` change anything.
"""

from __future__ import annotations

import time
from pathlib import Path

from broker import READY_TIMEOUT_S, Broker, free_port, new_broker, wait_until
from faultproxy import ProxyHub
import wire

FAST = {
    "broker.heartbeat.interval.ms": "300",
    "broker.session.timeout.ms": "2500",
    "replica.lag.time.max.ms": "2500",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "100",
    "controller.quorum.election.timeout.ms": "600",
    "controller.quorum.fetch.timeout.ms": "1200",
    "controller.quorum.request.timeout.ms": "1500",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.num.partitions": "6",
}


class Cluster:
    def __init__(self, workdir: Path, size: int = 3, overrides: dict[str, str] | None = None,
                 proxies: bool = False):
        self.workdir = Path(workdir)
        self.size = size
        self.hub = ProxyHub() if proxies else None
        self.nodes: list[Broker] = []
        ids = range(size)
        controller_port = {i: free_port() for i in ids}
        internal_port = {i: free_port() for i in ids}
        # Proxies: into node j's INTERNAL (shared), and from node i to node j's CONTROLLER.
        self.internal_proxy = {}
        self.controller_proxy = {}
        if self.hub:
            for j in ids:
                self.internal_proxy[j] = self.hub.proxy(internal_port[j], f"internal->{j}")
                for i in ids:
                    if i != j:
                        self.controller_proxy[(i, j)] = self.hub.proxy(controller_port[j], f"controller {i}->{j}")
        cluster_id = None
        for i in ids:
            b = new_broker(self.workdir / f"node{i}")
            # Apache Kafka (STRATA_TARGET=kafka) formats every node with one cluster id.
            if hasattr(b, "cluster_id"):
                cluster_id = cluster_id or b.cluster_id
                b.cluster_id = cluster_id

            def voter(j, i=i):
                port = controller_port[j] if (i == j or not self.hub) else self.controller_proxy[(i, j)].port
                return f"{j}@127.0.0.1:{port}"

            advertised_internal = self.internal_proxy[i].port if self.hub else internal_port[i]
            b.overrides = {
                **FAST,
                "node.id": str(i),
                "process.roles": "broker,controller",
                "controller.quorum.voters": ",".join(voter(j) for j in ids),
                "controller.listener.names": "CONTROLLER",
                "inter.broker.listener.name": "INTERNAL",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "listeners": (f"PLAINTEXT://127.0.0.1:{b.port},INTERNAL://127.0.0.1:{internal_port[i]},"
                              f"CONTROLLER://127.0.0.1:{controller_port[i]}"),
                "advertised.listeners": (f"PLAINTEXT://127.0.0.1:{b.port},"
                                         f"INTERNAL://127.0.0.1:{advertised_internal}"),
                **(overrides or {}),
            }
            self.nodes.append(b)

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def start(self, timeout: float = READY_TIMEOUT_S * 2) -> "Cluster":
        """Starts every node at once and waits until each serves clients and sees all brokers."""
        for n in self.nodes:
            n.spawn()
        for n in self.nodes:
            n.wait_ready(timeout, brokers=self.size)
        return self

    def start_node(self, i: int, timeout: float = READY_TIMEOUT_S * 2) -> Broker:
        """(Re)starts node `i` and waits until it serves clients."""
        n = self.nodes[i]
        n.spawn()
        n.wait_ready(timeout)
        return n

    def kill(self, i: int) -> None:
        self.nodes[i].kill()

    def stop(self, i: int) -> None:
        self.nodes[i].stop()

    def isolate(self, i: int) -> None:
        """Cuts node `i` off from the other nodes (clients still reach it)."""
        assert self.hub, "isolate needs a cluster started with proxies=True"
        self.internal_proxy[i].block()
        for (a, b), p in self.controller_proxy.items():
            if i in (a, b):
                p.block()

    def heal(self, i: int) -> None:
        assert self.hub
        self.internal_proxy[i].unblock()
        for (a, b), p in self.controller_proxy.items():
            if i in (a, b):
                p.unblock()

    def quorum(self, via: int, timeout: float = 8.0):
        """DescribeQuorum as node `via`'s client listener answers it (forwarded to the leader,
        which the broker looks for up to 5 s before it answers NOT_CONTROLLER)."""
        with wire.Conn(self.nodes[via].port, timeout=timeout) as conn:
            return wire.describe_quorum_v0(conn)

    def active_controller(self, timeout: float = 60.0) -> int:
        """The quorum's leader (the active controller), asked through any live node; Metadata's
        controller id is a random live broker, as Kafka's KRaft brokers answer."""
        seen: dict[int, object] = {}

        def leader():
            for i, n in enumerate(self.nodes):
                if n.alive():
                    try:
                        q = self.quorum(i)
                    except (OSError, ValueError) as e:
                        seen[i] = e
                        continue
                    seen[i] = q
                    if q.error_code == 0 and q.leader_id >= 0:
                        return (q.leader_id,)  # a tuple: node id 0 is falsy
            return None

        try:
            return wait_until(leader, timeout, "a quorum leader", interval=0.1)[0]
        except TimeoutError as e:
            raise TimeoutError(f"{e}; last answers by node: {seen!r}") from None

    def metadata(self, via: int | None = None):
        from confluent_kafka.admin import AdminClient

        bootstrap = self.nodes[via].bootstrap if via is not None else self.live_bootstrap()
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        return admin.list_topics(timeout=5)

    def live_bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes if n.alive())

    def partition(self, topic: str, partition: int, via: int | None = None):
        """The partition's metadata; a topic just created may take a moment to reach the
        broker asked (each follows the controller's log), so it is awaited."""
        def known():
            t = self.metadata(via).topics.get(topic)
            return t.partitions[partition] if t is not None and partition in t.partitions else None

        return wait_until(known, 30, f"{topic}-{partition} in the metadata", interval=0.1)

    def wait_isr(self, topic: str, partition: int, isr: set[int], timeout: float = 60.0, via: int | None = None):
        """Waits until the partition's ISR is exactly `isr`; returns its metadata."""
        def done():
            p = self.partition(topic, partition, via)
            return p if set(p.isrs) == isr and p.leader in isr else None

        return wait_until(done, timeout, f"{topic}-{partition} ISR {sorted(isr)}", interval=0.1)

    def wait_leader(self, topic: str, partition: int, not_in: set[int] = frozenset(), timeout: float = 60.0):
        """Waits until the partition has a leader outside `not_in`; returns its id."""
        def done():
            p = self.partition(topic, partition)
            # A tuple: node id 0 is falsy.
            return (p.leader,) if p.leader >= 0 and p.leader not in not_in else None

        return wait_until(done, timeout, f"a leader of {topic}-{partition} outside {sorted(not_in)}", interval=0.1)[0]

    def stop_all(self) -> list[str]:
        """SIGTERM every live node at once and waits; returns the problems seen."""
        import signal

        live = [n for n in self.nodes if n.alive()]
        for n in live:
            n.proc.send_signal(signal.SIGTERM)
        errors = []
        deadline = time.monotonic() + 60
        for n in live:
            try:
                rc = n.proc.wait(timeout=max(1.0, deadline - time.monotonic()))
                if rc not in n.clean_exit_codes:
                    errors.append(f"{n.workdir.name} exited {rc} after SIGTERM")
            except Exception:  # noqa: BLE001
                errors.append(f"{n.workdir.name} did not exit within 60 s of SIGTERM")
                n.kill()
            n.proc = None
        if self.hub:
            self.hub.close()
        return errors

    def in_sync_replicas(self, timeout: float = 5.0) -> dict[tuple[str, int], set[int]] | None:
        """Every partition's ISR as all live nodes agree on it (the intersection of what each
        answers, so a node with a stale view, isolated or just restarted, cannot add itself), live
        nodes only; None if a live node does not answer. For the replica audit."""
        from confluent_kafka.admin import AdminClient

        live = [i for i, n in enumerate(self.nodes) if n.alive()]
        if not live:
            return None
        out: dict[tuple[str, int], set[int]] = {}
        for i in live:
            admin = AdminClient({"bootstrap.servers": self.nodes[i].bootstrap, "log_level": 0})
            try:
                md = admin.list_topics(timeout=timeout)
            except Exception:  # noqa: BLE001 - no answer: no agreement check
                return None
            for t in md.topics.values():
                for p in t.partitions.values():
                    isr = set(p.isrs) & set(live)
                    key = (t.topic, p.id)
                    out[key] = out[key] & isr if key in out else isr
        return out

    def audit(self, in_sync: dict[tuple[str, int], set[int]] | None, topics: set[str] | None = None) -> list[str]:
        """The replica audit (replica_audit.py) of the nodes' logs as they are on disk: run it
        after the nodes stopped. Without `in_sync`, only duplicate batches are looked for."""
        import replica_audit

        dirs = {i: n.data_dir for i, n in enumerate(self.nodes)}
        problems = replica_audit.audit(dirs, in_sync if in_sync is not None else {}, topics)
        return problems

    def audit_summary(self, topics: set[str] | None = None) -> str:
        import replica_audit

        return replica_audit.summary({i: n.data_dir for i, n in enumerate(self.nodes)}, topics)

    def kill_all(self) -> None:
        for n in self.nodes:
            n.kill()
        if self.hub:
            self.hub.close()

    def log_tails(self, lines: int = 150) -> list[tuple[str, str]]:
        return [(n.workdir.name, n.log_tail(lines)) for n in self.nodes]
