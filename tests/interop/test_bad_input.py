"""Malformed input on raw sockets (frames packed by hand with struct, see wire.py).

Proves the broker survives and stays correct after: garbage bytes, an HTTP request, a 2 GiB
length prefix (without allocating it), negative lengths, a truncated frame followed by close, a
frame with an unknown API key, a request body shorter than its own fields claim, ApiVersions at an
unknown version (answered with a v0-encoded body, error UNSUPPORTED_VERSION 35 and the API list,
on a connection that stays usable), and Produce batches that are corrupt (bad CRC-32C: partition
error CORRUPT_MESSAGE 2; inconsistent lengths/counts: CORRUPT_MESSAGE 2 or INVALID_RECORD 87), none
of which is appended. After every bad input the broker still answers ApiVersions on a new
connection and every previously acknowledged record reads back intact.
"""

from __future__ import annotations

import os
import random
import socket
import struct

import pytest

import util
import wire
from util import assert_records

pytestmark = pytest.mark.timeout(90)

CLOSE_TIMEOUT_S = 10.0
INVALID_RECORD = 87


@pytest.fixture
def seeded(broker):
    """The broker with a topic holding 500 acknowledged records."""
    topic = util.unique_topic("bad")
    util.create_topic(broker.bootstrap, topic)
    recs = util.make_records(500, topic)
    util.confluent_produce(broker.bootstrap, topic, recs, codec="gzip")
    return broker, topic, recs


def assert_healthy(broker, topic, recs):
    broker.assert_alive()
    with wire.Conn(broker.port) as c:
        av = wire.api_versions(c, 0)
        assert av.error_code == 0 and wire.PRODUCE in av.apis
    got = util.confluent_read(broker.bootstrap, topic, 0, len(recs), timeout=30)
    assert_records(recs, got, what="acknowledged records after bad input")
    assert util.watermarks(broker.bootstrap, topic) == (0, len(recs)), "something was appended"


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def send_and_expect_close(broker, payload: bytes, what: str) -> None:
    with wire.Conn(broker.port) as c:
        try:
            c.send_raw(payload)
        except (BrokenPipeError, ConnectionResetError):
            return  # closed while we were still sending: fine
        assert c.closed_by_peer(CLOSE_TIMEOUT_S), f"{what}: connection still open after {CLOSE_TIMEOUT_S}s"


@pytest.mark.parametrize("kind", ["random", "http", "zeros", "small_len_garbage"])
def test_garbage_bytes(seeded, kind):
    broker, topic, recs = seeded
    rnd = random.Random(kind)
    payload = {
        "random": rnd.randbytes(4096),
        "http": b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",  # length prefix 0x47455420 (~1.2 GB)
        "zeros": b"\x00" * 64,  # a zero-length frame, then more: too short for any header
        # A plausible length, then an unknown api key and random bytes.
        "small_len_garbage": struct.pack(">i", 40) + b"\x7a\x7a" + rnd.randbytes(38),
    }[kind]
    if kind == "random":
        payload = struct.pack(">i", 1 << 20) + payload  # plausible length, garbage inside, then short
        with wire.Conn(broker.port) as c:
            c.send_raw(payload)
            # The frame is incomplete: the broker may wait for more. Closing must not hurt it.
    else:
        send_and_expect_close(broker, payload, kind)
    assert_healthy(broker, topic, recs)


@pytest.mark.parametrize("length", [0x7FFFFFFF, 0x40000000, 200 << 20])
def test_huge_length_prefix_is_not_allocated(seeded, length):
    """A length prefix far above socket.request.max.bytes (100 MiB by default) closes the
    connection at once; the broker does not allocate (or wait for) that many bytes."""
    broker, topic, recs = seeded
    before = rss_bytes(broker.proc.pid)
    send_and_expect_close(broker, struct.pack(">i", length) + b"\x00\x12\x00\x00" + b"x" * 64,
                          f"length {length}")
    grew = rss_bytes(broker.proc.pid) - before
    assert grew < 64 << 20, f"broker RSS grew by {grew >> 20} MiB after a {length}-byte length prefix"
    assert_healthy(broker, topic, recs)


@pytest.mark.parametrize("length", [-1, -2147483648, -100])
def test_negative_length_prefix(seeded, length):
    broker, topic, recs = seeded
    send_and_expect_close(broker, struct.pack(">i", length) + b"\x00" * 16, f"length {length}")
    assert_healthy(broker, topic, recs)


