//! Segments written by the log cleaner: created under a suffixed name (`.cleaned`), so
//! they never collide with the live segment of the same base offset, then renamed
//! suffix by suffix (`.cleaned` -> `.swap` -> final) as the swap progresses (see
//! `crate::cleaner` for the protocol and `crate::log` load for crash recovery).

use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use super::{
    open_log_file, path_with, remove_if_exists, with_suffix, LogSegment, INDEX_SUFFIX, LOG_SUFFIX,
    TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX,
};
use crate::config::LogConfig;
use crate::error::{IoOp, Result, StorageError};
use crate::index::{OffsetIndex, TimeIndex, TransactionIndex};

/// The four files of a segment, in the order a swap renames them: indexes first and the
/// log last, so that a `.log.swap` file on disk means every file of the swap is ready.
const SUFFIXES_LOG_LAST: [&str; 4] = [INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX];

impl LogSegment {
    /// Creates an empty segment at `base_offset` whose files are named like a live
    /// segment's plus `suffix` (e.g. `00000000000000000000.log.cleaned`). Stale files of
    /// that name are removed first. Its indexes are preallocated like an active segment's;
    /// [`LogSegment::on_become_inactive`] trims them.
    pub(crate) fn create_with_suffix(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        now_ms: i64,
        suffix: &str,
    ) -> Result<Self> {
        let path = |kind: &str| with_suffix(&path_with(dir, base_offset, kind), suffix);
        for kind in SUFFIXES_LOG_LAST {
            remove_if_exists(&path(kind))?;
        }
        let log_path = path(LOG_SUFFIX);
        let log = open_log_file(&log_path)?;
        let txn_index = TransactionIndex::create(&path(TXN_INDEX_SUFFIX), base_offset)?;
        let offset_index = OffsetIndex::open(&path(INDEX_SUFFIX), base_offset, config.segment_index_bytes)?;
        let time_index = TimeIndex::open(&path(TIME_INDEX_SUFFIX), base_offset, config.segment_index_bytes)?;
        Ok(LogSegment {
            base_offset,
            log_path,
            log: Arc::new(log),
            size: 0,
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

    /// Renames every file of the segment from `<name><from>` to `<name><to>` (either may
    /// be empty), indexes first and the log file last. A missing transaction index file
    /// (no aborted transaction) is skipped.
    pub(crate) fn change_suffix(&mut self, from: &str, to: &str) -> Result<()> {
        let renamed = |path: &Path| -> Result<std::path::PathBuf> {
            let name = path.as_os_str().to_string_lossy();
            let stem = name.strip_suffix(from).ok_or_else(|| {
                let error = std::io::Error::other(format!("segment file does not end with {from:?}"));
                StorageError::io(IoOp::Rename, path, 0, error)
            })?;
            Ok(std::path::PathBuf::from(format!("{stem}{to}")))
        };
        let offset_to = renamed(self.offset_index.path())?;
        self.offset_index.rename(offset_to)?;
        let time_to = renamed(self.time_index.path())?;
        self.time_index.rename(time_to)?;
        let txn_to = renamed(self.txn_index.path())?;
        self.txn_index.rename(txn_to)?;
        let log_to = renamed(&self.log_path)?;
        std::fs::rename(&self.log_path, &log_to)
            .map_err(|e| StorageError::io(IoOp::Rename, &self.log_path, 0, e))?;
        self.log_path = log_to;
        Ok(())
    }

    /// Sets the log file's modification time, which retention falls back to when no
    /// record carries a timestamp: a cleaned segment keeps its originals' time.
    pub(crate) fn set_last_modified(&self, time: SystemTime) -> Result<()> {
        self.log.set_modified(time).map_err(|e| StorageError::io(IoOp::Metadata, &self.log_path, 0, e))
    }
}
