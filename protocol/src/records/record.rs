//! Decoding of the individual records inside a v2 batch.
//!
//! Record layout: length varint, attributes i8, timestampDelta varlong, offsetDelta
//! varint, keyLength varint + key, valueLength varint + value, header count varint, then
//! per header keyLength varint + key (UTF-8) and valueLength varint + value. Lengths of -1
//! mean null (not allowed for header keys).

use bytes::Bytes;

use super::batch::{RecordBatch, TimestampType};
use super::error::RecordsError;
use super::varint::{read_varint, read_varlong};

/// Smallest possible encoded record body: attributes, timestampDelta, offsetDelta, key
/// length, value length and header count, one byte each.
const MIN_RECORD_BODY: usize = 6;

/// One record header. Keys are UTF-8 in Kafka; they are kept as bytes so decoding never
/// fails or copies because of them (see [`RecordHeader::key_str`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordHeader {
    /// Header key (UTF-8 by contract).
    pub key: Bytes,
    /// Header value; `None` is a null value.
    pub value: Option<Bytes>,
}

impl RecordHeader {
    /// The key as a string, if it is valid UTF-8.
    pub fn key_str(&self) -> Result<&str, std::str::Utf8Error> {
        std::str::from_utf8(&self.key)
    }
}

/// A decoded record with absolute offset and timestamp. Key, value and header fields
/// share the (decompressed) batch buffer rather than copying.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Record-level attributes (unused by Kafka so far, always 0 from real clients).
    pub attributes: i8,
    /// `base_offset + offset_delta`.
    pub offset: i64,
    /// Offset relative to the batch base.
    pub offset_delta: i32,
    /// `base_timestamp + timestamp_delta` for CreateTime; the batch max timestamp for
    /// LogAppendTime, as consumers see it.
    pub timestamp: i64,
    /// Record key; `None` is a null key.
    pub key: Option<Bytes>,
    /// Record value; `None` is a null value (a tombstone on compacted topics).
    pub value: Option<Bytes>,
    /// Headers in wire order (keys may repeat).
    pub headers: Vec<RecordHeader>,
}

/// Iterator over the records of one batch; see [`RecordBatch::records`].
///
/// Yields at most the declared count; then, if bytes remain, one
/// [`RecordsError::TrailingBytes`] error. After any error it stops. Nothing is
/// preallocated from the declared count.
#[derive(Debug, Clone)]
pub struct Records {
    payload: Bytes,
    position: usize,
    remaining: u32,
    base_offset: i64,
    base_timestamp: i64,
    log_append_time: Option<i64>,
    done: bool,
}

impl Records {
    pub(super) fn new(batch: &RecordBatch, payload: Bytes, count: u32) -> Self {
        let log_append_time = match batch.timestamp_type() {
            TimestampType::LogAppendTime => Some(batch.max_timestamp()),
            TimestampType::CreateTime => None,
        };
        Records {
            payload,
            position: 0,
            remaining: count,
            base_offset: batch.base_offset(),
            base_timestamp: batch.base_timestamp(),
            log_append_time,
            done: false,
        }
    }

    /// Records not yet yielded, according to the batch header.
    pub fn remaining(&self) -> u32 {
        self.remaining
    }

    /// Collects all records, failing on the first malformed one. The vector's capacity
    /// is bounded by what the payload could actually hold, not by the declared count.
    pub fn collect_all(self) -> Result<Vec<Record>, RecordsError> {
        let plausible = (self.payload.len() / (MIN_RECORD_BODY + 1)).min(self.remaining as usize);
        let mut out = Vec::with_capacity(plausible);
        for record in self {
            out.push(record?);
        }
        Ok(out)
    }

