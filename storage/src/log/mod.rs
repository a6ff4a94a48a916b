//! `Log`: the ordered segments of one topic-partition, with dense offsets.
//!
//! All state sits behind one `RwLock`: appends, rolls, retention and truncation take it
//! for writing; reads take it for reading and hand back a [`FileSlice`] that is used after
//! the lock is released. Validation of incoming batches (CRC, record decoding) happens
//! before the lock is taken, so it does not serialize producers. Producer state
//! (idempotence, transactions) is checked and updated under the same write lock, so
//! check-and-append is atomic. So is the leader epoch cache, which appends extend and
//! truncations cut under the same lock. The log end offset, log start offset and first
//! unstable offset are mirrored in atomics so hot-path queries take no lock.

mod append;
mod cleaning;
mod epochs;
mod load;
mod maintenance;
mod producers;
mod read;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

pub(crate) use append::batch_info;
pub use append::{AppendInfo, AppendOrigin, BatchInfo};
pub use read::LogReadInfo;

use crate::config::LogConfig;
use crate::error::{Result, StorageError};
use crate::leader_epoch::LeaderEpochCache;
use crate::producer_state::ProducerStateManager;
use crate::segment::LogSegment;

/// Files of deleted segments waiting for `file.delete.delay.ms` to pass.
#[derive(Debug)]
struct PendingDelete {
    due_ms: i64,
    paths: Vec<PathBuf>,
}

/// State guarded by the log's lock.
#[derive(Debug)]
struct LogInner {
    /// Segments by base offset; never empty while open. The last one is active.
    segments: BTreeMap<i64, LogSegment>,
    log_start_offset: i64,
    unflushed_messages: u64,
    last_flush_ms: i64,
    /// Latest clock value seen from any caller, for operations that take no `now_ms`.
    last_seen_ms: i64,
    pending_deletes: Vec<PendingDelete>,
    /// Idempotence and transaction state, consistent with the segments.
    producer_state: ProducerStateManager,
    /// Start offset of each leader epoch, as `leader-epoch-checkpoint` holds it.
    leader_epochs: LeaderEpochCache,
    /// The high watermark the broker last reported ([`Log::update_high_watermark`]),
    /// kept within [log start, log end]; `None` until it reports one after opening.
    /// Completed transactions whose markers are at or above it are still unstable.
    high_watermark: Option<i64>,
    closed: bool,
}

impl LogInner {
    fn active(&self) -> &LogSegment {
        // Invariant: at least one segment while open (checked by every constructor).
        self.segments.values().next_back().expect("log has no segment")
    }

    fn active_mut(&mut self) -> &mut LogSegment {
        self.segments.values_mut().next_back().expect("log has no segment")
    }

    fn log_end_offset(&self) -> i64 {
        self.active().next_offset()
    }

    fn observe_now(&mut self, now_ms: i64) {
        self.last_seen_ms = self.last_seen_ms.max(now_ms);
    }

    fn first_segment_base(&self) -> i64 {
        self.segments.keys().next().copied().unwrap_or(self.log_start_offset)
    }

    /// First offset of the oldest transaction that is open, or completed by a marker at
    /// or above the high watermark; never below the log start offset.
    fn first_unstable_offset(&self) -> Option<i64> {
        self.producer_state.first_unstable_offset().map(|offset| offset.max(self.log_start_offset))
    }
}

/// `first_unstable_offset` mirror value meaning "no unstable transaction".
const NO_UNSTABLE_OFFSET: i64 = -1;

/// The log of one topic-partition: `<log.dirs>/<topic>-<partition>/`, Kafka's layout.
///
/// `Send + Sync`; share it as `Arc<Log>`. Every method takes `&self` and locks
/// internally; no guard escapes. Times are passed in (`now_ms`) so tests control them.
#[derive(Debug)]
pub struct Log {
    dir: PathBuf,
    topic: String,
    partition: i32,
    config: RwLock<Arc<LogConfig>>,
    inner: RwLock<LogInner>,
    log_end_offset: AtomicI64,
    log_start_offset: AtomicI64,
    /// Log cleaner bookkeeping (one cleaning at a time, cached checkpoint).
    cleaner_state: cleaning::CleanerState,
    /// [`NO_UNSTABLE_OFFSET`] when no transaction is unstable.
    first_unstable_offset: AtomicI64,
}

