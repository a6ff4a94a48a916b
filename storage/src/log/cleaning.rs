//! The log's side of compaction: a snapshot of its inactive segments for the cleaner,
//! the atomic swap of a cleaned segment for the segments it replaces, and the cleaner
//! checkpoint. The cleaning itself lives in [`crate::cleaner`] and runs without the
//! log's lock.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use super::Log;
use crate::checkpoint::sync_dir;
use crate::cleaner::{self, LogView, SegmentView, CLEANED_SUFFIX};
use crate::error::Result;
use crate::segment::LogSegment;

/// Suffix of a cleaned segment that may replace the segments it covers (see `load`).
const SWAP_SUFFIX: &str = ".swap";
/// `CleanerState::checkpoint` before the file was read.
const CHECKPOINT_UNKNOWN: i64 = -2;
/// `CleanerState::checkpoint` when there is no checkpoint.
const NO_CHECKPOINT: i64 = -1;
/// `CleanerState::pending_horizon` before its file was read.
const HORIZON_UNKNOWN: i64 = i64::MIN;

/// Per-log cleaner bookkeeping, outside the log's main lock.
#[derive(Debug)]
pub(crate) struct CleanerState {
    /// Held for the whole of a cleaning: one cleaner per log at a time.
    in_progress: Mutex<()>,
    /// Cached `cleaner-offset-checkpoint`.
    checkpoint: AtomicI64,
    /// The earliest delete horizon among the batches the last cleaning kept (tombstones
    /// and transaction markers stamped by KIP-534), `i64::MAX` if none; cached
    /// `cleaner-delete-horizon`.
    pending_horizon: AtomicI64,
}

impl Default for CleanerState {
    fn default() -> Self {
        CleanerState {
            in_progress: Mutex::new(()),
            checkpoint: AtomicI64::new(CHECKPOINT_UNKNOWN),
            pending_horizon: AtomicI64::new(HORIZON_UNKNOWN),
        }
    }
}

