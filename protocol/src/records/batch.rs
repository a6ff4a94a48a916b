//! Zero-copy view over one v2 record batch, in-place header patching, and iteration over
//! the consecutive batches of a buffer (a produce request's records, a log segment's bytes).

use bytes::Bytes;

use super::compression::Compression;
use super::error::RecordsError;
use super::record::Records;

/// Bytes before the batchLength-counted part: baseOffset (8) + batchLength (4).
pub const LOG_OVERHEAD: usize = 12;
/// Size of the v2 batch header, i.e. the offset of the first record.
pub const BATCH_HEADER_SIZE: usize = 61;
/// The only message format version this crate reads and writes.
pub const MAGIC_V2: i8 = 2;
/// Offset of the CRC field.
pub const CRC_OFFSET: usize = 17;
/// First byte covered by the CRC (the attributes field).
pub const CRC_START: usize = 21;

const BASE_OFFSET_OFFSET: usize = 0;
const LENGTH_OFFSET: usize = 8;
const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;
const MAGIC_OFFSET: usize = 16;
const ATTRIBUTES_OFFSET: usize = 21;
const LAST_OFFSET_DELTA_OFFSET: usize = 23;
const BASE_TIMESTAMP_OFFSET: usize = 27;
const MAX_TIMESTAMP_OFFSET: usize = 35;
const PRODUCER_ID_OFFSET: usize = 43;
const PRODUCER_EPOCH_OFFSET: usize = 51;
const BASE_SEQUENCE_OFFSET: usize = 53;
const RECORDS_COUNT_OFFSET: usize = 57;

pub(crate) const TIMESTAMP_TYPE_BIT: i16 = 1 << 3;
const TRANSACTIONAL_BIT: i16 = 1 << 4;
const CONTROL_BIT: i16 = 1 << 5;
const DELETE_HORIZON_BIT: i16 = 1 << 6;

/// What a batch's timestamps mean (attribute bit 3). The topic config
/// `message.timestamp.type` decides which the broker stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TimestampType {
    /// Timestamps were set by the producer.
    #[default]
    CreateTime,
    /// The broker overwrote the batch's max timestamp with its clock at append; every
    /// record's timestamp then reads as that max timestamp.
    LogAppendTime,
}

fn read_array<const N: usize>(buf: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&buf[at..at + N]);
    out
}

fn get_i16(buf: &[u8], at: usize) -> i16 {
    i16::from_be_bytes(read_array(buf, at))
}
fn get_i32(buf: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(read_array(buf, at))
}
fn get_i64(buf: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(read_array(buf, at))
}

/// Checks that `buf` starts with a whole v2 batch and returns its total size in bytes.
/// Only length and magic are checked, not the CRC.
fn check_header(buf: &[u8]) -> Result<usize, RecordsError> {
    if buf.len() < MAGIC_OFFSET + 1 {
        return Err(RecordsError::Truncated { needed: MAGIC_OFFSET + 1, available: buf.len() });
    }
    let magic = buf[MAGIC_OFFSET] as i8;
    if magic != MAGIC_V2 {
        return Err(RecordsError::InvalidMagic(magic));
    }
    let batch_length = get_i32(buf, LENGTH_OFFSET);
    let size = usize::try_from(batch_length)
        .ok()
        .and_then(|len| len.checked_add(LOG_OVERHEAD))
        .filter(|size| *size >= BATCH_HEADER_SIZE)
        .ok_or(RecordsError::InvalidBatchLength(batch_length))?;
    if buf.len() < size {
        return Err(RecordsError::Truncated { needed: size, available: buf.len() });
    }
    Ok(size)
}

/// The fixed-size header of a v2 batch, decoded from its first [`BATCH_HEADER_SIZE`]
/// bytes alone.
///
/// Storage scans segment files by reading only headers (one small `pread` per batch) to
/// find batch boundaries, offsets and timestamps without loading records; this type is
/// that scan's unit. Magic and batch length are checked; the CRC cannot be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordBatchHeader {
    /// Offset of the first record.
    pub base_offset: i64,
    /// Bytes after the batchLength field.
    pub batch_length: i32,
    /// Epoch of the leader that appended the batch.
    pub partition_leader_epoch: i32,
    /// Stored CRC-32C.
    pub crc: u32,
    /// Raw attributes.
    pub attributes: i16,
    /// Offset delta of the last record.
    pub last_offset_delta: i32,
    /// Timestamp record deltas are relative to.
    pub base_timestamp: i64,
    /// Largest timestamp (or append time for LogAppendTime).
    pub max_timestamp: i64,
    /// Producer id or -1.
    pub producer_id: i64,
    /// Producer epoch or -1.
    pub producer_epoch: i16,
    /// First sequence or -1.
    pub base_sequence: i32,
    /// Declared number of records.
    pub records_count: i32,
}

