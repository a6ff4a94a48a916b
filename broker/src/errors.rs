//! The one place where internal errors become Kafka error codes.

use crate::controller::raft::ServeError;
use crate::replica::{AppendError, WaitError};
use strata_protocol::ErrorCode;
use strata_storage::StorageError;

/// Why a log directory could not be described; reported in its result's error code
/// (see [`log_dir_error_code`]), as Kafka reports an offline dir.
#[derive(Debug, thiserror::Error)]
pub enum LogDirError {
    /// `statvfs` of the directory failed: it is gone, unreadable or its disk failed.
    #[error("cannot stat log dir {path}: {source}")]
    Unreadable {
        /// The directory.
        path: std::path::PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// The error code of a StrataRaft answer whose RPC could not be served.
pub fn raft_serve_error_code(e: &ServeError) -> ErrorCode {
    match e {
        ServeError::UnknownKind(_) | ServeError::Decode { .. } => ErrorCode::InvalidRequest,
        ServeError::Encode { .. } => ErrorCode::UnknownServerError,
        // Raft is waiting on its log (a full disk): the caller retries at its next heartbeat.
        ServeError::Busy { .. } => ErrorCode::RequestTimedOut,
    }
}

/// The Kafka error code a client should see for a storage error.
pub fn storage_error_code(e: &StorageError) -> ErrorCode {
    match e {
        StorageError::CorruptRecord { .. } => ErrorCode::CorruptMessage,
        StorageError::RecordTooLarge { .. } => ErrorCode::MessageTooLarge,
        StorageError::RecordSetTooLarge { .. } => ErrorCode::RecordListTooLarge,
        StorageError::InvalidRecord { .. } | StorageError::MalformedRecords { .. } => {
            ErrorCode::InvalidRecord
        }
        StorageError::OffsetOutOfRange { .. } => ErrorCode::OffsetOutOfRange,
        StorageError::UnexpectedAppendOffset { .. } => ErrorCode::UnknownServerError,
        StorageError::InvalidConfig { .. } => ErrorCode::InvalidConfig,
        StorageError::InvalidTopicPartition { .. } => ErrorCode::InvalidTopicException,
        StorageError::LogClosed { .. } => ErrorCode::NotLeaderOrFollower,
        StorageError::Io { .. } | StorageError::CorruptLog { .. } => ErrorCode::KafkaStorageError,
        StorageError::InvalidProducerEpoch { .. } => ErrorCode::InvalidProducerEpoch,
        StorageError::OutOfOrderSequence { .. } => ErrorCode::OutOfOrderSequenceNumber,
        StorageError::InvalidTxnState { .. } => ErrorCode::InvalidTxnState,
        StorageError::TransactionCoordinatorFenced { .. } => ErrorCode::TransactionCoordinatorFenced,
        // A leader append with an epoch older than the log's: this broker was deposed.
        StorageError::StaleLeaderEpoch { .. } => ErrorCode::NotLeaderOrFollower,
    }
}

/// The error code of a leader append that was refused: a deposed leader's, or its log's.
pub fn append_error_code(e: &AppendError) -> ErrorCode {
    match e {
        AppendError::NotLeader => ErrorCode::NotLeaderOrFollower,
        AppendError::Storage(e) => storage_error_code(e),
    }
}

/// The error code of an append that was not replicated: leadership moved before the high
/// watermark passed it, or the request's timeout passed first.
pub fn wait_error_code(e: WaitError) -> ErrorCode {
    match e {
        WaitError::NotLeader => ErrorCode::NotLeaderOrFollower,
        WaitError::Timeout => ErrorCode::RequestTimedOut,
    }
}

/// The error code of a log directory DescribeLogDirs cannot describe: Kafka reports an
/// offline log dir with KAFKA_STORAGE_ERROR.
pub fn log_dir_error_code(e: &LogDirError) -> ErrorCode {
    match e {
        LogDirError::Unreadable { .. } => ErrorCode::KafkaStorageError,
    }
}
