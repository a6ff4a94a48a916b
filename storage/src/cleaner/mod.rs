//! Log compaction: the log cleaner of topics whose `cleanup.policy` contains `compact`
//! (Kafka's `LogCleaner`, `Cleaner` and `LogCleanerManager`).
//!
//! # What a cleaning does
//!
//! 1. **Decide** ([`CleanableInfo`]): the log is cleaned when the dirty part (from the
//!    `cleaner-offset-checkpoint` to the first uncleanable offset) is more than
//!    `min.cleanable.dirty.ratio` of the cleanable bytes, or when its oldest dirty batch
//!    is older than `max.compaction.lag.ms`. Cleaning never goes past the last stable
//!    offset, the high watermark, the active segment, or a segment with records younger
//!    than `min.compaction.lag.ms`; it works on whole segments.
//! 2. **Map** the dirty section: key -> latest offset, in a bounded [`OffsetMap`] of
//!    strong key hashes. If the map fills, this cleaning covers only what was mapped.
//! 3. **Rewrite** every segment from the log start up to the end of the mapped range, in
//!    groups of adjacent segments that fit one segment: a record stays if it is the
//!    latest for its key; a tombstone additionally stays until its batch's delete horizon
//!    (set to now + `delete.retention.ms` by the first cleaning that keeps it, KIP-534).
//!    Offsets are preserved (holes are allowed); see [`batch`] for how retained batches
//!    are re-encoded (same codec, same last offset, producer fields kept).
//! 4. **Swap** each group in, crash-safely: the group is written as `<base>.log.cleaned`
//!    (+ indexes) without any log lock, fsynced; then, under the log's write lock and
//!    only if the replaced segments are unchanged (same file, same size): `.cleaned` ->
//!    `.swap`, old segments -> `.deleted` (removed after `file.delete.delay.ms`), `.swap`
//!    -> final name, log file last. Loading a log removes `.cleaned` leftovers and
//!    completes a `.swap` (dropping the segments it overlaps), so a crash at any step
//!    leaves either the old segments or the cleaned one. Readers holding a `FileSlice` of
//!    a replaced segment keep reading it (the open file outlives its name).
//! 5. **Checkpoint** the end of the mapped range as the new first dirty offset.
//!
//! Transactions (see [`txn`]): batches of aborted transactions are removed, batches of
//! committed ones are compacted like any other, and a COMMIT/ABORT marker is removed once
//! no data of its transaction is left and `delete.retention.ms` has passed since a
//! cleaning first found it removable; the cleaned segment's transaction index lists only
//! the aborts whose markers stay. A producer's batch holding its last sequence is kept,
//! emptied to its header if all its records go, so idempotence state rebuilt from the
//! log survives compaction, as in Kafka.
//!
//! Records without a key are kept (Kafka counts them as invalid and drops them).

mod batch;
mod checkpoint;
mod map;
mod offset_map;
mod range;
mod reader;
mod rewrite;
mod txn;

use std::collections::HashSet;

pub use range::CleanableInfo;
pub(crate) use range::{LogView, SegmentView};
pub(crate) use rewrite::CLEANED_SUFFIX;

use crate::error::{Result, StorageError};
use crate::log::Log;
use offset_map::{OffsetMap, BYTES_PER_ENTRY};
use rewrite::{RewriteBuffers, RewriteContext};

pub(crate) use checkpoint::{
    read as read_checkpoint, read_horizon, write as write_checkpoint, write_horizon,
};

/// Settings of one cleaner (Kafka's broker-level `log.cleaner.*` keys).
#[derive(Debug, Clone, PartialEq)]
pub struct CleanerConfig {
    /// `log.cleaner.dedupe.buffer.size` (per cleaner; Kafka divides it among its cleaner
    /// threads): memory of the key -> offset map, 24 bytes per key. Default 128 MiB,
    /// about 5 million keys per cleaning.
    pub dedupe_buffer_bytes: usize,
    /// `log.cleaner.io.buffer.load.factor`: how full the map may get. Default 0.9.
    pub dedupe_buffer_load_factor: f64,
    /// `log.cleaner.io.buffer.size`: bytes read from a segment, and buffered before
    /// writing the cleaned one, at a time. Default 512 KiB; grows per batch for larger
    /// batches.
    pub io_buffer_bytes: usize,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            dedupe_buffer_bytes: 128 << 20,
            dedupe_buffer_load_factor: 0.9,
            io_buffer_bytes: 512 << 10,
        }
    }
}

