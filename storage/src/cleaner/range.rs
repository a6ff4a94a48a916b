//! Which part of a log the cleaner may work on (Kafka's `LogCleanerManager.cleanableOffsets`
//! and `calculateCleanableBytes`), and how the segments to rewrite are grouped.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

use strata_protocol::records::{RecordBatchHeader, BATCH_HEADER_SIZE};

use crate::config::LogConfig;
use crate::index::AbortedTxn;

/// What the cleaner needs of one inactive segment, captured under the log's read lock.
/// The file handle keeps the data readable whatever happens to the log meanwhile; the
/// swap compares handle and size to detect that the segment changed.
#[derive(Debug, Clone)]
pub(crate) struct SegmentView {
    pub(crate) base_offset: i64,
    /// Offset after the last batch (`base_offset` when empty).
    pub(crate) next_offset: i64,
    pub(crate) size: u64,
    pub(crate) file: Arc<File>,
    pub(crate) path: PathBuf,
    /// Largest record timestamp, or the file's modification time without one.
    pub(crate) largest_timestamp: i64,
    /// The segment's transaction index entries (aborted transactions whose ABORT
    /// marker is in this segment).
    pub(crate) aborted_txns: Vec<AbortedTxn>,
}

/// A consistent picture of a log for one cleaning.
#[derive(Debug, Clone)]
pub(crate) struct LogView {
    pub(crate) dir: PathBuf,
    /// Every segment but the active one, oldest first.
    pub(crate) segments: Vec<SegmentView>,
    pub(crate) active_base_offset: i64,
    pub(crate) log_start_offset: i64,
    pub(crate) log_end_offset: i64,
    pub(crate) last_stable_offset: i64,
    /// The active segment's transaction index entries.
    pub(crate) active_aborted_txns: Vec<AbortedTxn>,
    /// The earliest delete horizon the last cleaning left (`i64::MAX`: none known).
    pub(crate) pending_horizon_ms: i64,
}

impl LogView {
    /// The aborted transactions with batches in `[start, upper)` (Kafka's
    /// `collectAbortedTransactions`). An abort is indexed in the segment of its marker,
    /// which may be after `upper`, even the active segment, so every index is searched.
    pub(crate) fn aborted_overlapping(&self, start: i64, upper: i64) -> Vec<AbortedTxn> {
        self.segments
            .iter()
            .flat_map(|s| s.aborted_txns.iter())
            .chain(self.active_aborted_txns.iter())
            .filter(|t| t.last_offset >= start && t.first_offset < upper)
            .copied()
            .collect()
    }
}

/// How dirty a compacted log is and what the cleaner may clean, for the broker to pick
/// the filthiest log and for [`crate::Cleaner::clean`] to decide.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CleanableInfo {
    /// First offset not yet cleaned (the checkpoint, reset to the log start offset when
    /// it is outside the log).
    pub first_dirty_offset: i64,
    /// Cleaning stops before this offset: the base of the segment holding the smallest of
    /// the last stable offset, the high watermark, the active segment's base and the
    /// first dirty segment younger than `min.compaction.lag.ms`.
    pub first_uncleanable_offset: i64,
    /// Bytes of inactive segments wholly below the first dirty offset.
    pub clean_bytes: u64,
    /// Bytes of the segments from the first dirty offset to the first uncleanable one.
    pub dirty_bytes: u64,
    /// `dirty_bytes / (clean_bytes + dirty_bytes)`, 0 for an empty log.
    pub dirty_ratio: f64,
    /// How long ago the oldest cleanable dirty batch passed `max.compaction.lag.ms`
    /// (0 if none did): such a log is cleaned whatever its dirty ratio.
    pub max_compaction_delay_ms: i64,
    /// A delete horizon the last cleaning stamped (on tombstones or transaction markers)
    /// has passed: the clean section is worth rewriting even with nothing dirty.
    pub delete_horizon_passed: bool,
    /// Whether the log is due: dirty bytes exist and the dirty ratio exceeds
    /// `min.cleanable.dirty.ratio` (strictly, as Kafka) or the compaction delay is
    /// positive; or a delete horizon has passed.
    pub should_clean: bool,
}

