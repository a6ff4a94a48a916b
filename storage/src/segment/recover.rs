//! Rebuilding a segment from its log file after an unclean shutdown or a broken index:
//! re-read every batch checking structure, offsets and CRC, cut the file at the first
//! bad byte, and re-create both indexes. The transaction index loses the entries of cut
//! markers; rebuilding the rest needs producer state, so the log does it by replay.

use std::os::unix::fs::FileExt;

use strata_protocol::records::{RecordBatchHeader, BATCH_HEADER_SIZE, CRC_START};

use super::{BatchMeta, LogSegment};
use crate::error::{IoOp, Result, StorageError};

/// Chunk size for streaming CRC computation, so a corrupt length field never makes
/// recovery allocate more than this.
const CRC_CHUNK: usize = 64 * 1024;

impl LogSegment {
    /// Re-reads the whole segment, truncates any torn or corrupt tail and rebuilds the
    /// indexes. Returns the number of bytes truncated. Never panics on bad data.
    pub(crate) fn recover(&mut self) -> Result<u64> {
        self.offset_index.reset();
        self.time_index.reset();
        self.next_offset = self.base_offset;
        self.max_timestamp = -1;
        self.offset_of_max_timestamp = -1;
        self.first_batch_timestamp = None;
        self.bytes_since_last_index_entry = 0;
        let file_size =
            self.log.metadata().map_err(|e| StorageError::io(IoOp::Metadata, &self.log_path, 0, e))?.len();
        self.size = file_size;
        let mut position = 0u64;
        let mut chunk = Vec::new();
        while position < file_size {
            let Some(header) = self.read_header(position)? else {
                break;
            };
            let meta = BatchMeta::from(&header);
            let offsets_ok = meta.base_offset >= self.next_offset
                && meta.last_offset >= meta.base_offset
                && meta.last_offset - self.base_offset <= i64::from(u32::MAX);
            if !offsets_ok || !self.crc_matches(position, &header, &mut chunk)? {
                break;
            }
            self.index_batch(position, &meta);
            position += meta.size;
        }
        let truncated = file_size - position;
        if truncated > 0 {
            tracing::warn!(
                segment = %self.log_path.display(),
                valid_bytes = position,
                truncated_bytes = truncated,
                "truncating torn or corrupt tail of segment"
            );
            self.log
                .set_len(position)
                .map_err(|e| StorageError::io(IoOp::SetLen, &self.log_path, position, e))?;
            self.size = position;
        }
        self.txn_index.truncate_to(self.next_offset)?;
        self.dirty = true;
        Ok(truncated)
    }

    /// Streams the CRC-covered bytes of the batch at `position` through CRC-32C.
    fn crc_matches(&self, position: u64, header: &RecordBatchHeader, chunk: &mut Vec<u8>) -> Result<bool> {
        let end = position + header.size_in_bytes() as u64;
        let mut at = position + CRC_START as u64;
        let mut crc = strata_protocol::records::Crc32c::default();
        while at < end {
            let n = CRC_CHUNK.min((end - at) as usize);
            chunk.resize(n, 0);
            self.log
                .read_exact_at(chunk, at)
                .map_err(|e| StorageError::io(IoOp::Read, &self.log_path, at, e))?;
            crc.update(chunk);
            at += n as u64;
        }
        debug_assert!(header.size_in_bytes() >= BATCH_HEADER_SIZE);
        Ok(crc.finish() == header.crc)
    }
}
