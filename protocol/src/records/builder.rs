//! Building v2 batches: used by tests, by the broker for its own writes (control markers,
//! internal topics) and later by the client's producer.

use bytes::{BufMut, Bytes};

use super::batch::{
    RecordBatchMut, TimestampType, BATCH_HEADER_SIZE, CRC_OFFSET, CRC_START, LOG_OVERHEAD, MAGIC_V2,
    TIMESTAMP_TYPE_BIT,
};
use super::compression::{compress_at, Compression, SnappyFormat};
use super::crc::{crc32c, crc32c_combine, Crc32c};
use super::error::RecordsError;
use super::record::RecordHeader;
use super::varint::{put_varint, put_varlong, varint_len, varlong_len};
use super::{NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE};

/// A record header as the builder reads it: its key and nullable value, borrowed, so
/// headers held in any form are written without being converted first.
pub trait HeaderParts {
    /// The header's key (UTF-8 by contract).
    fn key(&self) -> &[u8];
    /// The header's value; `None` is a null value.
    fn value(&self) -> Option<&[u8]>;
}

impl HeaderParts for RecordHeader {
    fn key(&self) -> &[u8] {
        &self.key
    }

    fn value(&self) -> Option<&[u8]> {
        self.value.as_deref()
    }
}

/// A record to append to a [`RecordBatchBuilder`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NewRecord {
    /// Create time in milliseconds since the epoch.
    pub timestamp: i64,
    /// Key; `None` is a null key.
    pub key: Option<Bytes>,
    /// Value; `None` is a null value (tombstone).
    pub value: Option<Bytes>,
    /// Headers in order.
    pub headers: Vec<RecordHeader>,
}

impl NewRecord {
    /// A record with the given timestamp, key and value and no headers.
    pub fn new(timestamp: i64, key: Option<Bytes>, value: Option<Bytes>) -> Self {
        NewRecord { timestamp, key, value, headers: Vec::new() }
    }

    /// Adds a header; keys should be UTF-8.
    pub fn with_header(mut self, key: impl Into<Bytes>, value: Option<Bytes>) -> Self {
        self.headers.push(RecordHeader { key: key.into(), value });
        self
    }
}

/// Records of an uncompressed batch are checksummed in steps of this many bytes as they
/// are appended, while they are still in the appending core's cache: a producer that
/// seals a batch on another core (or long after) would otherwise read all of it back
/// from memory for the CRC alone.
const CRC_STEP: usize = 16 * 1024;

/// Builds one valid v2 batch: records are encoded as they are appended, and compression
/// and the CRC are applied once by [`RecordBatchBuilder::build`] (an uncompressed
/// batch's records are checksummed as they come, in `CRC_STEP` pieces).
#[derive(Debug, Clone)]
pub struct RecordBatchBuilder {
    base_offset: i64,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
    control: bool,
    compression: Compression,
    compression_level: Option<i32>,
    snappy_format: SnappyFormat,
    log_append_time: Option<i64>,
    base_timestamp: Option<i64>,
    max_timestamp: i64,
    count: i32,
    /// Room for the batch header (filled by `build`), then the encoded records: an
    /// uncompressed batch is built in place, without copying its records again.
    records: Vec<u8>,
    /// CRC-32C of `records[BATCH_HEADER_SIZE..crc_done]` (uncompressed batches only).
    records_crc: Option<Crc32c>,
    crc_done: usize,
}

impl RecordBatchBuilder {
    /// A builder for a non-idempotent, uncompressed batch starting at `base_offset`.
    /// Producers use base offset 0; the leader assigns the real one on append.
    pub fn new(base_offset: i64) -> Self {
        RecordBatchBuilder {
            base_offset,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            base_sequence: NO_SEQUENCE,
            transactional: false,
            control: false,
            compression: Compression::None,
            compression_level: None,
            snappy_format: SnappyFormat::default(),
            log_append_time: None,
            base_timestamp: None,
            max_timestamp: super::NO_TIMESTAMP,
            count: 0,
            records: vec![0; BATCH_HEADER_SIZE],
            records_crc: None,
            crc_done: BATCH_HEADER_SIZE,
        }
    }

    /// Builds in `buffer` (emptied first) instead of a new allocation: a producer that
    /// recycles the buffers of finished batches keeps writing to memory already mapped
    /// and cached, instead of faulting in and zeroing fresh pages for every batch.
    /// Call before appending.
    pub fn with_buffer(mut self, mut buffer: Vec<u8>) -> Self {
        debug_assert_eq!(self.count, 0, "with_buffer before any append");
        buffer.clear();
        buffer.resize(BATCH_HEADER_SIZE, 0);
        self.records = buffer;
        self.crc_done = BATCH_HEADER_SIZE;
        self
    }

