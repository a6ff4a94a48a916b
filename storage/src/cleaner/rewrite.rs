//! Phase 2 of a cleaning: rewrite a group of segments into one `.cleaned` segment,
//! keeping for each key only its latest record (Kafka's `cleanSegments` / `cleanInto`
//! with `MemoryRecords.filterTo`).

use std::collections::HashSet;
use std::path::Path;
use std::time::SystemTime;

use strata_protocol::records::{Record, RecordBatch, RecordBatchHeader};

use super::batch::{write_empty, write_retained, DELETE_HORIZON_BIT};
use super::offset_map::OffsetMap;
use super::range::SegmentView;
use super::reader::BatchReader;
pub(super) use super::txn::TxnTracker;
use super::CleanStats;
use crate::config::LogConfig;
use crate::error::{Result, StorageError};
use crate::segment::{BatchMeta, LogSegment};

/// Suffix of a cleaned segment being written.
pub(crate) const CLEANED_SUFFIX: &str = ".cleaned";

/// Identifies the batch holding a producer's last sequence: (producer id, epoch, last
/// sequence). Such a batch is kept, emptied if need be, so producer state rebuilt from the
/// log still knows the producer's last sequence (idempotence across restarts).
pub(super) type ProducerLast = (i64, i16, i32);

/// Everything a group rewrite needs besides the segments.
pub(super) struct RewriteContext<'a> {
    pub(super) dir: &'a Path,
    pub(super) config: &'a LogConfig,
    pub(super) map: &'a OffsetMap,
    pub(super) now_ms: i64,
    pub(super) producer_last_batches: &'a HashSet<ProducerLast>,
    pub(super) io_buffer_bytes: usize,
}

/// Reusable buffers of the rewrite.
#[derive(Debug, Default)]
pub(super) struct RewriteBuffers {
    out: Vec<u8>,
    metas: Vec<BatchMeta>,
    scratch: Vec<u8>,
    kept: Vec<Record>,
}

/// What to do with one batch.
enum Decision {
    /// Keep the stored bytes.
    Copy,
    /// Re-encode with the records in `RewriteBuffers::kept` and this delete horizon.
    Rewrite(Option<i64>),
    /// Keep only the header (no records).
    Empty,
    Drop,
}

/// Writes the cleaned replacement of `group` (consecutive inactive segments) as a
/// `.cleaned` segment at the group's base offset, flushed and with trimmed indexes,
/// ready to be swapped in. On error the partial files are removed.
///
/// `txns` carries the transactions from group to group of one cleaning (a transaction's
/// data may be in one group and its marker in the next), as Kafka's
/// `CleanedTransactionMetadata` does; it holds the aborted transactions of the whole
/// rewritten range.
pub(super) fn clean_group(
    ctx: &RewriteContext<'_>,
    group: &[SegmentView],
    txns: &mut TxnTracker,
    buffers: &mut RewriteBuffers,
    stats: &mut CleanStats,
) -> Result<LogSegment> {
    let base = group.first().map_or(0, |s| s.base_offset);
    let mut cleaned = LogSegment::create_with_suffix(ctx.dir, base, ctx.config, ctx.now_ms, CLEANED_SUFFIX)?;
    match fill(ctx, group, txns, buffers, stats, &mut cleaned) {
        Ok(()) => Ok(cleaned),
        Err(error) => {
            if let Err(cleanup) = cleaned.delete() {
                tracing::warn!(%cleanup, "cannot remove partial cleaned segment");
            }
            Err(error)
        }
    }
}

