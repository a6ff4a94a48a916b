//! `LogSegment`: one `.log` file of whole batches plus its `.index`, `.timeindex` and
//! `.txnindex`.
//!
//! The log file is only ever appended to (`O_APPEND` writes) or truncated, and read with
//! `pread`; it is never memory-mapped, so a torn or truncated file cannot fault the
//! process. The segment keeps in memory what appends and rolls need: its size, its next
//! offset, its largest timestamp and the bytes since the last index entry.

mod cleaned;
mod read;
mod recover;
mod scan;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_protocol::records::RecordBatchHeader;

use crate::config::LogConfig;
use crate::error::{IoOp, Result, StorageError};
use crate::index::{OffsetIndex, TimeIndex, TransactionIndex};

pub use read::TimestampAndOffset;

/// Suffix of segment data files.
pub(crate) const LOG_SUFFIX: &str = ".log";
/// Suffix of offset index files.
pub(crate) const INDEX_SUFFIX: &str = ".index";
/// Suffix of time index files.
pub(crate) const TIME_INDEX_SUFFIX: &str = ".timeindex";
/// Suffix of transaction index files.
pub(crate) const TXN_INDEX_SUFFIX: &str = ".txnindex";
/// Suffix added to files of deleted segments until they are removed.
pub(crate) const DELETED_SUFFIX: &str = ".deleted";

/// The 20-digit zero-padded base offset that names a segment's files.
pub(crate) fn file_stem(base_offset: i64) -> String {
    format!("{base_offset:020}")
}

fn path_with(dir: &Path, base_offset: i64, suffix: &str) -> PathBuf {
    dir.join(format!("{}{suffix}", file_stem(base_offset)))
}

/// What the segment needs to know about each appended batch (already patched).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchMeta {
    pub(crate) base_offset: i64,
    pub(crate) last_offset: i64,
    pub(crate) max_timestamp: i64,
    pub(crate) size: u64,
}

impl From<&RecordBatchHeader> for BatchMeta {
    fn from(h: &RecordBatchHeader) -> Self {
        BatchMeta {
            base_offset: h.base_offset,
            last_offset: h.last_offset(),
            max_timestamp: h.max_timestamp,
            size: h.size_in_bytes() as u64,
        }
    }
}

/// One segment of a partition's log.
#[derive(Debug)]
pub(crate) struct LogSegment {
    base_offset: i64,
    log_path: PathBuf,
    log: Arc<File>,
    size: u64,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    txn_index: TransactionIndex,
    /// Offset after the last batch; `base_offset` when empty.
    next_offset: i64,
    /// Largest batch max timestamp, -1 when unknown or empty.
    max_timestamp: i64,
    /// Base offset of the first batch that reached `max_timestamp`, -1 when unknown.
    offset_of_max_timestamp: i64,
    /// Max timestamp of the first batch, which time-based rolling measures from.
    first_batch_timestamp: Option<i64>,
    created_ms: i64,
    index_interval_bytes: u64,
    bytes_since_last_index_entry: u64,
    /// Appended since the last fsync.
    dirty: bool,
}

impl LogSegment {
    /// Creates an empty segment starting at `base_offset`, replacing stale files with the
    /// same name if any (e.g. left by a truncation that crashed half-way).
    pub(crate) fn create(dir: &Path, base_offset: i64, config: &LogConfig, now_ms: i64) -> Result<Self> {
        let log_path = path_with(dir, base_offset, LOG_SUFFIX);
        let log = open_log_file(&log_path)?;
        log.set_len(0).map_err(|e| StorageError::io(IoOp::SetLen, &log_path, 0, e))?;
        let txn_index =
            TransactionIndex::create(&path_with(dir, base_offset, TXN_INDEX_SUFFIX), base_offset)?;
        let mut segment = Self::with_files(dir, base_offset, log_path, log, 0, txn_index, config, now_ms)?;
        segment.offset_index.reset();
        segment.time_index.reset();
        segment.offset_index.resize(u64::from(config.segment_index_bytes))?;
        segment.time_index.resize(u64::from(config.segment_index_bytes))?;
        Ok(segment)
    }