impl RecordBatchHeader {
    /// Decodes the header at the start of `buf`, which needs at least
    /// [`BATCH_HEADER_SIZE`] bytes; the rest of the batch need not be present.
    pub fn parse(buf: &[u8]) -> Result<Self, RecordsError> {
        if buf.len() < BATCH_HEADER_SIZE {
            return Err(RecordsError::Truncated { needed: BATCH_HEADER_SIZE, available: buf.len() });
        }
        let magic = buf[MAGIC_OFFSET] as i8;
        if magic != MAGIC_V2 {
            return Err(RecordsError::InvalidMagic(magic));
        }
        let batch_length = get_i32(buf, LENGTH_OFFSET);
        if batch_length < (BATCH_HEADER_SIZE - LOG_OVERHEAD) as i32 {
            return Err(RecordsError::InvalidBatchLength(batch_length));
        }
        Ok(RecordBatchHeader {
            base_offset: get_i64(buf, BASE_OFFSET_OFFSET),
            batch_length,
            partition_leader_epoch: get_i32(buf, PARTITION_LEADER_EPOCH_OFFSET),
            crc: u32::from_be_bytes(read_array(buf, CRC_OFFSET)),
            attributes: get_i16(buf, ATTRIBUTES_OFFSET),
            last_offset_delta: get_i32(buf, LAST_OFFSET_DELTA_OFFSET),
            base_timestamp: get_i64(buf, BASE_TIMESTAMP_OFFSET),
            max_timestamp: get_i64(buf, MAX_TIMESTAMP_OFFSET),
            producer_id: get_i64(buf, PRODUCER_ID_OFFSET),
            producer_epoch: get_i16(buf, PRODUCER_EPOCH_OFFSET),
            base_sequence: get_i32(buf, BASE_SEQUENCE_OFFSET),
            records_count: get_i32(buf, RECORDS_COUNT_OFFSET),
        })
    }

    /// Total size of the batch in bytes.
    pub fn size_in_bytes(&self) -> usize {
        self.batch_length as usize + LOG_OVERHEAD
    }

    /// Offset of the last record.
    pub fn last_offset(&self) -> i64 {
        self.base_offset.wrapping_add(i64::from(self.last_offset_delta))
    }

    /// Offset the next batch should start at.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().wrapping_add(1)
    }

    /// Meaning of the timestamps.
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & TIMESTAMP_TYPE_BIT != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// Whether the batch is a control batch.
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }

    /// Whether the batch is transactional.
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }
}

impl RecordBatch {
    /// The decoded fixed header.
    pub fn header(&self) -> RecordBatchHeader {
        RecordBatchHeader {
            base_offset: self.base_offset(),
            batch_length: self.batch_length(),
            partition_leader_epoch: self.partition_leader_epoch(),
            crc: self.crc(),
            attributes: self.attributes(),
            last_offset_delta: self.last_offset_delta(),
            base_timestamp: self.base_timestamp(),
            max_timestamp: self.max_timestamp(),
            producer_id: self.producer_id(),
            producer_epoch: self.producer_epoch(),
            base_sequence: self.base_sequence(),
            records_count: self.records_count(),
        }
    }
}

/// A cheap, immutable view over exactly one v2 record batch.
///
/// Cloning shares the underlying buffer. [`RecordBatch::parse`] guarantees the header is
/// present and the magic is 2, so the header accessors cannot fail; the CRC is checked
/// separately by [`RecordBatch::validate_crc`] because recovery and produce need it but
/// re-reading already validated data does not.
#[derive(Clone, PartialEq, Eq)]
pub struct RecordBatch {
    buf: Bytes,
}

impl std::fmt::Debug for RecordBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordBatch")
            .field("base_offset", &self.base_offset())
            .field("last_offset_delta", &self.last_offset_delta())
            .field("records_count", &self.records_count())
            .field("size", &self.size_in_bytes())
            .field("attributes", &self.attributes())
            .finish()
    }
}

