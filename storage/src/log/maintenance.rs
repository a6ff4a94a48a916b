//! Rolling, flushing, retention, DeleteRecords, truncation, close and delete, each
//! keeping producer state and its snapshots, the leader epoch cache and the high
//! watermark consistent with the segments.

use std::collections::BTreeMap;

use super::{producers, Log, LogInner, PendingDelete};
use crate::checkpoint;
use crate::config::LogConfig;
use crate::error::{IoOp, Result, StorageError};
use crate::segment::{remove_if_exists, LogSegment};

impl Log {
    /// Starts a new active segment at the log end offset (no-op if the active segment is
    /// empty). The old one gets its final time index entry and trimmed indexes, and a
    /// producer state snapshot is taken at the new base, from which a crash recovers it.
    pub fn roll(&self) -> Result<()> {
        let config = self.config();
        let mut inner = self.write_inner();
        self.check_open(&inner)?;
        self.roll_locked(&mut inner, &config)?;
        self.publish(&inner);
        Ok(())
    }

    pub(super) fn roll_locked(&self, inner: &mut LogInner, config: &LogConfig) -> Result<()> {
        if inner.active().is_empty() {
            return Ok(());
        }
        let new_base = inner.log_end_offset();
        inner.active_mut().on_become_inactive()?;
        let segment = LogSegment::create(&self.dir, new_base, config, inner.last_seen_ms)?;
        tracing::debug!(topic = %self.topic, partition = self.partition, base_offset = new_base, "rolled segment");
        inner.segments.insert(new_base, segment);
        // Not fsynced under the lock: a snapshot lost to a machine crash only means a
        // longer replay (an unreadable one is skipped).
        inner.producer_state.set_map_end_offset(new_base);
        producers::take_producer_snapshot(inner, false)
    }

    /// fsyncs every segment with unflushed appends.
    pub fn flush(&self) -> Result<()> {
        let mut inner = self.write_inner();
        self.check_open(&inner)?;
        Self::flush_locked(&mut inner)
    }

    pub(super) fn flush_locked(inner: &mut LogInner) -> Result<()> {
        for segment in inner.segments.values_mut() {
            segment.flush()?;
        }
        inner.unflushed_messages = 0;
        inner.last_flush_ms = inner.last_seen_ms;
        Ok(())
    }

    /// Flushes if `flush.ms` has passed since the last flush, and removes deleted segment
    /// files whose `file.delete.delay.ms` has passed. Meant to be called periodically.
    pub fn maybe_flush(&self, now_ms: i64) -> Result<()> {
        let config = self.config();
        let mut inner = self.write_inner();
        self.check_open(&inner)?;
        inner.observe_now(now_ms);
        Self::remove_due_files(&mut inner, now_ms)?;
        if inner.unflushed_messages > 0
            && now_ms.saturating_sub(inner.last_flush_ms) >= config.flush_interval_ms
        {
            Self::flush_locked(&mut inner)?;
            inner.last_flush_ms = now_ms;
        }
        Ok(())
    }

    /// Deletes the oldest segments that lie wholly below the log start offset, then by
    /// `retention.ms` (segment's largest timestamp older than that), then by
    /// `retention.bytes` (while the log stays at or above the limit without the
    /// segment). The active segment counts too when it has data: if every segment is
    /// deletable the log rolls first, as Kafka does, so one (empty) segment always
    /// remains. Returns the number of segments deleted. Equivalent to
    /// [`Log::apply_retention_up_to`] with the log end offset as high watermark. The time
    /// and size limits apply only when `cleanup.policy` contains `delete`, as in Kafka.
    pub fn apply_retention(&self, now_ms: i64) -> Result<usize> {
        self.apply_retention_up_to(now_ms, i64::MAX)
    }