def test_truncated_frame_then_close(seeded):
    """Half a valid Produce frame, then the client goes away."""
    broker, topic, recs = seeded
    body = wire.produce_v3_body(topic, 0, wire.record_batch([(b"k", b"never", [])]))
    frame = wire.Conn.header(wire.PRODUCE, 3, 1, False) + body
    full = wire.i32(len(frame)) + frame
    for cut in (2, 4, 7, len(full) // 2, len(full) - 1):
        with wire.Conn(broker.port) as c:
            c.send_raw(full[:cut])
    # And one where the length is honest but the client stops mid-way and shuts down writing.
    s = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
    s.sendall(full[: len(full) - 10])
    s.shutdown(socket.SHUT_WR)
    s.settimeout(CLOSE_TIMEOUT_S)
    try:
        assert s.recv(1) == b"", "broker answered a truncated frame"
    except ConnectionResetError:
        pass
    finally:
        s.close()
    assert_healthy(broker, topic, recs)


@pytest.mark.parametrize("api_key,version", [(9999, 0), (-1, 0), (0, 999), (3, 999)],
                         ids=["key9999", "key-1", "produce-v999", "metadata-v999"])
def test_unknown_api_key_or_version(seeded, api_key, version):
    """Unknown API key, or a known one at a version nobody supports: the broker closes the
    connection or answers (correlated) with an error; either way it keeps serving others."""
    broker, topic, recs = seeded
    with wire.Conn(broker.port) as c:
        corr = c.send_request(api_key, version, b"\x00" * 16)
        c.sock.settimeout(CLOSE_TIMEOUT_S)
        try:
            resp = c.recv_frame()
        except (ConnectionError, ConnectionResetError):
            resp = None  # closed: fine
        except socket.timeout:
            pytest.fail("broker neither answered nor closed the connection")
        if resp is not None:
            assert struct.unpack(">i", resp[:4])[0] == corr, "response to an unknown request has the wrong correlation id"
    assert_healthy(broker, topic, recs)


def test_body_shorter_than_its_fields(seeded):
    """Metadata v1 claiming 1000 topics and carrying none; Produce v3 whose records field claims
    1 MiB but holds 10 bytes. Error or close, no crash, no huge allocation."""
    broker, topic, recs = seeded
    for api, ver, body in [
        (wire.METADATA, 1, wire.i32(1000)),
        (wire.PRODUCE, 3, wire.string(None) + wire.i16(-1) + wire.i32(1000) + wire.i32(1) + wire.string(topic)
         + wire.i32(1) + wire.i32(0) + wire.i32(1 << 20) + b"0123456789"),
    ]:
        with wire.Conn(broker.port) as c:
            corr = c.send_request(api, ver, body)
            c.sock.settimeout(CLOSE_TIMEOUT_S)
            try:
                resp = c.recv_frame()
                assert struct.unpack(">i", resp[:4])[0] == corr
            except (ConnectionError, ConnectionResetError):
                pass
            except socket.timeout:
                pytest.fail(f"api {api}: broker neither answered nor closed")
    assert_healthy(broker, topic, recs)


def test_api_versions_unsupported_version(seeded):
    """KIP-511: ApiVersions at an unknown version gets a v0-encoded body with UNSUPPORTED_VERSION
    (35) and at least ApiVersions' own range (response header v0; Apache Kafka 4.4 lists only
    that one, Strata lists every API), and the client may retry on the same connection at a
    version both know, which lists every API."""
    broker, topic, recs = seeded
    with wire.Conn(broker.port) as c:
        body = wire.compact_string("strata-interop") + wire.compact_string("0.1") + b"\x00"
        resp = c.request(wire.API_VERSIONS, 99, body, flexible=True)
        av = wire.decode_api_versions(resp, 0)  # must decode exactly as v0, no trailing bytes
        assert av.error_code == wire.UNSUPPORTED_VERSION
        assert wire.API_VERSIONS in av.apis
        lo, hi = av.apis[wire.API_VERSIONS]
        assert lo == 0 and hi >= 3
        v3 = wire.api_versions(c, 3)
        assert v3.error_code == 0 and wire.PRODUCE in v3.apis and wire.FETCH in v3.apis, v3
        # What the error answer lists agrees with the full answer.
        assert {k: v3.apis.get(k) for k in av.apis} == av.apis, (av.apis, v3.apis)
        assert wire.api_versions(c, 0).apis == v3.apis
    assert_healthy(broker, topic, recs)


def _valid_batch(n: int = 3) -> bytes:
    return wire.record_batch([(f"raw-{i}".encode(), f"value-{i}".encode() * 3, [("h", b"x")]) for i in range(n)])


def test_raw_valid_produce_is_acknowledged(seeded):
    """Sanity check of the hand-built batch: a correct one is appended at the high watermark."""
    broker, topic, recs = seeded
    with wire.Conn(broker.port) as c:
        r = wire.produce_v3(c, topic, 0, _valid_batch(3))
    assert (r.error_code, r.base_offset) == (wire.NONE, len(recs))
    got = util.confluent_read(broker.bootstrap, topic, 0, 3, start_offset=len(recs))
    assert [g.key for g in got] == [b"raw-0", b"raw-1", b"raw-2"]
    assert got[0].headers == [("h", b"x")]


def _corrupt(kind: str) -> bytes:
    b = bytearray(_valid_batch(3))
    if kind == "flip_record_byte":
        b[-5] ^= 0x01  # inside the last record's value
    elif kind == "flip_crc":
        b[wire.BATCH_CRC_OFFSET] ^= 0x80
    elif kind == "flip_attributes":
        # Claims snappy; CRC now wrong. (A zstd claim in this v3 request would be answered
        # UNSUPPORTED_COMPRESSION_TYPE before the CRC is read, as Kafka answers it: KIP-110.)
        b[wire.BATCH_ATTRIBUTES_OFFSET + 1] ^= 0x02
    elif kind == "flip_header_count":
        b[wire.BATCH_ATTRIBUTES_OFFSET + 2 + 4 + 8 + 8 + 8 + 2 + 4 + 3] ^= 0x10  # records count
    else:
        raise ValueError(kind)
    return bytes(b)


@pytest.mark.parametrize("kind", ["flip_record_byte", "flip_crc", "flip_attributes", "flip_header_count"])
def test_produce_bad_crc_is_corrupt_message(seeded, kind):
    broker, topic, recs = seeded
    batch = _corrupt(kind)
    with wire.Conn(broker.port) as c:
        r = wire.produce_v3(c, topic, 0, batch)
        assert r.error_code == wire.CORRUPT_MESSAGE, f"{kind}: got error {r.error_code}, expected CORRUPT_MESSAGE (2)"
        assert (r.topic, r.partition) == (topic, 0)
        assert_healthy(broker, topic, recs)
        # The connection is still usable and the next valid batch lands right after the old data.
        ok = wire.produce_v3(c, topic, 0, _valid_batch(2))
        assert (ok.error_code, ok.base_offset) == (wire.NONE, len(recs))


def _recrc(b: bytearray) -> bytes:
    b[wire.BATCH_CRC_OFFSET:wire.BATCH_CRC_OFFSET + 4] = struct.pack(">I", wire.crc32c(bytes(b[wire.BATCH_ATTRIBUTES_OFFSET:])))
    return bytes(b)


@pytest.mark.parametrize("kind", ["count_too_big", "batch_length_too_big", "batch_length_too_small", "truncated_records"])
def test_produce_inconsistent_batch(seeded, kind):
    """Batches whose CRC is right but whose structure lies: rejected (CORRUPT_MESSAGE or
    INVALID_RECORD), never appended, broker healthy."""
    broker, topic, recs = seeded
    b = bytearray(_valid_batch(3))
    count_at = wire.BATCH_ATTRIBUTES_OFFSET + 2 + 4 + 8 + 8 + 8 + 2 + 4
    if kind == "count_too_big":
        b[count_at:count_at + 4] = wire.i32(1000)
        batch = _recrc(b)
    elif kind == "batch_length_too_big":
        b[8:12] = wire.i32(len(b) - 12 + 100)
        batch = bytes(b)
    elif kind == "batch_length_too_small":
        b[8:12] = wire.i32(30)
        batch = bytes(b)
    else:
        batch = _recrc(bytearray(b[:-7]))
        batch = batch[:8] + wire.i32(len(batch) - 12) + batch[12:]
    with wire.Conn(broker.port) as c:
        try:
            r = wire.produce_v3(c, topic, 0, batch)
            assert r.error_code in (wire.CORRUPT_MESSAGE, INVALID_RECORD), f"{kind}: got error {r.error_code}"
        except (ConnectionError, ConnectionResetError):
            pass  # closing the connection is acceptable for a malformed request
    assert_healthy(broker, topic, recs)


def test_many_bad_connections_in_a_row(seeded):
    """A burst of 200 short-lived bad connections does not exhaust anything."""
    broker, topic, recs = seeded
    rnd = random.Random(5)
    for i in range(200):
        try:
            with wire.Conn(broker.port, timeout=5) as c:
                c.send_raw(struct.pack(">i", rnd.choice([-1, 0x7FFFFFFF, 8])) + os.urandom(rnd.randint(0, 64)))
        except OSError:
            pass
    assert_healthy(broker, topic, recs)