    /// Where the next record's body lies in the payload, its length checked.
    fn next_body(&self) -> Result<std::ops::Range<usize>, RecordsError> {
        let all = &self.payload[self.position..];
        let mut cur = all;
        let length = read_varint(&mut cur)?;
        let body_len = usize::try_from(length)
            .ok()
            .filter(|len| *len >= MIN_RECORD_BODY)
            .ok_or(RecordsError::InvalidLength { field: "record", length: i64::from(length) })?;
        if cur.len() < body_len {
            return Err(RecordsError::Truncated { needed: body_len, available: cur.len() });
        }
        let body_start = self.position + (all.len() - cur.len());
        Ok(body_start..body_start + body_len)
    }

    fn decode_next(&mut self) -> Result<Record, RecordsError> {
        let range = self.next_body()?;
        let body = self.payload.slice(range.clone());
        let record = decode_body(&body, self.base_offset, self.base_timestamp, self.log_append_time)?;
        self.position = range.end;
        Ok(record)
    }

    /// The next record checked as [`Iterator::next`] checks it, but yielding only its
    /// offset delta and timestamp: no key, value or header is sliced out. This is the
    /// leader's validation of every produced record, so it must cost little.
    pub fn next_summary(&mut self) -> Option<Result<RecordSummary, RecordsError>> {
        self.step(|records| {
            let range = records.next_body()?;
            let (offset_delta, timestamp_delta) = scan_body(&records.payload[range.clone()])?;
            records.position = range.end;
            Ok(RecordSummary {
                offset_delta,
                timestamp: records
                    .log_append_time
                    .unwrap_or_else(|| records.base_timestamp.wrapping_add(timestamp_delta)),
            })
        })
    }

    /// One step of iteration: the declared count, then trailing bytes, then done after
    /// any error.
    fn step<T>(
        &mut self,
        next: impl FnOnce(&mut Self) -> Result<T, RecordsError>,
    ) -> Option<Result<T, RecordsError>> {
        if self.done {
            return None;
        }
        if self.remaining == 0 {
            self.done = true;
            let trailing = self.payload.len() - self.position;
            return (trailing > 0).then_some(Err(RecordsError::TrailingBytes(trailing)));
        }
        match next(self) {
            Ok(item) => {
                self.remaining -= 1;
                Some(Ok(item))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// What validation needs of a record (see [`Records::next_summary`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordSummary {
    /// Offset relative to the batch base.
    pub offset_delta: i32,
    /// The record's timestamp as [`Record::timestamp`] gives it.
    pub timestamp: i64,
}

/// Checks a record body exactly as [`decode_body`] does; returns its offset delta and
/// timestamp delta.
fn scan_body(body: &[u8]) -> Result<(i32, i64), RecordsError> {
    let mut cur = body;
    if cur.is_empty() {
        return Err(RecordsError::Truncated { needed: 1, available: 0 });
    }
    cur = &cur[1..]; // attributes
    let timestamp_delta = read_varlong(&mut cur)?;
    let offset_delta = read_varint(&mut cur)?;
    skip_nullable(&mut cur, "record key")?;
    skip_nullable(&mut cur, "record value")?;
    let header_count = read_varint(&mut cur)?;
    let header_count = usize::try_from(header_count).map_err(|_| RecordsError::InvalidLength {
        field: "header count",
        length: i64::from(header_count),
    })?;
    if header_count > cur.len() / 2 {
        return Err(RecordsError::InvalidLength { field: "header count", length: header_count as i64 });
    }
    for _ in 0..header_count {
        if !skip_nullable(&mut cur, "header key")? {
            return Err(RecordsError::InvalidLength { field: "header key", length: -1 });
        }
        skip_nullable(&mut cur, "header value")?;
    }
    if !cur.is_empty() {
        return Err(RecordsError::RecordSizeMismatch {
            declared: body.len(),
            actual: body.len() - cur.len(),
        });
    }
    Ok((offset_delta, timestamp_delta))
}

/// Skips a length-prefixed byte field; false if it was null.
fn skip_nullable(cur: &mut &[u8], field: &'static str) -> Result<bool, RecordsError> {
    let length = read_varint(cur)?;
    if length == -1 {
        return Ok(false);
    }
    let len = usize::try_from(length)
        .map_err(|_| RecordsError::InvalidLength { field, length: i64::from(length) })?;
    if len > cur.len() {
        return Err(RecordsError::InvalidLength { field, length: i64::from(length) });
    }
    *cur = &cur[len..];
    Ok(true)
}

impl Iterator for Records {
    type Item = Result<Record, RecordsError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step(Records::decode_next)
    }
}

/// A cursor over one record's body that hands out zero-copy slices.
struct BodyReader<'a> {
    body: &'a Bytes,
    position: usize,
}

impl BodyReader<'_> {
    fn rest(&self) -> &[u8] {
        &self.body[self.position..]
    }