impl RecordBatch {
    /// Views the batch at the start of `buf` (which may hold more after it), checking the
    /// magic and that all `batchLength` bytes are present. Shares `buf`'s memory.
    pub fn parse(buf: &Bytes) -> Result<RecordBatch, RecordsError> {
        let size = check_header(buf)?;
        Ok(RecordBatch { buf: buf.slice(..size) })
    }

    /// The batch's bytes, header included.
    pub fn as_bytes(&self) -> &Bytes {
        &self.buf
    }

    /// Consumes the view, returning the batch's bytes.
    pub fn into_bytes(self) -> Bytes {
        self.buf
    }

    /// Total size of the batch in bytes (`batch_length + 12`).
    pub fn size_in_bytes(&self) -> usize {
        self.buf.len()
    }

    /// Recomputes the CRC-32C over attributes..end and compares it with the stored one.
    pub fn validate_crc(&self) -> Result<(), RecordsError> {
        let computed = compute_crc(&self.buf);
        let stored = self.crc();
        if computed == stored {
            Ok(())
        } else {
            Err(RecordsError::CrcMismatch { stored, computed })
        }
    }

    /// Offset of the first record (assigned by the leader on append).
    pub fn base_offset(&self) -> i64 {
        get_i64(&self.buf, BASE_OFFSET_OFFSET)
    }
    /// Bytes after the batchLength field.
    pub fn batch_length(&self) -> i32 {
        get_i32(&self.buf, LENGTH_OFFSET)
    }
    /// Epoch of the leader that appended the batch (used by replication truncation).
    pub fn partition_leader_epoch(&self) -> i32 {
        get_i32(&self.buf, PARTITION_LEADER_EPOCH_OFFSET)
    }
    /// Message format version; always 2 for a parsed batch.
    pub fn magic(&self) -> i8 {
        self.buf[MAGIC_OFFSET] as i8
    }
    /// Stored CRC-32C.
    pub fn crc(&self) -> u32 {
        u32::from_be_bytes(read_array(&self.buf, CRC_OFFSET))
    }
    /// Raw attributes; see the typed accessors below.
    pub fn attributes(&self) -> i16 {
        get_i16(&self.buf, ATTRIBUTES_OFFSET)
    }
    /// Compression codec; fails for the undefined codec ids 5..=7.
    pub fn compression(&self) -> Result<Compression, RecordsError> {
        Compression::from_attributes(self.attributes())
    }
    /// Meaning of the batch's timestamps.
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes() & TIMESTAMP_TYPE_BIT != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }
    /// Whether the batch belongs to a transaction (KIP-98).
    pub fn is_transactional(&self) -> bool {
        self.attributes() & TRANSACTIONAL_BIT != 0
    }
    /// Whether the batch holds control records (transaction markers), which consumers
    /// never see as data.
    pub fn is_control(&self) -> bool {
        self.attributes() & CONTROL_BIT != 0
    }
    /// Whether baseTimestamp holds the delete horizon set by the log cleaner (KIP-534).
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes() & DELETE_HORIZON_BIT != 0
    }
    /// Offset delta of the last record; compaction may leave fewer records than this
    /// implies, so use it (not the count) to find the next offset.
    pub fn last_offset_delta(&self) -> i32 {
        get_i32(&self.buf, LAST_OFFSET_DELTA_OFFSET)
    }
    /// Timestamp that record timestamp deltas are relative to (firstTimestamp).
    pub fn base_timestamp(&self) -> i64 {
        get_i64(&self.buf, BASE_TIMESTAMP_OFFSET)
    }
    /// Largest record timestamp, or the append time for `LogAppendTime` batches.
    pub fn max_timestamp(&self) -> i64 {
        get_i64(&self.buf, MAX_TIMESTAMP_OFFSET)
    }
    /// Producer id, or -1 for non-idempotent producers.
    pub fn producer_id(&self) -> i64 {
        get_i64(&self.buf, PRODUCER_ID_OFFSET)
    }
    /// Producer epoch, or -1.
    pub fn producer_epoch(&self) -> i16 {
        get_i16(&self.buf, PRODUCER_EPOCH_OFFSET)
    }
    /// Sequence number of the first record, or -1.
    pub fn base_sequence(&self) -> i32 {
        get_i32(&self.buf, BASE_SEQUENCE_OFFSET)
    }
    /// Number of records as declared in the header (not trusted for allocation).
    pub fn records_count(&self) -> i32 {
        get_i32(&self.buf, RECORDS_COUNT_OFFSET)
    }
    /// Offset of the last record: `base_offset + last_offset_delta`.
    pub fn last_offset(&self) -> i64 {
        self.base_offset().wrapping_add(i64::from(self.last_offset_delta()))
    }
    /// Offset the next batch should start at.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().wrapping_add(1)
    }
    /// Sequence number of the last record, wrapping at i32::MAX as Kafka does, or -1.
    pub fn last_sequence(&self) -> i32 {
        let base = self.base_sequence();
        if base < 0 {
            return -1;
        }
        let last = i64::from(base) + i64::from(self.last_offset_delta());
        (last % (i64::from(i32::MAX) + 1)) as i32
    }
    /// The (possibly compressed) records section.
    pub fn records_payload(&self) -> Bytes {
        self.buf.slice(BATCH_HEADER_SIZE..)
    }

    /// Iterates the batch's records, decompressing first if needed. Decompressed size is
    /// capped at `max_uncompressed_bytes` to defeat zip bombs; a reasonable cap is a
    /// small multiple of `max.message.bytes`.
    pub fn records(&self, max_uncompressed_bytes: usize) -> Result<Records, RecordsError> {
        let codec = self.compression()?;
        let count = self.records_count();
        if count < 0 {
            return Err(RecordsError::InvalidRecordCount(count));
        }
        let payload = match codec {
            Compression::None => self.records_payload(),
            codec => {
                super::compression::decompress(codec, &self.buf[BATCH_HEADER_SIZE..], max_uncompressed_bytes)?
            }
        };
        Ok(Records::new(self, payload, count as u32))
    }
}

