//! Storage errors. Each variant is distinct so the broker can map it to one Kafka error
//! code in an exhaustive `match`, and each I/O failure names the file, the position and
//! the operation.

use std::path::PathBuf;

use strata_protocol::records::RecordsError;

/// What the storage layer was doing when an I/O call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoOp {
    /// Creating or opening a file or directory.
    Open,
    /// Reading (pread) from a file.
    Read,
    /// Appending to a log file.
    Append,
    /// Changing a file's length (truncation, index trimming or preallocation).
    SetLen,
    /// Memory-mapping an index file.
    Map,
    /// fsync / msync.
    Sync,
    /// Renaming a file or directory.
    Rename,
    /// Deleting a file or directory.
    Delete,
    /// Listing a directory.
    ListDir,
    /// Reading file metadata.
    Metadata,
    /// Writing a small metadata file (checkpoint, marker).
    Write,
}

impl std::fmt::Display for IoOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let op = match self {
            IoOp::Open => "open",
            IoOp::Read => "read",
            IoOp::Append => "append to",
            IoOp::SetLen => "set the length of",
            IoOp::Map => "memory-map",
            IoOp::Sync => "sync",
            IoOp::Rename => "rename",
            IoOp::Delete => "delete",
            IoOp::ListDir => "list",
            IoOp::Metadata => "stat",
            IoOp::Write => "write",
        };
        f.write_str(op)
    }
}