    /// Opens an existing segment. Indexes that are missing (for a non-empty log) or fail
    /// their sanity check are rebuilt by a full recovery of the segment. `active` selects
    /// the full (rather than first/last) index check and preallocates the indexes for
    /// appends. `force_recover` skips the checks and recovers (after an unclean shutdown).
    /// Returns the segment and what loading it found.
    pub(crate) fn open(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        now_ms: i64,
        active: bool,
        force_recover: bool,
    ) -> Result<(Self, SegmentLoad)> {
        let log_path = path_with(dir, base_offset, LOG_SUFFIX);
        let indexes_present = path_with(dir, base_offset, INDEX_SUFFIX).exists()
            && path_with(dir, base_offset, TIME_INDEX_SUFFIX).exists();
        let log = open_log_file(&log_path)?;
        let size = log.metadata().map_err(|e| StorageError::io(IoOp::Metadata, &log_path, 0, e))?.len();
        let txn_path = path_with(dir, base_offset, TXN_INDEX_SUFFIX);
        let (txn_index, txn_index_sane) = TransactionIndex::open(&txn_path, base_offset, i64::MAX)?;
        let mut segment = Self::with_files(dir, base_offset, log_path, log, size, txn_index, config, now_ms)?;
        if active {
            segment.resize_indexes(config.segment_index_bytes)?;
        }
        let truncated_bytes = segment.open_indexes(active, force_recover, size, indexes_present)?;
        // Entries for markers lost with a torn tail go too.
        segment.txn_index.truncate_to(segment.next_offset)?;
        // After a crash the active segment's last aborts may have reached the log but not
        // the transaction index: the log replays the segment to be sure.
        let txn_index_suspect = force_recover || !txn_index_sane;
        Ok((segment, SegmentLoad { truncated_bytes, txn_index_suspect }))
    }

    /// Loads or rebuilds the offset and time indexes; returns the bytes recovery cut.
    fn open_indexes(
        &mut self,
        active: bool,
        force_recover: bool,
        size: u64,
        indexes_present: bool,
    ) -> Result<u64> {
        let segment = self;
        if force_recover {
            return segment.recover();
        }
        let sane = indexes_present || size == 0;
        let sane = sane && segment.offset_index.sanity_check(size, active).is_ok();
        let truncated = if sane && segment.load_tail_state()? {
            0
        } else {
            tracing::warn!(
                segment = %segment.log_path.display(),
                "segment indexes missing or inconsistent, rebuilding from the log"
            );
            segment.recover()?
        };
        if segment.time_index.sanity_check(segment.next_offset, active).is_err() {
            tracing::warn!(segment = %segment.log_path.display(), "time index inconsistent, rebuilding");
            segment.recover()?;
        }
        if !active {
            // Rebuilt indexes of an inactive segment are still preallocated and lack the
            // final time index entry.
            segment.on_become_inactive()?;
        }
        Ok(truncated)
    }

    #[allow(clippy::too_many_arguments)]
    fn with_files(
        dir: &Path,
        base_offset: i64,
        log_path: PathBuf,
        log: File,
        size: u64,
        txn_index: TransactionIndex,
        config: &LogConfig,
        now_ms: i64,
    ) -> Result<Self> {
        let offset_index = OffsetIndex::open(
            &path_with(dir, base_offset, INDEX_SUFFIX),
            base_offset,
            config.segment_index_bytes,
        )?;
        let time_index = TimeIndex::open(
            &path_with(dir, base_offset, TIME_INDEX_SUFFIX),
            base_offset,
            config.segment_index_bytes,
        )?;
        Ok(LogSegment {
            base_offset,
            log_path,
            log: Arc::new(log),
            size,
            offset_index,
            time_index,
            txn_index,
            next_offset: base_offset,
            max_timestamp: -1,
            offset_of_max_timestamp: -1,
            first_batch_timestamp: None,
            created_ms: now_ms,
            index_interval_bytes: u64::from(config.index_interval_bytes),
            bytes_since_last_index_entry: 0,
            dirty: false,
        })
    }

