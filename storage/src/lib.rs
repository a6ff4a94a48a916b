//! Strata storage: each topic-partition is a [`Log`] of segments on disk, in Apache
//! Kafka's layout and vocabulary, so a Kafka engineer finds every concept by its name.
//!
//! # On disk
//!
//! ```text
//! <log.dirs>/.strata_cleanshutdown                     written by LogManager::close_all
//! <log.dirs>/<topic>-<partition>/00000000000000000000.log        batches, appended, read by pread
//!                                00000000000000000000.index      offset -> position (8-byte entries, mmapped)
//!                                00000000000000000000.timeindex  timestamp -> offset (12-byte entries, mmapped)
//!                                00000000000000000000.txnindex   aborted transactions (34-byte entries), if any
//!                                00000000000000004242.snapshot   producer state below offset 4242
//!                                log-start-offset-checkpoint     raised by DeleteRecords
//!                                leader-epoch-checkpoint         epoch -> start offset (Kafka's format)
//!                                cleaner-offset-checkpoint       first dirty offset (compaction)
//!                                cleaner-delete-horizon          earliest pending delete horizon (compaction)
//! ```
//!
//! Segment files are named by their 20-digit zero-padded base offset. Indexes are sparse
//! (one entry every `index.interval.bytes`), big-endian like Kafka's, preallocated to
//! `segment.index.bytes` while active and trimmed on roll and close. Log data is never
//! memory-mapped. Producer state snapshots are Kafka's `ProducerSnapshot` v1 plus an
//! extension Kafka ignores (every retained batch, not just the last); they are taken at
//! each roll (at the new base) and at close (at the log end), and pruned to the newest at
//! or below each of the last two segment bases plus the newest of all. The
//! `leader-epoch-checkpoint` is Kafka's `LeaderEpochCheckpointFile` (`0`, the entry
//! count, then one `epoch start_offset` line per entry), rewritten (temp file, fsync,
//! rename) whenever the cache changes, which is on a new epoch or a truncation, not per
//! append.
//!
//! # API
//!
//! ```text
//! LogConfig { segment_bytes, segment_ms, retention_ms, retention_bytes, index_interval_bytes,
//!             segment_index_bytes, max_message_bytes, flush_interval_messages, flush_interval_ms,
//!             message_timestamp_type, file_delete_delay_ms, max_uncompressed_batch_bytes,
//!             cleanup_policy_compact, cleanup_policy_delete, min_cleanable_dirty_ratio,
//!             min_compaction_lag_ms, max_compaction_lag_ms, delete_retention_ms,
//!             producer_id_expiration_ms }
//!     Default = Kafka's defaults; validate() -> Result<()>
//!
//! Log (Send + Sync, share as Arc<Log>)
//!   open(root: &Path, topic: &str, partition: i32, config: LogConfig, clean_shutdown: bool, now_ms: i64) -> Result<Log>
//!   append(&self, records: Bytes, leader_epoch: i32, now_ms: i64) -> Result<AppendInfo>
//!   append_with_origin(&self, records: Bytes, leader_epoch: i32, origin: AppendOrigin, now_ms: i64) -> Result<AppendInfo>
//!   append_as_follower(&self, records: Bytes) -> Result<AppendInfo>
//!   read(&self, start_offset: i64, max_bytes: usize, max_offset: i64, min_one_batch: bool) -> Result<LogReadInfo>
//!   offset_for_timestamp(&self, timestamp: i64) -> Result<Option<TimestampAndOffset>>
//!   max_timestamp(&self) -> Result<Option<TimestampAndOffset>>
//!   delete_records_before(&self, offset: i64) -> Result<i64>          // new log start offset
//!   truncate_to(&self, offset: i64) -> Result<()>                     // also drops epochs >= the new end
//!   restart_at(&self, offset: i64) -> Result<()>                      // empty, starting at offset (follower behind the leader start)
//!   apply_retention(&self, now_ms: i64) -> Result<usize>               // segments deleted
//!   apply_retention_up_to(&self, now_ms: i64, high_watermark: i64) -> Result<usize>
//!   roll(&self) -> Result<()>;  flush(&self) -> Result<()>;  maybe_flush(&self, now_ms: i64) -> Result<()>
//!   close(&self) -> Result<()>;  delete(&self) -> Result<()>
//!   update_config(&self, LogConfig) -> Result<()>;  config(&self) -> Arc<LogConfig>
//!   log_start_offset(&self) -> i64;  log_end_offset(&self) -> i64
//!   first_unstable_offset(&self) -> Option<i64>;  last_stable_offset(&self) -> i64     // lock-free
//!   update_high_watermark(&self, high_watermark: i64) -> Result<i64> // call whenever the HW moves
//!   assign_epoch_start_offset(&self, epoch: i32, offset: i64) -> Result<()>          // on becoming leader
//!   latest_epoch(&self) -> Option<i32>;  end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)>
//!   epoch_for_offset(&self, offset: i64) -> Option<i32>;  leader_epoch_entries(&self) -> Vec<(i32, i64)>
//!   aborted_transactions(&self, start_offset: i64, upper_bound_offset: i64) -> Result<Vec<AbortedTxn>>
//!   active_producers(&self) -> Vec<ActiveProducer>
//!   remove_expired_producers(&self, now_ms: i64) -> Result<usize>     // call periodically
//!   size_in_bytes(&self) -> u64;  num_segments(&self) -> usize;  segment_base_offsets(&self) -> Vec<i64>
//!   topic(&self) -> &str;  partition(&self) -> i32;  dir(&self) -> &Path
//!
//! AppendInfo { first_offset, last_offset, log_append_time, log_start_offset, max_timestamp,
//!              offset_of_max_timestamp, valid_bytes, batches: Vec<BatchInfo>, duplicate: bool }
//! BatchInfo { base_offset, last_offset, producer_id, producer_epoch, base_sequence, last_sequence,
//!             is_transactional, is_control, end_txn_marker, max_timestamp, size_in_bytes }
//! LogReadInfo { records: FileSlice, log_start_offset, log_end_offset }
//! FileSlice: file() -> &Arc<File>, position() -> u64, len() -> u32, read_bytes() -> io::Result<Bytes>
//! TimestampAndOffset { timestamp, offset }
//! AbortedTxn { producer_id, first_offset, last_offset, last_stable_offset }
//! ActiveProducer { producer_id, producer_epoch, last_sequence, last_timestamp, coordinator_epoch,
//!                  current_txn_start_offset }
//!
//! LogManager (Send + Sync)
//!   open(root: &Path, default_config: LogConfig, now_ms: i64) -> Result<LogManager>
//!   get_or_create(&self, topic, partition, config, now_ms) -> Result<Arc<Log>>
//!   get(&self, topic, partition) -> Option<Arc<Log>>;  remove(&self, topic, partition) -> Result<bool>
//!   all(&self) -> Vec<Arc<Log>>;  close_all(&self) -> Result<()>;  had_clean_shutdown(&self) -> bool
//!
//! Cleaner (log compaction, see the `cleaner` module docs; one per cleaner thread)
//!   new(CleanerConfig { dedupe_buffer_bytes, dedupe_buffer_load_factor, io_buffer_bytes }) -> Result<Cleaner>
//!   clean(&mut self, log: &Log, now_ms: i64, high_watermark: i64) -> Result<CleanStats>
//!   inspect(log: &Log, now_ms: i64, high_watermark: i64) -> Result<CleanableInfo>
//! CleanStats { outcome: CleanOutcome, info: Option<CleanableInfo>, end_offset, segments_cleaned, .. }
//! CleanableInfo { first_dirty_offset, first_uncleanable_offset, clean_bytes, dirty_bytes,
//!                 dirty_ratio, max_compaction_delay_ms, should_clean }
//! ```
//!
//! # Guarantees
//!
//! - Offsets are dense and increasing for leader appends; `log_start_offset <= log_end_offset`.
//! - A leader append is all-or-nothing: every batch is validated before any byte is written.
//! - Reads return whole batches from one segment, starting with the batch containing the
//!   requested offset.
//! - Idempotence (checked with the append, under the log lock): a producer's retry of
//!   any of its last 5 batches is not written again and is answered with the original
//!   offsets (`AppendInfo::duplicate`); a sequence that does not follow the last one, or
//!   a new epoch not starting at 0, is `OutOfOrderSequence`; an older epoch is
//!   `InvalidProducerEpoch`. A producer the partition does not know may start at any
//!   sequence (Kafka since KIP-360).
//! - Transactions: a transactional batch opens (or continues) its producer's
//!   transaction, a COMMIT/ABORT marker (coordinator appends only) closes it. A
//!   transaction is unstable while open and, once its marker is written, until the high
//!   watermark passes the marker (Kafka's unreplicated transactions: a new leader may
//!   not have it). The last stable offset is the first offset of the oldest unstable
//!   transaction (never below the log start), else the log end offset; the broker bounds
//!   it by the high watermark and calls `update_high_watermark` whenever that moves (a
//!   single-node broker: with the log end offset after each append, and after opening).
//!   A reopened log counts the completions its replay sees (after the producer snapshot
//!   it starts from) as unreplicated until told a high watermark. Every ABORT of a
//!   non-empty transaction is recorded in the marker's segment's `.txnindex`, which
//!   `aborted_transactions` searches.
//! - Leader epochs (KIP-101, KIP-279): each leader append stamps its batches with the
//!   leader's epoch, refused (`StaleLeaderEpoch`) if older than the newest recorded; a
//!   new epoch is recorded at the first offset of the append, a follower records the
//!   epoch of each replicated batch newer than the latest at its base offset, and a new
//!   leader records its epoch at the log end (`assign_epoch_start_offset`). Epochs are
//!   recorded durably before the batches that start them are written. Truncation removes
//!   the epochs starting at or after the new log end, emptying the log clears them, and
//!   a rising log start moves the earliest up to it; compaction changes no offsets and
//!   leaves them alone. `end_offset_for_epoch` answers as Kafka's `endOffsetFor`.
//!   Loading drops epochs starting at or after the recovered log end (a torn tail, or an
//!   epoch taken and never written in, as Kafka does), and a missing, empty or corrupt
//!   checkpoint (e.g. a data directory older than the cache) never stops a log from
//!   opening: the cache is rebuilt from the batch headers and written.
//! - Producer state and transaction indexes are rebuilt after a restart, a crash or a
//!   truncation from the newest usable snapshot plus a header-only replay of the batches
//!   after it; a torn or corrupt transaction index is repaired the same way.
//! - Recovery after an unclean shutdown re-reads the active segment (length, offsets, CRC),
//!   truncates a torn tail and rebuilds its indexes; any segment whose indexes are missing or
//!   fail a sanity check is rebuilt too. Older segments are trusted otherwise: a process kill
//!   keeps the page cache, and durability against machine loss comes from replication, as
//!   in Kafka with its default flush settings.
//!
//! # Not yet
//!
//! KIP-890 transaction verification in the log (refusing a transactional batch the
//! coordinator has not registered). Unreplicated transactions are not persisted (as in
//! Kafka): a transaction completed before the producer snapshot a reopened log starts
//! from counts as stable even if its marker is above the high watermark.
//!
//! Log compaction (see the `cleaner` module docs) removes aborted transactions' data, and
//! markers once their transaction's data is gone and `delete.retention.ms` has passed
//! (Kafka's marker delete horizon); it keeps each producer's last batch (as an empty
//! batch if need be) so a replay rebuilds its sequence.

mod checkpoint;
mod cleaner;
mod config;
mod error;
mod file_slice;
mod index;
mod leader_epoch;
mod log;
mod manager;
mod partition_metadata;
mod producer_state;
mod segment;

pub use cleaner::{CleanOutcome, CleanStats, CleanableInfo, Cleaner, CleanerConfig};
pub use config::LogConfig;
pub use error::{IoOp, Result, StorageError};
pub use file_slice::FileSlice;
pub use index::AbortedTxn;
pub use log::{AppendInfo, AppendOrigin, BatchInfo, Log, LogReadInfo};
pub use manager::{parse_partition_dir, LogManager, CLEAN_SHUTDOWN_FILE, METADATA_LOG_PREFIX};
pub use partition_metadata::PARTITION_METADATA_FILE;
pub use producer_state::ActiveProducer;
pub use segment::TimestampAndOffset;
pub use strata_protocol::records::TimestampType;