    fn advance_by_read<T>(
        &mut self,
        read: impl FnOnce(&mut &[u8]) -> Result<T, RecordsError>,
    ) -> Result<T, RecordsError> {
        let mut cur = self.rest();
        let before = cur.len();
        let value = read(&mut cur)?;
        self.position += before - cur.len();
        Ok(value)
    }

    fn i8(&mut self) -> Result<i8, RecordsError> {
        let byte = *self.rest().first().ok_or(RecordsError::Truncated { needed: 1, available: 0 })?;
        self.position += 1;
        Ok(byte as i8)
    }

    fn varint(&mut self) -> Result<i32, RecordsError> {
        self.advance_by_read(read_varint)
    }

    fn varlong(&mut self) -> Result<i64, RecordsError> {
        self.advance_by_read(read_varlong)
    }

    /// A length-prefixed byte field; -1 is null. The length is checked against the
    /// bytes left in this record before slicing.
    fn nullable_bytes(&mut self, field: &'static str) -> Result<Option<Bytes>, RecordsError> {
        let length = self.varint()?;
        if length == -1 {
            return Ok(None);
        }
        let len = usize::try_from(length)
            .map_err(|_| RecordsError::InvalidLength { field, length: i64::from(length) })?;
        let available = self.body.len() - self.position;
        if len > available {
            return Err(RecordsError::InvalidLength { field, length: i64::from(length) });
        }
        let value = self.body.slice(self.position..self.position + len);
        self.position += len;
        Ok(Some(value))
    }
}

fn decode_body(
    body: &Bytes,
    base_offset: i64,
    base_timestamp: i64,
    log_append_time: Option<i64>,
) -> Result<Record, RecordsError> {
    let mut reader = BodyReader { body, position: 0 };
    let attributes = reader.i8()?;
    let timestamp_delta = reader.varlong()?;
    let offset_delta = reader.varint()?;
    let key = reader.nullable_bytes("record key")?;
    let value = reader.nullable_bytes("record value")?;
    let header_count = reader.varint()?;
    let header_count = usize::try_from(header_count).map_err(|_| RecordsError::InvalidLength {
        field: "header count",
        length: i64::from(header_count),
    })?;
    // Each header needs at least two bytes (key length and value length).
    let left = body.len() - reader.position;
    if header_count > left / 2 {
        return Err(RecordsError::InvalidLength { field: "header count", length: header_count as i64 });
    }
    let mut headers = Vec::with_capacity(header_count);
    for _ in 0..header_count {
        let key = reader
            .nullable_bytes("header key")?
            .ok_or(RecordsError::InvalidLength { field: "header key", length: -1 })?;
        let value = reader.nullable_bytes("header value")?;
        headers.push(RecordHeader { key, value });
    }
    if reader.position != body.len() {
        return Err(RecordsError::RecordSizeMismatch { declared: body.len(), actual: reader.position });
    }
    Ok(Record {
        attributes,
        offset: base_offset.wrapping_add(i64::from(offset_delta)),
        offset_delta,
        timestamp: log_append_time.unwrap_or_else(|| base_timestamp.wrapping_add(timestamp_delta)),
        key,
        value,
        headers,
    })
}