impl CleanerConfig {
    /// Checks the values once (the map must hold at least a few keys).
    pub fn validate(&self) -> Result<()> {
        let invalid = |key: &'static str, value: String| Err(StorageError::InvalidConfig { key, value });
        if self.dedupe_buffer_bytes < 4 * BYTES_PER_ENTRY {
            return invalid("log.cleaner.dedupe.buffer.size", self.dedupe_buffer_bytes.to_string());
        }
        if !(self.dedupe_buffer_load_factor > 0.0 && self.dedupe_buffer_load_factor <= 1.0) {
            return invalid("log.cleaner.io.buffer.load.factor", self.dedupe_buffer_load_factor.to_string());
        }
        if self.io_buffer_bytes == 0 {
            return invalid("log.cleaner.io.buffer.size", self.io_buffer_bytes.to_string());
        }
        Ok(())
    }
}

/// What a call to [`Cleaner::clean`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CleanOutcome {
    /// Segments were rewritten and the checkpoint advanced.
    Cleaned,
    /// `cleanup.policy` does not contain `compact`.
    #[default]
    NotCompacted,
    /// Nothing dirty, or not dirty enough yet (see [`CleanStats::info`]).
    NotDue,
    /// Another cleaner is cleaning this log right now.
    Busy,
    /// The log changed under the cleaner (retention, truncation, DeleteRecords, close)
    /// and a swap was abandoned; segments swapped before it stay cleaned. Retry later.
    Aborted,
    /// Not even one batch's keys fit the offset map: raise `dedupe_buffer_bytes`.
    OffsetMapTooSmall,
}

/// Statistics of one cleaning (Kafka's `CleanerStats`), for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CleanStats {
    /// What happened.
    pub outcome: CleanOutcome,
    /// The dirty-ratio decision; `None` when the log was not looked at (not compacted,
    /// busy).
    pub info: Option<CleanableInfo>,
    /// First dirty offset after this cleaning (the checkpoint written).
    pub end_offset: i64,
    /// Segments replaced.
    pub segments_cleaned: usize,
    /// Cleaned segments written (one per group).
    pub segments_written: usize,
    /// Bytes read while building the offset map.
    pub map_bytes_read: u64,
    /// Records decoded while building the offset map.
    pub map_records_read: u64,
    /// Distinct keys in the offset map.
    pub keys_mapped: usize,
    /// Fraction of the map's usable capacity used.
    pub map_utilization: f64,
    /// Bytes of the segments rewritten.
    pub bytes_read: u64,
    /// Bytes of the cleaned segments.
    pub bytes_written: u64,
    /// Records in the segments rewritten.
    pub records_read: u64,
    /// Records kept.
    pub records_retained: u64,
    /// Tombstones dropped (delete horizon passed, or superseded).
    pub tombstones_removed: u64,
    /// Batches kept whole because their records could not be decoded.
    pub undecodable_batches: u64,
    /// Batches of aborted transactions removed (or emptied, when they hold a
    /// producer's last sequence).
    pub aborted_batches_removed: u64,
    /// COMMIT/ABORT markers removed (their transaction's data gone and their delete
    /// horizon passed).
    pub markers_removed: u64,
    /// The earliest delete horizon among the batches kept: the log is due again then.
    pub pending_horizon_ms: Option<i64>,
}

/// A log cleaner: owns the offset map and I/O buffers, reused across cleanings. The
/// broker runs one or more (Kafka's `log.cleaner.threads`), each on a blocking thread,
/// calling [`Cleaner::clean`] on compacted logs, filthiest first; a log is cleaned by at
/// most one cleaner at a time ([`CleanOutcome::Busy`] otherwise).
#[derive(Debug)]
pub struct Cleaner {
    config: CleanerConfig,
    map: OffsetMap,
    buffers: RewriteBuffers,
}

impl Cleaner {
    /// A cleaner with its map allocated (memory is committed lazily as it is used).
    pub fn new(config: CleanerConfig) -> Result<Cleaner> {
        config.validate()?;
        let map = OffsetMap::new(config.dedupe_buffer_bytes, config.dedupe_buffer_load_factor);
        Ok(Cleaner { config, map, buffers: RewriteBuffers::default() })
    }

