"""Shared helpers for the interop tests: deterministic records, one producer and one reader per
client library, and an exact comparison of what was written with what was read.

Every reader uses explicit partition assignment (no consumer group: Strata has none yet) and
returns `Got` tuples; `assert_records` checks byte equality, order and dense offsets.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from broker import wait_until  # noqa: F401  (re-exported for tests)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
JS_DIR = Path(__file__).parent / "js"


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


@dataclass
class Rec:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    timestamp: int | None = None  # ms; None lets the client choose
    partition: int | None = None


@dataclass
class Got:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    timestamp: int


def make_records(n: int, tag: str, *, seed: int = 1, text_only: bool = False, headers: bool = True,
                 partitions: int | None = None, timestamps: list[int] | None = None) -> list[Rec]:
    """`n` records with distinct keys, values and headers, deterministic for (`tag`, `seed`).

    Values mix a readable prefix, random bytes (incompressible) and a repeated run (compressible),
    so every codec has real work. `text_only` keeps keys/values/headers printable and free of tab
    and newline (for kcat's line-based input). `partitions` spreads records round-robin."""
    rnd = random.Random(f"{tag}/{seed}")
    out = []
    for i in range(n):
        key = f"{tag}-k-{i:08d}".encode()
        if text_only:
            payload = rnd.randbytes(rnd.randint(0, 32)).hex().encode()
        else:
            payload = rnd.randbytes(rnd.randint(0, 48))
        value = f"{tag}-v-{i}-".encode() + payload + b"abcdefgh" * rnd.randint(0, 12)
        hdrs = []
        if headers:
            hdrs = [("idx", str(i).encode()), ("tag", tag.encode())]
            if not text_only:
                hdrs.append(("bin", rnd.randbytes(4)))
        out.append(Rec(key, value, hdrs,
                       timestamp=None if timestamps is None else timestamps[i],
                       partition=None if partitions is None else i % partitions))
    return out


def by_partition(recs: list[Rec]) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = {}
    for r in recs:
        out.setdefault(r.partition or 0, []).append(r)
    return out


def assert_records(expected: list[Rec], got: list[Got], *, start_offset: int = 0, check_headers: bool = True,
                   check_timestamps: bool = False, what: str = "") -> None:
    """`got` holds exactly `expected`, in order, at offsets start_offset, start_offset+1, ..."""
    prefix = f"{what}: " if what else ""
    for i, (e, g) in enumerate(zip(expected, got)):
        problems = []
        if g.offset != start_offset + i:
            problems.append(f"offset {g.offset} != {start_offset + i}")
        if g.key != e.key:
            problems.append(f"key {g.key!r} != {e.key!r}")
        if g.value != e.value:
            problems.append(f"value {g.value!r} != {e.value!r}")
        if check_headers and list(g.headers) != list(e.headers):
            problems.append(f"headers {g.headers!r} != {e.headers!r}")
        if check_timestamps and e.timestamp is not None and g.timestamp != e.timestamp:
            problems.append(f"timestamp {g.timestamp} != {e.timestamp}")
        if problems:
            raise AssertionError(f"{prefix}record #{i} differs: " + "; ".join(problems))
    if len(got) != len(expected):
        raise AssertionError(f"{prefix}read {len(got)} records, expected {len(expected)}"
                             + (f"; first extra: {got[len(expected)]!r}" if len(got) > len(expected) else ""))


def _norm_headers(h) -> list[tuple[str, bytes]]:
    return [(k, bytes(v) if v is not None else None) for k, v in (h or [])]


# --------------------------------------------------------------------------------------------
# confluent-kafka (librdkafka)
# --------------------------------------------------------------------------------------------


def confluent_produce(bootstrap: str, topic: str, recs: list[Rec], *, codec: str = "none", acks="all",
                      extra: dict | None = None, timeout: float = 120.0) -> list[tuple[int, int]]:
    """Produces `recs` (to their partition, or partition 0) and returns [(partition, offset)] in
    input order. Fails on any delivery error."""
    from confluent_kafka import Producer

    conf = {
        "bootstrap.servers": bootstrap,
        "compression.type": codec,
        "acks": str(acks),
        "linger.ms": 5,
        "enable.idempotence": False,
        "max.in.flight.requests.per.connection": 1,
        "batch.size": 512 * 1024,
        "queue.buffering.max.messages": 200_000,
        "message.timeout.ms": int(timeout * 1000),
        "log_level": 4,
    }
    conf.update(extra or {})
    p = Producer(conf)
    results: list[tuple[int, int] | None] = [None] * len(recs)
    errors = []

    def cb_for(i):
        def cb(err, msg):
            if err is not None:
                errors.append((i, err))
            else:
                results[i] = (msg.partition(), msg.offset())
        return cb

    for i, r in enumerate(recs):
        kw = {"key": r.key, "value": r.value, "headers": r.headers or None, "on_delivery": cb_for(i),
              "partition": 0 if r.partition is None else r.partition}
        if r.timestamp is not None:
            kw["timestamp"] = r.timestamp
        while True:
            try:
                p.produce(topic, **kw)
                break
            except BufferError:
                p.poll(0.05)
        if i % 1000 == 0:
            p.poll(0)
    remaining = p.flush(timeout)
    assert remaining == 0, f"{remaining} messages still in flight after {timeout}s"
    assert not errors, f"{len(errors)} delivery errors, first: {errors[0]}"
    assert all(r is not None for r in results)
    return results  # type: ignore[return-value]


def confluent_read(bootstrap: str, topic: str, partition: int, count: int, *, start_offset: int = 0,
                   timeout: float = 60.0, extra: dict | None = None) -> list[Got]:
    """Reads `count` records from `start_offset` with assign(); fails if they do not arrive in time."""
    from confluent_kafka import Consumer, TopicPartition

    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": f"interop-{uuid.uuid4().hex[:8]}",  # required by the client; no group API is used
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
        "fetch.wait.max.ms": 100,
        "log_level": 4,
    }
    conf.update(extra or {})
    c = Consumer(conf)
    out: list[Got] = []
    try:
        c.assign([TopicPartition(topic, partition, start_offset)])
        deadline = time.monotonic() + timeout
        while len(out) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"confluent: read {len(out)} of {count} records from {topic}-{partition} "
                                     f"within {timeout}s")
            for m in c.consume(num_messages=min(10_000, count - len(out)), timeout=0.5):
                if m.error():
                    raise AssertionError(f"confluent consumer error: {m.error()}")
                out.append(Got(m.partition(), m.offset(), m.key(), m.value(), _norm_headers(m.headers()),
                               m.timestamp()[1]))
    finally:
        c.close()
    return out