/// Computes the cleanable range of `view` given the checkpointed first dirty offset.
/// Reads the first batch header of dirty segments (for `max.compaction.lag.ms`).
pub(crate) fn cleanable_info(
    view: &LogView,
    checkpoint: Option<i64>,
    config: &LogConfig,
    now_ms: i64,
    high_watermark: i64,
) -> CleanableInfo {
    let first_dirty_offset = match checkpoint {
        Some(offset) if offset >= view.log_start_offset && offset <= view.log_end_offset => offset,
        _ => view.log_start_offset,
    };
    let dirty = |s: &&SegmentView| s.next_offset > first_dirty_offset;
    let mut uncleanable = view.last_stable_offset.min(high_watermark).min(view.active_base_offset);
    if config.min_compaction_lag_ms > 0 {
        let horizon = now_ms.saturating_sub(config.min_compaction_lag_ms);
        if let Some(young) = view.segments.iter().filter(dirty).find(|s| s.largest_timestamp > horizon) {
            uncleanable = uncleanable.min(young.base_offset);
        }
    }
    // Only whole segments are cleaned: round down to the base of the segment holding it
    // (the active one if it is at or past its base).
    let first_uncleanable_offset = if uncleanable >= view.active_base_offset {
        view.active_base_offset
    } else {
        view.segments
            .iter()
            .rev()
            .find(|s| s.base_offset <= uncleanable)
            .map_or(uncleanable, |s| s.base_offset)
    };
    let cleanable = || view.segments.iter().filter(|s| s.base_offset < first_uncleanable_offset);
    let clean_bytes: u64 = cleanable().filter(|s| !dirty(s)).map(|s| s.size).sum();
    let dirty_bytes: u64 = cleanable().filter(dirty).map(|s| s.size).sum();
    let total = clean_bytes + dirty_bytes;
    let dirty_ratio = if total == 0 { 0.0 } else { dirty_bytes as f64 / total as f64 };
    let clean_until_ms = now_ms.saturating_sub(config.max_compaction_lag_ms.max(0));
    let earliest_dirty_ms = cleanable()
        .filter(dirty)
        .filter_map(first_batch_timestamp)
        .filter(|ts| *ts > 0)
        .min()
        .unwrap_or(i64::MAX);
    let max_compaction_delay_ms =
        if earliest_dirty_ms < clean_until_ms { clean_until_ms - earliest_dirty_ms } else { 0 };
    // Beyond Kafka's cleaner (3.9 picks logs by dirty ratio and compaction lag only): a
    // marker goes three cleanings after its data (see `txn.rs`), and cleanings driven by
    // the dirty ratio alone come ever further apart when the clean section is mostly
    // such batches, so a passed horizon is a reason to clean too.
    let delete_horizon_passed = view.pending_horizon_ms <= now_ms && clean_bytes > 0;
    let should_clean = (dirty_bytes > 0
        && (dirty_ratio > config.min_cleanable_dirty_ratio || max_compaction_delay_ms > 0))
        || delete_horizon_passed;
    CleanableInfo {
        first_dirty_offset,
        first_uncleanable_offset,
        clean_bytes,
        dirty_bytes,
        dirty_ratio,
        max_compaction_delay_ms,
        delete_horizon_passed,
        should_clean,
    }
}

/// Max timestamp of the segment's first batch (what `segment.ms` measures from, and
/// Kafka's "first batch timestamp" for `max.compaction.lag.ms`); `None` if unreadable.
fn first_batch_timestamp(segment: &SegmentView) -> Option<i64> {
    let mut buf = [0u8; BATCH_HEADER_SIZE];
    if segment.size < BATCH_HEADER_SIZE as u64 || segment.file.read_exact_at(&mut buf, 0).is_err() {
        return None;
    }
    RecordBatchHeader::parse(&buf).ok().map(|h| h.max_timestamp)
}

