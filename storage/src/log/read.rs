//! Fetch reads and ListOffsets lookups.

use super::Log;
use crate::error::{Result, StorageError};
use crate::file_slice::FileSlice;
use crate::segment::TimestampAndOffset;

/// The answer to a read: whole batches from one segment plus the log bounds at the time.
#[derive(Debug, Clone)]
pub struct LogReadInfo {
    /// The batches; empty when the read starts at the log end or limits excluded the
    /// first batch.
    pub records: FileSlice,
    /// Log start offset when the read was served.
    pub log_start_offset: i64,
    /// Log end offset when the read was served.
    pub log_end_offset: i64,
}

impl Log {
    /// Reads whole batches starting with the batch that contains `start_offset` (the
    /// client skips the records before it), from a single segment, totalling at most
    /// `max_bytes` — or the first batch whatever its size if `min_one_batch` — and never
    /// a batch whose base offset is >= `max_offset` (an exclusive bound such as the high
    /// watermark). `OffsetOutOfRange` if `start_offset` is below the log start offset or
    /// above the log end offset.
    pub fn read(
        &self,
        start_offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<LogReadInfo> {
        let inner = self.read_inner();
        self.check_open(&inner)?;
        let log_start_offset = inner.log_start_offset;
        let log_end_offset = inner.log_end_offset();
        if start_offset < log_start_offset || start_offset > log_end_offset {
            return Err(StorageError::OffsetOutOfRange {
                offset: start_offset,
                log_start_offset,
                log_end_offset,
            });
        }
        let floor = inner.segments.range(..=start_offset).next_back().map_or(i64::MIN, |(b, _)| *b);
        for segment in inner.segments.range(floor..).map(|(_, s)| s) {
            if let Some(records) = segment.read(start_offset, max_bytes, max_offset, min_one_batch)? {
                return Ok(LogReadInfo { records, log_start_offset, log_end_offset });
            }
        }
        let active = inner.active();
        Ok(LogReadInfo {
            records: FileSlice::new(active.file().clone(), active.size(), 0),
            log_start_offset,
            log_end_offset,
        })
    }

    /// ListOffsets by time: the first record (by offset, at or after the log start
    /// offset) whose timestamp is >= `timestamp`, with that record's timestamp; `None`
    /// if no record is that recent. The sparse time index narrows the scan; the final
    /// batch is decoded (decompressed if needed) to find the exact record. Special
    /// ListOffsets timestamps (-1 latest, -2 earliest, -3 max) are the caller's job.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<TimestampAndOffset>> {
        let config = self.config();
        let inner = self.read_inner();
        self.check_open(&inner)?;
        for segment in inner.segments.values() {
            if segment.max_timestamp() < timestamp || segment.next_offset() <= inner.log_start_offset {
                continue;
            }
            let found = segment.find_offset_by_timestamp(
                timestamp,
                inner.log_start_offset,
                config.max_uncompressed_batch_bytes,
            )?;
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }

    /// ListOffsets MAX_TIMESTAMP (-3): the largest record timestamp in the log and the
    /// offset of the first record carrying it (KIP-734); `None` for an empty log.
    pub fn max_timestamp(&self) -> Result<Option<TimestampAndOffset>> {
        let config = self.config();
        let inner = self.read_inner();
        self.check_open(&inner)?;
        let mut best: Option<&crate::segment::LogSegment> = None;
        for segment in inner.segments.values() {
            if segment.next_offset() <= inner.log_start_offset {
                continue;
            }
            match best {
                Some(b) if segment.max_timestamp() <= b.max_timestamp() => {}
                _ => best = Some(segment),
            }
        }
        match best {
            Some(segment) => segment.max_timestamp_record(config.max_uncompressed_batch_bytes),
            None => Ok(None),
        }
    }
}