impl Log {
    /// Opens the log of `topic`-`partition` under the log dir `root`, creating it if
    /// absent. When `clean_shutdown` is false the active segment is recovered: batches
    /// are re-read with length and CRC checks, a torn tail is truncated and its indexes
    /// are rebuilt. Indexes of other segments are sanity-checked and rebuilt if broken.
    pub fn open(
        root: &Path,
        topic: &str,
        partition: i32,
        config: LogConfig,
        clean_shutdown: bool,
        now_ms: i64,
    ) -> Result<Log> {
        config.validate()?;
        let dir = root.join(partition_dir_name(topic, partition)?);
        let inner = load::load(&dir, &config, clean_shutdown, now_ms)?;
        let log = Log {
            dir,
            topic: topic.to_string(),
            partition,
            config: RwLock::new(Arc::new(config)),
            log_end_offset: AtomicI64::new(inner.log_end_offset()),
            log_start_offset: AtomicI64::new(inner.log_start_offset),
            first_unstable_offset: AtomicI64::new(
                inner.first_unstable_offset().unwrap_or(NO_UNSTABLE_OFFSET),
            ),
            cleaner_state: cleaning::CleanerState::default(),
            inner: RwLock::new(inner),
        };
        tracing::debug!(
            topic = %log.topic,
            partition = log.partition,
            log_start_offset = log.log_start_offset(),
            log_end_offset = log.log_end_offset(),
            "log opened"
        );
        Ok(log)
    }

    /// Topic of this log.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Partition of this log.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// First offset still readable (raised by retention and DeleteRecords).
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset.load(Ordering::Acquire)
    }

    /// Offset the next appended record will get.
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset.load(Ordering::Acquire)
    }

    /// Bytes of all segment files.
    pub fn size_in_bytes(&self) -> u64 {
        self.read_inner().segments.values().map(LogSegment::size).sum()
    }

    /// Number of segments (at least 1 while open).
    pub fn num_segments(&self) -> usize {
        self.read_inner().segments.len()
    }

    /// Base offsets of the segments, oldest first (for tests and admin tools).
    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.read_inner().segments.keys().copied().collect()
    }

    /// The current configuration.
    pub fn config(&self) -> Arc<LogConfig> {
        self.config.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replaces the configuration (topic config change). New limits apply to the next
    /// append; index sizes apply to segments created from now on.
    pub fn update_config(&self, config: LogConfig) -> Result<()> {
        config.validate()?;
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(config);
        Ok(())
    }

    fn read_inner(&self) -> RwLockReadGuard<'_, LogInner> {
        // A panic while holding the lock cannot leave a half-applied append visible:
        // offsets are published only after the write, so the state stays usable.
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write_inner(&self) -> RwLockWriteGuard<'_, LogInner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    fn check_open(&self, inner: &LogInner) -> Result<()> {
        if inner.closed {
            return Err(StorageError::LogClosed { topic: self.topic.clone(), partition: self.partition });
        }
        Ok(())
    }

    /// Mirrors offsets into the atomics after a change, checking the invariants
    /// `log_start_offset <= first_unstable_offset <= log_end_offset`, every leader epoch
    /// starts within [log start, log end], and the high watermark lies within them too.
    fn publish(&self, inner: &LogInner) {
        let leo = inner.log_end_offset();
        let start = inner.log_start_offset;
        assert!(start <= leo, "log start offset {start} above log end offset {leo}");
        let unstable = inner.first_unstable_offset();
        if let Some(unstable) = unstable {
            assert!(
                start <= unstable && unstable <= leo,
                "first unstable offset {unstable} outside the log [{start}, {leo}]"
            );
        }
        let epochs = &inner.leader_epochs;
        if let (Some(earliest), Some(latest)) = (epochs.earliest_entry(), epochs.latest_entry()) {
            assert!(
                start <= earliest.start_offset && latest.start_offset <= leo,
                "leader epochs {:?} outside the log [{start}, {leo}]",
                epochs.entries()
            );
        }
        if let Some(hw) = inner.high_watermark {
            assert!(start <= hw && hw <= leo, "high watermark {hw} outside the log [{start}, {leo}]");
        }
        // The log end first: a reader that sees the new unstable offset sees a log end
        // at least as far.
        self.log_end_offset.store(leo, Ordering::Release);
        self.log_start_offset.store(inner.log_start_offset, Ordering::Release);
        self.first_unstable_offset.store(unstable.unwrap_or(NO_UNSTABLE_OFFSET), Ordering::Release);
    }
}

/// `<topic>-<partition>`, refusing names that would escape the log dir.
pub(crate) fn partition_dir_name(topic: &str, partition: i32) -> Result<String> {
    let bad = topic.is_empty()
        || topic == "."
        || topic == ".."
        || topic.contains(['/', '\\', '\0'])
        || partition < 0;
    if bad {
        return Err(StorageError::InvalidTopicPartition { topic: topic.to_string(), partition });
    }
    Ok(format!("{topic}-{partition}"))
}