def confluent_read_all(bootstrap: str, topic: str, partition: int, *, start_offset: int = 0,
                       timeout: float = 60.0) -> list[Got]:
    """Reads from `start_offset` up to the current high watermark."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"interop-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "log_level": 4})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        c.close()
    return confluent_read(bootstrap, topic, partition, max(0, high - start_offset),
                          start_offset=start_offset, timeout=timeout)


def watermarks(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    """(log start offset, high watermark) through ListOffsets (librdkafka)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"interop-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "log_level": 4})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
    finally:
        c.close()


def create_topic(bootstrap: str, topic: str, partitions: int = 1, config: dict | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    a = AdminClient({"bootstrap.servers": bootstrap})
    fut = a.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1,
                                    config=config or {})], operation_timeout=10)[topic]
    fut.result(timeout=30)
    wait_until(lambda: topic in a.list_topics(timeout=5).topics
               and len(a.list_topics(topic, timeout=5).topics[topic].partitions) == partitions,
               20, f"topic {topic} in metadata")


# --------------------------------------------------------------------------------------------
# kafka-python
# --------------------------------------------------------------------------------------------

KP_CODEC = {"none": None, "gzip": "gzip", "snappy": "snappy", "lz4": "lz4", "zstd": "zstd"}


def kafka_python_produce(bootstrap: str, topic: str, recs: list[Rec], *, codec: str = "none",
                         timeout: float = 120.0) -> list[tuple[int, int]]:
    from kafka import KafkaProducer

    # enable_idempotence=False: kafka-python 3 defaults to idempotence, which needs
    # InitProducerId, which Strata does not serve yet.
    p = KafkaProducer(bootstrap_servers=bootstrap, compression_type=KP_CODEC[codec], acks="all",
                      enable_idempotence=False, linger_ms=5, batch_size=256 * 1024,
                      max_in_flight_requests_per_connection=1, request_timeout_ms=30_000)
    try:
        futs = []
        for r in recs:
            futs.append(p.send(topic, key=r.key, value=r.value, headers=r.headers or None,
                               partition=0 if r.partition is None else r.partition, timestamp_ms=r.timestamp))
        p.flush(timeout=timeout)
        out = []
        for f in futs:
            md = f.get(timeout=timeout)
            out.append((md.partition, md.offset))
        return out
    finally:
        p.close(timeout=10)