    /// [`Log::apply_retention`] that never deletes a segment holding offsets at or above
    /// `high_watermark` (Kafka only deletes fully replicated segments).
    pub fn apply_retention_up_to(&self, now_ms: i64, high_watermark: i64) -> Result<usize> {
        let config = self.config();
        let mut inner = self.write_inner();
        self.check_open(&inner)?;
        inner.observe_now(now_ms);
        Self::remove_due_files(&mut inner, now_ms)?;
        // Segments wholly below the log start offset: DeleteRecords raised it inside
        // what was then the active segment, which could not be deleted at the time.
        let bases: Vec<i64> = inner.segments.keys().copied().collect();
        let log_start_offset = inner.log_start_offset;
        let mut below_start =
            bases.windows(2).map(|w| w[1] <= log_start_offset).collect::<Vec<_>>().into_iter();
        let mut deleted = self.delete_oldest_segments(&mut inner, &config, high_watermark, |_| {
            below_start.next().unwrap_or(false)
        })?;
        if config.cleanup_policy_delete && config.retention_ms >= 0 {
            let mut expired = Vec::new();
            for segment in inner.segments.values() {
                expired.push(
                    now_ms.saturating_sub(segment.largest_timestamp_for_retention()?) > config.retention_ms,
                );
            }
            let mut flags = expired.into_iter();
            deleted += self.delete_oldest_segments(&mut inner, &config, high_watermark, |_| {
                flags.next().unwrap_or(false)
            })?;
        }
        if config.cleanup_policy_delete && config.retention_bytes >= 0 {
            let total: u64 = inner.segments.values().map(LogSegment::size).sum();
            let mut excess = i128::from(total) - i128::from(config.retention_bytes);
            deleted += self.delete_oldest_segments(&mut inner, &config, high_watermark, |segment| {
                let size = i128::from(segment.size());
                if excess - size >= 0 {
                    excess -= size;
                    true
                } else {
                    false
                }
            })?;
        }
        self.publish(&inner);
        Ok(deleted)
    }

    /// Deletes the longest prefix of segments matching `predicate` and wholly below
    /// `high_watermark` (an empty active segment never matches), rolling first when that
    /// prefix is every segment.
    fn delete_oldest_segments(
        &self,
        inner: &mut LogInner,
        config: &LogConfig,
        high_watermark: i64,
        mut predicate: impl FnMut(&LogSegment) -> bool,
    ) -> Result<usize> {
        let count = inner.segments.len();
        let mut deletable = Vec::new();
        for (i, (base, segment)) in inner.segments.iter().enumerate() {
            let is_active = i + 1 == count;
            if (is_active && segment.is_empty())
                || segment.next_offset() > high_watermark
                || !predicate(segment)
            {
                break;
            }
            deletable.push(*base);
        }
        if deletable.is_empty() {
            return Ok(0);
        }
        if deletable.len() == count {
            self.roll_locked(inner, config)?;
        }
        for base in &deletable {
            if let Some(segment) = inner.segments.remove(base) {
                self.schedule_delete(inner, segment, config)?;
            }
        }
        let first_base = inner.first_segment_base();
        let log_start_offset = inner.log_start_offset.max(first_base);
        self.raise_log_start_offset(inner, log_start_offset)?;
        // Replaying from a snapshot below the first segment would skip deleted batches.
        // Producer state itself is kept: producers outlive their batches until expiry.
        inner.producer_state.delete_snapshots_where(|offset| offset < first_base)?;
        tracing::info!(
            topic = %self.topic,
            partition = self.partition,
            segments = deletable.len(),
            log_start_offset = inner.log_start_offset,
            "deleted segments by retention"
        );
        Ok(deletable.len())
    }

