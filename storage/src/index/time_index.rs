//! `.timeindex`: sparse map from timestamp to offset within one segment.
//!
//! Entries are 12 bytes, big-endian like Kafka's: a timestamp (i64) and an offset
//! relative to the segment base (u32). An entry `(t, o)` means the largest timestamp seen
//! in the segment up to that point is `t`, first reached in the batch with base offset
//! `o`; every earlier batch has only smaller timestamps. Timestamps grow strictly. The
//! last entry is the segment's largest timestamp once the segment is rolled or closed
//! (Kafka appends it then), which retention and ListOffsets rely on after a restart.

use std::path::Path;

use super::file::IndexFile;
use super::largest_lower_bound;
use crate::error::Result;

const ENTRY_SIZE: usize = 12;

/// A found time index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimestampOffset {
    pub(crate) timestamp: i64,
    pub(crate) offset: i64,
}

/// The time index of one segment.
#[derive(Debug)]
pub(crate) struct TimeIndex {
    base_offset: i64,
    file: IndexFile,
}

impl TimeIndex {
    /// Opens or creates the index; see [`IndexFile::open`].
    pub(crate) fn open(path: &Path, base_offset: i64, max_index_bytes: u32) -> Result<Self> {
        Ok(TimeIndex { base_offset, file: IndexFile::open(path, ENTRY_SIZE, max_index_bytes)? })
    }

    fn entry(&self, i: usize) -> TimestampOffset {
        let e = self.file.entry(i);
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&e[..8]);
        TimestampOffset {
            timestamp: i64::from_be_bytes(ts),
            offset: self.base_offset + i64::from(u32::from_be_bytes([e[8], e[9], e[10], e[11]])),
        }
    }

    /// The entry with the largest timestamp <= `timestamp`, or `(-1, base offset)`:
    /// where a scan for the first record with a timestamp >= `timestamp` can start.
    pub(crate) fn lookup(&self, timestamp: i64) -> TimestampOffset {
        let found = largest_lower_bound(self.file.entries(), timestamp, |i| self.entry(i).timestamp);
        found.map_or(TimestampOffset { timestamp: -1, offset: self.base_offset }, |i| self.entry(i))
    }

    /// Last entry, if any.
    pub(crate) fn last_entry(&self) -> Option<TimestampOffset> {
        self.file.entries().checked_sub(1).map(|i| self.entry(i))
    }

    /// Whether the segment must roll: one slot is always kept free for the final entry
    /// written at roll or close.
    pub(crate) fn is_full(&self) -> bool {
        self.file.entries() + 1 >= self.file.capacity()
    }

    /// Appends `(timestamp, offset)` if `timestamp` is larger than the last entry's.
    /// `final_entry` may use the slot kept free by [`TimeIndex::is_full`].
    pub(crate) fn maybe_append(&mut self, timestamp: i64, offset: i64, final_entry: bool) {
        if let Some(last) = self.last_entry() {
            if timestamp <= last.timestamp {
                return;
            }
            debug_assert!(offset >= last.offset, "time index offsets must not go backwards");
            if offset < last.offset {
                return;
            }
        }
        if timestamp < 0 || (!final_entry && self.is_full()) || self.file.entries() >= self.file.capacity() {
            return;
        }
        let Ok(relative) = u32::try_from(offset - self.base_offset) else {
            debug_assert!(false, "relative offset overflow");
            return;
        };
        let mut entry = [0u8; ENTRY_SIZE];
        entry[..8].copy_from_slice(&timestamp.to_be_bytes());
        entry[8..].copy_from_slice(&relative.to_be_bytes());
        self.file.push(&entry);
    }

    /// Drops entries whose offset is >= `offset`.
    pub(crate) fn truncate_to(&mut self, offset: i64) {
        let mut keep = self.file.entries();
        while keep > 0 && self.entry(keep - 1).offset >= offset {
            keep -= 1;
        }
        self.file.truncate_entries(keep);
    }

    /// Drops all entries.
    pub(crate) fn reset(&mut self) {
        self.file.truncate_entries(0);
    }

    /// Whole entries, strictly growing timestamps and non-decreasing offsets (all entries
    /// when `full`, else first against last), last offset below `next_offset`.
    pub(crate) fn sanity_check(&self, next_offset: i64, full: bool) -> Result<(), &'static str> {
        if self.file.is_ragged() {
            return Err("time index length is not a multiple of the entry size");
        }
        let n = self.file.entries();
        if n == 0 {
            return Ok(());
        }
        let check = |a: usize, b: usize| {
            let (x, y) = (self.entry(a), self.entry(b));
            y.timestamp > x.timestamp && y.offset >= x.offset
        };
        let ok = if full { (1..n).all(|i| check(i - 1, i)) } else { n == 1 || check(0, n - 1) };
        if !ok {
            return Err("time index entries do not grow");
        }
        if self.entry(n - 1).offset >= next_offset.max(self.base_offset + 1) {
            return Err("time index points past the end of the log");
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