impl RecordBatch {
    /// The batch with its records section re-encoded with `target` (what a broker whose
    /// `compression.type` names a codec does to a producer's batch in another one). Every
    /// header field but the codec bits, the length and the CRC stays as sent, so offsets,
    /// timestamps and producer sequences mean the same; the records themselves are not
    /// re-parsed, since their encoding does not depend on the codec. A batch already in
    /// `target` comes back as it is, without a copy.
    pub fn recompressed(
        &self,
        target: Compression,
        snappy_format: super::SnappyFormat,
        max_uncompressed_bytes: usize,
    ) -> Result<Bytes, RecordsError> {
        self.recompressed_at(target, snappy_format, max_uncompressed_bytes, None)
    }

    /// [`RecordBatch::recompressed`] at a codec level (see [`super::compress_at`]).
    pub fn recompressed_at(
        &self,
        target: Compression,
        snappy_format: super::SnappyFormat,
        max_uncompressed_bytes: usize,
        level: Option<i32>,
    ) -> Result<Bytes, RecordsError> {
        let source = self.compression()?;
        if source == target {
            return Ok(self.buf.clone());
        }
        let payload = &self.buf[BATCH_HEADER_SIZE..];
        let raw = match source {
            Compression::None => None,
            codec => Some(super::compression::decompress(codec, payload, max_uncompressed_bytes)?),
        };
        let raw: &[u8] = raw.as_deref().unwrap_or(payload);
        let mut out = Vec::with_capacity(BATCH_HEADER_SIZE + raw.len());
        out.extend_from_slice(&self.buf[..BATCH_HEADER_SIZE]);
        match target {
            Compression::None => out.extend_from_slice(raw),
            codec => {
                out.extend_from_slice(&super::compression::compress_at(codec, raw, snappy_format, level)?)
            }
        }
        let batch_length =
            i32::try_from(out.len() - LOG_OVERHEAD).map_err(|_| RecordsError::BatchTooLarge)?;
        out[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&batch_length.to_be_bytes());
        let attributes = (self.attributes() & !0x07) | target.id();
        out[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
        let crc = compute_crc(&out);
        out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        Ok(Bytes::from(out))
    }
}

/// Computes the CRC-32C a batch should carry (over attributes..end). `buf` must hold a
/// whole batch header.
fn compute_crc(buf: &[u8]) -> u32 {
    super::crc32c(&buf[CRC_START..])
}

/// In-place header patching for one v2 batch held in a mutable buffer (e.g. a
/// `BytesMut` copied from a produce request), without touching the records.
///
/// baseOffset and partitionLeaderEpoch sit before the CRC-covered range, so assigning
/// offsets costs no CRC recomputation; only [`RecordBatchMut::set_max_timestamp`] does.
#[derive(Debug)]
pub struct RecordBatchMut<'a> {
    buf: &'a mut [u8],
}

