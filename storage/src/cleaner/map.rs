//! Phase 1 of a cleaning: map every key of the dirty section to its latest offset
//! (Kafka's `buildOffsetMap`).

use strata_protocol::records::RecordBatch;

use super::offset_map::OffsetMap;
use super::range::SegmentView;
use super::reader::BatchReader;
use super::txn::TxnTracker;
use super::CleanStats;
use crate::error::Result;
use crate::index::AbortedTxn;

/// Fills `map` from the dirty segments `dirty` (those overlapping
/// `[first_dirty_offset, first_uncleanable_offset)`, in order). Stops early when the map
/// is full, at a batch boundary when possible. Afterwards `map.latest_offset()` is the
/// last offset covered: records after it are not judged by the map.
///
/// Records of aborted transactions (`aborted`: the aborts covering the dirty section)
/// are not mapped, so they supersede nothing; records of committed transactions are,
/// like any others. Control batches are never mapped.
#[allow(clippy::too_many_arguments)]
pub(super) fn build_offset_map(
    map: &mut OffsetMap,
    dirty: &[SegmentView],
    aborted: Vec<AbortedTxn>,
    first_dirty_offset: i64,
    first_uncleanable_offset: i64,
    max_uncompressed_bytes: usize,
    io_buffer_bytes: usize,
    stats: &mut CleanStats,
) -> Result<()> {
    map.clear();
    let mut txns = TxnTracker::default();
    txns.add_aborted(aborted);
    for (i, segment) in dirty.iter().enumerate() {
        let segment_end = dirty.get(i + 1).map_or(first_uncleanable_offset, |next| next.base_offset);
        let mut reader = BatchReader::new(&segment.file, &segment.path, segment.size, io_buffer_bytes);
        while let Some(batch) = reader.next_batch()? {
            stats.map_bytes_read += batch.size_in_bytes() as u64;
            if batch.last_offset() < first_dirty_offset {
                continue;
            }
            if batch.base_offset() >= first_uncleanable_offset {
                return Ok(());
            }
            let mapped = if batch.is_control() {
                txns.on_control(&batch);
                false
            } else {
                !txns.on_data(&batch)
            };
            if mapped {
                let count = usize::try_from(batch.records_count()).unwrap_or(0);
                // Stop before a batch that may not fit, unless nothing is mapped yet (a
                // batch is then mapped as far as the map goes: progress is still made
                // if the map holds at least one batch's worth of keys).
                if map.len() > 0 && map.len() + count > map.max_entries() {
                    return Ok(());
                }
                if !map_batch(map, &batch, first_dirty_offset, max_uncompressed_bytes, stats) {
                    return Ok(());
                }
            }
            map.update_latest_offset(batch.last_offset());
        }
        // Offsets after the segment's last batch up to the next segment are holes.
        map.update_latest_offset(segment_end - 1);
    }
    Ok(())
}

/// Puts the batch's keys into the map; false if the map filled up part-way.
fn map_batch(
    map: &mut OffsetMap,
    batch: &RecordBatch,
    first_dirty_offset: i64,
    max_uncompressed_bytes: usize,
    stats: &mut CleanStats,
) -> bool {
    let records = match batch.records(max_uncompressed_bytes) {
        Ok(records) => records,
        Err(error) => {
            // Its keys stay unknown, so nothing is dropped because of it: safe.
            tracing::warn!(offset = batch.base_offset(), %error, "cleaner cannot decode batch, not mapping it");
            stats.undecodable_batches += 1;
            return true;
        }
    };
    for record in records {
        let record = match record {
            Ok(record) => record,
            Err(error) => {
                tracing::warn!(offset = batch.base_offset(), %error, "cleaner cannot decode record");
                stats.undecodable_batches += 1;
                return true;
            }
        };
        stats.map_records_read += 1;
        let Some(key) = record.key.as_ref() else {
            continue;
        };
        if record.offset >= first_dirty_offset && !map.put(map.hash(key), record.offset) {
            return false;
        }
    }
    true
}
