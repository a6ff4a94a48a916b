//! Re-encoding what the cleaner keeps of a batch, as Kafka's `MemoryRecords.filterTo`
//! does for magic v2:
//!
//! - the header keeps the base offset, the **last offset delta** (so the batch still
//!   spans its original offsets and the producer's last sequence survives compaction),
//!   the partition leader epoch, producer id, epoch and base sequence, the
//!   transactional and control bits, the timestamp type and the **compression codec**
//!   (retained records are compressed again with the batch's own codec);
//! - records keep their offset deltas, attributes, keys, values and headers; their
//!   timestamp deltas are recomputed against the new base timestamp;
//! - with a delete horizon (KIP-534) the base timestamp *is* the horizon and attribute
//!   bit 6 is set; otherwise it is the first retained record's timestamp;
//! - the max timestamp is the largest retained timestamp (the append time for
//!   `LogAppendTime` batches).
//!
//! An emptied batch that must stay (it carries a producer's last sequence, or ends the
//! range being cleaned) becomes a 61-byte header with no records, as Kafka's
//! `writeEmptyHeader`.

use bytes::{BufMut, Bytes};
use strata_protocol::records::varint::{put_varint, put_varlong, varint_len, varlong_len};
use strata_protocol::records::{
    compress, Compression, Record, RecordBatch, RecordBatchMut, RecordsError, SnappyFormat, TimestampType,
    BATCH_HEADER_SIZE, LOG_OVERHEAD, MAGIC_V2, NO_TIMESTAMP,
};

/// Attribute bits kept from the original batch: codec (0-2), timestamp type (3),
/// transactional (4), control (5).
const KEPT_ATTRIBUTES: i16 = 0x3f;
/// Attribute bits of an empty batch: no codec, no delete horizon.
const EMPTY_BATCH_ATTRIBUTES: i16 = 0x38;
/// Attribute bit 6: the base timestamp holds the delete horizon (KIP-534).
pub(super) const DELETE_HORIZON_BIT: i16 = 1 << 6;

/// Appends to `out` a batch holding `records` (a non-empty, ordered subset of
/// `original`'s records) with `delete_horizon_ms` as its horizon if any. `scratch` is
/// reused for the uncompressed records.
pub(super) fn write_retained(
    original: &RecordBatch,
    records: &[Record],
    delete_horizon_ms: Option<i64>,
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
) -> Result<(), RecordsError> {
    let Some(first) = records.first() else {
        return Err(RecordsError::EmptyBatch);
    };
    let codec = original.compression()?;
    let (base_timestamp, max_timestamp) = match original.timestamp_type() {
        // Every record reads as the append time whatever its delta says.
        TimestampType::LogAppendTime => {
            (delete_horizon_ms.unwrap_or(original.max_timestamp()), original.max_timestamp())
        }
        TimestampType::CreateTime => {
            let max = records.iter().map(|r| r.timestamp).max().unwrap_or(first.timestamp);
            (delete_horizon_ms.unwrap_or(first.timestamp), max)
        }
    };
    scratch.clear();
    for record in records {
        encode_record(record, base_timestamp, scratch)?;
    }
    let compressed;
    let payload: &[u8] = match codec {
        Compression::None => scratch,
        codec => {
            compressed = compress(codec, scratch, SnappyFormat::Xerial)?;
            &compressed
        }
    };
    let mut attributes = original.attributes() & KEPT_ATTRIBUTES;
    if delete_horizon_ms.is_some() {
        attributes |= DELETE_HORIZON_BIT;
    }
    let header = Header {
        attributes,
        base_timestamp,
        max_timestamp,
        records_count: i32::try_from(records.len()).map_err(|_| RecordsError::BatchTooLarge)?,
    };
    write_batch(original, &header, payload, out)
}

/// Appends to `out` the 61-byte empty form of `original`: same offsets and producer
/// fields, no records, max timestamp kept, no codec and no delete horizon.
pub(super) fn write_empty(original: &RecordBatch, out: &mut Vec<u8>) -> Result<(), RecordsError> {
    let header = Header {
        attributes: original.attributes() & EMPTY_BATCH_ATTRIBUTES,
        base_timestamp: NO_TIMESTAMP,
        max_timestamp: original.max_timestamp(),
        records_count: 0,
    };
    write_batch(original, &header, &[], out)
}

/// The header fields that differ from the original batch.
struct Header {
    attributes: i16,
    base_timestamp: i64,
    max_timestamp: i64,
    records_count: i32,
}

fn write_batch(
    original: &RecordBatch,
    header: &Header,
    payload: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), RecordsError> {
    let size = BATCH_HEADER_SIZE + payload.len();
    let batch_length = i32::try_from(size - LOG_OVERHEAD).map_err(|_| RecordsError::BatchTooLarge)?;
    let start = out.len();
    out.reserve(size);
    out.put_i64(original.base_offset());
    out.put_i32(batch_length);
    out.put_i32(original.partition_leader_epoch());
    out.put_i8(MAGIC_V2);
    out.put_u32(0); // CRC, computed below
    out.put_i16(header.attributes);
    out.put_i32(original.last_offset_delta());
    out.put_i64(header.base_timestamp);
    out.put_i64(header.max_timestamp);
    out.put_i64(original.producer_id());
    out.put_i16(original.producer_epoch());
    out.put_i32(original.base_sequence());
    out.put_i32(header.records_count);
    out.put_slice(payload);
    RecordBatchMut::new(&mut out[start..])?.recompute_crc();
    debug_assert_eq!(out.len() - start, size);
    Ok(())
}

