"""A consume-transform-produce application with exactly-once output, as its own process so the
transaction tests can SIGKILL it at any point and start it again.

    python txn_ctp.py '<json config>'

Config: lib (confluent | kafka-python), bootstrap, in_topic, out_topic, group, tid
(transactional id), instance_id (static membership, so a restart takes over at once),
session_timeout_ms, max_records; optionally dwell_ms (a random pause of up to that long inside
every transaction, between producing and sending the offsets), abort_ratio (confluent: the share of
transactions aborted on purpose after their offsets were sent, then rewound and done again),
max_aborts (aborts in a row before it gives up, default 5), debug and consumer_debug
(librdkafka debug contexts for the producer and the consumer, logged to stderr).

It first initializes its transactional producer (fencing any previous instance and completing or
aborting its transaction), then joins the group with read_committed and, for every batch it
polls: begins a transaction, copies each record's value to the same partition of `out_topic`,
adds the next input offsets to the transaction (send_offsets_to_transaction) and commits. If a
transaction fails with an abortable error it aborts and rewinds to the batch's first offsets; after
a fatal error it replaces the producer (and rewinds); a fatal consumer error, any other error, or
five aborts in a row, ends the process with a non-zero code.

Output, JSON lines with `t` = time.monotonic():
  {"ev": "start"} {"ev": "assign", "parts": [..]} {"ev": "begin", "n": n}
  {"ev": "produced", "n": n, "count": k} {"ev": "offsets", "n": n}
  {"ev": "committed", "n": n, "offsets": {"p": next}} {"ev": "aborted", "n": n, "err": ".."}
  {"ev": "idle", "parts": [[p, position], ..], "errors": [..]} (confluent: nothing consumed for 3 s)
  {"ev": "renew", "purged": k} (confluent: an abort purged records; a new producer takes over)
  {"ev": "closed"}
"""

from __future__ import annotations

import json
import logging
import random
import signal
import sys
import threading
import time

CONF = json.loads(sys.argv[1])
STOP = False


def out(ev: str, **kw) -> None:
    kw.update(ev=ev, t=time.monotonic())
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


def dwell() -> None:
    """Stays inside the open transaction for a random while (up to dwell_ms): the transaction
    then lasts long enough for a test to see it open and kill the process inside it, and the
    application's cycle is not so regular that a test polling its output keeps missing that."""
    if CONF.get("dwell_ms"):
        time.sleep(random.uniform(0, CONF["dwell_ms"]) / 1000)


def on_term(*_):
    global STOP
    STOP = True