    /// Reserves room for about `bytes` of batch, so a producer filling batches up to a
    /// known size does not grow (and copy) the buffer as it goes.
    pub fn with_capacity(mut self, bytes: usize) -> Self {
        self.records.reserve(bytes.saturating_sub(self.records.len()));
        self
    }

    /// Sets the idempotent producer identity and the sequence of the first record.
    pub fn producer(mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Marks the batch as part of a transaction.
    pub fn transactional(mut self, transactional: bool) -> Self {
        self.transactional = transactional;
        self
    }

    /// Marks the batch as a control batch (transaction markers); see
    /// [`super::EndTxnMarker`].
    pub fn control(mut self, control: bool) -> Self {
        self.control = control;
        self
    }

    /// Chooses the codec applied at [`RecordBatchBuilder::build`].
    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// Chooses the codec's level (see [`super::compress_at`]); `None` is its default.
    pub fn compression_level(mut self, level: Option<i32>) -> Self {
        self.compression_level = level;
        self
    }

    /// Chooses the snappy framing written (xerial by default, as the Java client does).
    pub fn snappy_format(mut self, format: SnappyFormat) -> Self {
        self.snappy_format = format;
        self
    }

    /// Stamps the partition leader epoch.
    pub fn partition_leader_epoch(mut self, epoch: i32) -> Self {
        self.partition_leader_epoch = epoch;
        self
    }

    /// Builds a `LogAppendTime` batch whose max timestamp is `append_time_ms`.
    pub fn log_append_time(mut self, append_time_ms: i64) -> Self {
        self.log_append_time = Some(append_time_ms);
        self
    }

    /// Records appended so far.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether no record was appended yet.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Upper bound of the batch size if built uncompressed, for size-based batching.
    pub fn uncompressed_size_in_bytes(&self) -> usize {
        self.records.len()
    }

    /// Appends a record at the next offset and returns that offset.
    pub fn append(&mut self, record: &NewRecord) -> Result<i64, RecordsError> {
        self.append_parts(record.timestamp, record.key.as_deref(), record.value.as_deref(), &record.headers)
    }

    /// Appends a record given as borrowed parts, which it copies into the batch: what
    /// [`RecordBatchBuilder::append`] does, for a caller whose bytes are not `Bytes`
    /// (a producer copying from the application's own buffers). Returns the record's
    /// absolute offset.
    pub fn append_parts<H: HeaderParts>(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[H],
    ) -> Result<i64, RecordsError> {
        let offset_delta = self.count;
        let next_count = self.count.checked_add(1).ok_or(RecordsError::BatchTooLarge)?;
        let base_timestamp = *self.base_timestamp.get_or_insert(timestamp);
        let timestamp_delta = timestamp.checked_sub(base_timestamp).ok_or(RecordsError::BatchTooLarge)?;
        // The body's length comes first, so it is computed before writing the body
        // straight into the batch (no per-record buffer).
        let mut body_len = 1 + varlong_len(timestamp_delta) + varint_len(offset_delta);
        body_len += nullable_len(key)? + nullable_len(value)?;
        body_len += varint_len(to_i32(headers.len())?);
        for header in headers {
            body_len += nullable_len(Some(header.key()))? + nullable_len(header.value())?;
        }
        let body_len = to_i32(body_len)?;
        let start = self.records.len();
        let out = &mut self.records;
        out.reserve(varint_len(body_len) + body_len as usize);
        put_varint(out, body_len);
        out.push(0); // record attributes
        put_varlong(out, timestamp_delta);
        put_varint(out, offset_delta);
        put_nullable(out, key)?;
        put_nullable(out, value)?;
        put_varint(out, to_i32(headers.len())?);
        for header in headers {
            put_nullable(out, Some(header.key()))?;
            put_nullable(out, header.value())?;
        }
        debug_assert_eq!(out.len() - start, varint_len(body_len) + body_len as usize);
        self.max_timestamp = if self.count == 0 { timestamp } else { self.max_timestamp.max(timestamp) };
        self.count = next_count;
        if self.records.len() - self.crc_done >= CRC_STEP && self.compression == Compression::None {
            self.fold_crc();
        }
        Ok(self.base_offset.wrapping_add(i64::from(offset_delta)))
    }

    /// Checksums the records appended since the last step.
    fn fold_crc(&mut self) {
        let crc = self.records_crc.get_or_insert_with(Crc32c::default);
        crc.update(&self.records[self.crc_done..]);
        self.crc_done = self.records.len();
    }

    /// Encodes the batch: compresses the records, writes the header and the CRC.
    pub fn build(mut self) -> Result<Bytes, RecordsError> {
        if self.count == 0 {
            return Err(RecordsError::EmptyBatch);
        }
        // The records' CRC so far, if they were checksummed as they came (an
        // uncompressed batch of at least one step).
        let mut records_crc = None;
        if self.compression == Compression::None && self.records_crc.is_some() {
            self.fold_crc();
            records_crc = self.records_crc.as_ref().map(|c| (c.finish(), self.crc_done - BATCH_HEADER_SIZE));
        }
        let fields = HeaderFields {
            base_offset: self.base_offset,
            partition_leader_epoch: self.partition_leader_epoch,
            count: self.count,
            base_timestamp: self.base_timestamp.unwrap_or(super::NO_TIMESTAMP),
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            base_sequence: self.base_sequence,
        };
        let mut buf = match self.compression {
            Compression::None => self.records,
            codec => {
                let payload = compress_at(
                    codec,
                    &self.records[BATCH_HEADER_SIZE..],
                    self.snappy_format,
                    self.compression_level,
                )?;
                let mut buf = Vec::with_capacity(BATCH_HEADER_SIZE + payload.len());
                buf.resize(BATCH_HEADER_SIZE, 0);
                buf.extend_from_slice(&payload);
                buf
            }
        };
        let size = buf.len();
        let batch_length = to_i32(size - LOG_OVERHEAD)?;
        let mut attributes = self.compression.id();
        if self.transactional {
            attributes |= 1 << 4;
        }
        if self.control {
            attributes |= 1 << 5;
        }
        let (timestamp_type, max_timestamp) = match self.log_append_time {
            Some(ts) => (TimestampType::LogAppendTime, ts),
            None => (TimestampType::CreateTime, self.max_timestamp),
        };
        if let Some((crc, len)) = records_crc {
            // The header is written as it will be stored (timestamp type, max
            // timestamp) and its CRC joined to the records'.
            if timestamp_type == TimestampType::LogAppendTime {
                attributes |= TIMESTAMP_TYPE_BIT;
            }
            write_header(&mut buf, &fields, batch_length, attributes, max_timestamp);
            let header_crc = crc32c(&buf[CRC_START..BATCH_HEADER_SIZE]);
            let crc = crc32c_combine(header_crc, crc, len);
            buf[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
            debug_assert!(RecordBatchMut::new(&mut buf).is_ok());
            return Ok(Bytes::from(buf));
        }
        write_header(&mut buf, &fields, batch_length, attributes, self.max_timestamp);
        let mut batch = RecordBatchMut::new(&mut buf)?;
        // Sets the timestamp type bit when needed and always computes the CRC.
        batch.set_max_timestamp(timestamp_type, max_timestamp);
        batch.recompute_crc();
        Ok(Bytes::from(buf))
    }
}

/// The header fields a builder fixes before its buffer becomes the batch.
struct HeaderFields {
    base_offset: i64,
    partition_leader_epoch: i32,
    count: i32,
    base_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
}

/// Writes a v2 batch header (CRC left zero) into the first [`BATCH_HEADER_SIZE`] bytes.
fn write_header(buf: &mut [u8], b: &HeaderFields, batch_length: i32, attributes: i16, max_timestamp: i64) {
    {
        let mut header = &mut buf[..BATCH_HEADER_SIZE];
        header.put_i64(b.base_offset);
        header.put_i32(batch_length);
        header.put_i32(b.partition_leader_epoch);
        header.put_i8(MAGIC_V2);
        header.put_u32(0); // CRC, filled by the caller
        header.put_i16(attributes);
        header.put_i32(b.count - 1);
        header.put_i64(b.base_timestamp);
        header.put_i64(max_timestamp);
        header.put_i64(b.producer_id);
        header.put_i16(b.producer_epoch);
        header.put_i32(b.base_sequence);
        header.put_i32(b.count);
        debug_assert!(header.is_empty());
    }
}

/// Encoded size of a nullable varint-prefixed field.
#[inline]
fn nullable_len(field: Option<&[u8]>) -> Result<usize, RecordsError> {
    Ok(match field {
        None => varint_len(-1),
        Some(bytes) => varint_len(to_i32(bytes.len())?) + bytes.len(),
    })
}

#[inline]
fn to_i32(len: usize) -> Result<i32, RecordsError> {
    i32::try_from(len).map_err(|_| RecordsError::BatchTooLarge)
}

#[inline]
fn put_nullable(out: &mut Vec<u8>, field: Option<&[u8]>) -> Result<(), RecordsError> {
    match field {
        None => put_varint(out, -1),
        Some(bytes) => {
            put_varint(out, to_i32(bytes.len())?);
            out.extend_from_slice(bytes);
        }
    }
    Ok(())
}
