//! `TransactionIndex`: the aborted transactions whose ABORT markers sit in one segment,
//! in Kafka's `.txnindex` format, so a `read_committed` fetch can list the aborted
//! transactions overlapping what it returns.
//!
//! Each entry is 34 big-endian bytes: `version: i16 (0), producer_id: i64, first_offset:
//! i64, last_offset: i64, last_stable_offset: i64`, where `last_offset` is the marker's
//! offset and `last_stable_offset` the log's LSO right after the marker. Entries are
//! ordered by `last_offset`. The file is created on the first abort (most segments have
//! none) and written with plain appends; the entries are also kept in memory, since a
//! segment rarely holds more than a few and every `read_committed` fetch consults them.
//!
//! A crash can leave a torn last entry; [`TransactionIndex::open`] cuts it. Any other
//! inconsistency (unknown version, offsets outside the segment or out of order) makes the
//! index untrustworthy: it is emptied and the log rebuilds it by replaying the segment.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{IoOp, Result, StorageError};
use crate::segment::remove_if_exists;

/// Size of one entry on disk.
pub(crate) const ABORTED_TXN_SIZE: usize = 34;
/// The only entry version Kafka defines.
const ABORTED_TXN_VERSION: i16 = 0;

/// An aborted transaction: what a `read_committed` Fetch response lists (producer id and
/// first offset) plus what the index needs to order and bound its search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AbortedTxn {
    /// The producer whose transaction was aborted.
    pub producer_id: i64,
    /// Offset of the transaction's first batch in this partition.
    pub first_offset: i64,
    /// Offset of the ABORT marker.
    pub last_offset: i64,
    /// The partition's last stable offset just after the marker: no transaction that
    /// started below it was still open, which lets a search stop early.
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    fn encode(&self) -> [u8; ABORTED_TXN_SIZE] {
        let mut buf = [0u8; ABORTED_TXN_SIZE];
        buf[0..2].copy_from_slice(&ABORTED_TXN_VERSION.to_be_bytes());
        buf[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        buf[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        buf[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        buf[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        buf
    }

    /// Decodes one entry; `None` for an unknown version.
    fn decode(buf: &[u8; ABORTED_TXN_SIZE]) -> Option<AbortedTxn> {
        let i64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&buf[at..at + 8]);
            i64::from_be_bytes(b)
        };
        if i16::from_be_bytes([buf[0], buf[1]]) != ABORTED_TXN_VERSION {
            return None;
        }
        Some(AbortedTxn {
            producer_id: i64_at(2),
            first_offset: i64_at(10),
            last_offset: i64_at(18),
            last_stable_offset: i64_at(26),
        })
    }
}

/// The `.txnindex` of one segment.
#[derive(Debug)]
pub(crate) struct TransactionIndex {
    path: PathBuf,
    base_offset: i64,
    /// Open for appends once the file exists.
    file: Option<File>,
    entries: Vec<AbortedTxn>,
    dirty: bool,
}

impl TransactionIndex {
    /// An index for a new segment: any stale file with the same name is removed.
    pub(crate) fn create(path: &Path, base_offset: i64) -> Result<Self> {
        remove_if_exists(path)?;
        Ok(TransactionIndex {
            path: path.to_path_buf(),
            base_offset,
            file: None,
            entries: Vec::new(),
            dirty: false,
        })
    }

    /// Opens the index of an existing segment whose offsets end before `next_offset`.
    /// A torn last entry is cut, and entries for markers at or past `next_offset` (lost
    /// with a torn log tail) are dropped. Returns the index and whether it was intact
    /// apart from that; when it was not, it comes back empty and must be rebuilt.
    pub(crate) fn open(path: &Path, base_offset: i64, next_offset: i64) -> Result<(Self, bool)> {
        let mut index = TransactionIndex {
            path: path.to_path_buf(),
            base_offset,
            file: None,
            entries: Vec::new(),
            dirty: false,
        };
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((index, true)),
            Err(e) => return Err(StorageError::io(IoOp::Read, path, 0, e)),
        };
        index.file = Some(open_for_append(path)?);
        let whole = bytes.len() - bytes.len() % ABORTED_TXN_SIZE;
        if whole != bytes.len() {
            tracing::warn!(file = %path.display(), valid_bytes = whole, "cutting torn transaction index entry");
        }
        let mut sane = true;
        for chunk in bytes[..whole].chunks_exact(ABORTED_TXN_SIZE) {
            let mut buf = [0u8; ABORTED_TXN_SIZE];
            buf.copy_from_slice(chunk);
            let Some(txn) = AbortedTxn::decode(&buf) else {
                sane = false;
                break;
            };
            let ordered = index.entries.last().is_none_or(|prev| prev.last_offset < txn.last_offset);
            if !ordered || txn.last_offset < base_offset || txn.first_offset > txn.last_offset {
                sane = false;
                break;
            }
            index.entries.push(txn);
        }
        if !sane {
            tracing::warn!(file = %path.display(), "transaction index is corrupt, it will be rebuilt");
            index.entries.clear();
        }
        index.entries.retain(|t| t.last_offset < next_offset);
        index.set_file_len()?;
        Ok((index, sane))
    }

    /// Records an aborted transaction whose marker was just appended to the segment.
    /// Entries must arrive in marker order.
    pub(crate) fn append(&mut self, txn: AbortedTxn) -> Result<()> {
        assert!(
            txn.last_offset >= self.base_offset,
            "aborted transaction {txn:?} below segment {}",
            self.base_offset
        );
        if let Some(last) = self.entries.last() {
            assert!(last.last_offset < txn.last_offset, "aborted transaction {txn:?} not after {last:?}");
        }
        let position = (self.entries.len() * ABORTED_TXN_SIZE) as u64;
        if self.file.is_none() {
            self.file = Some(open_for_append(&self.path)?);
        }
        let file = self.file.as_mut().expect("opened above");
        if let Err(e) = file.write_all(&txn.encode()) {
            let _ = file.set_len(position);
            return Err(StorageError::io(IoOp::Append, &self.path, position, e));
        }
        self.entries.push(txn);
        self.dirty = true;
        Ok(())
    }

    /// Appends `txn` unless an entry for a marker at or after it is already present
    /// (replay over a range whose entries survived). Returns whether it was appended.
    pub(crate) fn append_if_newer(&mut self, txn: AbortedTxn) -> Result<bool> {
        if self.entries.last().is_some_and(|last| last.last_offset >= txn.last_offset) {
            return Ok(false);
        }
        self.append(txn)?;
        Ok(true)
    }

    /// Drops the entries whose markers are at or after `offset` (log truncation).
    pub(crate) fn truncate_to(&mut self, offset: i64) -> Result<()> {
        let keep = self.entries.partition_point(|t| t.last_offset < offset);
        if keep < self.entries.len() {
            self.entries.truncate(keep);
            self.set_file_len()?;
        }
        Ok(())
    }

    /// Adds to `out` the aborted transactions overlapping `[start_offset,
    /// upper_bound_offset)`. Returns true when no later segment can hold more: an entry
    /// whose last stable offset reaches the upper bound proves every transaction that
    /// started below the bound had ended by then.
    pub(crate) fn collect(
        &self,
        start_offset: i64,
        upper_bound_offset: i64,
        out: &mut Vec<AbortedTxn>,
    ) -> bool {
        for txn in &self.entries {
            if txn.last_offset >= start_offset && txn.first_offset < upper_bound_offset {
                out.push(*txn);
            }
            if txn.last_stable_offset >= upper_bound_offset {
                return true;
            }
        }
        false
    }

    /// Every entry, oldest marker first.
    #[cfg(test)]
    pub(crate) fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }

    /// fsyncs appended entries.
    pub(crate) fn flush(&mut self) -> Result<()> {
        if let (true, Some(file)) = (self.dirty, &self.file) {
            file.sync_data().map_err(|e| StorageError::io(IoOp::Sync, &self.path, 0, e))?;
        }
        self.dirty = false;
        Ok(())
    }

    /// Renames the file (if it exists) to `to`; returns whether there was a file.
    pub(crate) fn rename(&mut self, to: PathBuf) -> Result<bool> {
        let existed = self.file.is_some() || self.path.exists();
        if existed {
            std::fs::rename(&self.path, &to).map_err(|e| StorageError::io(IoOp::Rename, &self.path, 0, e))?;
        }
        self.path = to;
        Ok(existed)
    }

    /// Removes the file.
    pub(crate) fn delete(self) -> Result<()> {
        remove_if_exists(&self.path)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Cuts the file to the entries held in memory (only if it exists).
    fn set_file_len(&mut self) -> Result<()> {
        let len = (self.entries.len() * ABORTED_TXN_SIZE) as u64;
        if let Some(file) = &self.file {
            file.set_len(len).map_err(|e| StorageError::io(IoOp::SetLen, &self.path, len, e))?;
            self.dirty = true;
        }
        Ok(())
    }
}