def run_confluent() -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

    def retrying(call, attempts: int = 10) -> None:
        """Repeats a transactional call that failed retriably (a coordinator connection lost
        mid-request), as confluent-kafka documents; an abortable or fatal error propagates."""
        for attempt in range(attempts):
            try:
                return call()
            except KafkaException as e:
                err = e.args[0]
                if attempt + 1 == attempts or not err.retriable() or err.txn_requires_abort():
                    raise
                out("retry", err=str(err))

    class Stuck(Exception):
        """A transactional call outlived its own timeout (librdkafka #5511: after the group
        coordinator's broker is decommissioned, send_offsets_to_transaction can hang)."""

    def bounded(call, timeout: float):
        """Runs `call` in a thread; a call still running `timeout` + 5 s later is abandoned
        (its producer is replaced, which fences it) and Stuck is raised."""
        result: dict = {}

        def run():
            try:
                result["ok"] = call()
            except BaseException as e:  # handed to the caller
                result["err"] = e

        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(timeout + 5)
        if t.is_alive():
            raise Stuck(f"call still running {timeout + 5:.0f}s after it started")
        if "err" in result:
            raise result["err"]
        return result.get("ok")

    def new_producer():
        # metadata.recovery.strategy=none: a broker that leaves the metadata (fenced after a
        # kill, as Kafka's controller drops it too) is otherwise decommissioned by librdkafka
        # 2.x while still cached as group coordinator, and send_offsets_to_transaction then
        # hangs past its timeout (librdkafka issues #5511 and #5456).
        producer = Producer({"bootstrap.servers": CONF["bootstrap"], "transactional.id": CONF["tid"],
                             "transaction.timeout.ms": 10_000, "linger.ms": 2, "log_level": 3,
                             "metadata.recovery.strategy": "none",
                             **({"debug": CONF["debug"], "log_level": 7} if CONF.get("debug") else {})})
        producer.init_transactions(60)
        return producer

    # librdkafka 2.16 gives the records after a batch purged by abort_transaction() that batch's
    # sequence numbers, without an epoch bump; if the purged batch had been written (it waited
    # for a retry after NOT_ENOUGH_REPLICAS_AFTER_APPEND or a timeout), the next transaction's
    # batch is taken for its retry and not written, and that transaction commits without it
    # (tests/interop/test_txn_abort_in_doubt.py; Apache Kafka loses it too). So after an abort
    # that purged anything, a new producer (a new epoch) takes over.
    PURGED: list = []

    def on_delivery(err, _msg):
        if err is not None and err.code() == KafkaError._PURGE_QUEUE:
            PURGED.append(1)

    def renewed_if_purged(producer):
        producer.poll(0)  # delivery reports of the purged records
        if not PURGED:
            return producer
        out("renew", purged=len(PURGED))
        PURGED.clear()
        return new_producer()

    p = new_producer()
    out("start")
    # A fatal consumer error (a static member fenced) may come as a consumed error message or to
    # error_cb with code _FATAL, but confluent-kafka 2.16 delivered it by neither in the harsh
    # nemesis runs: only librdkafka's level-0 FATAL log line said so. All three are watched.
    CONSUMER_FATAL: list = []

    def is_fatal(e) -> bool:
        return e.fatal() or e.code() == KafkaError._FATAL

    class FatalLog(logging.Handler):
        """Passes librdkafka's log lines on to stderr and notes a FATAL one."""

        def emit(self, record: logging.LogRecord) -> None:
            line = record.getMessage()
            sys.stderr.write(f"{time.time():.3f} {record.levelname} {line}\n")
            if record.levelno >= logging.CRITICAL or line.startswith("FATAL "):
                CONSUMER_FATAL.append(line)

    log = logging.getLogger("consumer")
    log.propagate = False
    log.setLevel(logging.DEBUG)
    log.addHandler(FatalLog())
    c = Consumer({"bootstrap.servers": CONF["bootstrap"], "group.id": CONF["group"],
                  "error_cb": lambda e: CONSUMER_FATAL.append(e) if is_fatal(e) else None,
                  "logger": log,
                  "group.instance.id": CONF["instance_id"], "session.timeout.ms": CONF["session_timeout_ms"],
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100, "log_level": 3,
                  **({"debug": CONF["consumer_debug"], "log_level": 7} if CONF.get("consumer_debug") else {})})
    c.subscribe([CONF["in_topic"]], on_assign=lambda _c, ps: out("assign", parts=sorted(x.partition for x in ps)))
    n = aborts = 0
    idle_since = time.monotonic()
    while not STOP:
        got = c.consume(CONF["max_records"], timeout=0.2)
        msgs = [m for m in got if not m.error()]
        fatal = CONSUMER_FATAL + [m.error() for m in got if m.error() and is_fatal(m.error())]
        if fatal:
            # The consumer is unusable (a static member fenced: FENCED_INSTANCE_ID after its
            # coordinator failed over, as against Kafka): end, so a supervisor starts it again.
            out("idle", parts=[], errors=[str(e) for e in fatal][:3])
            sys.exit(f"fatal consumer error: {fatal[0]}")
        if not msgs:
            if time.monotonic() - idle_since > 3:
                # Nothing for a while: say what the consumer holds, for a stalled test's report.
                held = c.assignment()
                out("idle", parts=[(x.partition, x.offset) for x in c.position(held)] if held else [],
                    errors=[str(m.error()) for m in got][:3])
                idle_since = time.monotonic()
            continue
        idle_since = time.monotonic()
        first, nxt = {}, {}
        for m in msgs:
            first.setdefault(m.partition(), m.offset())
            nxt[m.partition()] = m.offset() + 1
        try:
            p.begin_transaction()
            out("begin", n=n)
            PURGED.clear()
            for m in msgs:
                p.produce(CONF["out_topic"], value=m.value(), partition=m.partition(), on_delivery=on_delivery)
            out("produced", n=n, count=len(msgs))
            dwell()
            offsets = [TopicPartition(CONF["in_topic"], q, o) for q, o in nxt.items()]
            # Asked once per transaction, not per attempt: the call waits on the consumer's own
            # thread without a timeout.
            group = c.consumer_group_metadata()
            retrying(lambda: bounded(lambda: p.send_offsets_to_transaction(offsets, group, 30), 30))
            out("offsets", n=n)
            if random.random() < CONF.get("abort_ratio", 0.0):
                p.abort_transaction(30)
                p = renewed_if_purged(p)
                out("aborted", n=n, err="on purpose", fatal=False)
                for q, o in first.items():
                    c.seek(TopicPartition(CONF["in_topic"], q, o))
                continue
            retrying(lambda: p.commit_transaction(30))
            out("committed", n=n, offsets={str(q): o for q, o in nxt.items()})
        except Stuck as e:
            # As after a fatal error: a new producer fences the stuck one and aborts its
            # transaction.
            p = new_producer()
            out("aborted", n=n, err=str(e), fatal=True)
            aborts += 1
            if aborts >= CONF.get("max_aborts", 5):
                sys.exit(f"{aborts} transactions in a row aborted, last: {e}")
            for q, o in first.items():
                c.seek(TopicPartition(CONF["in_topic"], q, o))
            continue
        except KafkaException as e:
            err = e.args[0]
            if not (err.fatal() or err.txn_requires_abort()):
                raise
            if not err.fatal():
                try:
                    p.abort_transaction(30)
                    p = renewed_if_purged(p)
                except KafkaException as abort_error:
                    err = abort_error.args[0]
                    if not err.fatal():
                        raise
            if err.fatal():
                # The producer is unusable (for example its coordinator died with an
                # AddPartitionsToTxn in flight, and the next one answers the abort with
                # INVALID_TXN_STATE, as Kafka's does): as confluent-kafka documents, a new
                # producer takes over; its init_transactions aborts whatever was left open.
                p = new_producer()
            out("aborted", n=n, err=str(err), fatal=err.fatal())
            aborts += 1
            if aborts >= CONF.get("max_aborts", 5):
                sys.exit(f"{aborts} transactions in a row aborted, last: {err}")
            for q, o in first.items():
                c.seek(TopicPartition(CONF["in_topic"], q, o))
            continue
        finally:
            n += 1
        aborts = 0
    c.close()
    out("closed")