    /// Derives next offset, max timestamp and first batch timestamp from the indexes and
    /// the batches after the last offset index entry. Returns false if those batches do
    /// not scan cleanly to the end of the file (then the caller recovers).
    fn load_tail_state(&mut self) -> Result<bool> {
        self.next_offset = self.base_offset;
        self.max_timestamp = -1;
        self.offset_of_max_timestamp = -1;
        self.first_batch_timestamp = None;
        if let Some(last) = self.time_index.last_entry() {
            self.max_timestamp = last.timestamp;
            self.offset_of_max_timestamp = last.offset;
        }
        if self.size == 0 {
            return Ok(true);
        }
        match self.read_header(0)? {
            Some(first) if first.base_offset >= self.base_offset => {
                self.first_batch_timestamp = Some(first.max_timestamp);
            }
            _ => return Ok(false),
        }
        let start = self.offset_index.last_entry().map_or(0, |e| u64::from(e.position));
        if start >= self.size {
            return Ok(false);
        }
        let mut position = start;
        let mut bytes_since = 0;
        while position < self.size {
            let Some(header) = self.read_header(position)? else {
                return Ok(false);
            };
            let meta = BatchMeta::from(&header);
            if meta.base_offset < self.next_offset || meta.last_offset < meta.base_offset {
                return Ok(false);
            }
            position += meta.size;
            if position > self.size {
                return Ok(false);
            }
            self.next_offset = meta.last_offset + 1;
            self.observe_timestamp(&meta);
            bytes_since += meta.size;
        }
        self.bytes_since_last_index_entry = bytes_since;
        Ok(true)
    }

    fn observe_timestamp(&mut self, meta: &BatchMeta) {
        if meta.max_timestamp > self.max_timestamp {
            self.max_timestamp = meta.max_timestamp;
            self.offset_of_max_timestamp = meta.base_offset;
        }
    }

    /// Updates indexes and in-memory state for a batch written at `position`.
    fn index_batch(&mut self, position: u64, meta: &BatchMeta) {
        debug_assert!(meta.base_offset >= self.next_offset, "offsets must grow within a segment");
        if self.first_batch_timestamp.is_none() {
            self.first_batch_timestamp = Some(meta.max_timestamp);
        }
        self.observe_timestamp(meta);
        if self.bytes_since_last_index_entry > self.index_interval_bytes {
            if let Ok(position) = u32::try_from(position) {
                if !self.offset_index.is_full() {
                    self.offset_index.append(meta.base_offset, position);
                }
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, false);
            }
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += meta.size;
        self.next_offset = meta.last_offset + 1;
    }

    /// Appends `data`, which holds exactly the batches described by `batches`, with one
    /// write. On a failed or short write the file is cut back to its previous size so no
    /// partial batch stays behind.
    pub(crate) fn append(&mut self, data: &[u8], batches: &[BatchMeta]) -> Result<()> {
        debug_assert_eq!(data.len() as u64, batches.iter().map(|b| b.size).sum::<u64>());
        let start = self.size;
        if let Err(e) = (&*self.log).write_all(data) {
            let _ = self.log.set_len(start);
            return Err(StorageError::io(IoOp::Append, &self.log_path, start, e));
        }
        let mut position = start;
        for meta in batches {
            self.index_batch(position, meta);
            position += meta.size;
        }
        self.size = position;
        self.dirty = true;
        Ok(())
    }

    /// Whether the segment must roll before taking `incoming_bytes` more whose largest
    /// timestamp is `incoming_max_timestamp` and last offset `incoming_last_offset`.
    /// Empty segments never roll, so a roll cannot loop.
    pub(crate) fn should_roll(
        &self,
        config: &LogConfig,
        incoming_bytes: u64,
        incoming_max_timestamp: i64,
        incoming_last_offset: i64,
        now_ms: i64,
    ) -> bool {
        if self.size == 0 {
            return false;
        }
        let waited_ms = match self.first_batch_timestamp {
            Some(first) if first >= 0 => incoming_max_timestamp.saturating_sub(first),
            _ => now_ms.saturating_sub(self.created_ms),
        };
        self.size + incoming_bytes > config.segment_bytes
            || waited_ms > config.segment_ms
            || self.offset_index.is_full()
            || self.time_index.is_full()
            || incoming_last_offset - self.base_offset > i64::from(i32::MAX)
    }

