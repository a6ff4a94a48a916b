//! Sequential batch reads of one segment file for the cleaner: chunks of
//! `io_buffer_bytes` are read with `pread` from the segment's shared file handle (no log
//! lock needed: inactive segments only change by truncation or deletion, which the swap
//! detects), and batches are handed out as zero-copy views into the chunk.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use bytes::{Bytes, BytesMut};
use strata_protocol::records::{RecordBatch, RecordBatchHeader, BATCH_HEADER_SIZE};

use crate::error::{IoOp, Result, StorageError};

/// Iterates the batches of `file` between two byte positions.
pub(super) struct BatchReader<'a> {
    file: &'a File,
    path: &'a Path,
    position: u64,
    end: u64,
    chunk: Bytes,
    chunk_start: u64,
    io_buffer_bytes: usize,
}

impl<'a> BatchReader<'a> {
    /// Reads `file` (at `path`, for errors) from byte 0 to `end`.
    pub(super) fn new(file: &'a File, path: &'a Path, end: u64, io_buffer_bytes: usize) -> Self {
        BatchReader { file, path, position: 0, end, chunk: Bytes::new(), chunk_start: 0, io_buffer_bytes }
    }

    /// Whether no batch is left.
    pub(super) fn is_done(&self) -> bool {
        self.position >= self.end
    }

    fn chunk_holds(&self, len: u64) -> bool {
        self.position >= self.chunk_start && self.position + len <= self.chunk_start + self.chunk.len() as u64
    }

    fn refill(&mut self, at_least: usize) -> Result<()> {
        let left = self.end - self.position;
        let len = (self.io_buffer_bytes.max(at_least) as u64).min(left) as usize;
        let mut buf = BytesMut::zeroed(len);
        self.file
            .read_exact_at(&mut buf, self.position)
            .map_err(|e| StorageError::io(IoOp::Read, self.path, self.position, e))?;
        self.chunk = buf.freeze();
        self.chunk_start = self.position;
        Ok(())
    }

    /// The next whole batch, or `None` at the end. A batch that does not parse or runs
    /// past the end is reported as corrupt: segments the cleaner reads were recovered or
    /// cleanly closed, so this is damage, not a torn tail.
    pub(super) fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        if self.is_done() {
            return Ok(None);
        }
        let corrupt =
            |offset, source| StorageError::CorruptLog { path: self.path.to_path_buf(), offset, source };
        if !self.chunk_holds(BATCH_HEADER_SIZE as u64) {
            self.refill(BATCH_HEADER_SIZE)?;
        }
        let at = (self.position - self.chunk_start) as usize;
        let header = RecordBatchHeader::parse(&self.chunk[at..]).map_err(|e| corrupt(-1, e))?;
        let size = header.size_in_bytes();
        if self.position + size as u64 > self.end {
            let available = (self.end - self.position) as usize;
            let error = strata_protocol::records::RecordsError::Truncated { needed: size, available };
            return Err(corrupt(header.base_offset, error));
        }
        if !self.chunk_holds(size as u64) {
            self.refill(size)?;
        }
        let at = (self.position - self.chunk_start) as usize;
        let batch = RecordBatch::parse(&self.chunk.slice(at..at + size))
            .map_err(|e| corrupt(header.base_offset, e))?;
        self.position += size as u64;
        Ok(Some(batch))
    }
}