fn open_for_append(path: &Path) -> Result<File> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| StorageError::io(IoOp::Open, path, 0, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(producer_id: i64, first_offset: i64, last_offset: i64, last_stable_offset: i64) -> AbortedTxn {
        AbortedTxn { producer_id, first_offset, last_offset, last_stable_offset }
    }

    #[test]
    fn kafka_layout_reopen_truncate_and_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000100.txnindex");
        let mut index = TransactionIndex::create(&path, 100).unwrap();
        assert!(!path.exists(), "created lazily");
        index.append(txn(7, 90, 105, 106)).unwrap();
        index.append(txn(8, 101, 120, 110)).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 68);
        assert_eq!(&bytes[..2], &[0, 0]);
        assert_eq!(&bytes[2..10], &7i64.to_be_bytes());
        assert_eq!(&bytes[26..34], &106i64.to_be_bytes());

        // A torn third entry is cut; entries past the segment end are dropped.
        let mut torn = bytes.clone();
        torn.extend_from_slice(&[0, 0, 1, 2, 3]);
        std::fs::write(&path, &torn).unwrap();
        let (reopened, sane) = TransactionIndex::open(&path, 100, 121).unwrap();
        assert!(sane);
        assert_eq!(reopened.entries(), &[txn(7, 90, 105, 106), txn(8, 101, 120, 110)]);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 68);
        let (mut reopened, _) = TransactionIndex::open(&path, 100, 120).unwrap();
        assert_eq!(reopened.entries().len(), 1);
        assert!(!reopened.append_if_newer(txn(7, 90, 105, 106)).unwrap());
        assert!(reopened.append_if_newer(txn(9, 115, 130, 131)).unwrap());
        reopened.truncate_to(106).unwrap();
        assert_eq!(reopened.entries().len(), 1);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 34);
    }

    #[test]
    fn corrupt_index_comes_back_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.txnindex");
        let mut bytes = txn(1, 0, 5, 6).encode().to_vec();
        bytes.extend_from_slice(&txn(1, 7, 3, 9).encode());
        std::fs::write(&path, &bytes).unwrap();
        let (index, sane) = TransactionIndex::open(&path, 0, 100).unwrap();
        assert!(!sane);
        assert!(index.entries().is_empty());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    }

    #[test]
    fn collect_overlapping_and_stop_early() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = TransactionIndex::create(&dir.path().join("x.txnindex"), 0).unwrap();
        index.append(txn(1, 0, 10, 11)).unwrap();
        index.append(txn(2, 5, 20, 12)).unwrap();
        index.append(txn(3, 30, 40, 41)).unwrap();
        let mut out = Vec::new();
        assert!(index.collect(11, 12, &mut out), "txn 2's last stable offset 12 reaches the bound");
        assert_eq!(out, vec![txn(2, 5, 20, 12)]);
        out.clear();
        // [11, 25): txn 1 ended at 10 (before the range); txn 2 overlaps; txn 3 starts after.
        let complete = index.collect(11, 25, &mut out);
        assert_eq!(out.iter().map(|t| t.producer_id).collect::<Vec<_>>(), vec![2]);
        assert!(complete, "txn 3's last stable offset 41 reaches 25");
        out.clear();
        assert!(!index.collect(0, 100, &mut out));
        assert_eq!(out.len(), 3);
    }
}