def kafka_python_read(bootstrap: str, topic: str, partition: int, count: int, *, start_offset: int = 0,
                      timeout: float = 60.0) -> list[Got]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="none", fetch_max_wait_ms=100, max_partition_fetch_bytes=4 << 20)
    out: list[Got] = []
    try:
        tp = TopicPartition(topic, partition)
        c.assign([tp])
        c.seek(tp, start_offset)
        deadline = time.monotonic() + timeout
        while len(out) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"kafka-python: read {len(out)} of {count} within {timeout}s")
            for msgs in c.poll(timeout_ms=500, max_records=10_000).values():
                for m in msgs:
                    out.append(Got(m.partition, m.offset, m.key, m.value, _norm_headers(m.headers), m.timestamp))
    finally:
        c.close()
    return out


# --------------------------------------------------------------------------------------------
# aiokafka
# --------------------------------------------------------------------------------------------


def aiokafka_produce(bootstrap: str, topic: str, recs: list[Rec], *, codec: str = "none",
                     timeout: float = 120.0) -> list[tuple[int, int]]:
    from aiokafka import AIOKafkaProducer

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=KP_CODEC[codec], acks="all",
                             linger_ms=5, max_batch_size=256 * 1024, request_timeout_ms=30_000)
        await p.start()
        try:
            futs = []
            for r in recs:
                futs.append(await p.send(topic, key=r.key, value=r.value, headers=r.headers or None,
                                         partition=0 if r.partition is None else r.partition,
                                         timestamp_ms=r.timestamp))
            mds = await asyncio.wait_for(asyncio.gather(*futs), timeout)
            return [(md.partition, md.offset) for md in mds]
        finally:
            await p.stop()

    return asyncio.run(run())


def aiokafka_read(bootstrap: str, topic: str, partition: int, count: int, *, start_offset: int = 0,
                  timeout: float = 60.0) -> list[Got]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run():
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="none", fetch_max_wait_ms=100,
                             max_partition_fetch_bytes=4 << 20)
        await c.start()
        out: list[Got] = []
        try:
            tp = TopicPartition(topic, partition)
            c.assign([tp])
            c.seek(tp, start_offset)
            deadline = time.monotonic() + timeout
            while len(out) < count:
                if time.monotonic() > deadline:
                    raise AssertionError(f"aiokafka: read {len(out)} of {count} within {timeout}s")
                batches = await c.getmany(tp, timeout_ms=500, max_records=10_000)
                for msgs in batches.values():
                    for m in msgs:
                        out.append(Got(m.partition, m.offset, m.key, m.value, _norm_headers(m.headers),
                                       m.timestamp))
        finally:
            await c.stop()
        return out

    return asyncio.run(run())


# --------------------------------------------------------------------------------------------
# kafkajs (through tests/interop/js/driver.js)
# --------------------------------------------------------------------------------------------


def _b64(b: bytes | None):
    return None if b is None else base64.b64encode(b).decode()


def _unb64(s):
    return None if s is None else base64.b64decode(s)


def _node(args: list[str], timeout: float) -> str:
    node = shutil.which("node")
    assert node, "node not found on PATH"
    assert (JS_DIR / "node_modules" / "kafkajs").is_dir(), \
        f"kafkajs not installed: run `npm ci` in {JS_DIR} (scripts/test.sh does)"
    p = subprocess.run([node, str(JS_DIR / "driver.js"), *args], capture_output=True, text=True,
                       timeout=timeout, env={"KAFKAJS_NO_PARTITIONER_WARNING": "1", "PATH": "/usr/bin:/bin"})
    if p.returncode != 0:
        raise AssertionError(f"kafkajs driver {args[0]} failed ({p.returncode}):\n{p.stderr[-4000:]}")
    return p.stdout


def kafkajs_produce(bootstrap: str, topic: str, recs: list[Rec], workdir: Path, *, codec: str = "none",
                    acks: int = -1, timeout: float = 180.0) -> dict:
    path = workdir / f"kafkajs-in-{uuid.uuid4().hex[:6]}.jsonl"
    with open(path, "w") as f:
        for r in recs:
            f.write(json.dumps({"k": _b64(r.key), "v": _b64(r.value),
                                "h": [[k, _b64(v)] for k, v in r.headers],
                                "p": 0 if r.partition is None else r.partition, "ts": r.timestamp}) + "\n")
    out = json.loads(_node(["produce", bootstrap, topic, codec, str(path), str(acks)], timeout).strip().splitlines()[-1])
    bad = [r for r in out["results"] if r["err"] != 0]
    assert not bad, f"kafkajs produce errors: {bad[:5]}"
    return out


def kafkajs_read(bootstrap: str, topic: str, partition: int, count: int, workdir: Path, *,
                 start_offset: int = 0, timeout: float = 120.0) -> list[Got]:
    path = workdir / f"kafkajs-out-{uuid.uuid4().hex[:6]}.jsonl"
    _node(["consume", bootstrap, topic, str(partition), str(count), str(path), str(start_offset),
           str(int(timeout * 1000))], timeout + 15)
    out = []
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            out.append(Got(d["p"], d["o"], _unb64(d["k"]), _unb64(d["v"]),
                           [(k, _unb64(v)) for k, v in d["h"]], d["ts"]))
    return out


