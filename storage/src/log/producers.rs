//! The log's side of producer state: the queries the broker makes (last stable offset,
//! aborted transactions, DescribeProducers, expiration), the high watermark that makes
//! completed transactions stable, and keeping the [`ProducerStateManager`] and the
//! transaction indexes consistent with the segments through rolls, recovery and
//! truncation (snapshots plus replay).

use std::sync::atomic::Ordering;

use super::{batch_info, Log, LogInner, NO_UNSTABLE_OFFSET};
use crate::error::Result;
use crate::index::AbortedTxn;
use crate::producer_state::{ActiveProducer, Origin};

impl Log {
    /// First offset of the oldest unstable transaction (raised to the log start offset
    /// if retention passed it), or `None` when there is none. A transaction is unstable
    /// while it is open, and once completed until the high watermark passes its marker
    /// (Kafka's unreplicated transactions: a new leader may not have the marker), see
    /// [`Log::update_high_watermark`]. Lock-free.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        let offset = self.first_unstable_offset.load(Ordering::Acquire);
        (offset != NO_UNSTABLE_OFFSET).then_some(offset)
    }

    /// The last stable offset (LSO) as far as the log knows it:
    /// [`Log::first_unstable_offset`] or else the log end offset. The broker bounds it
    /// by the high watermark (a `read_committed` fetch reads up to min(LSO, HW)) and
    /// calls [`Log::update_high_watermark`] whenever the high watermark moves, without
    /// which completed transactions never become stable. Lock-free.
    pub fn last_stable_offset(&self) -> i64 {
        let log_end_offset = self.log_end_offset();
        self.first_unstable_offset().map_or(log_end_offset, |offset| offset.min(log_end_offset))
    }

    /// Tells the log the partition's high watermark: transactions completed by a marker
    /// below it are replicated and become stable (Kafka's `onHighWatermarkUpdated`). The
    /// broker calls it whenever the high watermark moves, on leaders and followers, and
    /// right after opening the log (with the checkpointed high watermark); a single-node
    /// broker calls it with the log end offset after each append. `high_watermark` is
    /// clamped to [log start offset, log end offset], as Kafka's `updateHighWatermark`
    /// does (a follower may hear of one beyond its log end); returns the clamped value.
    /// The value is also remembered for rebuilds of producer state (truncation), which
    /// treat completions at or above it as unreplicated.
    pub fn update_high_watermark(&self, high_watermark: i64) -> Result<i64> {
        let mut inner = self.write_inner();
        self.check_open(&inner)?;
        let clamped = high_watermark.clamp(inner.log_start_offset, inner.log_end_offset());
        inner.high_watermark = Some(clamped);
        inner.producer_state.on_high_watermark_updated(clamped);
        self.publish(&inner);
        Ok(clamped)
    }

    /// The aborted transactions overlapping `[start_offset, upper_bound_offset)`: every
    /// one whose ABORT marker is at or after `start_offset` and whose first offset is
    /// below `upper_bound_offset`, in marker order, looked up in the transaction indexes
    /// of the segment holding `start_offset` and the following ones, as far as needed.
    /// A `read_committed` Fetch lists them (producer id, first offset) so the consumer
    /// drops those records.
    pub fn aborted_transactions(
        &self,
        start_offset: i64,
        upper_bound_offset: i64,
    ) -> Result<Vec<AbortedTxn>> {
        let inner = self.read_inner();
        self.check_open(&inner)?;
        let floor = inner.segments.range(..=start_offset).next_back().map_or(i64::MIN, |(base, _)| *base);
        let mut out = Vec::new();
        for segment in inner.segments.range(floor..).map(|(_, s)| s) {
            if segment.txn_index().collect(start_offset, upper_bound_offset, &mut out) {
                break;
            }
        }
        Ok(out)
    }

    /// The producers this partition knows (DescribeProducers), ordered by id.
    pub fn active_producers(&self) -> Vec<ActiveProducer> {
        self.read_inner().producer_state.active_producers()
    }

    /// Forgets producers whose last batch or marker is `producer.id.expiration.ms` old
    /// and that have no open transaction; returns how many. The broker calls it
    /// periodically (Kafka: every `producer.id.expiration.check.interval.ms`, 10 min).
    /// A forgotten producer's next batch is accepted at any sequence, as a new one.
    pub fn remove_expired_producers(&self, now_ms: i64) -> Result<usize> {
        let config = self.config();
        let mut inner = self.write_inner();
        self.check_open(&inner)?;
        inner.observe_now(now_ms);
        let removed = inner.producer_state.remove_expired(now_ms, config.producer_id_expiration_ms);
        if removed > 0 {
            tracing::debug!(topic = %self.topic, partition = self.partition, removed, "expired producer ids");
        }
        Ok(removed)
    }
}

