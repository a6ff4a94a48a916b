//! Reads within one segment: locating the batch holding an offset, cutting whole-batch
//! slices under byte and offset limits, and timestamp lookups.

use std::os::unix::fs::FileExt;

use bytes::{Bytes, BytesMut};
use strata_protocol::records::{RecordBatch, RecordBatchHeader, TimestampType, BATCH_HEADER_SIZE};

use super::LogSegment;
use crate::error::{IoOp, Result, StorageError};
use crate::file_slice::FileSlice;

/// A record offset and its timestamp, as ListOffsets answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampAndOffset {
    /// The record's timestamp (ms).
    pub timestamp: i64,
    /// The record's offset.
    pub offset: i64,
}

impl LogSegment {
    /// Reads the header of the batch at `position`, or `None` if no whole, well-formed
    /// batch starts there.
    pub(crate) fn read_header(&self, position: u64) -> Result<Option<RecordBatchHeader>> {
        if position + BATCH_HEADER_SIZE as u64 > self.size {
            return Ok(None);
        }
        let mut buf = [0u8; BATCH_HEADER_SIZE];
        self.log
            .read_exact_at(&mut buf, position)
            .map_err(|e| StorageError::io(IoOp::Read, &self.log_path, position, e))?;
        match RecordBatchHeader::parse(&buf) {
            Ok(h) if position + h.size_in_bytes() as u64 <= self.size => Ok(Some(h)),
            _ => Ok(None),
        }
    }

    /// Reads the whole batch at `position` into memory.
    pub(crate) fn read_batch(&self, position: u64, header: &RecordBatchHeader) -> Result<RecordBatch> {
        let mut buf = BytesMut::zeroed(header.size_in_bytes());
        self.log
            .read_exact_at(&mut buf, position)
            .map_err(|e| StorageError::io(IoOp::Read, &self.log_path, position, e))?;
        RecordBatch::parse(&Bytes::from(buf)).map_err(|source| StorageError::CorruptLog {
            path: self.log_path.clone(),
            offset: header.base_offset,
            source,
        })
    }

    /// Position and header of the first batch whose last offset is >= `offset`: the batch
    /// containing it, or the next one if it falls in a gap. `None` if no such batch.
    pub(crate) fn find_batch(&self, offset: i64) -> Result<Option<(u64, RecordBatchHeader)>> {
        let mut position = u64::from(self.offset_index.lookup(offset).position);
        while position < self.size {
            let Some(header) = self.read_header(position)? else {
                return Ok(None);
            };
            if header.last_offset() >= offset {
                return Ok(Some((position, header)));
            }
            position += header.size_in_bytes() as u64;
        }
        Ok(None)
    }

    /// Whole batches from the one containing `start_offset`, up to `max_bytes` (but the
    /// first batch whatever its size if `min_one_batch`), none with a base offset >=
    /// `max_offset`. `None` when the segment has no batch at or after `start_offset`; an
    /// empty slice when limits exclude even the first batch.
    pub(crate) fn read(
        &self,
        start_offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<Option<FileSlice>> {
        let Some((start, first)) = self.find_batch(start_offset)? else {
            return Ok(None);
        };
        let empty = FileSlice::new(self.log.clone(), start, 0);
        let first_size = first.size_in_bytes() as u64;
        let max_bytes = u64::try_from(max_bytes).unwrap_or(u64::MAX).min(u64::from(u32::MAX));
        if first.base_offset >= max_offset || (first_size > max_bytes && !min_one_batch) {
            return Ok(Some(empty));
        }
        let limit = start.saturating_add(max_bytes.max(first_size)).min(self.size);
        let mut end = start + first_size;
        // Jump over whole batches with the sparse index before scanning headers: the
        // entry must start inside the byte limit and below max_offset.
        let by_position = self.offset_index.lookup_by_position(u32::try_from(limit).unwrap_or(u32::MAX));
        let by_offset = self.offset_index.lookup(max_offset.saturating_sub(1));
        if let Some(entry) = by_position {
            let jump = u64::from(entry.position.min(by_offset.position));
            if jump > end {
                end = jump;
            }
        }
        while end < self.size {
            let Some(header) = self.read_header(end)? else {
                break;
            };
            let next = end + header.size_in_bytes() as u64;
            if header.base_offset >= max_offset || next > limit {
                break;
            }
            end = next;
        }
        let len = u32::try_from(end - start).unwrap_or(u32::MAX);
        Ok(Some(FileSlice::new(self.log.clone(), start, len).with_first_header(first)))
    }

    /// The first record at or after `starting_offset` whose timestamp is >= `timestamp`.
    pub(crate) fn find_offset_by_timestamp(
        &self,
        timestamp: i64,
        starting_offset: i64,
        max_uncompressed_bytes: usize,
    ) -> Result<Option<TimestampAndOffset>> {
        let from = self.time_index.lookup(timestamp).offset.max(starting_offset);
        let mut position = u64::from(self.offset_index.lookup(from).position);
        while position < self.size {
            let Some(header) = self.read_header(position)? else {
                break;
            };
            if header.max_timestamp >= timestamp && header.last_offset() >= starting_offset {
                let found =
                    self.first_record_where(position, &header, max_uncompressed_bytes, |offset, ts| {
                        offset >= starting_offset && ts >= timestamp
                    })?;
                if found.is_some() {
                    return Ok(found);
                }
            }
            position += header.size_in_bytes() as u64;
        }
        Ok(None)
    }

    /// Exact offset of the first record carrying the segment's max timestamp (the index
    /// only knows the batch). Falls back to the batch base offset.
    pub(crate) fn max_timestamp_record(
        &self,
        max_uncompressed_bytes: usize,
    ) -> Result<Option<TimestampAndOffset>> {
        if self.max_timestamp < 0 {
            return Ok(None);
        }
        let max = self.max_timestamp;
        let fallback = TimestampAndOffset { timestamp: max, offset: self.offset_of_max_timestamp };
        let Some((position, header)) = self.find_batch(self.offset_of_max_timestamp)? else {
            return Ok(Some(fallback));
        };
        if header.max_timestamp != max {
            return Ok(Some(fallback));
        }
        let found = self.first_record_where(position, &header, max_uncompressed_bytes, |_, ts| ts == max)?;
        Ok(Some(found.unwrap_or(fallback)))
    }

    /// Decodes the batch at `position` and returns its first record matching `pred`
    /// (offset, timestamp). LogAppendTime batches need no decoding: every record has the
    /// batch's max timestamp.
    fn first_record_where(
        &self,
        position: u64,
        header: &RecordBatchHeader,
        max_uncompressed_bytes: usize,
        pred: impl Fn(i64, i64) -> bool,
    ) -> Result<Option<TimestampAndOffset>> {
        if header.timestamp_type() == TimestampType::LogAppendTime {
            let ts = header.max_timestamp;
            let found = (header.base_offset..=header.last_offset()).find(|&o| pred(o, ts));
            return Ok(found.map(|offset| TimestampAndOffset { timestamp: ts, offset }));
        }
        let batch = self.read_batch(position, header)?;
        let corrupt = |source| StorageError::CorruptLog {
            path: self.log_path.clone(),
            offset: header.base_offset,
            source,
        };
        for record in batch.records(max_uncompressed_bytes).map_err(corrupt)? {
            let record = record.map_err(corrupt)?;
            if pred(record.offset, record.timestamp) {
                return Ok(Some(TimestampAndOffset { timestamp: record.timestamp, offset: record.offset }));
            }
        }
        Ok(None)
    }
}
