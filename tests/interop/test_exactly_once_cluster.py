"""Exactly-once end to end on a 3-node cluster: the `wordcount` example (Strata's checkpointed
source, barrier checkpoints and two-phase-commit sink on KIP-939) runs against RF-3 topics while
input keeps arriving; the broker that is the sink's transaction coordinator is SIGKILLed (and
later restarted), and the job itself is SIGKILLed and restarted on the way. A read_committed
librdkafka reader of the output then sees, for every word, exactly 1, 2, ..., n in order.
"""

from __future__ import annotations

import os
import random
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

import wire
from broker import BrokerDied
from test_replication import create
from txn_util import read_committed, wait_lso_caught_up
from util import unique_topic, wait_until

ROOT = Path(__file__).resolve().parents[2]
PARTS = 3
WORDS = [f"w{i}" for i in range(16)]


def wordcount_bin() -> str:
    path = os.environ.get("STRATA_WORDCOUNT") or str(ROOT / "target" / "release" / "examples" / "wordcount")
    if not os.path.isfile(path):
        pytest.fail(f"the wordcount example is not built ({path}): "
                    "cargo build --release -p strata-client --features fault-injection --example wordcount", pytrace=False)
    return path


def coordinator_of(port: int, transactional_id: str) -> int:
    """The node id FindCoordinator (v1, key type 1) names for a transactional id."""
    with wire.Conn(port) as conn:
        body = conn.request(10, 1, wire.string(transactional_id) + wire.i8(1))
    r = wire.Reader(body)
    r.i32()
    error = r.i16()
    r.string()
    node = r.i32()
    assert error == 0, f"FindCoordinator: error {error}"
    return node


class Feeder:
    """Produces lines of words (idempotent, acks=all) until stopped; counts what was acked."""

    def __init__(self, bootstrap: str, topic: str, seed: int):
        from confluent_kafka import Producer

        self.p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                           "message.timeout.ms": 120_000, "log_level": 0})
        self.topic, self.rng = topic, random.Random(seed)
        self.acked: Counter[str] = Counter()
        self.failed = 0
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop_flag.is_set():
            for _ in range(10):
                words = [self.rng.choice(WORDS) for _ in range(self.rng.randint(1, 5))]

                def done(err, _msg, words=words):
                    if err is None:
                        self.acked.update(words)
                    else:
                        self.failed += 1

                self.p.produce(self.topic, " ".join(words).encode(), on_delivery=done)
            self.p.poll(0.02)

    def stop(self) -> Counter[str]:
        self.stop_flag.set()
        self.thread.join()
        assert self.p.flush(120) == 0, "input not delivered"
        assert self.failed == 0, f"{self.failed} input lines failed"
        return self.acked


def start_app(bootstrap: str, in_topic: str, out_topic: str, group: str, ckpt: Path, log: Path):
    return subprocess.Popen(
        [wordcount_bin(), "--bootstrap-server", bootstrap, "--input", in_topic, "--output", out_topic,
         "--group", group, "--checkpoint-dir", str(ckpt), "--checkpoint-interval-ms", "300"],
        stdout=subprocess.DEVNULL, stderr=open(log, "ab"), env={**os.environ, "RUST_LOG": "info"})


def committed_words(bootstrap: str, topic: str) -> dict[str, list[int]]:
    """Every committed (word, count) of the output, in offset order per partition (a word's
    records share a partition: keyed by the word)."""
    out: dict[str, list[int]] = {}
    for m in read_committed(bootstrap, topic, PARTS):
        out.setdefault(m.key().decode(), []).append(int(m.value()))
    return out


@pytest.mark.timeout(420)
@pytest.mark.kafka_xfail("Kafka 4.4 advertises InitProducerId v6 (KIP-939) only among its unstable API versions; "
                         "with unstable.api.versions.enable it answers the two-phase-commit InitProducerId "
                         "UNSUPPORTED_VERSION")
def test_wordcount_is_exactly_once_when_the_transaction_coordinator_dies(cluster_factory, tmp_path):
    c = cluster_factory(overrides={"transaction.two.phase.commit.enable": "true"})
    in_topic, out_topic, group = unique_topic("eos-in"), unique_topic("eos-out"), unique_topic("eos-g")
    for t in (in_topic, out_topic):
        create(c.bootstrap, t, config={"min.insync.replicas": "2"})
    ckpt, log = tmp_path / "checkpoints", tmp_path / "wordcount.log"
    seed = int(os.environ.get("STRATA_EOS_SEED") or random.randrange(1 << 30))
    print(f"seed {seed} (STRATA_EOS_SEED={seed} repeats its timings)")
    rng = random.Random(seed)
    feeder = Feeder(c.bootstrap, in_topic, seed)
    app = start_app(c.bootstrap, in_topic, out_topic, group, ckpt, log)
    try:
        wait_until(lambda: sum(map(len, committed_words(c.bootstrap, out_topic).values())) > 0, 60,
                   "a first committed checkpoint")
        # The sink's transaction coordinator dies under the running job.
        coordinator = coordinator_of(c.nodes[0].port, f"{group}-sink")
        c.kill(coordinator)
        time.sleep(rng.uniform(0.5, 2.0))  # a random point while it is down
        assert app.poll() is None, f"wordcount died with the coordinator:\n{log.read_text()[-4000:]}"
        # The job is killed too, with its coordinator still down, then comes back.
        app.kill()
        app.wait()
        app = start_app(c.live_bootstrap(), in_topic, out_topic, group, ckpt, log)
        time.sleep(rng.uniform(1.0, 3.0))
        c.start_node(coordinator)
        # Once more, at a point after the coordinator is back.
        app.kill()
        app.wait()
        app = start_app(c.bootstrap, in_topic, out_topic, group, ckpt, log)
        time.sleep(rng.uniform(0.5, 2.0))
        expected = feeder.stop()
        total = sum(expected.values())

        def all_words_out() -> bool:
            if app.poll() is not None:  # the job failed: no point waiting for its output
                raise BrokerDied(f"wordcount exited ({app.returncode}):\n{log.read_text()[-6000:]}")
            return sum(map(len, committed_words(c.bootstrap, out_topic).values())) >= total

        try:
            wait_until(all_words_out, 180, f"all {total} words in the output")
        except TimeoutError as e:
            raise AssertionError(f"{e} (seed {seed}); the job's log ends:\n{log.read_text()[-6000:]}") from e
        app.terminate()
        assert app.wait(60) == 0, f"wordcount did not stop cleanly:\n{log.read_text()[-4000:]}"
    finally:
        if app.poll() is None:
            app.kill()
        if not feeder.stop_flag.is_set():
            feeder.stop_flag.set()

    wait_lso_caught_up(c.bootstrap, out_topic, PARTS, 60)
    output = committed_words(c.bootstrap, out_topic)
    for word, n in expected.items():
        assert output.get(word) == list(range(1, n + 1)), f"values of {word} (seed {seed})"
    assert set(output) == set(expected), "words in the output that were never produced"
