"""A consumer-group member for the interop tests, as a separate process (so a test can SIGKILL it).

    python group_consumer.py '<json config>'

Config: lib (confluent | kafka-python | aiokafka), bootstrap, topic, group, session_timeout_ms,
heartbeat_interval_ms, instance_id (optional: static membership), max_records, commit_every_ms.

It subscribes to `topic`, and for every batch it polls: prints one line per record, then (after
every batch, or once `commit_every_ms` passed since its last commit) commits the next offset of
every partition it processed synchronously, printing the offsets before ("committing") and after
("commit", or "commit_err"). So every record printed before the last printed commit of its
partition is committed, and a record can only be delivered again (to anyone) if it came after
that commit. Offsets not yet committed are dropped at a rebalance (they may be redelivered).

Output, one JSON object per line on stdout, flushed at once, `t` = time.monotonic() (the system's
CLOCK_MONOTONIC, comparable across processes):
  {"ev": "start"} | {"ev": "assign", "parts": [..], "s": session} | {"ev": "revoke", "parts": [..]}
  {"ev": "rec", "p": partition, "o": offset, "v": value, "s": session}
  {"ev": "committing", "offsets": {"p": next_offset}} then {"ev": "commit", "offsets": {..}}
  or {"ev": "commit_err", "err": "..."}
  {"ev": "closed"}  (after SIGTERM: the consumer closed cleanly, leaving the group if dynamic)
`s` counts assignments: a new session starts at every assignment.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time

CONF = json.loads(sys.argv[1])
STOP = False
SESSION = 0
PENDING: dict = {}  # partition key -> next offset processed but not committed
LAST_COMMIT = [0.0]


def out(ev: str, **kw) -> None:
    kw.update(ev=ev, t=time.monotonic())
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


def on_term(*_):
    global STOP
    STOP = True


def new_session(parts) -> None:
    global SESSION
    SESSION += 1
    PENDING.clear()
    out("assign", parts=sorted(parts), s=SESSION)


def revoked(parts) -> None:
    PENDING.clear()
    out("revoke", parts=sorted(parts))


def commit_due() -> bool:
    """Whether the processed offsets should be committed now."""
    if not PENDING:
        return False
    now = time.monotonic()
    if now - LAST_COMMIT[0] < CONF.get("commit_every_ms", 0) / 1000:
        return False
    LAST_COMMIT[0] = now
    return True




def run_confluent() -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    conf = {
        "bootstrap.servers": CONF["bootstrap"],
        "group.id": CONF["group"],
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": CONF["session_timeout_ms"],
        "heartbeat.interval.ms": CONF["heartbeat_interval_ms"],
        "partition.assignment.strategy": "range",
        "fetch.wait.max.ms": 100,
        "log_level": 3,
    }
    if CONF.get("instance_id"):
        conf["group.instance.id"] = CONF["instance_id"]
    c = Consumer(conf)
    c.subscribe([CONF["topic"]],
                on_assign=lambda _c, ps: new_session([p.partition for p in ps]),
                on_revoke=lambda _c, ps: revoked([p.partition for p in ps]))
    out("start")
    while not STOP:
        msgs = c.consume(num_messages=CONF["max_records"], timeout=0.2)
        for m in msgs:
            if m.error():
                out("error", err=str(m.error()))
                continue
            out("rec", p=m.partition(), o=m.offset(), v=m.value().decode(), s=SESSION)
            PENDING[m.partition()] = m.offset() + 1
        if commit_due():
            nxt = dict(PENDING)
            PENDING.clear()
            out("committing", offsets={str(p): o for p, o in nxt.items()})
            try:
                c.commit(offsets=[TopicPartition(CONF["topic"], p, o) for p, o in nxt.items()], asynchronous=False)
                out("commit", offsets={str(p): o for p, o in nxt.items()})
            except KafkaException as e:
                out("commit_err", err=str(e))
    c.close()
    out("closed")


def run_kafka_python() -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.errors import KafkaError

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, tps):
            revoked([tp.partition for tp in tps])

        def on_partitions_assigned(self, assigned):
            new_session([tp.partition for tp in assigned])

    kw = dict(bootstrap_servers=CONF["bootstrap"], group_id=CONF["group"], enable_auto_commit=False,
              auto_offset_reset="earliest", session_timeout_ms=CONF["session_timeout_ms"],
              heartbeat_interval_ms=CONF["heartbeat_interval_ms"], fetch_max_wait_ms=100)
    if CONF.get("instance_id"):
        kw["group_instance_id"] = CONF["instance_id"]
    c = KafkaConsumer(**kw)
    c.subscribe([CONF["topic"]], listener=Listener())
    out("start")
    while not STOP:
        # A long poll timeout works around a kafka-python 3.0.12 race: right after its first join
        # the leader rejoins because its metadata snapshot changed, and if a poll() times out
        # between that JoinGroup's answer and the SyncGroup's, the finished join is dropped
        # (need_rejoin() has turned False): no assignment and no heartbeats ever after, until
        # its session expires. poll() returns as soon as records arrive anyway.
        batches = c.poll(timeout_ms=3000, max_records=CONF["max_records"])
        for tp, msgs in batches.items():
            for m in msgs:
                out("rec", p=m.partition, o=m.offset, v=m.value.decode(), s=SESSION)
                PENDING[tp] = m.offset + 1
        if commit_due():
            nxt = dict(PENDING)
            PENDING.clear()
            out("committing", offsets={str(tp.partition): o for tp, o in nxt.items()})
            try:
                c.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in nxt.items()})
                out("commit", offsets={str(tp.partition): o for tp, o in nxt.items()})
            except KafkaError as e:
                out("commit_err", err=repr(e))
    c.close()
    out("closed")


def run_aiokafka() -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.errors import KafkaError

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, tps):
            revoked([tp.partition for tp in tps])

        async def on_partitions_assigned(self, assigned):
            new_session([tp.partition for tp in assigned])

    async def main():
        kw = dict(bootstrap_servers=CONF["bootstrap"], group_id=CONF["group"], enable_auto_commit=False,
                  auto_offset_reset="earliest", session_timeout_ms=CONF["session_timeout_ms"],
                  heartbeat_interval_ms=CONF["heartbeat_interval_ms"], fetch_max_wait_ms=100)
        if CONF.get("instance_id"):
            kw["group_instance_id"] = CONF["instance_id"]
        c = AIOKafkaConsumer(**kw)
        c.subscribe([CONF["topic"]], listener=Listener())
        await c.start()
        out("start")
        try:
            while not STOP:
                batches = await c.getmany(timeout_ms=200, max_records=CONF["max_records"])
                for tp, msgs in batches.items():
                    for m in msgs:
                        out("rec", p=m.partition, o=m.offset, v=m.value.decode(), s=SESSION)
                        PENDING[tp] = m.offset + 1
                if commit_due():
                    nxt = dict(PENDING)
                    PENDING.clear()
                    out("committing", offsets={str(tp.partition): o for tp, o in nxt.items()})
                    try:
                        await c.commit(nxt)
                        out("commit", offsets={str(tp.partition): o for tp, o in nxt.items()})
                    except KafkaError as e:
                        out("commit_err", err=repr(e))
        finally:
            await c.stop()
        out("closed")

    asyncio.run(main())


if __name__ == "__main__":
    import logging

    logging.basicConfig(stream=sys.stderr, level=CONF.get("log_level", "WARNING"),
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    signal.signal(signal.SIGTERM, on_term)
    {"confluent": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka}[CONF["lib"]]()