fn fill(
    ctx: &RewriteContext<'_>,
    group: &[SegmentView],
    txns: &mut TxnTracker,
    buffers: &mut RewriteBuffers,
    stats: &mut CleanStats,
    cleaned: &mut LogSegment,
) -> Result<()> {
    buffers.out.clear();
    buffers.metas.clear();
    // The group's last batch is kept (emptied if need be) so the cleaned segment ends at
    // the same offset as the originals: crash recovery of a swap drops the segments the
    // swapped-in one overlaps, so it must overlap all of them.
    let last_with_data = group.iter().rposition(|s| s.size > 0);
    let mut last_modified = SystemTime::UNIX_EPOCH;
    for (i, segment) in group.iter().enumerate() {
        let mut reader = BatchReader::new(&segment.file, &segment.path, segment.size, ctx.io_buffer_bytes);
        while let Some(batch) = reader.next_batch()? {
            let ends_group = Some(i) == last_with_data && reader.is_done();
            batch.validate_crc().map_err(|source| StorageError::CorruptLog {
                path: segment.path.clone(),
                offset: batch.base_offset(),
                source,
            })?;
            stats.records_read += u64::from(batch.records_count().max(0).unsigned_abs());
            stats.bytes_read += batch.size_in_bytes() as u64;
            let start = buffers.out.len();
            match decide(ctx, &batch, ends_group, txns, buffers, stats) {
                Decision::Copy => {
                    buffers.out.extend_from_slice(batch.as_bytes());
                    stats.records_retained += u64::from(batch.records_count().max(0).unsigned_abs());
                }
                Decision::Rewrite(horizon) => {
                    write_retained(&batch, &buffers.kept, horizon, &mut buffers.out, &mut buffers.scratch)
                        .map_err(|source| StorageError::CorruptLog {
                            path: segment.path.clone(),
                            offset: batch.base_offset(),
                            source,
                        })?;
                    stats.records_retained += buffers.kept.len() as u64;
                }
                Decision::Empty => {
                    write_empty(&batch, &mut buffers.out).map_err(|source| StorageError::CorruptLog {
                        path: segment.path.clone(),
                        offset: batch.base_offset(),
                        source,
                    })?;
                }
                Decision::Drop => continue,
            }
            let size = (buffers.out.len() - start) as u64;
            let header = RecordBatchHeader::parse(&buffers.out[start..]).ok();
            let max_timestamp = header.map_or(-1, |h| h.max_timestamp);
            // A horizon that had passed before this cleaning, on a batch it still kept (it
            // ends the group), is no reason to come back: only a later cleaning's grouping
            // can remove it. One stamped now (`delete.retention.ms` 0) is.
            let future_horizon = |h: &RecordBatchHeader| {
                h.attributes & DELETE_HORIZON_BIT != 0 && h.base_timestamp >= ctx.now_ms
            };
            if let Some(h) = header.filter(future_horizon) {
                stats.pending_horizon_ms =
                    Some(stats.pending_horizon_ms.map_or(h.base_timestamp, |p| p.min(h.base_timestamp)));
            }
            buffers.metas.push(BatchMeta {
                base_offset: batch.base_offset(),
                last_offset: batch.last_offset(),
                max_timestamp,
                size,
            });
            if buffers.out.len() >= ctx.io_buffer_bytes {
                flush_out(cleaned, buffers)?;
            }
        }
        last_modified = last_modified.max(modified(segment));
    }
    flush_out(cleaned, buffers)?;
    // Only the aborts whose markers stay: a read_committed reader skips an aborted
    // producer's batches until it meets the marker, so an entry without one would hide
    // the producer's later transactions.
    for txn in txns.take_retained() {
        cleaned.txn_index_mut().append(txn)?;
    }
    cleaned.on_become_inactive()?;
    cleaned.flush()?;
    if last_modified > SystemTime::UNIX_EPOCH {
        cleaned.set_last_modified(last_modified)?;
    }
    stats.bytes_written += cleaned.size();
    Ok(())
}

fn flush_out(cleaned: &mut LogSegment, buffers: &mut RewriteBuffers) -> Result<()> {
    if !buffers.out.is_empty() {
        cleaned.append(&buffers.out, &buffers.metas)?;
    }
    buffers.out.clear();
    buffers.metas.clear();
    Ok(())
}

fn modified(segment: &SegmentView) -> SystemTime {
    segment.file.metadata().and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH)
}

/// Kafka's `checkBatchRetention` + `shouldRetainRecord` for one batch, read in log
/// order (`txns` follows the transactions). Fills `buffers.kept` for
/// [`Decision::Rewrite`].
fn decide(
    ctx: &RewriteContext<'_>,
    batch: &RecordBatch,
    ends_group: bool,
    txns: &mut TxnTracker,
    buffers: &mut RewriteBuffers,
    stats: &mut CleanStats,
) -> Decision {
    let decision = decide_batch(ctx, batch, ends_group, txns, buffers, stats);
    if batch.is_transactional() && !batch.is_control() && !matches!(decision, Decision::Drop) {
        txns.data_kept(batch.producer_id());
    }
    decision
}