    /// How dirty `log` is, without cleaning it. `high_watermark` bounds what may be
    /// cleaned (records above it may still be truncated away).
    pub fn inspect(log: &Log, now_ms: i64, high_watermark: i64) -> Result<CleanableInfo> {
        let config = log.config();
        let view = log.cleaner_view()?;
        Ok(range::cleanable_info(&view, log.cleaner_checkpoint(), &config, now_ms, high_watermark))
    }

    /// Cleans `log` if its config asks for compaction and it is due (see the module
    /// docs), never past `high_watermark` nor the last stable offset, and never touching
    /// the active segment. Appends, reads and retention proceed meanwhile; the log's
    /// lock is taken only to snapshot the segment list and, briefly, per swap.
    ///
    /// Call it periodically for every log whose `cleanup.policy` contains `compact`
    /// (Kafka's cleaner backs off `log.cleaner.backoff.ms`, 15 s, when nothing is due),
    /// with `now_ms` from the broker clock. Retention of `compact,delete` logs stays
    /// [`Log::apply_retention`]'s job.
    pub fn clean(&mut self, log: &Log, now_ms: i64, high_watermark: i64) -> Result<CleanStats> {
        let config = log.config();
        if !config.cleanup_policy_compact {
            return Ok(CleanStats { outcome: CleanOutcome::NotCompacted, ..CleanStats::default() });
        }
        let Some(_cleaning) = log.try_start_cleaning() else {
            return Ok(CleanStats { outcome: CleanOutcome::Busy, ..CleanStats::default() });
        };
        let view = log.cleaner_view()?;
        let info = range::cleanable_info(&view, log.cleaner_checkpoint(), &config, now_ms, high_watermark);
        let mut stats =
            CleanStats { outcome: CleanOutcome::NotDue, info: Some(info), ..CleanStats::default() };
        stats.end_offset = info.first_dirty_offset;
        if !info.should_clean {
            return Ok(stats);
        }
        tracing::info!(
            topic = log.topic(),
            partition = log.partition(),
            first_dirty_offset = info.first_dirty_offset,
            first_uncleanable_offset = info.first_uncleanable_offset,
            dirty_ratio = info.dirty_ratio,
            "cleaning log"
        );
        let dirty: Vec<SegmentView> = view
            .segments
            .iter()
            .filter(|s| {
                s.next_offset > info.first_dirty_offset && s.base_offset < info.first_uncleanable_offset
            })
            .cloned()
            .collect();
        let end_offset = if dirty.is_empty() {
            // Only a delete horizon passed: rewrite the clean section with an empty map
            // covering it, so nothing is superseded and expired tombstones and markers go.
            self.map.clear();
            self.map.update_latest_offset(info.first_dirty_offset - 1);
            info.first_dirty_offset
        } else {
            let dirty_aborts = view.aborted_overlapping(
                dirty.first().map_or(info.first_dirty_offset, |s| s.base_offset),
                info.first_uncleanable_offset,
            );
            map::build_offset_map(
                &mut self.map,
                &dirty,
                dirty_aborts,
                info.first_dirty_offset,
                info.first_uncleanable_offset,
                config.max_uncompressed_batch_bytes,
                self.config.io_buffer_bytes,
                &mut stats,
            )?;
            self.map.latest_offset() + 1
        };
        stats.keys_mapped = self.map.len();
        stats.map_utilization = self.map.utilization();
        if end_offset <= info.first_dirty_offset && !dirty.is_empty() {
            tracing::warn!(
                topic = log.topic(),
                partition = log.partition(),
                "offset map too small for one batch"
            );
            stats.outcome = CleanOutcome::OffsetMapTooSmall;
            return Ok(stats);
        }
        let producer_last_batches: HashSet<rewrite::ProducerLast> = log
            .active_producers()
            .into_iter()
            .filter(|p| p.last_sequence >= 0)
            .map(|p| (p.producer_id, p.producer_epoch, p.last_sequence))
            .collect();
        let ctx = RewriteContext {
            dir: &view.dir,
            config: &config,
            map: &self.map,
            now_ms,
            producer_last_batches: &producer_last_batches,
            io_buffer_bytes: self.config.io_buffer_bytes,
        };
        let to_clean: Vec<SegmentView> =
            view.segments.iter().filter(|s| s.base_offset < end_offset).cloned().collect();
        // One search of the transaction indexes for the whole rewritten range: the
        // tracker starts each abort when the log reaches its first offset.
        let mut txns = rewrite::TxnTracker::default();
        txns.add_aborted(view.aborted_overlapping(
            view.log_start_offset,
            end_offset.max(to_clean.last().map_or(end_offset, |s| s.next_offset)),
        ));
        for group in range::group_segments(&to_clean, &config) {
            let group = &to_clean[group];
            let cleaned = rewrite::clean_group(&ctx, group, &mut txns, &mut self.buffers, &mut stats)?;
            if !log.swap_cleaned(cleaned, group)? {
                tracing::info!(
                    topic = log.topic(),
                    partition = log.partition(),
                    "log changed while cleaning, aborting"
                );
                stats.outcome = CleanOutcome::Aborted;
                return Ok(stats);
            }
            stats.segments_cleaned += group.len();
            stats.segments_written += 1;
        }
        log.write_cleaner_checkpoint(end_offset)?;
        log.set_pending_horizon(stats.pending_horizon_ms)?;
        stats.end_offset = end_offset;
        stats.outcome = CleanOutcome::Cleaned;
        tracing::info!(
            topic = log.topic(),
            partition = log.partition(),
            end_offset,
            bytes_read = stats.bytes_read,
            bytes_written = stats.bytes_written,
            records_read = stats.records_read,
            records_retained = stats.records_retained,
            "cleaned log"
        );
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use strata_protocol::records::{NewRecord, RecordBatchBuilder};

    use super::*;
    use crate::config::LogConfig;

    fn keyed_batch(i: usize) -> Bytes {
        let mut b = RecordBatchBuilder::new(0);
        for j in 0..4 {
            let key = Bytes::from(format!("k{}", (i + j) % 3));
            b.append(&NewRecord::new(100, Some(key), Some(Bytes::from(format!("v{i}-{j}"))))).unwrap();
        }
        b.build().unwrap()
    }

    #[test]
    fn cleaner_is_send() {
        fn send<T: Send>() {}
        send::<Cleaner>();
    }

    /// The swap re-checks the replaced segments under the write lock: a truncation that
    /// cut into one of them (replication) makes the cleaner give the group up.
    #[test]
    fn swap_is_abandoned_when_a_replaced_segment_changed() {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            segment_bytes: 1024,
            file_delete_delay_ms: 0,
            cleanup_policy_compact: true,
            ..LogConfig::default()
        };
        let log = Log::open(dir.path(), "t", 0, config.clone(), true, 0).unwrap();
        for i in 0..40 {
            log.append(keyed_batch(i), 0, 100).unwrap();
        }
        log.roll().unwrap();
        let view = log.cleaner_view().unwrap();
        assert!(view.segments.len() >= 3);
        let mut map = OffsetMap::new(1 << 16, 0.9);
        let mut stats = CleanStats::default();
        let end = view.active_base_offset;
        map::build_offset_map(&mut map, &view.segments, Vec::new(), 0, end, 1 << 20, 4096, &mut stats)
            .unwrap();
        assert_eq!(map.latest_offset(), end - 1);
        let producers = HashSet::new();
        let ctx = RewriteContext {
            dir: &view.dir,
            config: &config,
            map: &map,
            now_ms: 100,
            producer_last_batches: &producers,
            io_buffer_bytes: 4096,
        };
        let mut txns = rewrite::TxnTracker::default();
        let cleaned =
            rewrite::clean_group(&ctx, &view.segments, &mut txns, &mut RewriteBuffers::default(), &mut stats)
                .unwrap();
        assert!(view.dir.join(format!("{:020}.log{CLEANED_SUFFIX}", 0)).exists());

        let cut = view.segments[1].base_offset + 1;
        log.truncate_to(cut).unwrap();
        assert!(!log.swap_cleaned(cleaned, &view.segments).unwrap(), "abandoned");
        let leftovers: Vec<_> = std::fs::read_dir(&view.dir)
            .unwrap()
            .filter_map(|e| e.unwrap().file_name().into_string().ok())
            .filter(|n| n.ends_with(CLEANED_SUFFIX) || n.ends_with(".swap"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        assert_eq!(log.segment_base_offsets()[..2], [0, view.segments[1].base_offset]);
        assert!(!log.read(0, 1 << 20, i64::MAX, true).unwrap().records.is_empty());
    }
}
