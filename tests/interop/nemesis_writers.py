"""Writers for the harsher nemesis workload (test_cluster_nemesis.py): an idempotent librdkafka
producer at a high rate whose failed sends are kept as indeterminate (the nemesis may outlast its
message timeout), and a transactional producer committing or aborting small transactions. Each
value is sent once by the application and never re-sent; every outcome ends up in a
history.Send (and history.Txn), so the checker knows exactly what was promised."""

from __future__ import annotations

import logging
import random
import threading
import time
from pathlib import Path

from confluent_kafka import KafkaException, Producer

import history


class FastProducer:
    """Produces "<tag>-<n>" round-robin over `partitions` at about `rate` records/s (idempotent,
    acks=all, linger 2 ms, 30 s message timeout): the issue's workload. Unlike PacedProducer, a
    send that fails is not an error of the test: it is indeterminate (it may be in the log)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float, tag: str,
                 debug_log: Path | None = None, debug: str = "eos,msg"):
        self.topic, self.partitions, self.rate, self.tag = topic, partitions, rate, tag
        self.debug_log = debug_log
        self.sent = 0
        self.acks: dict[int, tuple[int, int]] = {}
        self.failed: dict[int, str] = {}
        self._stop = threading.Event()
        conf = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                "linger.ms": 2, "message.timeout.ms": 30000, "log_level": 0}
        if debug_log is not None:
            # librdkafka's idempotence log (`eos`: epoch bumps and why, sequence resets, a few
            # lines a run; `msg` adds every produce request), to tell a broker's duplicate from
            # a client's re-send (client_resends.py).
            handler = logging.FileHandler(debug_log)
            handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
            logger = logging.getLogger(f"librdkafka-{tag}")
            logger.addHandler(handler)
            logger.setLevel(logging.DEBUG)
            conf.update({"debug": debug, "log_level": 7, "logger": logger})
        self.p = Producer(conf)
        self._t = threading.Thread(target=self._run, name=f"fast-producer-{tag}", daemon=True)
        self._t.start()

    def value(self, n: int) -> str:
        return f"{self.tag}-{n}"

    def _cb(self, n):
        def cb(err, msg):
            if err is not None:
                self.failed[n] = str(err)
            else:
                # librdkafka acknowledges a batch whose answer was lost, once a later batch of
                # the partition succeeded, without an offset (an "implicit ack"): None here.
                self.acks[n] = (msg.partition(), msg.offset())
        return cb

    def _run(self) -> None:
        start = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - start) * self.rate) + 1
            while self.sent < due and not self._stop.is_set():
                n = self.sent
                try:
                    self.p.produce(self.topic, value=self.value(n).encode(), partition=n % self.partitions,
                                   on_delivery=self._cb(n))
                except BufferError:
                    break  # the queue is full (a long outage): wait for deliveries
                self.sent += 1
            self.p.poll(0.005)

    def stop(self, timeout: float = 60.0) -> list[history.Send]:
        """Stops producing, waits for every outcome, and returns the sends in order."""
        self._stop.set()
        self._t.join(timeout=10)
        left = self.p.flush(timeout)
        assert left == 0, f"{self.tag}: {left} sends without an outcome after {timeout}s"
        out = []
        for n in range(self.sent):
            if n in self.acks:
                out.append(history.Send(self.value(n), *self.acks[n], producer=self.tag))
            else:
                out.append(history.Send(self.value(n), status=history.INFO, producer=self.tag))
        return out

    def close(self) -> None:
        self._stop.set()
        self._t.join(timeout=10)
        self.p.purge()
        self.p.flush(1)


class TxnWriter:
    """Transactions of 1-20 values over the partitions, 30 % aborted on purpose; a producer that
    fails fatally (fenced, timed out) is replaced by a new one with the same transactional id."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, tag: str, seed: int):
        self.bootstrap, self.topic, self.partitions, self.tag = bootstrap, topic, partitions, tag
        self.rng = random.Random(seed)
        self.sends: list[history.Send] = []
        self.txns: list[history.Txn] = []
        self.errors: list[str] = []
        self._n = 0
        self._acks: dict[str, tuple[int, int]] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, name=f"txn-writer-{tag}", daemon=True)
        self._t.start()

    def _producer(self) -> Producer:
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": f"{self.tag}-tid",
                      "acks": "all", "linger.ms": 2, "transaction.timeout.ms": 20000,
                      "message.timeout.ms": 20000, "log_level": 0})
        p.init_transactions(60)
        return p

    def _cb(self, value: str):
        def cb(err, msg):
            if err is None:
                self._acks[value] = (msg.partition(), msg.offset())
        return cb

    def _run(self) -> None:
        p = None
        txn_no = 0
        while not self._stop.is_set():
            try:
                if p is None:
                    p = self._producer()
            except KafkaException as e:
                self.errors.append(f"init: {e}")
                p = None
                time.sleep(0.5)
                continue
            txn_no += 1
            tid = f"{self.tag}-t{txn_no}"
            values = []
            outcome = history.OPEN
            commit_time = None
            try:
                p.begin_transaction()
                for _ in range(self.rng.randint(1, 20)):
                    v = f"{self.tag}-{self._n}"
                    self._n += 1
                    values.append(v)
                    p.produce(self.topic, value=v.encode(), partition=self.rng.randrange(self.partitions),
                              on_delivery=self._cb(v))
                p.flush(30)
                if self.rng.random() < 0.3:
                    p.abort_transaction(30)
                    outcome = history.ABORT
                else:
                    commit_time = time.monotonic()
                    outcome = history.UNKNOWN
                    p.commit_transaction(30)
                    outcome = history.COMMIT
            except KafkaException as e:
                err = e.args[0]
                self.errors.append(f"{tid}: {err}")
                if outcome == history.OPEN or err.txn_requires_abort():
                    try:
                        p.abort_transaction(30)
                        outcome = history.ABORT if outcome == history.OPEN else history.UNKNOWN
                    except KafkaException:
                        p = None
                else:
                    p = None
            self.txns.append(history.Txn(tid, outcome, commit_time))
            for v in values:
                if v in self._acks:
                    self.sends.append(history.Send(v, *self._acks[v], producer=self.tag, txn=tid))
                else:
                    self.sends.append(history.Send(v, status=history.INFO, producer=self.tag, txn=tid))
            time.sleep(self.rng.uniform(0, 0.02))

    def stop(self, timeout: float = 90.0) -> tuple[list[history.Send], list[history.Txn]]:
        self._stop.set()
        self._t.join(timeout)
        assert not self._t.is_alive(), f"{self.tag}: transaction loop did not stop within {timeout}s"
        return self.sends, self.txns