fn encode_record(record: &Record, base_timestamp: i64, out: &mut Vec<u8>) -> Result<(), RecordsError> {
    let timestamp_delta = record.timestamp.wrapping_sub(base_timestamp);
    let header_count = i32::try_from(record.headers.len()).map_err(|_| RecordsError::BatchTooLarge)?;
    let mut body_len = 1
        + varlong_len(timestamp_delta)
        + varint_len(record.offset_delta)
        + nullable_len(record.key.as_ref())?
        + nullable_len(record.value.as_ref())?
        + varint_len(header_count);
    for header in &record.headers {
        body_len += nullable_len(Some(&header.key))? + nullable_len(header.value.as_ref())?;
    }
    put_varint(out, i32::try_from(body_len).map_err(|_| RecordsError::BatchTooLarge)?);
    let body_start = out.len();
    out.push(record.attributes as u8);
    put_varlong(out, timestamp_delta);
    put_varint(out, record.offset_delta);
    put_nullable(out, record.key.as_ref());
    put_nullable(out, record.value.as_ref());
    put_varint(out, header_count);
    for header in &record.headers {
        put_nullable(out, Some(&header.key));
        put_nullable(out, header.value.as_ref());
    }
    debug_assert_eq!(out.len() - body_start, body_len);
    Ok(())
}

fn nullable_len(field: Option<&Bytes>) -> Result<usize, RecordsError> {
    Ok(match field {
        None => varint_len(-1),
        Some(bytes) => {
            varint_len(i32::try_from(bytes.len()).map_err(|_| RecordsError::BatchTooLarge)?) + bytes.len()
        }
    })
}

/// Writes a nullable byte field; its length was checked by `nullable_len`.
fn put_nullable(out: &mut Vec<u8>, field: Option<&Bytes>) {
    match field {
        None => put_varint(out, -1),
        Some(bytes) => {
            put_varint(out, bytes.len() as i32);
            out.extend_from_slice(bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use strata_protocol::records::{NewRecord, RecordBatchBuilder};

    use super::*;

    fn original(codec: Compression) -> RecordBatch {
        let mut b =
            RecordBatchBuilder::new(100).producer(7, 2, 40).compression(codec).partition_leader_epoch(3);
        for i in 0..5i64 {
            let value = (i != 3).then(|| Bytes::from(format!("v{i}")));
            let rec = NewRecord::new(1_000 + i * 10, Some(Bytes::from(format!("k{i}"))), value)
                .with_header("h", Some(Bytes::from_static(b"x")));
            b.append(&rec).unwrap();
        }
        RecordBatch::parse(&b.build().unwrap()).unwrap()
    }

    #[test]
    fn retained_subset_keeps_offsets_producer_fields_and_codec() {
        for codec in
            [Compression::None, Compression::Gzip, Compression::Lz4, Compression::Zstd, Compression::Snappy]
        {
            let batch = original(codec);
            let all: Vec<Record> = batch.records(1 << 20).unwrap().map(|r| r.unwrap()).collect();
            let kept = vec![all[1].clone(), all[3].clone()];
            let (mut out, mut scratch) = (Vec::new(), Vec::new());
            write_retained(&batch, &kept, Some(9_999), &mut out, &mut scratch).unwrap();
            let cleaned = RecordBatch::parse(&Bytes::from(out)).unwrap();
            cleaned.validate_crc().unwrap();
            assert_eq!(cleaned.base_offset(), 100);
            assert_eq!(cleaned.last_offset(), 104, "last offset delta preserved");
            assert_eq!(cleaned.last_sequence(), batch.last_sequence());
            assert_eq!(
                (cleaned.producer_id(), cleaned.producer_epoch(), cleaned.base_sequence()),
                (7, 2, 40)
            );
            assert_eq!(cleaned.partition_leader_epoch(), 3);
            assert_eq!(cleaned.compression().unwrap(), codec);
            assert!(cleaned.has_delete_horizon());
            assert_eq!(cleaned.base_timestamp(), 9_999);
            assert_eq!(cleaned.max_timestamp(), 1_030);
            assert_eq!(cleaned.records_count(), 2);
            let got: Vec<Record> = cleaned.records(1 << 20).unwrap().map(|r| r.unwrap()).collect();
            assert_eq!(got, kept, "records identical, offsets and timestamps included");
        }
    }

    #[test]
    fn without_horizon_base_is_first_timestamp() {
        let batch = original(Compression::None);
        let all: Vec<Record> = batch.records(1 << 20).unwrap().map(|r| r.unwrap()).collect();
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        write_retained(&batch, &all[2..3], None, &mut out, &mut scratch).unwrap();
        let cleaned = RecordBatch::parse(&Bytes::from(out)).unwrap();
        assert!(!cleaned.has_delete_horizon());
        assert_eq!(cleaned.base_timestamp(), 1_020);
        let got: Vec<Record> = cleaned.records(1 << 20).unwrap().map(|r| r.unwrap()).collect();
        assert_eq!(got, all[2..3].to_vec());
    }

    #[test]
    fn empty_batch_keeps_offsets_and_sequence() {
        let batch = original(Compression::Zstd);
        let mut out = Vec::new();
        write_empty(&batch, &mut out).unwrap();
        assert_eq!(out.len(), BATCH_HEADER_SIZE);
        let empty = RecordBatch::parse(&Bytes::from(out)).unwrap();
        empty.validate_crc().unwrap();
        assert_eq!((empty.base_offset(), empty.last_offset()), (100, 104));
        assert_eq!(empty.last_sequence(), batch.last_sequence());
        assert_eq!(empty.records_count(), 0);
        assert_eq!(empty.compression().unwrap(), Compression::None);
        assert_eq!(empty.max_timestamp(), batch.max_timestamp());
        assert_eq!(empty.records(1 << 20).unwrap().count(), 0);
    }
}
