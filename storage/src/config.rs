//! Per-log configuration: the topic-level settings that govern segments, indexes,
//! retention and flushing, with Apache Kafka's defaults.

use strata_protocol::records::{Compression, TimestampType};

use crate::error::{Result, StorageError};

/// Topic-level log settings. Field names follow the Kafka keys (`segment.bytes` ->
/// `segment_bytes`), with units in the names. `Default` gives Kafka's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: roll the active segment before it would exceed this size.
    pub segment_bytes: u64,
    /// `segment.ms`: roll when the first record of the active segment is this old
    /// (measured against the incoming records' timestamps, as Kafka does).
    pub segment_ms: i64,
    /// `retention.ms`: delete segments whose largest timestamp is older; -1 = forever.
    pub retention_ms: i64,
    /// `retention.bytes`: delete oldest segments while the log is bigger; -1 = no limit.
    pub retention_bytes: i64,
    /// `index.interval.bytes`: log bytes between two sparse index entries.
    pub index_interval_bytes: u32,
    /// `segment.index.bytes`: preallocated size of each offset and time index.
    pub segment_index_bytes: u32,
    /// `max.message.bytes`: largest batch accepted from a producer.
    pub max_message_bytes: u32,
    /// `flush.messages`: fsync after this many appended records (u64::MAX = never).
    pub flush_interval_messages: u64,
    /// `flush.ms`: fsync when this long has passed since the last flush
    /// (i64::MAX = never); checked by [`crate::Log::maybe_flush`].
    pub flush_interval_ms: i64,
    /// `message.timestamp.type`: keep producer timestamps or stamp the append time.
    pub message_timestamp_type: TimestampType,
    /// `compression.type`: the codec a leader stores client batches in, re-encoding those
    /// sent in another; `None` keeps each batch as the producer compressed it (`producer`).
    pub compression: Option<Compression>,
    /// The level `compression` is applied at (KIP-390's `compression.gzip.level` or
    /// `compression.zstd.level`, whichever is the codec's); `None` is the codec's default.
    pub compression_level: Option<i32>,
    /// `file.delete.delay.ms`: how long deleted segment files linger (renamed to
    /// `.deleted`) before removal.
    pub file_delete_delay_ms: i64,
    /// `cleanup.policy` contains `compact`: the log cleaner keeps the latest record per key
    /// (see [`crate::Cleaner`]).
    pub cleanup_policy_compact: bool,
    /// `cleanup.policy` contains `delete`: `retention.ms` and `retention.bytes` apply.
    /// Kafka's default policy is `delete` alone.
    pub cleanup_policy_delete: bool,
    /// `min.cleanable.dirty.ratio`: clean when the dirty bytes are more than this
    /// fraction of the cleanable bytes.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: segments holding records younger than this are not cleaned.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a dirty record this old makes the log due for cleaning
    /// whatever its dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// `delete.retention.ms`: how long tombstones survive after the cleaning that first
    /// kept them (their batch's delete horizon, KIP-534).
    pub delete_retention_ms: i64,
    /// Not a Kafka key: cap on a batch's decompressed size when the leader validates
    /// records, guarding against zip bombs. Defaults to 64 x `max.message.bytes`.
    pub max_uncompressed_batch_bytes: usize,
    /// `producer.id.expiration.ms` (a broker key in Kafka): how long a producer id with
    /// no open transaction is remembered after its last write, for idempotence.
    pub producer_id_expiration_ms: i64,
}

impl Default for LogConfig {
    fn default() -> Self {
        let max_message_bytes = 1_048_588;
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            retention_ms: 7 * 24 * 60 * 60 * 1000,
            retention_bytes: -1,
            index_interval_bytes: 4096,
            segment_index_bytes: 10 * 1024 * 1024,
            max_message_bytes,
            flush_interval_messages: u64::MAX,
            flush_interval_ms: i64::MAX,
            message_timestamp_type: TimestampType::CreateTime,
            compression: None,
            compression_level: None,
            file_delete_delay_ms: 60_000,
            cleanup_policy_compact: false,
            cleanup_policy_delete: true,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: 24 * 60 * 60 * 1000,
            max_uncompressed_batch_bytes: 64 * max_message_bytes as usize,
            producer_id_expiration_ms: 24 * 60 * 60 * 1000,
        }
    }
}

impl LogConfig {
    /// Checks ranges once so the log can rely on them: segment positions must fit the
    /// u32 positions of the offset index, and an index must hold at least two entries.
    pub fn validate(&self) -> Result<()> {
        let invalid = |key: &'static str, value: String| Err(StorageError::InvalidConfig { key, value });
        if self.segment_bytes < 14 || self.segment_bytes > i32::MAX as u64 {
            return invalid("segment.bytes", self.segment_bytes.to_string());
        }
        if self.segment_ms < 1 {
            return invalid("segment.ms", self.segment_ms.to_string());
        }
        if self.retention_ms < -1 {
            return invalid("retention.ms", self.retention_ms.to_string());
        }
        if self.retention_bytes < -1 {
            return invalid("retention.bytes", self.retention_bytes.to_string());
        }
        if self.segment_index_bytes < 24 {
            return invalid("segment.index.bytes", self.segment_index_bytes.to_string());
        }
        if self.max_message_bytes == 0 {
            return invalid("max.message.bytes", self.max_message_bytes.to_string());
        }
        if self.flush_interval_messages == 0 {
            return invalid("flush.messages", self.flush_interval_messages.to_string());
        }
        if self.flush_interval_ms < 0 {
            return invalid("flush.ms", self.flush_interval_ms.to_string());
        }
        if self.file_delete_delay_ms < 0 {
            return invalid("file.delete.delay.ms", self.file_delete_delay_ms.to_string());
        }
        if !(0.0..=1.0).contains(&self.min_cleanable_dirty_ratio) {
            return invalid("min.cleanable.dirty.ratio", self.min_cleanable_dirty_ratio.to_string());
        }
        if self.min_compaction_lag_ms < 0 {
            return invalid("min.compaction.lag.ms", self.min_compaction_lag_ms.to_string());
        }
        if self.max_compaction_lag_ms < 1 || self.max_compaction_lag_ms < self.min_compaction_lag_ms {
            return invalid("max.compaction.lag.ms", self.max_compaction_lag_ms.to_string());
        }
        if self.delete_retention_ms < 0 {
            return invalid("delete.retention.ms", self.delete_retention_ms.to_string());
        }
        if self.producer_id_expiration_ms < 1 {
            return invalid("producer.id.expiration.ms", self.producer_id_expiration_ms.to_string());
        }
        Ok(())
    }
}