impl Log {
    /// Claims the log for one cleaning; `None` if another cleaning holds it.
    pub(crate) fn try_start_cleaning(&self) -> Option<MutexGuard<'_, ()>> {
        match self.cleaner_state.in_progress.try_lock() {
            Ok(guard) => Some(guard),
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// The first dirty offset recorded by the last cleaning, if any.
    pub(crate) fn cleaner_checkpoint(&self) -> Option<i64> {
        let mut offset = self.cleaner_state.checkpoint.load(Ordering::Acquire);
        if offset == CHECKPOINT_UNKNOWN {
            offset = cleaner::read_checkpoint(&self.dir).unwrap_or(NO_CHECKPOINT);
            self.cleaner_state.checkpoint.store(offset, Ordering::Release);
        }
        (offset >= 0).then_some(offset)
    }

    /// Durably records the earliest delete horizon the last cleaning left in the log, so
    /// the cleaner comes back when it passes even if nothing new is dirty, also after a
    /// restart. The file is rewritten only when the value changes.
    pub(crate) fn set_pending_horizon(&self, horizon_ms: Option<i64>) -> Result<()> {
        let value = horizon_ms.unwrap_or(i64::MAX);
        if self.pending_horizon() != value {
            cleaner::write_horizon(&self.dir, horizon_ms)?;
        }
        self.cleaner_state.pending_horizon.store(value, Ordering::Release);
        Ok(())
    }

    /// The pending delete horizon (`i64::MAX`: none), read from its file the first time.
    fn pending_horizon(&self) -> i64 {
        let value = self.cleaner_state.pending_horizon.load(Ordering::Acquire);
        if value != HORIZON_UNKNOWN {
            return value;
        }
        let value = cleaner::read_horizon(&self.dir).unwrap_or(i64::MAX);
        self.cleaner_state.pending_horizon.store(value, Ordering::Release);
        value
    }

    /// Durably records `offset` as the first dirty offset.
    pub(crate) fn write_cleaner_checkpoint(&self, offset: i64) -> Result<()> {
        cleaner::write_checkpoint(&self.dir, offset)?;
        self.cleaner_state.checkpoint.store(offset, Ordering::Release);
        Ok(())
    }

    /// The inactive segments and offsets the cleaner works from, taken under the read lock.
    pub(crate) fn cleaner_view(&self) -> Result<LogView> {
        let pending_horizon_ms = self.pending_horizon();
        let inner = self.read_inner();
        self.check_open(&inner)?;
        let active_base_offset = inner.segments.keys().next_back().copied().unwrap_or(inner.log_start_offset);
        let mut segments = Vec::with_capacity(inner.segments.len().saturating_sub(1));
        for (base, segment) in inner.segments.range(..active_base_offset) {
            let mut aborted_txns = Vec::new();
            segment.txn_index().collect(i64::MIN, i64::MAX, &mut aborted_txns);
            segments.push(SegmentView {
                base_offset: *base,
                next_offset: segment.next_offset(),
                size: segment.size(),
                file: segment.file().clone(),
                path: segment.log_path().to_path_buf(),
                largest_timestamp: segment.largest_timestamp_for_retention()?,
                aborted_txns,
            });
        }
        let mut active_aborted_txns = Vec::new();
        if let Some(active) = inner.segments.get(&active_base_offset) {
            active.txn_index().collect(i64::MIN, i64::MAX, &mut active_aborted_txns);
        }
        let log_end_offset = inner.log_end_offset();
        Ok(LogView {
            active_aborted_txns,
            pending_horizon_ms,
            dir: self.dir.clone(),
            segments,
            active_base_offset,
            log_start_offset: inner.log_start_offset,
            log_end_offset,
            last_stable_offset: inner.first_unstable_offset().unwrap_or(log_end_offset).min(log_end_offset),
        })
    }

    /// Replaces `replaced` (consecutive inactive segments, as the cleaner saw them) by
    /// `cleaned` (a flushed `.cleaned` segment at the first one's base). Returns false,
    /// deleting `cleaned`, if the log changed since: a replaced segment was deleted,
    /// truncated or became active, or the log was closed.
    ///
    /// The renames, under the write lock: `cleaned` `.cleaned` -> `.swap`; the replaced
    /// segments -> `.deleted` (as retention does); `.swap` -> final names, log file last.
    /// A crash between any two leaves a state `load` completes or undoes.
    pub(crate) fn swap_cleaned(&self, mut cleaned: LogSegment, replaced: &[SegmentView]) -> Result<bool> {
        let config = self.config();
        let mut inner = self.write_inner();
        let (Some(first), Some(last)) = (replaced.first(), replaced.last()) else {
            drop(inner);
            cleaned.delete()?;
            return Ok(false);
        };
        let active_base = inner.segments.keys().next_back().copied().unwrap_or(i64::MAX);
        let current: Vec<(&i64, &LogSegment)> =
            inner.segments.range(first.base_offset..=last.base_offset).collect();
        let unchanged = !inner.closed
            && last.base_offset < active_base
            && current.len() == replaced.len()
            && current.iter().zip(replaced).all(|((base, segment), seen)| {
                **base == seen.base_offset
                    && Arc::ptr_eq(segment.file(), &seen.file)
                    && segment.size() == seen.size
            });
        if !unchanged {
            drop(inner);
            cleaned.delete()?;
            return Ok(false);
        }
        let base = first.base_offset;
        cleaned.change_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)?;
        sync_dir(&self.dir)?;
        let old: Vec<LogSegment> =
            replaced.iter().filter_map(|r| inner.segments.remove(&r.base_offset)).collect();
        // From here the cleaned segment serves reads whatever fails: its `.swap` files
        // make the next load finish the job.
        inner.segments.insert(base, cleaned);
        let mut result = Ok(());
        for segment in old {
            if result.is_ok() {
                result = self.schedule_delete(&mut inner, segment, &config);
            }
        }
        result?;
        if let Some(cleaned) = inner.segments.get_mut(&base) {
            cleaned.change_suffix(SWAP_SUFFIX, "")?;
        }
        sync_dir(&self.dir)?;
        tracing::debug!(
            topic = %self.topic,
            partition = self.partition,
            base_offset = base,
            replaced = replaced.len(),
            "swapped in cleaned segment"
        );
        Ok(true)
    }
}
