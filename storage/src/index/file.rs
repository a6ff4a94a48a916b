//! A file of fixed-size entries, memory-mapped read-write, shared by both index kinds.
//!
//! The file descriptor is closed once the file is mapped (the mapping keeps the file
//! alive), as Kafka does: a partition's segments then cost one descriptor each (the log
//! file), not three, so a broker within its open-files limit stays within it across
//! restarts. Resizing (on roll and when the active segment is reopened) opens the file
//! again for the length change.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use memmap2::MmapMut;

use crate::error::{IoOp, Result, StorageError};

/// Fixed-size-entry file behind an index. Entries `[0, entries)` are valid; the mapping
/// may extend further (preallocation) up to `capacity` entries.
pub(crate) struct IndexFile {
    path: PathBuf,
    mmap: Option<MmapMut>,
    entry_size: usize,
    entries: usize,
    capacity: usize,
    /// File length at open was not a multiple of the entry size.
    ragged: bool,
}

impl std::fmt::Debug for IndexFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexFile")
            .field("path", &self.path)
            .field("entries", &self.entries)
            .field("capacity", &self.capacity)
            .finish()
    }
}

impl IndexFile {
    /// Opens or creates the file. A new (or empty) file is preallocated to
    /// `preallocate_bytes` rounded down to whole entries and has no entries; an existing
    /// file keeps its length and is taken to be full of entries (the caller sanity-checks
    /// them, and resizes the active segment's indexes).
    pub(crate) fn open(path: &Path, entry_size: usize, preallocate_bytes: u32) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| StorageError::io(IoOp::Open, path, 0, e))?;
        let len = file.metadata().map_err(|e| StorageError::io(IoOp::Metadata, path, 0, e))?.len();
        let mut index = IndexFile {
            path: path.to_path_buf(),
            mmap: None,
            entry_size,
            entries: 0,
            capacity: 0,
            ragged: len % entry_size as u64 != 0,
        };
        if len == 0 {
            index.resize_open(&file, u64::from(preallocate_bytes))?;
        } else {
            index.map(&file, len)?;
            index.entries = index.capacity;
        }
        Ok(index)
    }

    fn map(&mut self, file: &File, len: u64) -> Result<()> {
        let entries = usize::try_from(len).unwrap_or(usize::MAX) / self.entry_size;
        self.capacity = entries;
        self.mmap = None;
        if entries == 0 {
            return Ok(());
        }
        // SAFETY: the file is owned by this process's log and never truncated below the
        // mapped length while mapped (resize() drops the mapping first); other processes
        // are not expected to modify files in a log directory.
        let mmap = unsafe { memmap2::MmapOptions::new().len(entries * self.entry_size).map_mut(file) }
            .map_err(|e| StorageError::io(IoOp::Map, &self.path, 0, e))?;
        // No readahead on faults: a new index is a sparse preallocated file, and the kernel
        // would otherwise read (zero-fill) a whole readahead window around the first entry
        // written into each page. With many partitions that was most of a broker's CPU
        // (every segment's first index entries). Advisory: a refusal changes nothing else.
        let _ = mmap.advise(memmap2::Advice::Random);
        self.mmap = Some(mmap);
        Ok(())
    }

    /// Changes the file length to `bytes` rounded down to whole entries and remaps it;
    /// entries beyond the new capacity are dropped.
    pub(crate) fn resize(&mut self, bytes: u64) -> Result<()> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.path)
            .map_err(|e| StorageError::io(IoOp::Open, &self.path, 0, e))?;
        self.resize_open(&file, bytes)
    }

    fn resize_open(&mut self, file: &File, bytes: u64) -> Result<()> {
        let len = bytes - bytes % self.entry_size as u64;
        self.mmap = None;
        file.set_len(len).map_err(|e| StorageError::io(IoOp::SetLen, &self.path, len, e))?;
        self.map(file, len)?;
        self.entries = self.entries.min(self.capacity);
        self.ragged = false;
        Ok(())
    }

    /// Shrinks the file to the entries in use (on roll and close).
    pub(crate) fn trim(&mut self) -> Result<()> {
        if self.entries == self.capacity && !self.ragged {
            return Ok(());
        }
        self.resize((self.entries * self.entry_size) as u64)
    }

    /// Whether the file length was not a whole number of entries when opened.
    pub(crate) fn is_ragged(&self) -> bool {
        self.ragged
    }

    pub(crate) fn entries(&self) -> usize {
        self.entries
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of entry `i`; `i` must be below `entries()`.
    pub(crate) fn entry(&self, i: usize) -> &[u8] {
        debug_assert!(i < self.entries);
        match &self.mmap {
            Some(m) => &m[i * self.entry_size..(i + 1) * self.entry_size],
            None => &[],
        }
    }

    /// Appends an entry; the caller checks `entries() < capacity()` first.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        debug_assert_eq!(bytes.len(), self.entry_size);
        let at = self.entries * self.entry_size;
        if let Some(m) = &mut self.mmap {
            if at + self.entry_size <= m.len() {
                m[at..at + self.entry_size].copy_from_slice(bytes);
                self.entries += 1;
            }
        }
    }

    /// Keeps the first `n` entries.
    pub(crate) fn truncate_entries(&mut self, n: usize) {
        self.entries = self.entries.min(n);
    }

    /// Writes dirty pages back to the file.
    pub(crate) fn flush(&self) -> Result<()> {
        if let Some(m) = &self.mmap {
            m.flush().map_err(|e| StorageError::io(IoOp::Sync, &self.path, 0, e))?;
        }
        Ok(())
    }

    /// Unmaps and removes the file.
    pub(crate) fn delete(mut self) -> Result<()> {
        self.mmap = None;
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StorageError::io(IoOp::Delete, &self.path, 0, e)),
        }
    }

    /// Renames the file (the mapping stays valid, it follows the inode).
    pub(crate) fn rename(&mut self, to: PathBuf) -> Result<()> {
        std::fs::rename(&self.path, &to).map_err(|e| StorageError::io(IoOp::Rename, &self.path, 0, e))?;
        self.path = to;
        Ok(())
    }
}