def kafkajs_offsets(bootstrap: str, topic: str, timestamp: int | None = None) -> dict:
    args = ["offsets", bootstrap, topic] + ([str(timestamp)] if timestamp is not None else [])
    return json.loads(_node(args, 60).strip().splitlines()[-1])


def kafkajs_reassign(bootstrap: str, topic: str, partition: int, replicas: list[int]) -> dict:
    """Starts moving `topic`-`partition` to `replicas` with kafkajs's admin client; returns what
    its listPartitionReassignments answered right after."""
    args = ["reassign", bootstrap, topic, str(partition), ",".join(map(str, replicas))]
    return json.loads(_node(args, 90).strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------
# kcat
# --------------------------------------------------------------------------------------------

KCAT_HEADERS = [("src", b"kcat"), ("run", b"interop")]


def kcat_bin() -> str:
    k = shutil.which("kcat")
    assert k, "kcat not found on PATH (scripts/test.sh installs it with apt-get)"
    return k


def kcat_produce(bootstrap: str, topic: str, recs: list[Rec], *, codec: str = "none", partition: int = 0,
                 timeout: float = 120.0) -> None:
    """kcat -P: one line per record, key and value split by a tab. kcat applies the same -H
    headers to every record, so records must carry KCAT_HEADERS; keys/values must be text."""
    lines = []
    for r in recs:
        assert r.headers == KCAT_HEADERS, "kcat records must carry exactly KCAT_HEADERS"
        assert b"\t" not in r.key + r.value and b"\n" not in r.key + r.value
        lines.append(r.key + b"\t" + r.value)
    args = [kcat_bin(), "-P", "-b", bootstrap, "-t", topic, "-p", str(partition), "-K", "\t",
            "-X", "acks=all", "-X", "linger.ms=5", "-X", "enable.idempotence=false"]
    if codec != "none":
        args += ["-z", codec]
    for k, v in KCAT_HEADERS:
        args += ["-H", f"{k}={v.decode()}"]
    p = subprocess.run(args, input=b"\n".join(lines) + b"\n", capture_output=True, timeout=timeout)
    assert p.returncode == 0, f"kcat -P failed ({p.returncode}): {p.stderr.decode(errors='replace')[-3000:]}"
    assert b"Delivery failed" not in p.stderr, p.stderr.decode(errors="replace")[-3000:]


def kcat_read(bootstrap: str, topic: str, partition: int, count: int, *, start_offset: int = 0,
              timeout: float = 120.0, with_headers: bool = True) -> list[Got]:
    """kcat -C with a length-prefixed output format, so keys and values are read byte-exact.
    With `with_headers`, headers are printed after the value as name=value,... up to the newline
    and parsed back (text headers without ',', '=' or newlines only); without, they are not read."""
    fmt = "%o %T %K %S|%k%s" + ("%h" if with_headers else "") + "\\n"
    args = [kcat_bin(), "-C", "-b", bootstrap, "-t", topic, "-p", str(partition), "-o", str(start_offset),
            "-c", str(count), "-e", "-q", "-f", fmt, "-X", "fetch.wait.max.ms=100"]
    p = subprocess.run(args, capture_output=True, timeout=timeout)
    assert p.returncode == 0, f"kcat -C failed ({p.returncode}): {p.stderr.decode(errors='replace')[-3000:]}"
    data = p.stdout
    out, pos = [], 0
    while pos < len(data):
        bar = data.index(b"|", pos)
        off_s, ts_s, klen_s, vlen_s = data[pos:bar].decode().split(" ")
        klen, vlen = int(klen_s), int(vlen_s)
        pos = bar + 1
        key = None if klen < 0 else data[pos:pos + klen]
        pos += max(klen, 0)
        value = None if vlen < 0 else data[pos:pos + vlen]
        pos += max(vlen, 0)
        eol = data.index(b"\n", pos)
        hdr_s = data[pos:eol].decode()
        assert with_headers or not hdr_s, f"kcat output framing lost at byte {pos}"
        pos = eol + 1
        headers = []
        if hdr_s:
            for kv in hdr_s.split(","):
                k, _, v = kv.partition("=")
                headers.append((k, v.encode()))
        out.append(Got(partition, int(off_s), key, value, headers, int(ts_s)))
    return out


def stop_processes(procs) -> None:
    """SIGTERM each helper process (a Prometheus or Burrow server), SIGKILL what does not
    exit within 10 s."""
    for p in procs:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