    /// DeleteRecords: raises the log start offset to `offset` (durably, in the partition
    /// directory's checkpoint) and deletes segments wholly below it. Returns the new log
    /// start offset. `OffsetOutOfRange` if `offset` is above the log end offset; an
    /// offset at or below the current start is a no-op.
    pub fn delete_records_before(&self, offset: i64) -> Result<i64> {
        let config = self.config();
        let mut inner = self.write_inner();
        self.check_open(&inner)?;
        let log_end_offset = inner.log_end_offset();
        if offset > log_end_offset || offset < 0 {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start_offset: inner.log_start_offset,
                log_end_offset,
            });
        }
        if offset <= inner.log_start_offset {
            return Ok(inner.log_start_offset);
        }
        checkpoint::write_log_start_offset(&self.dir, offset)?;
        self.raise_log_start_offset(&mut inner, offset)?;
        let bases: Vec<i64> = inner.segments.keys().copied().collect();
        for pair in bases.windows(2) {
            if pair[1] > offset {
                break;
            }
            if let Some(segment) = inner.segments.remove(&pair[0]) {
                self.schedule_delete(&mut inner, segment, &config)?;
            }
        }
        let first_base = inner.first_segment_base();
        inner.producer_state.delete_snapshots_where(|offset| offset < first_base)?;
        self.publish(&inner);
        Ok(offset)
    }

    /// Moves the log start offset up to `offset` (retention, DeleteRecords): the leader
    /// epoch covering it now starts there, completed transactions whose markers are
    /// below it are no longer unstable, and the high watermark is raised to it if below
    /// (as Kafka's `updateLogStartOffset` does).
    fn raise_log_start_offset(&self, inner: &mut LogInner, offset: i64) -> Result<()> {
        debug_assert!(offset >= inner.log_start_offset, "the log start offset only moves up");
        inner.log_start_offset = offset;
        inner.producer_state.on_high_watermark_updated(offset);
        inner.high_watermark = inner.high_watermark.map(|hw| hw.max(offset));
        self.move_epochs_to_log_start(inner)
    }

    /// Removes every record at or after `offset` (replication truncation). The cut is at
    /// the start of the batch containing `offset`, so the new log end offset is the
    /// base offset of that batch (equal to `offset` when it is a batch boundary, as
    /// replication uses). An `offset` below the log start (or the first segment)
    /// empties the log and restarts it at `offset`; a cut below the log start restarts
    /// the empty log at the log start.
    ///
    /// Leader epochs starting at or after the new log end offset are removed (durably),
    /// also when `offset` is at or above the log end and nothing else changes: as in
    /// Kafka, that drops an epoch this replica took as leader at its log end but never
    /// wrote in. Emptying the log clears them. The high watermark the log was told of is
    /// lowered to the new log end if above it.
    ///
    /// Producer state is rebuilt from the newest snapshot at or below the new log end plus
    /// a replay of the batches after it; snapshots above the new end are deleted. Open
    /// transactions that started in the removed tail are gone, and so are the aborted
    /// transactions whose markers were there; a transaction whose marker was cut is open
    /// again. Completed transactions with markers at or above the high watermark stay
    /// unstable.
    pub fn truncate_to(&self, offset: i64) -> Result<()> {
        let config = self.config();
        let mut inner = self.write_inner();
        self.check_open(&inner)?;
        if offset < 0 {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start_offset: inner.log_start_offset,
                log_end_offset: inner.log_end_offset(),
            });
        }
        if offset >= inner.log_end_offset() {
            if self.cut_epochs_at_log_end(&mut inner) {
                self.persist_epochs(&inner)?;
            }
            self.publish(&inner);
            return Ok(());
        }
        let first_base = inner.segments.keys().next().copied().unwrap_or(0);
        if offset < inner.log_start_offset || offset < first_base {
            self.truncate_fully_and_start_at(&mut inner, &config, offset)?;
        } else {
            let later: Vec<i64> = inner.segments.range(offset + 1..).map(|(b, _)| *b).collect();
            for base in later {
                if let Some(segment) = inner.segments.remove(&base) {
                    self.schedule_delete(&mut inner, segment, &config)?;
                }
            }
            let active = inner.active_mut();
            active.truncate_to(offset)?;
            active.resize_indexes(config.segment_index_bytes)?;
            if inner.log_end_offset() < inner.log_start_offset {
                // The cut fell in a batch straddling the log start offset: nothing
                // readable is left, so restart at the start offset to keep it <= the end.
                let start = inner.log_start_offset;
                self.truncate_fully_and_start_at(&mut inner, &config, start)?;
            } else {
                // In memory first, so that whatever fails next leaves them consistent.
                let log_end_offset = inner.log_end_offset();
                inner.high_watermark = inner.high_watermark.map(|hw| hw.min(log_end_offset));
                let epochs_cut = self.cut_epochs_at_log_end(&mut inner);
                let now_ms = inner.last_seen_ms;
                producers::rebuild_producer_state(
                    &mut inner,
                    i64::MAX,
                    false,
                    now_ms,
                    config.producer_id_expiration_ms,
                )?;
                if epochs_cut {
                    self.persist_epochs(&inner)?;
                }
            }
        }
        tracing::info!(
            topic = %self.topic,
            partition = self.partition,
            offset,
            log_end_offset = inner.log_end_offset(),
            "truncated log"
        );
        self.publish(&inner);
        Ok(())
    }

    /// Empties the log and restarts it at `offset` (Kafka's `truncateFullyAndStartAt`):
    /// a follower whose log end is below the leader's log start cannot catch up by
    /// fetching, so it starts over where the leader's log starts.
    pub fn restart_at(&self, offset: i64) -> Result<()> {
        let config = self.config();
        let mut inner = self.write_inner();
        self.check_open(&inner)?;
        if offset < 0 {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start_offset: inner.log_start_offset,
                log_end_offset: inner.log_end_offset(),
            });
        }
        self.truncate_fully_and_start_at(&mut inner, &config, offset)?;
        tracing::info!(topic = %self.topic, partition = self.partition, offset, "log restarted empty");
        self.publish(&inner);
        Ok(())
    }

    fn truncate_fully_and_start_at(
        &self,
        inner: &mut LogInner,
        config: &LogConfig,
        offset: i64,
    ) -> Result<()> {
        for (_, segment) in std::mem::take(&mut inner.segments) {
            self.schedule_delete(inner, segment, config)?;
        }
        let segment = LogSegment::create(&self.dir, offset, config, inner.last_seen_ms)?;
        inner.segments.insert(offset, segment);
        inner.log_start_offset = offset;
        inner.high_watermark = inner.high_watermark.map(|_| offset);
        inner.leader_epochs.clear();
        inner.producer_state.delete_snapshots_where(|_| true)?;
        inner.producer_state.reset_to(offset);
        checkpoint::write_log_start_offset(&self.dir, offset)?;
        self.persist_epochs(inner)
    }

    /// Renames a removed segment's files to `.deleted` and removes them once
    /// `file.delete.delay.ms` has passed (immediately if it is 0). Readers holding a
    /// `FileSlice` of it keep working either way.
    pub(super) fn schedule_delete(
        &self,
        inner: &mut LogInner,
        mut segment: LogSegment,
        config: &LogConfig,
    ) -> Result<()> {
        if config.file_delete_delay_ms == 0 {
            return segment.delete();
        }
        let paths = segment.rename_to_deleted()?;
        drop(segment);
        let due_ms = inner.last_seen_ms.saturating_add(config.file_delete_delay_ms);
        inner.pending_deletes.push(PendingDelete { due_ms, paths });
        Ok(())
    }

    fn remove_due_files(inner: &mut LogInner, now_ms: i64) -> Result<()> {
        let (due, waiting): (Vec<_>, Vec<_>) =
            std::mem::take(&mut inner.pending_deletes).into_iter().partition(|p| p.due_ms <= now_ms);
        inner.pending_deletes = waiting;
        for pending in due {
            for path in &pending.paths {
                remove_if_exists(path)?;
            }
        }
        Ok(())
    }

    /// Flushes, writes the final time index entry, trims the indexes, writes a producer
    /// state snapshot at the log end (so a clean restart replays nothing) and removes
    /// pending deleted files; the log then refuses further calls. `&self` because the log
    /// is shared (`Arc`) between the manager and the broker.
    pub fn close(&self) -> Result<()> {
        let mut inner = self.write_inner();
        if inner.closed {
            return Ok(());
        }
        Self::flush_locked(&mut inner)?;
        for segment in inner.segments.values_mut() {
            segment.on_become_inactive()?;
        }
        let log_end_offset = inner.log_end_offset();
        inner.producer_state.set_map_end_offset(log_end_offset);
        producers::take_producer_snapshot(&mut inner, true)?;
        Self::remove_due_files(&mut inner, i64::MAX)?;
        inner.closed = true;
        Ok(())
    }

    /// Closes the log for deletion without writing anything: no flush, no producer
    /// snapshot, no index trim. A log is deleted most urgently when its disk is full, and
    /// then any write fails, which must not stop its files from being removed. Dropping
    /// the segments closes their files and unmaps their indexes, so their space comes
    /// back once the directory is removed (other holders of the `Arc<Log>` get
    /// `LogClosed`; a reader's open `FileSlice` keeps only its own file until it is sent).
    pub fn close_for_delete(&self) {
        let mut inner = self.write_inner();
        inner.closed = true;
        inner.segments = BTreeMap::new();
        inner.pending_deletes.clear();
    }

    /// Closes the log and removes its directory with everything in it.
    pub fn delete(&self) -> Result<()> {
        self.close_for_delete();
        match std::fs::remove_dir_all(&self.dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StorageError::io(IoOp::Delete, &self.dir, 0, e)),
        }
    }
}