/// Writes a producer snapshot at the state's end (if new), then prunes old ones.
///
/// Kept: the newest snapshot at or below the base of the segment before the active one,
/// the newest at or below the active segment's base, and the newest of all. A crash
/// recovers the active segment from the second, a truncation into the previous segment
/// replays from the first, and a clean restart starts from the third: the "last two"
/// segment snapshots plus the clean-shutdown one, at most three files.
pub(super) fn take_producer_snapshot(inner: &mut LogInner, sync: bool) -> Result<()> {
    inner.producer_state.take_snapshot(sync)?;
    let mut bases = inner.segments.keys().rev();
    let active = bases.next().copied().unwrap_or(0);
    let previous = bases.next().copied().unwrap_or(active);
    let offsets = inner.producer_state.snapshot_offsets();
    let newest_at_or_below = |limit: i64| offsets.iter().rev().find(|o| **o <= limit).copied();
    let keep = [newest_at_or_below(previous), newest_at_or_below(active), offsets.last().copied()];
    inner.producer_state.delete_snapshots_where(|offset| !keep.contains(&Some(offset)))
}

/// Rebuilds producer state, ongoing transactions and transaction index entries from the
/// newest usable snapshot at or below `replay_from_at_most` and a replay of the log
/// after it (Kafka's `rebuildProducerState` / `truncateAndReload`); with
/// `rebuild_epochs`, the same pass also rebuilds the leader epoch cache (empty on entry)
/// from the headers of every batch.
///
/// Snapshots above the log end (truncated away) or below the first segment (their
/// replay would skip deleted batches) are deleted first. Without a usable snapshot the
/// whole log is replayed. Index entries already present are kept; missing ones are
/// appended. Completed transactions the replay sees count as unreplicated unless the
/// high watermark the log was told of is past their markers; those that were
/// unreplicated before and are still in the log stay so, even if completed before the
/// snapshot the replay starts from.
pub(super) fn rebuild_producer_state(
    inner: &mut LogInner,
    replay_from_at_most: i64,
    rebuild_epochs: bool,
    now_ms: i64,
    expiration_ms: i64,
) -> Result<()> {
    let log_end_offset = inner.log_end_offset();
    let first_base = inner.first_segment_base();
    let state = &mut inner.producer_state;
    let still_unreplicated = state.unreplicated_below(log_end_offset);
    state.delete_snapshots_where(|offset| offset > log_end_offset || offset < first_base)?;
    let max_start = replay_from_at_most.min(log_end_offset);
    let start = match state.load_latest_snapshot(first_base, max_start, now_ms, expiration_ms)? {
        Some(offset) => offset,
        None => {
            state.reset_to(first_base);
            first_base
        }
    };
    debug_assert!(!rebuild_epochs || inner.leader_epochs.entries().is_empty(), "epochs rebuilt into a cache");
    replay(inner, start, rebuild_epochs)?;
    let state = &mut inner.producer_state;
    state.set_map_end_offset(log_end_offset);
    state.restore_unreplicated(still_unreplicated);
    state.on_high_watermark_updated(inner.log_start_offset);
    if let Some(high_watermark) = inner.high_watermark {
        state.on_high_watermark_updated(high_watermark);
    }
    Ok(())
}

/// Feeds every producer batch at or after `start` through producer state (as
/// replication would) and records the aborts it completes in their segments'
/// transaction indexes; with `rebuild_epochs`, scans from the first segment and also
/// assigns each new leader epoch its first batch's base offset. Reads headers only
/// (the scan `LogSegment::for_each_batch_from`), plus the small control batches.
fn replay(inner: &mut LogInner, start: i64, rebuild_epochs: bool) -> Result<()> {
    let LogInner { segments, producer_state, leader_epochs, .. } = inner;
    let producer_floor = segments.range(..=start).next_back().map_or(i64::MIN, |(base, _)| *base);
    let floor = if rebuild_epochs { i64::MIN } else { producer_floor };
    let mut aborted_by_segment: Vec<(i64, Vec<AbortedTxn>)> = Vec::new();
    let mut batches = 0u64;
    for (base, segment) in segments.range(floor..) {
        let scan_from = if rebuild_epochs { *base } else { start };
        if segment.next_offset() <= scan_from {
            continue;
        }
        let mut aborted = Vec::new();
        segment.for_each_batch_from(scan_from, |position, header| {
            // Kafka's segment recovery rule: only a real epoch newer than the latest.
            if rebuild_epochs && leader_epochs.is_new_epoch(header.partition_leader_epoch) {
                leader_epochs.assign(header.partition_leader_epoch, header.base_offset);
            }
            // A batch straddling `start` is already in the snapshot.
            if header.producer_id < 0 || header.base_offset < start {
                return Ok(());
            }
            let marker =
                if header.is_control() { segment.read_end_txn_marker(position, header)? } else { None };
            let info = batch_info(header, marker);
            let update = producer_state.prepare_update(std::slice::from_ref(&info), Origin::Replication)?;
            aborted.extend(producer_state.apply(update, header.next_offset()));
            batches += 1;
            Ok(())
        })?;
        aborted_by_segment.push((*base, aborted));
    }
    for (base, aborted) in aborted_by_segment {
        if let Some(segment) = segments.get_mut(&base) {
            for txn in aborted {
                segment.txn_index_mut().append_if_newer(txn)?;
            }
        }
    }
    tracing::debug!(
        start,
        batches,
        rebuild_epochs,
        epochs = leader_epochs.entries().len(),
        "replayed producer batches"
    );
    Ok(())
}
