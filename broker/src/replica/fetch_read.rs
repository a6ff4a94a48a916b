//! Reading record data for a Fetch: up to the high watermark (consumers), the last
//! stable offset (`read_committed`) or the log end (followers). Reads of 16 KiB or more
//! stay in the segment file and are sent with `sendfile(2)`.
//!
//! A compacted log can hold batches the cleaner emptied (kept to preserve offsets or a
//! producer's last sequence) and segments holding nothing else; a response made only of
//! empty batches makes librdkafka take the data for a message too large to fetch. So
//! when a read finds only empty batches, the following batches are appended (bounded by
//! `max_bytes`), as a Kafka log whose cleaner merged those segments would return them.

use super::{Partition, ReadError};
use bytes::Bytes;
use std::sync::Arc;
use strata_protocol::records::RecordSet;
use strata_storage::LogReadInfo;

/// Fetch reads shorter than this are copied into the response: below it a `sendfile`
/// per partition costs more than the copy it saves.
pub const SENDFILE_MIN_BYTES: usize = 16 * 1024;

/// How far a fetch may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadUpper {
    /// A consumer with `read_uncommitted`: below the high watermark.
    HighWatermark,
    /// A consumer with `read_committed`: below the last stable offset.
    LastStable,
    /// A follower: everything in the log.
    LogEnd,
}

impl ReadUpper {
    /// The bound itself, from the high watermark and last stable offset a fetch read once
    /// (both move while it runs; the data, the aborted transactions and the offsets a
    /// response reports must all come from one reading of them).
    pub fn bound(self, high_watermark: i64, last_stable_offset: i64) -> i64 {
        match self {
            ReadUpper::HighWatermark => high_watermark,
            ReadUpper::LastStable => last_stable_offset,
            ReadUpper::LogEnd => i64::MAX,
        }
    }
}

fn read(
    p: &Partition,
    offset: i64,
    max_bytes: usize,
    min_one: bool,
    bound: i64,
) -> Result<LogReadInfo, ReadError> {
    Ok(p.log.read(offset, max_bytes, bound, min_one)?)
}

/// Whole batches from `offset` below `bound` (a [`ReadUpper::bound`], read once by the
/// caller: a read_committed fetch that read the last stable offset twice could return
/// data past the bound its aborted transactions were collected for), within
/// `max_bytes` (at least one batch with `min_one`).
pub(super) fn read_for_fetch(
    p: &Partition,
    offset: i64,
    max_bytes: usize,
    min_one: bool,
    bound: i64,
) -> Result<RecordSet, ReadError> {
    // A caught-up consumer (most partitions of most fetches): nothing to look up.
    if bound != i64::MAX && offset == bound && offset >= p.log.log_start_offset() {
        return Ok(RecordSet::new());
    }
    let slice = read(p, offset, max_bytes, min_one, bound)?.records;
    if slice.len() as usize >= SENDFILE_MIN_BYTES {
        let first = slice.first_batch_header().map_err(ReadError::Io)?;
        if first.is_some_and(|h| h.records_count != 0) {
            // Holds records: sent from the page cache as it is, never read here.
            let mut set = RecordSet::new();
            set.push_external(Arc::new(slice));
            return Ok(set);
        }
    }
    let mut data = slice.read_bytes().map_err(ReadError::Io)?;
    for _ in 0..64 {
        let Some(next) = next_offset_if_only_empty_batches(&data) else { break };
        if next >= bound || data.len() >= max_bytes {
            break;
        }
        let more = read(p, next, max_bytes - data.len(), false, bound)?;
        let more = more.records.read_bytes().map_err(ReadError::Io)?;
        if more.is_empty() {
            break;
        }
        let mut joined = bytes::BytesMut::with_capacity(data.len() + more.len());
        joined.extend_from_slice(&data);
        joined.extend_from_slice(&more);
        data = joined.freeze();
    }
    Ok(RecordSet::from(data))
}

/// If `data` is non-empty and holds only batches without records, the offset after
/// its last batch.
fn next_offset_if_only_empty_batches(data: &Bytes) -> Option<i64> {
    let mut next = None;
    for batch in strata_protocol::records::RecordBatches::new(data.clone()) {
        let batch = batch.ok()?;
        if batch.records_count() != 0 {
            return None;
        }
        next = Some(batch.next_offset());
    }
    next
}
