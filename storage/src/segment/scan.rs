//! Header-only scans of a segment, for rebuilding producer state: batches are read in
//! 64 KiB chunks and only their 61-byte headers parsed, so replay costs one read per
//! chunk rather than one per batch and never decompresses. Control batches (tiny,
//! uncompressed markers) are read whole to learn COMMIT or ABORT.

use std::os::unix::fs::FileExt;

use strata_protocol::records::{EndTxnMarker, RecordBatchHeader, BATCH_HEADER_SIZE};

use super::LogSegment;
use crate::error::{IoOp, Result, StorageError};

/// Bytes read at a time by a header scan.
const SCAN_CHUNK: usize = 64 * 1024;

impl LogSegment {
    /// Calls `f(position, header)` for every batch whose last offset is >= `start_offset`,
    /// in order, stopping at the end of the segment or at the first header that does not
    /// parse (recovery has already validated what is kept).
    pub(crate) fn for_each_batch_from(
        &self,
        start_offset: i64,
        mut f: impl FnMut(u64, &RecordBatchHeader) -> Result<()>,
    ) -> Result<()> {
        let Some((mut position, _)) = self.find_batch(start_offset)? else {
            return Ok(());
        };
        let mut buf = Vec::new();
        let mut buf_start = position;
        while position + BATCH_HEADER_SIZE as u64 <= self.size {
            let in_buf =
                position >= buf_start && position + BATCH_HEADER_SIZE as u64 <= buf_start + buf.len() as u64;
            if !in_buf {
                let n = SCAN_CHUNK.min((self.size - position) as usize);
                buf.resize(n, 0);
                self.log
                    .read_exact_at(&mut buf, position)
                    .map_err(|e| StorageError::io(IoOp::Read, &self.log_path, position, e))?;
                buf_start = position;
            }
            let at = (position - buf_start) as usize;
            let Ok(header) = RecordBatchHeader::parse(&buf[at..]) else {
                break;
            };
            let end = position + header.size_in_bytes() as u64;
            if end > self.size {
                break;
            }
            f(position, &header)?;
            position = end;
        }
        Ok(())
    }

    /// The COMMIT/ABORT marker of the control batch at `position`; `None` for another
    /// control type, or (with a warning) for a marker that does not decode.
    pub(crate) fn read_end_txn_marker(
        &self,
        position: u64,
        header: &RecordBatchHeader,
    ) -> Result<Option<EndTxnMarker>> {
        let batch = self.read_batch(position, header)?;
        match EndTxnMarker::from_batch(&batch) {
            Ok(marker) => Ok(marker),
            Err(error) => {
                tracing::warn!(
                    segment = %self.log_path.display(),
                    offset = header.base_offset,
                    %error,
                    "ignoring undecodable control batch"
                );
                Ok(None)
            }
        }
    }
}