/// [`decide`] before the transaction tracker learns what stays.
fn decide_batch(
    ctx: &RewriteContext<'_>,
    batch: &RecordBatch,
    ends_group: bool,
    txns: &mut TxnTracker,
    buffers: &mut RewriteBuffers,
    stats: &mut CleanStats,
) -> Decision {
    let horizon = batch.has_delete_horizon().then(|| batch.base_timestamp());
    if batch.is_control() {
        return decide_marker(ctx, batch, ends_group, horizon, txns, buffers, stats);
    }
    let aborted = txns.on_data(batch);
    let producer_last = batch.producer_id() >= 0
        && ctx.producer_last_batches.contains(&(
            batch.producer_id(),
            batch.producer_epoch(),
            batch.last_sequence(),
        ));
    let keep_empty = producer_last || ends_group;
    if aborted {
        stats.aborted_batches_removed += 1;
        return if keep_empty { Decision::Empty } else { Decision::Drop };
    }
    let tombstones_expired = horizon.is_some_and(|h| ctx.now_ms >= h);
    let records = match batch.records(ctx.config.max_uncompressed_batch_bytes) {
        Ok(records) => records,
        Err(error) => {
            tracing::warn!(offset = batch.base_offset(), %error, "cleaner cannot decode batch, keeping it");
            stats.undecodable_batches += 1;
            return Decision::Copy;
        }
    };
    buffers.kept.clear();
    let mut dropped = false;
    let mut has_tombstone = false;
    for record in records {
        let Ok(record) = record else {
            tracing::warn!(offset = batch.base_offset(), "cleaner cannot decode a record, keeping its batch");
            stats.undecodable_batches += 1;
            return Decision::Copy;
        };
        if retain(ctx.map, &record, tombstones_expired) {
            has_tombstone |= record.value.is_none();
            buffers.kept.push(record);
        } else {
            if record.value.is_none() {
                stats.tombstones_removed += 1;
            }
            dropped = true;
        }
    }
    if buffers.kept.is_empty() {
        return if keep_empty { Decision::Empty } else { Decision::Drop };
    }
    // KIP-534: the first cleaning that keeps a tombstone stamps the batch with the time
    // after which its tombstones may go.
    let new_horizon =
        horizon.or_else(|| has_tombstone.then(|| ctx.now_ms.saturating_add(ctx.config.delete_retention_ms)));
    if !dropped && new_horizon == horizon {
        Decision::Copy
    } else {
        Decision::Rewrite(new_horizon)
    }
}

/// A COMMIT or ABORT marker: kept while a batch of its transaction was read in this
/// cleaning; then stamped with a delete horizon (now + `delete.retention.ms`) by the
/// first cleaning that finds it removable, and removed by the first one after that
/// horizon, unless it ends the group (the cleaned segment must end where the originals
/// did; a later cleaning removes it).
fn decide_marker(
    ctx: &RewriteContext<'_>,
    batch: &RecordBatch,
    ends_group: bool,
    horizon: Option<i64>,
    txns: &mut TxnTracker,
    buffers: &mut RewriteBuffers,
    stats: &mut CleanStats,
) -> Decision {
    let data_dropped = txns.data_all_dropped(batch.producer_id());
    if !txns.on_control(batch) {
        if data_dropped {
            // Its data is gone now, so the next cleaning may stamp it: come back then
            // rather than wait for new dirty data that may never come.
            stats.pending_horizon_ms =
                Some(stats.pending_horizon_ms.map_or(ctx.now_ms, |p| p.min(ctx.now_ms)));
        }
        return Decision::Copy;
    }
    match horizon {
        Some(h) if ctx.now_ms >= h && !ends_group => {
            stats.markers_removed += 1;
            Decision::Drop
        }
        Some(_) => Decision::Copy,
        None => {
            buffers.kept.clear();
            let records = match batch.records(ctx.config.max_uncompressed_batch_bytes) {
                Ok(records) => records,
                Err(_) => return Decision::Copy,
            };
            for record in records {
                let Ok(record) = record else { return Decision::Copy };
                buffers.kept.push(record);
            }
            if buffers.kept.is_empty() {
                return Decision::Copy;
            }
            Decision::Rewrite(Some(ctx.now_ms.saturating_add(ctx.config.delete_retention_ms)))
        }
    }
}

/// Kafka's `shouldRetainRecord`: a record after the mapped range stays; one without a
/// key stays (Kafka drops them as invalid on compacted topics; keeping them loses
/// nothing); otherwise it stays if it is the latest for its key, and, for a tombstone,
/// if its batch's delete horizon has not passed.
fn retain(map: &OffsetMap, record: &Record, tombstones_expired: bool) -> bool {
    if record.offset > map.latest_offset() {
        return true;
    }
    let Some(key) = record.key.as_ref() else {
        return true;
    };
    let latest = map.get(map.hash(key)).is_none_or(|offset| record.offset >= offset);
    latest && (record.value.is_some() || !tombstones_expired)
}
