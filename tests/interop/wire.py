"""Raw Kafka wire protocol for tests that must send what no client would.

Hand-written from the Kafka protocol guide (kafka.apache.org/protocol) so the tests do not
trust any client library: frame (int32 length prefix), request header v1/v2, ApiVersions v0/v3
decoding, a RecordBatch v2 builder with CRC-32C, and Produce v3 encode/decode.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass

# Error codes (Kafka protocol guide, "Error Codes").
NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_CONFIG = 40
INVALID_REQUEST = 42

# API keys.
PRODUCE = 0
FETCH = 1
METADATA = 3
API_VERSIONS = 18

CLIENT_ID = b"strata-interop-raw"

# --------------------------------------------------------------------------------------------
# CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), table driven.
# --------------------------------------------------------------------------------------------


def _make_crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C_TABLE = _make_crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    t = _CRC32C_TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283, "crc32c check value"

# --------------------------------------------------------------------------------------------
# Primitive encoders
# --------------------------------------------------------------------------------------------


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def string(s: str | None) -> bytes:
    if s is None:
        return i16(-1)
    b = s.encode()
    return i16(len(b)) + b


def nbytes(b: bytes | None) -> bytes:
    if b is None:
        return i32(-1)
    return i32(len(b)) + b


def uvarint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def varint(v: int) -> bytes:
    """Zig-zag signed varint (as in record fields)."""
    return uvarint((v << 1) ^ (v >> 63))


def compact_string(s: str | None) -> bytes:
    if s is None:
        return uvarint(0)
    b = s.encode()
    return uvarint(len(b) + 1) + b


class Reader:
    """Bounds-checked big-endian reader over a response body."""

    def __init__(self, buf: bytes):
        self.buf = buf
        self.pos = 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.buf):
            raise ValueError(f"truncated: wanted {n} bytes at {self.pos}, have {len(self.buf)}")
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return b

    def i16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def i32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def i64(self) -> int:
        return struct.unpack(">q", self.take(8))[0]

    def string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self.take(n).decode()

    def uvarint(self) -> int:
        v, shift = 0, 0
        while True:
            b = self.take(1)[0]
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
            shift += 7
            if shift > 63:
                raise ValueError("varint too long")

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())

    def remaining(self) -> int:
        return len(self.buf) - self.pos


# --------------------------------------------------------------------------------------------
# Connection
# --------------------------------------------------------------------------------------------


class Conn:
    """One TCP connection to the broker with blocking request/response helpers."""

    def __init__(self, port: int, timeout: float = 10.0, source: str | None = None):
        """`source`: the local address to connect from (any of 127.0.0.0/8 on loopback)."""
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.next_corr = 1

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "Conn":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    @staticmethod
    def header(api_key: int, version: int, corr: int, flexible: bool) -> bytes:
        h = i16(api_key) + i16(version) + i32(corr) + i16(len(CLIENT_ID)) + CLIENT_ID
        return h + (b"\x00" if flexible else b"")

    def send_request(self, api_key: int, version: int, body: bytes, flexible: bool = False) -> int:
        corr = self.next_corr
        self.next_corr += 1
        frame = self.header(api_key, version, corr, flexible) + body
        self.sock.sendall(i32(len(frame)) + frame)
        return corr

    def recv_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            c = self.sock.recv(n)
            if not c:
                raise ConnectionError("connection closed by broker")
            chunks.append(c)
            n -= len(c)
        return b"".join(chunks)

    def recv_frame(self) -> bytes:
        (n,) = struct.unpack(">i", self.recv_exact(4))
        if not 4 <= n <= 64 << 20:
            raise ValueError(f"implausible response length {n}")
        return self.recv_exact(n)

    def request(self, api_key: int, version: int, body: bytes, flexible: bool = False) -> bytes:
        """Sends a request and returns the response body after the correlation id (response
        header v0). For flexible responses other than ApiVersions the caller skips the header
        tags."""
        corr = self.send_request(api_key, version, body, flexible)
        resp = self.recv_frame()
        (got,) = struct.unpack(">i", resp[:4])
        if got != corr:
            raise ValueError(f"correlation id mismatch: sent {corr}, got {got}")
        return resp[4:]

    def closed_by_peer(self, timeout: float) -> bool:
        """True if the broker closes the connection (EOF or reset) within `timeout` seconds
        without sending anything more; False if it stays open that long. Raises if bytes arrive."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1)
        except socket.timeout:
            return False
        except (ConnectionResetError, BrokenPipeError):
            return True
        if data:
            raise AssertionError(f"unexpected bytes from broker: {data!r}")
        return True