/// Splits `segments` (consecutive, oldest first) into runs that are each rewritten into
/// one cleaned segment: a run grows while its total size stays within `segment.bytes`,
/// its offsets within a 32-bit distance of its base (relative index offsets), and the
/// index entries its bytes can produce within `segment.index.bytes`. Kafka's
/// `groupSegmentsBySize`. Returns index ranges into `segments`.
pub(crate) fn group_segments(segments: &[SegmentView], config: &LogConfig) -> Vec<std::ops::Range<usize>> {
    // A time index entry is 12 bytes and one slot stays free for the final entry.
    let max_index_entries = u64::from(config.segment_index_bytes) / 12;
    let interval = u64::from(config.index_interval_bytes.max(1));
    let mut groups = Vec::new();
    let mut start = 0;
    while start < segments.len() {
        let base = segments[start].base_offset;
        let mut bytes = segments[start].size;
        let mut end = start + 1;
        while let Some(next) = segments.get(end) {
            let fits_bytes = bytes + next.size <= config.segment_bytes;
            let fits_index = (bytes + next.size) / interval + 2 <= max_index_entries;
            let fits_offsets = next.size == 0 || next.next_offset - 1 - base <= i64::from(i32::MAX);
            if !(fits_bytes && fits_index && fits_offsets) {
                break;
            }
            bytes += next.size;
            end += 1;
        }
        groups.push(start..end);
        start = end;
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(dir: &std::path::Path, base: i64, next: i64, size: u64, ts: i64) -> SegmentView {
        let path = dir.join(format!("{base:020}.log"));
        let file = File::create(&path).unwrap();
        SegmentView {
            base_offset: base,
            next_offset: next,
            size,
            file: Arc::new(file),
            path,
            largest_timestamp: ts,
            aborted_txns: Vec::new(),
        }
    }

    fn view(segments: Vec<SegmentView>, active: i64) -> LogView {
        LogView {
            dir: PathBuf::new(),
            segments,
            active_base_offset: active,
            log_start_offset: 0,
            log_end_offset: active + 5,
            last_stable_offset: active + 5,
            active_aborted_txns: Vec::new(),
            pending_horizon_ms: i64::MAX,
        }
    }

    #[test]
    fn ratio_checkpoint_and_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let v = view(vec![seg(d, 0, 10, 100, 1), seg(d, 10, 20, 100, 2), seg(d, 20, 30, 200, 3)], 30);
        let config = LogConfig::default();
        let info = cleanable_info(&v, None, &config, 1_000, i64::MAX);
        assert_eq!((info.first_dirty_offset, info.first_uncleanable_offset), (0, 30));
        assert_eq!((info.clean_bytes, info.dirty_bytes), (0, 400));
        assert!(info.should_clean);
        let info = cleanable_info(&v, Some(10), &config, 1_000, i64::MAX);
        assert_eq!((info.clean_bytes, info.dirty_bytes), (100, 300));
        assert!((info.dirty_ratio - 0.75).abs() < 1e-9);
        let info = cleanable_info(&v, Some(20), &config, 1_000, i64::MAX);
        assert!((info.dirty_ratio - 0.5).abs() < 1e-9);
        assert!(!info.should_clean, "0.5 is not above 0.5");
        // Checkpoint beyond the log end: everything is dirty again.
        assert_eq!(cleanable_info(&v, Some(99), &config, 1_000, i64::MAX).first_dirty_offset, 0);
        // The high watermark inside segment 10 stops cleaning at its base.
        let info = cleanable_info(&v, None, &config, 1_000, 15);
        assert_eq!((info.first_uncleanable_offset, info.dirty_bytes), (10, 100));
        // min.compaction.lag.ms: segment 20 (timestamp 3) is too young at now=10.
        let lagged = LogConfig { min_compaction_lag_ms: 8, ..LogConfig::default() };
        let info = cleanable_info(&v, None, &lagged, 10, i64::MAX);
        assert_eq!(info.first_uncleanable_offset, 20);
    }

    #[test]
    fn grouping_respects_size_and_index_limits() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let segments: Vec<SegmentView> =
            (0..6).map(|i| seg(d, i * 10, i * 10 + 10, if i == 3 { 900 } else { 300 }, 0)).collect();
        let config = LogConfig { segment_bytes: 1_000, ..LogConfig::default() };
        assert_eq!(group_segments(&segments, &config), vec![0..3, 3..4, 4..6]);
        let tight_index = LogConfig { segment_index_bytes: 36, index_interval_bytes: 200, ..config };
        assert_eq!(group_segments(&segments, &tight_index), vec![0..1, 1..2, 2..3, 3..4, 4..5, 5..6]);
    }
}
