//! A byte range of a segment file, handed to the broker instead of copied bytes.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use bytes::Bytes;
use strata_protocol::records::{RecordBatchHeader, BATCH_HEADER_SIZE};

/// Whole record batches in a range of one segment's `.log` file.
///
/// Holding the `Arc<File>` keeps the data readable even if the segment is deleted by
/// retention meanwhile (Unix keeps an unlinked open file alive), so the broker can read
/// it later with `pread` or `sendfile` without holding any log lock. A truncation by
/// replication can still rewrite the range, as in Kafka; readers then see newer batches.
#[derive(Clone)]
pub struct FileSlice {
    file: Arc<File>,
    position: u64,
    len: u32,
    /// The header of the first batch, when the read that cut the slice had it anyway.
    first_header: Option<RecordBatchHeader>,
}

impl std::fmt::Debug for FileSlice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSlice").field("position", &self.position).field("len", &self.len).finish()
    }
}

impl FileSlice {
    pub(crate) fn new(file: Arc<File>, position: u64, len: u32) -> Self {
        FileSlice { file, position, len, first_header: None }
    }

    /// Remembers the first batch's header, read while locating the slice, so
    /// [`FileSlice::first_batch_header`] needs no second read.
    pub(crate) fn with_first_header(mut self, header: RecordBatchHeader) -> Self {
        if self.len as usize >= BATCH_HEADER_SIZE {
            self.first_header = Some(header);
        }
        self
    }

    /// The segment file, for zero-copy transfer.
    pub fn file(&self) -> &Arc<File> {
        &self.file
    }

    /// Byte position of the first batch in the file.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Length in bytes (whole batches).
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether the slice holds no batch.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Reads the range into memory with `pread` straight into fresh capacity (no zeroing
    /// first: it was a fifth of the fetch path's CPU).
    pub fn read_bytes(&self) -> std::io::Result<Bytes> {
        let len = self.len as usize;
        let mut buf: Vec<u8> = Vec::with_capacity(len);
        let mut filled = 0usize;
        while filled < len {
            let offset = self.position + filled as u64;
            // SAFETY: the destination is the vector's spare capacity from `filled` on,
            // `len - filled` bytes long; pread writes at most that many bytes there and
            // nothing reads them before `set_len` below covers only what was written.
            let n = unsafe {
                libc::pread(
                    self.file.as_raw_fd(),
                    buf.as_mut_ptr().add(filled).cast::<libc::c_void>(),
                    len - filled,
                    offset as libc::off_t,
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "segment file ended before the slice (truncated under a reader)",
                ));
            }
            filled += n as usize;
        }
        // SAFETY: pread initialised exactly `filled == len` bytes of the allocation.
        unsafe { buf.set_len(filled) };
        Ok(Bytes::from(buf))
    }
}

/// A fetch response carries a slice as an external part of its frame: the connection
/// sends it with `sendfile`, and only a frame that must be contiguous loads it.
impl strata_protocol::codec::External for FileSlice {
    fn len(&self) -> usize {
        self.len as usize
    }

    fn load(&self) -> std::io::Result<Bytes> {
        self.read_bytes()
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl FileSlice {
    /// The header of the first batch in the slice: the one the read that cut the slice
    /// already parsed, else read with one small `pread`; `None` if the slice is shorter
    /// than a batch header.
    pub fn first_batch_header(&self) -> std::io::Result<Option<RecordBatchHeader>> {
        use std::os::unix::fs::FileExt;
        if let Some(header) = self.first_header {
            return Ok(Some(header));
        }
        if (self.len as usize) < BATCH_HEADER_SIZE {
            return Ok(None);
        }
        let mut buf = [0u8; BATCH_HEADER_SIZE];
        self.file.read_exact_at(&mut buf, self.position)?;
        Ok(RecordBatchHeader::parse(&buf).ok())
    }
}