# --------------------------------------------------------------------------------------------
# ApiVersions
# --------------------------------------------------------------------------------------------


@dataclass
class ApiVersions:
    error_code: int
    apis: dict[int, tuple[int, int]]
    throttle_time_ms: int | None


def decode_api_versions(body: bytes, version: int) -> ApiVersions:
    r = Reader(body)
    err = r.i16()
    flexible = version >= 3
    n = r.uvarint() - 1 if flexible else r.i32()
    if n < 0 or n > len(body) // 6:
        raise ValueError(f"bad api_keys count {n}")
    apis = {}
    for _ in range(n):
        k, lo, hi = r.i16(), r.i16(), r.i16()
        apis[k] = (lo, hi)
        if flexible:
            r.skip_tags()
    throttle = r.i32() if version >= 1 else None
    if flexible:
        r.skip_tags()
    if r.remaining():
        raise ValueError(f"{r.remaining()} trailing bytes in ApiVersions v{version}")
    return ApiVersions(err, apis, throttle)


def api_versions(conn: Conn, version: int = 0) -> ApiVersions:
    if version >= 3:
        body = compact_string("strata-interop") + compact_string("0.1") + b"\x00"
        return decode_api_versions(conn.request(API_VERSIONS, version, body, flexible=True), version)
    return decode_api_versions(conn.request(API_VERSIONS, version, b""), version)


def api_versions_ok(port: int, timeout: float = 5.0) -> bool:
    """One fresh connection, ApiVersions v0, error 0 and a non-empty list."""
    with Conn(port, timeout=timeout) as c:
        av = api_versions(c, 0)
        return av.error_code == 0 and API_VERSIONS in av.apis


# --------------------------------------------------------------------------------------------
# RecordBatch v2 (magic 2)
# --------------------------------------------------------------------------------------------