impl<'a> RecordBatchMut<'a> {
    /// Wraps the batch at the start of `buf`, checking magic and length like
    /// [`RecordBatch::parse`]; the view covers exactly that batch.
    pub fn new(buf: &'a mut [u8]) -> Result<Self, RecordsError> {
        let size = check_header(buf)?;
        Ok(RecordBatchMut { buf: &mut buf[..size] })
    }

    /// Sets the offset of the first record (the leader assigns dense offsets).
    pub fn set_base_offset(&mut self, base_offset: i64) {
        self.buf[BASE_OFFSET_OFFSET..BASE_OFFSET_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
    }

    /// Stamps the epoch of the leader appending the batch.
    pub fn set_partition_leader_epoch(&mut self, epoch: i32) {
        self.buf[PARTITION_LEADER_EPOCH_OFFSET..PARTITION_LEADER_EPOCH_OFFSET + 4]
            .copy_from_slice(&epoch.to_be_bytes());
    }

    /// Sets the timestamp type bit and the max timestamp, then recomputes the CRC since
    /// both are CRC-covered. Skips all work when nothing changes.
    pub fn set_max_timestamp(&mut self, timestamp_type: TimestampType, max_timestamp: i64) {
        let attributes = get_i16(self.buf, ATTRIBUTES_OFFSET);
        let new_attributes = match timestamp_type {
            TimestampType::CreateTime => attributes & !TIMESTAMP_TYPE_BIT,
            TimestampType::LogAppendTime => attributes | TIMESTAMP_TYPE_BIT,
        };
        if new_attributes == attributes && get_i64(self.buf, MAX_TIMESTAMP_OFFSET) == max_timestamp {
            return;
        }
        self.buf[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&new_attributes.to_be_bytes());
        self.buf[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8]
            .copy_from_slice(&max_timestamp.to_be_bytes());
        self.recompute_crc();
    }

    /// Marks the batch as `LogAppendTime` with `append_time_ms` as its max timestamp
    /// (the broker's `message.timestamp.type=LogAppendTime`), fixing the CRC.
    pub fn set_max_timestamp_and_log_append_time(&mut self, append_time_ms: i64) {
        self.set_max_timestamp(TimestampType::LogAppendTime, append_time_ms);
    }

    /// Rewrites the stored CRC to match the current bytes.
    pub fn recompute_crc(&mut self) {
        let crc = compute_crc(self.buf);
        self.buf[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    }
}

/// Iterator over the consecutive batches in a buffer, yielding each batch or one final
/// error for an invalid or torn tail, after which it stops.
///
/// It checks length and magic but not CRCs; call [`RecordBatch::validate_crc`] where the
/// data is untrusted.
#[derive(Debug, Clone)]
pub struct RecordBatches {
    buf: Bytes,
    position: usize,
    failed: bool,
}

impl RecordBatches {
    /// Iterates the batches of `buf` from its start.
    pub fn new(buf: Bytes) -> Self {
        RecordBatches { buf, position: 0, failed: false }
    }

    /// Bytes covered by the batches yielded so far; after an error, the length of the
    /// valid prefix.
    pub fn position(&self) -> usize {
        self.position
    }
}

impl Iterator for RecordBatches {
    type Item = Result<RecordBatch, RecordsError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.position >= self.buf.len() {
            return None;
        }
        let rest = self.buf.slice(self.position..);
        match RecordBatch::parse(&rest) {
            Ok(batch) => {
                self.position += batch.size_in_bytes();
                Some(Ok(batch))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// Length of the longest prefix of `buf` made of whole batches with a valid magic,
/// length and CRC: where log recovery truncates a torn or corrupt tail.
pub fn valid_batches_len(buf: &Bytes) -> usize {
    let mut batches = RecordBatches::new(buf.clone());
    let mut valid = 0;
    for batch in batches.by_ref() {
        match batch {
            Ok(batch) if batch.validate_crc().is_ok() => valid += batch.size_in_bytes(),
            _ => break,
        }
    }
    valid
}