/// Errors returned by [`crate::Log`] and [`crate::LogManager`].
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// A filesystem call failed (maps to KAFKA_STORAGE_ERROR).
    #[error("failed to {op} {} at position {position}", path.display())]
    Io {
        /// The operation attempted.
        op: IoOp,
        /// The file or directory touched.
        path: PathBuf,
        /// Byte position in the file, 0 when not meaningful.
        position: u64,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A batch failed its length or CRC check (CORRUPT_MESSAGE).
    #[error("batch {batch_index} of the request is corrupt")]
    CorruptRecord {
        /// Index of the batch within the appended records.
        batch_index: usize,
        /// What was wrong.
        #[source]
        source: RecordsError,
    },
    /// A batch is well-formed on the wire but breaks a rule of the log, e.g. a count that
    /// disagrees with its offsets, or a control batch from a client (INVALID_RECORD).
    #[error("batch {batch_index} of the request is invalid: {reason}")]
    InvalidRecord {
        /// Index of the batch within the appended records.
        batch_index: usize,
        /// The rule broken.
        reason: &'static str,
    },
    /// A batch's records could not be decoded (INVALID_RECORD).
    #[error("batch {batch_index} of the request has malformed records")]
    MalformedRecords {
        /// Index of the batch within the appended records.
        batch_index: usize,
        /// The decoding error.
        #[source]
        source: RecordsError,
    },
    /// One batch exceeds `max.message.bytes` (MESSAGE_TOO_LARGE).
    #[error("batch of {size} bytes exceeds max.message.bytes {max}")]
    RecordTooLarge {
        /// Size of the batch.
        size: usize,
        /// The configured maximum.
        max: u32,
    },
    /// The records of one append exceed `segment.bytes` and can never fit a segment
    /// (RECORD_LIST_TOO_LARGE).
    #[error("{size} bytes of records exceed segment.bytes {segment_bytes}")]
    RecordSetTooLarge {
        /// Size of the append.
        size: usize,
        /// The configured segment size.
        segment_bytes: u64,
    },
    /// A read or truncation asked for an offset outside the log (OFFSET_OUT_OF_RANGE).
    #[error("offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        /// The offset asked for.
        offset: i64,
        /// First offset of the log.
        log_start_offset: i64,
        /// Next offset to be written.
        log_end_offset: i64,
    },
    /// A follower append does not continue the log: its first offset is below the log
    /// end offset or its batches go backwards (replication must truncate first).
    #[error("unexpected append offset {offset}, log end offset is {log_end_offset}")]
    UnexpectedAppendOffset {
        /// First offending batch's base offset.
        offset: i64,
        /// Log end offset at the time, or the previous batch's next offset.
        log_end_offset: i64,
    },
    /// A configuration value is out of range.
    #[error("invalid value {value} for {key}")]
    InvalidConfig {
        /// The Kafka config key.
        key: &'static str,
        /// The rejected value.
        value: String,
    },
    /// The log was closed or deleted; the handle is stale.
    #[error("log {topic}-{partition} is closed")]
    LogClosed {
        /// Topic of the log.
        topic: String,
        /// Partition of the log.
        partition: i32,
    },
    /// A stored batch could not be decoded while serving a read (e.g. ListOffsets by
    /// time needs record timestamps).
    #[error("stored batch at offset {offset} in {} is unreadable", path.display())]
    CorruptLog {
        /// Segment file.
        path: PathBuf,
        /// Base offset of the batch.
        offset: i64,
        /// What was wrong.
        #[source]
        source: RecordsError,
    },
    /// A producer wrote with an epoch older than the one the partition has seen: a
    /// zombie fenced by a newer instance (INVALID_PRODUCER_EPOCH; Kafka answers Produce
    /// with it instead of PRODUCER_FENCED since 2.7 so the client can abort and go on).
    /// Also returned for a transaction marker carrying an old producer epoch.
    #[error("producer {producer_id} epoch {epoch} is older than its current epoch {current_epoch}")]
    InvalidProducerEpoch {
        /// The producer.
        producer_id: i64,
        /// Epoch in the batch.
        epoch: i16,
        /// Epoch the partition knows.
        current_epoch: i16,
    },
    /// A batch's first sequence does not follow the producer's last appended sequence,
    /// or a new epoch does not start at sequence 0 (OUT_OF_ORDER_SEQUENCE_NUMBER).
    /// Retries of the last 5 batches are not errors: they are answered as duplicates.
    #[error(
        "producer {producer_id} epoch {epoch}: sequence {first_sequence} does not follow last sequence {last_sequence}"
    )]
    OutOfOrderSequence {
        /// The producer.
        producer_id: i64,
        /// Epoch in the batch.
        epoch: i16,
        /// First sequence of the batch.
        first_sequence: i32,
        /// Last sequence appended in that epoch, -1 if none.
        last_sequence: i32,
    },
    /// A non-transactional batch from a producer whose transaction is open
    /// (INVALID_TXN_STATE).
    #[error("producer {producer_id} wrote a non-transactional batch inside its open transaction")]
    InvalidTxnState {
        /// The producer.
        producer_id: i64,
    },
    /// A transaction marker written by a coordinator older than the one that wrote the
    /// producer's last marker (TRANSACTION_COORDINATOR_FENCED).
    #[error(
        "marker for producer {producer_id} from coordinator epoch {coordinator_epoch}, \
         older than {current_coordinator_epoch}"
    )]
    TransactionCoordinatorFenced {
        /// The producer whose transaction the marker ends.
        producer_id: i64,
        /// Coordinator epoch in the marker.
        coordinator_epoch: i32,
        /// Coordinator epoch of the last marker appended.
        current_coordinator_epoch: i32,
    },
    /// A leader append or epoch assignment with a leader epoch older than the newest one
    /// the log has recorded: leader epochs never go back, so the caller is a leader that
    /// was replaced (FENCED_LEADER_EPOCH). Nothing was written.
    #[error("leader epoch {epoch} is older than the log's latest leader epoch {latest_epoch}")]
    StaleLeaderEpoch {
        /// The epoch given.
        epoch: i32,
        /// The newest epoch in the log's leader epoch cache.
        latest_epoch: i32,
    },
    /// Topic name or partition is not usable as a directory name.
    #[error("invalid topic partition {topic}-{partition}")]
    InvalidTopicPartition {
        /// Topic name.
        topic: String,
        /// Partition.
        partition: i32,
    },
}

impl StorageError {
    /// Builds an [`StorageError::Io`] for `path`.
    pub(crate) fn io(op: IoOp, path: impl Into<PathBuf>, position: u64, source: std::io::Error) -> Self {
        StorageError::Io { op, path: path.into(), position, source }
    }
}

/// Shorthand used throughout the crate.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;