def encode_record(offset_delta: int, ts_delta: int, key: bytes | None, value: bytes | None,
                  headers: list[tuple[str, bytes]] = ()) -> bytes:
    body = bytearray()
    body += i8(0)  # attributes
    body += varint(ts_delta)
    body += varint(offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(-1) if value is None else varint(len(value)) + value
    body += varint(len(headers))
    for hk, hv in headers:
        hkb = hk.encode()
        body += varint(len(hkb)) + hkb
        body += varint(-1) if hv is None else varint(len(hv)) + hv
    return varint(len(body)) + bytes(body)


def record_batch(records: list[tuple[bytes | None, bytes | None, list]], base_timestamp: int | None = None,
                 base_offset: int = 0) -> bytes:
    """An uncompressed v2 batch with a correct CRC-32C; records are (key, value, headers)."""
    ts = int(time.time() * 1000) if base_timestamp is None else base_timestamp
    recs = b"".join(encode_record(i, 0, k, v, h) for i, (k, v, h) in enumerate(records))
    # From attributes to the end: what the CRC covers.
    after_crc = (
        i16(0)  # attributes: no compression, CreateTime, not transactional, not control
        + i32(len(records) - 1)  # lastOffsetDelta
        + i64(ts)  # baseTimestamp
        + i64(ts)  # maxTimestamp
        + i64(-1)  # producerId
        + i16(-1)  # producerEpoch
        + i32(-1)  # baseSequence
        + i32(len(records))
        + recs
    )
    partition_leader_epoch = i32(-1)
    magic = i8(2)
    crc = struct.pack(">I", crc32c(after_crc))
    rest = partition_leader_epoch + magic + crc + after_crc
    return i64(base_offset) + i32(len(rest)) + rest


# Byte offset of the CRC field and of the first byte it covers within a v2 batch.
BATCH_CRC_OFFSET = 8 + 4 + 4 + 1
BATCH_ATTRIBUTES_OFFSET = BATCH_CRC_OFFSET + 4


# --------------------------------------------------------------------------------------------
# Produce v3
# --------------------------------------------------------------------------------------------


def produce_v3_body(topic: str, partition: int, batch: bytes, acks: int = -1, timeout_ms: int = 10000) -> bytes:
    return (
        string(None)  # transactional_id
        + i16(acks)
        + i32(timeout_ms)
        + i32(1)
        + string(topic)
        + i32(1)
        + i32(partition)
        + nbytes(batch)
    )


@dataclass
class ProducePartitionResult:
    topic: str
    partition: int
    error_code: int
    base_offset: int


def decode_produce_v3(body: bytes) -> list[ProducePartitionResult]:
    r = Reader(body)
    out = []
    for _ in range(r.i32()):
        topic = r.string()
        for _ in range(r.i32()):
            p, err, base = r.i32(), r.i16(), r.i64()
            r.i64()  # log_append_time_ms
            out.append(ProducePartitionResult(topic, p, err, base))
    r.i32()  # throttle_time_ms
    if r.remaining():
        raise ValueError(f"{r.remaining()} trailing bytes in Produce v3 response")
    return out


def produce_v3(conn: Conn, topic: str, partition: int, batch: bytes, acks: int = -1) -> ProducePartitionResult:
    res = decode_produce_v3(conn.request(PRODUCE, 3, produce_v3_body(topic, partition, batch, acks)))
    if len(res) != 1:
        raise ValueError(f"expected one partition result, got {res}")
    return res[0]


def incremental_alter_configs_v0(conn: Conn, resource_type: int, name: str,
                                 ops: list[tuple[str, int, str | None]]) -> tuple[int, str | None]:
    """IncrementalAlterConfigs v0 for one resource (ops: (key, 0=SET/1=DELETE/2=APPEND/3=SUBTRACT,
    value)), as `kafka-configs.sh --entity-default` sends it for the cluster-wide broker default
    (an empty BROKER name, which librdkafka and kafka-python refuse to send). Returns the
    resource's (error code, error message)."""
    body = i32(1) + i8(resource_type) + string(name) + i32(len(ops))
    for key, op, value in ops:
        body += string(key) + i8(op) + string(value)
    body += i8(0)  # validate_only
    r = Reader(conn.request(44, 0, body))
    r.i32()  # throttle_time_ms
    assert r.i32() == 1, "one resource answered"
    code = r.i16()
    message = r.string()
    return code, message


def describe_configs_v1(conn: Conn, resource_type: int, name: str, keys: list[str]) -> dict[str, str | None]:
    """DescribeConfigs v1 (Kafka 4's oldest) for one resource and `keys` over this connection (no new one, so it
    works while a connection limit holds new connections back). Returns key -> value."""
    body = i32(1) + i8(resource_type) + string(name) + i32(len(keys))
    for key in keys:
        body += string(key)
    body += i8(0)  # include_synonyms
    r = Reader(conn.request(32, 1, body))
    r.i32()  # throttle_time_ms
    assert r.i32() == 1, "one resource answered"
    code, message = r.i16(), r.string()
    assert code == 0, (code, message)
    r.take(1)  # resource_type
    r.string()  # resource_name
    values = {}
    for _ in range(r.i32()):
        key, value = r.string(), r.string()
        r.take(3)  # read_only, config_source, is_sensitive
        for _ in range(r.i32()):  # synonyms
            r.string(), r.string(), r.take(1)
        values[key] = value
    return values


@dataclass
class QuorumState:
    error_code: int  # top level, then the partition's if that one is 0
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: dict[int, int]  # replica id -> log end offset


def describe_quorum_v0(conn: Conn) -> QuorumState:
    """DescribeQuorum v0 (flexible) for `__cluster_metadata`-0, as
    `kafka-metadata-quorum.sh describe --status` sends it to a broker."""
    partitions = uvarint(2) + i32(0) + uvarint(0)
    body = uvarint(2) + compact_string("__cluster_metadata") + partitions + uvarint(0) + uvarint(0)
    r = Reader(conn.request(55, 0, body, flexible=True))
    r.skip_tags()  # response header v1
    top = r.i16()
    topics = r.uvarint() - 1
    if top != 0 or topics < 1:
        return QuorumState(top, -1, -1, -1, {})
    r.take(r.uvarint() - 1)  # topic name
    assert r.uvarint() - 1 == 1, "one partition answered"
    r.i32()  # partition index
    code = r.i16()
    leader, epoch, hw = r.i32(), r.i32(), r.i64()
    voters = {}
    for _ in range(r.uvarint() - 1):
        rid, leo = r.i32(), r.i64()
        r.skip_tags()
        voters[rid] = leo
    return QuorumState(code, leader, epoch, hw, voters)