    /// Called when the segment stops being the active one: records its largest timestamp
    /// in the time index (so it survives a restart) and trims both indexes.
    pub(crate) fn on_become_inactive(&mut self) -> Result<()> {
        if self.max_timestamp >= 0 {
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, true);
        }
        self.offset_index.trim()?;
        self.time_index.trim()
    }

    /// Preallocates (or trims) both indexes to `bytes`.
    pub(crate) fn resize_indexes(&mut self, bytes: u32) -> Result<()> {
        self.offset_index.resize(u64::from(bytes))?;
        self.time_index.resize(u64::from(bytes))
    }

    /// fsyncs the log file and msyncs the indexes if anything was appended since.
    pub(crate) fn flush(&mut self) -> Result<()> {
        if self.dirty {
            self.log.sync_data().map_err(|e| StorageError::io(IoOp::Sync, &self.log_path, self.size, e))?;
            self.offset_index.flush()?;
            self.time_index.flush()?;
            self.dirty = false;
        }
        self.txn_index.flush()
    }

    /// Renames all three files with the `.deleted` suffix, so a crash before their
    /// removal leaves nothing that looks like a live segment. Returns the new paths.
    pub(crate) fn rename_to_deleted(&mut self) -> Result<Vec<PathBuf>> {
        let mut paths = Vec::with_capacity(3);
        let log_to = with_suffix(&self.log_path, DELETED_SUFFIX);
        std::fs::rename(&self.log_path, &log_to)
            .map_err(|e| StorageError::io(IoOp::Rename, &self.log_path, 0, e))?;
        self.log_path = log_to.clone();
        paths.push(log_to);
        let index_to = with_suffix(self.offset_index.path(), DELETED_SUFFIX);
        self.offset_index.rename(index_to.clone())?;
        paths.push(index_to);
        let time_to = with_suffix(self.time_index.path(), DELETED_SUFFIX);
        self.time_index.rename(time_to.clone())?;
        paths.push(time_to);
        let txn_to = with_suffix(self.txn_index.path(), DELETED_SUFFIX);
        if self.txn_index.rename(txn_to.clone())? {
            paths.push(txn_to);
        }
        Ok(paths)
    }

    /// Removes the segment's files now (readers holding a `FileSlice` keep working).
    pub(crate) fn delete(self) -> Result<()> {
        remove_if_exists(&self.log_path)?;
        self.offset_index.delete()?;
        self.time_index.delete()?;
        self.txn_index.delete()
    }

    /// Removes the records at and after `offset`, cutting at the start of the batch that
    /// contains it. Returns the bytes removed.
    pub(crate) fn truncate_to(&mut self, offset: i64) -> Result<u64> {
        let Some((position, header)) = self.find_batch(offset)? else {
            return Ok(0);
        };
        // Index entries are keyed by batch base offsets: drop every entry of the cut batch.
        let cut_offset = header.base_offset;
        let removed = self.size - position;
        self.log
            .set_len(position)
            .map_err(|e| StorageError::io(IoOp::SetLen, &self.log_path, position, e))?;
        self.size = position;
        self.offset_index.truncate_to(cut_offset);
        self.time_index.truncate_to(cut_offset);
        self.txn_index.truncate_to(cut_offset)?;
        if !self.load_tail_state()? {
            self.recover()?;
        }
        if self.size == 0 {
            self.first_batch_timestamp = None;
        }
        self.dirty = true;
        Ok(removed)
    }

    /// The segment's largest timestamp for retention: the max record timestamp, or the
    /// file's modification time when no record carries one (as Kafka does).
    pub(crate) fn largest_timestamp_for_retention(&self) -> Result<i64> {
        if self.max_timestamp >= 0 {
            return Ok(self.max_timestamp);
        }
        let modified = self
            .log
            .metadata()
            .and_then(|m| m.modified())
            .map_err(|e| StorageError::io(IoOp::Metadata, &self.log_path, 0, e))?;
        Ok(modified
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)))
    }

    pub(crate) fn next_offset(&self) -> i64 {
        self.next_offset
    }
    pub(crate) fn size(&self) -> u64 {
        self.size
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.size == 0
    }
    pub(crate) fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }
    pub(crate) fn log_path(&self) -> &Path {
        &self.log_path
    }
    pub(crate) fn file(&self) -> &Arc<File> {
        &self.log
    }
    pub(crate) fn txn_index(&self) -> &TransactionIndex {
        &self.txn_index
    }
    pub(crate) fn txn_index_mut(&mut self) -> &mut TransactionIndex {
        &mut self.txn_index
    }
}

/// What opening a segment found.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SegmentLoad {
    /// Bytes recovery cut off a torn or corrupt tail.
    pub(crate) truncated_bytes: u64,
    /// The transaction index may lack entries (crash recovery) or was corrupt and
    /// emptied: the log must replay this segment with known producer state.
    pub(crate) txn_index_suspect: bool,
}

fn open_log_file(path: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| StorageError::io(IoOp::Open, path, 0, e))
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Removes a file, treating "already gone" as success.
pub(crate) fn remove_if_exists(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StorageError::io(IoOp::Delete, path, 0, e)),
    }
}
