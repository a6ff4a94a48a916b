//! A byte range of a segment file, handed to the broker instead of copied bytes.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

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
}

impl std::fmt::Debug for FileSlice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSlice").field("position", &self.position).field("len", &self.len).finish()
    }
}

impl FileSlice {
    pub(crate) fn new(file: Arc<File>, position: u64, len: u32) -> Self {
        FileSlice { file, position, len }
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

    /// Reads the range into memory with one `pread`.
    pub fn read_bytes(&self) -> std::io::Result<Bytes> {
        let mut buf = BytesMut::zeroed(self.len as usize);
        self.file.read_exact_at(&mut buf, self.position)?;
        Ok(buf.freeze())
    }
}
