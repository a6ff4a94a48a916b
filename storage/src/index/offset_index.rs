//! `.index`: sparse map from offset to file position within one segment.
//!
//! Entries are 8 bytes, big-endian like Kafka's: offset relative to the segment base
//! (u32) and byte position in the `.log` file (u32). Each entry points at the start of a
//! batch and holds that batch's base offset, so a lookup lands at or before the batch
//! containing the target and a forward scan of batch headers finishes the job.

use std::path::Path;

use super::file::IndexFile;
use super::largest_lower_bound;
use crate::error::Result;

const ENTRY_SIZE: usize = 8;

/// A found index entry: an absolute offset and the position of its batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OffsetPosition {
    pub(crate) offset: i64,
    pub(crate) position: u32,
}

/// The offset index of one segment.
#[derive(Debug)]
pub(crate) struct OffsetIndex {
    base_offset: i64,
    file: IndexFile,
}

impl OffsetIndex {
    /// Opens or creates the index; see [`IndexFile::open`].
    pub(crate) fn open(path: &Path, base_offset: i64, max_index_bytes: u32) -> Result<Self> {
        Ok(OffsetIndex { base_offset, file: IndexFile::open(path, ENTRY_SIZE, max_index_bytes)? })
    }

    fn relative(&self, i: usize) -> u32 {
        let e = self.file.entry(i);
        u32::from_be_bytes([e[0], e[1], e[2], e[3]])
    }

    fn entry(&self, i: usize) -> OffsetPosition {
        let e = self.file.entry(i);
        OffsetPosition {
            offset: self.base_offset + i64::from(self.relative(i)),
            position: u32::from_be_bytes([e[4], e[5], e[6], e[7]]),
        }
    }

    /// The entry with the largest offset <= `target`, or the segment start.
    pub(crate) fn lookup(&self, target: i64) -> OffsetPosition {
        let found = largest_lower_bound(self.file.entries(), target, |i| self.entry(i).offset);
        found.map_or(OffsetPosition { offset: self.base_offset, position: 0 }, |i| self.entry(i))
    }

    /// The entry with the largest position <= `position`, if any.
    pub(crate) fn lookup_by_position(&self, position: u32) -> Option<OffsetPosition> {
        largest_lower_bound(self.file.entries(), i64::from(position), |i| i64::from(self.entry(i).position))
            .map(|i| self.entry(i))
    }

    /// Whether no more entries fit; the segment must roll.
    pub(crate) fn is_full(&self) -> bool {
        self.file.entries() >= self.file.capacity()
    }

    /// Last entry, if any.
    pub(crate) fn last_entry(&self) -> Option<OffsetPosition> {
        self.file.entries().checked_sub(1).map(|i| self.entry(i))
    }

    /// Appends an entry for a batch starting at `position` with base offset `offset`.
    /// Offsets and positions must grow strictly; the caller checks fullness and that the
    /// relative offset fits (segments roll before it could not).
    pub(crate) fn append(&mut self, offset: i64, position: u32) {
        if let Some(last) = self.last_entry() {
            debug_assert!(offset > last.offset && position > last.position, "offset index must grow");
            if offset <= last.offset || position <= last.position {
                return;
            }
        }
        let Ok(relative) = u32::try_from(offset - self.base_offset) else {
            debug_assert!(false, "relative offset overflow");
            return;
        };
        let mut entry = [0u8; ENTRY_SIZE];
        entry[..4].copy_from_slice(&relative.to_be_bytes());
        entry[4..].copy_from_slice(&position.to_be_bytes());
        self.file.push(&entry);
    }

    /// Drops entries whose offset is >= `offset`.
    pub(crate) fn truncate_to(&mut self, offset: i64) {
        let keep = largest_lower_bound(self.file.entries(), offset - 1, |i| self.entry(i).offset)
            .map_or(0, |i| i + 1);
        self.file.truncate_entries(keep);
    }

    /// Drops all entries.
    pub(crate) fn reset(&mut self) {
        self.file.truncate_entries(0);
    }

    /// Checks what can be checked cheaply without the log: whole entries, strictly growing
    /// offsets and positions (all of them when `full`, else the first and last), and the
    /// last position inside the log file.
    pub(crate) fn sanity_check(&self, log_size: u64, full: bool) -> Result<(), &'static str> {
        if self.file.is_ragged() {
            return Err("index length is not a multiple of the entry size");
        }
        let n = self.file.entries();
        if n == 0 {
            return Ok(());
        }
        let pairs: Box<dyn Iterator<Item = (usize, usize)>> =
            if full { Box::new((1..n).map(|i| (i - 1, i))) } else { Box::new(std::iter::once((0, n - 1))) };
        for (a, b) in pairs {
            if a == b {
                continue;
            }
            let (x, y) = (self.entry(a), self.entry(b));
            if y.offset <= x.offset || y.position <= x.position {
                return Err("offset index entries do not grow");
            }
        }
        if u64::from(self.entry(n - 1).position) >= log_size {
            return Err("offset index points past the end of the log");
        }
        Ok(())
    }

    /// Sets the preallocated size (active segments) or trims (inactive ones).
    pub(crate) fn resize(&mut self, bytes: u64) -> Result<()> {
        self.file.resize(bytes)
    }

    /// Shrinks the file to the entries in use.
    pub(crate) fn trim(&mut self) -> Result<()> {
        self.file.trim()
    }

    /// msyncs the mapping.
    pub(crate) fn flush(&self) -> Result<()> {
        self.file.flush()
    }

    /// Removes the file.
    pub(crate) fn delete(self) -> Result<()> {
        self.file.delete()
    }

    /// Renames the file.
    pub(crate) fn rename(&mut self, to: std::path::PathBuf) -> Result<()> {
        self.file.rename(to)
    }

    /// Path of the file.
    pub(crate) fn path(&self) -> &Path {
        self.file.path()
    }
}