def run_kafka_python() -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            pass

        def on_partitions_assigned(self, assigned):
            out("assign", parts=sorted(tp.partition for tp in assigned))

    p = KafkaProducer(bootstrap_servers=CONF["bootstrap"], transactional_id=CONF["tid"],
                      transaction_timeout_ms=10_000, linger_ms=2)
    p.init_transactions()
    out("start")
    c = KafkaConsumer(bootstrap_servers=CONF["bootstrap"], group_id=CONF["group"],
                      group_instance_id=CONF["instance_id"], session_timeout_ms=CONF["session_timeout_ms"],
                      isolation_level="read_committed", enable_auto_commit=False, auto_offset_reset="earliest",
                      fetch_max_wait_ms=100)
    c.subscribe([CONF["in_topic"]], listener=Listener())
    n = 0
    while not STOP:
        # A long poll timeout: see apps/group_consumer.py (kafka-python 3.0.12 join race).
        batches = c.poll(timeout_ms=3000, max_records=CONF["max_records"])
        msgs = [m for ms in batches.values() for m in ms]
        if not msgs:
            continue
        nxt = {}
        for m in msgs:
            nxt[m.partition] = m.offset + 1
        p.begin_transaction()
        out("begin", n=n)
        for m in msgs:
            p.send(CONF["out_topic"], value=m.value, partition=m.partition)
        out("produced", n=n, count=len(msgs))
        dwell()
        p.send_offsets_to_transaction(
            {TopicPartition(CONF["in_topic"], q): OffsetAndMetadata(o, "", -1) for q, o in nxt.items()},
            c.group_metadata())
        out("offsets", n=n)
        p.commit_transaction()
        out("committed", n=n, offsets={str(q): o for q, o in nxt.items()})
        n += 1
    c.close()
    p.close()
    out("closed")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, on_term)
    if CONF.get("debug"):
        # A stalled run then shows in its stderr where every thread of the application waits.
        import faulthandler
        faulthandler.dump_traceback_later(45, repeat=True)
    {"confluent": run_confluent, "kafka-python": run_kafka_python}[CONF["lib"]]()
