//! RecordBatch v2 ("magic 2"): zero-copy view, record decoding, builder, compression and
//! transaction control batches.
//!
//! The broker never re-encodes what a producer sent: it validates a batch, patches a few
//! header fields (base offset, partition leader epoch, and for `LogAppendTime` the max
//! timestamp plus CRC) and stores the bytes as they came. So the central type here is
//! [`RecordBatch`], a cheap view over a `bytes::Bytes` that reads header fields in place,
//! and [`RecordBatchMut`], which patches them in a mutable buffer without touching records.
//!
//! Decoding individual records ([`RecordBatch::records`]) is needed only for validation,
//! `ListOffsets` by timestamp, control markers and tests. Every decoder here caps what it
//! allocates by the bytes actually present, and decompression is capped by a
//! caller-given maximum, so a hostile count, length or zip bomb costs an error, not memory.
//!
//! Layout of a v2 batch (all integers big-endian):
//!
//! | offset | field | type |
//! |---|---|---|
//! | 0 | baseOffset | i64 |
//! | 8 | batchLength (bytes after this field) | i32 |
//! | 12 | partitionLeaderEpoch | i32 |
//! | 16 | magic (= 2) | i8 |
//! | 17 | crc (CRC-32C of bytes 21..end) | u32 |
//! | 21 | attributes | i16 |
//! | 23 | lastOffsetDelta | i32 |
//! | 27 | baseTimestamp (firstTimestamp) | i64 |
//! | 35 | maxTimestamp | i64 |
//! | 43 | producerId | i64 |
//! | 51 | producerEpoch | i16 |
//! | 53 | baseSequence | i32 |
//! | 57 | recordsCount | i32 |
//! | 61 | records (possibly compressed) | |

mod batch;
mod builder;
mod compression;
mod control;
mod crc;
mod error;
mod record;
mod set;
pub mod varint;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod oracle_tests;

pub use batch::{
    valid_batches_len, RecordBatch, RecordBatchHeader, RecordBatchMut, RecordBatches, TimestampType,
    BATCH_HEADER_SIZE, CRC_OFFSET, CRC_START, LOG_OVERHEAD, MAGIC_V2,
};
pub use builder::{HeaderParts, NewRecord, RecordBatchBuilder};
pub use compression::{
    compress, compress_at, decompress, describe_levels, level_allowed, Compression, SnappyFormat,
    GZIP_LEVELS, LZ4_LEVELS, ZSTD_LEVELS,
};
pub use control::{ControlRecordType, EndTxnMarker, EndTxnMarkerBatch};
pub use crc::{crc32c, Crc32c};
pub use error::RecordsError;
pub use record::{Record, RecordHeader, RecordSummary, Records};
pub use set::{RecordPart, RecordSet};

/// Producer id carried by batches from producers that are neither idempotent nor
/// transactional.
pub const NO_PRODUCER_ID: i64 = -1;
/// Producer epoch carried by batches without a producer id.
pub const NO_PRODUCER_EPOCH: i16 = -1;
/// Base sequence carried by batches without a producer id, and by control batches.
pub const NO_SEQUENCE: i32 = -1;
/// Partition leader epoch of a batch that no leader has stamped yet.
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;
/// Timestamp meaning "unknown", used for example as the max timestamp of an empty log.
pub const NO_TIMESTAMP: i64 = -1;
