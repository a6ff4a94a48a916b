//! Producer state snapshots: `<20-digit offset>.snapshot` in the partition directory,
//! holding the producer state after every batch below that offset.
//!
//! The file is Kafka's `ProducerSnapshot` version 1, so Kafka tooling can read it:
//!
//! ```text
//! version: i16 (1) | crc: u32 (CRC-32C of everything after it) | count: i32 | entries:
//!   producer_id i64, epoch i16, last_sequence i32, last_offset i64, offset_delta i32,
//!   timestamp i64, coordinator_epoch i32, current_txn_first_offset i64 (-1 = none)
//! ```
//!
//! Kafka keeps only each producer's last batch there, so after a restart it can only
//! deduplicate a retry of that one. Strata appends an extension after the entries, which
//! Kafka's reader ignores (it covers only the declared entries, and the CRC spans the
//! whole file): the magic `strata.1`, then for each entry in order a count (u8, <= 4)
//! of its older retained batches, each `last_sequence i32, last_offset i64,
//! offset_delta i32, timestamp i64`. Snapshots are written to a `.tmp` file and renamed.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::entry::{BatchMetadata, ProducerStateEntry, NUM_BATCHES_TO_RETAIN};
use crate::checkpoint::sync_dir;
use crate::error::{IoOp, Result, StorageError};

/// Suffix of producer state snapshot files.
pub(crate) const SNAPSHOT_SUFFIX: &str = ".snapshot";
const VERSION: i16 = 1;
/// Where the CRC-covered bytes start: after version and CRC.
const ENTRIES_START: usize = 6;
const ENTRY_SIZE: usize = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8;
const EXTENSION_MAGIC: &[u8; 8] = b"strata.1";
const EXTRA_BATCH_SIZE: usize = 4 + 8 + 4 + 8;

/// Path of the snapshot at `offset`.
pub(crate) fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(format!("{}{SNAPSHOT_SUFFIX}", crate::segment::file_stem(offset)))
}

/// Encodes `entries` in the format above.
pub(crate) fn encode<'a>(entries: impl Iterator<Item = &'a ProducerStateEntry> + Clone) -> Vec<u8> {
    let count = entries.clone().count();
    let per_entry = ENTRY_SIZE + 1 + (NUM_BATCHES_TO_RETAIN - 1) * EXTRA_BATCH_SIZE;
    let mut buf = Vec::with_capacity(ENTRIES_START + 4 + count * per_entry + EXTENSION_MAGIC.len());
    buf.extend_from_slice(&VERSION.to_be_bytes());
    buf.extend_from_slice(&[0; 4]);
    buf.extend_from_slice(&(count as i32).to_be_bytes());
    for e in entries.clone() {
        let last = e.batches.back();
        buf.extend_from_slice(&e.producer_id.to_be_bytes());
        buf.extend_from_slice(&e.producer_epoch.to_be_bytes());
        buf.extend_from_slice(&e.last_seq().to_be_bytes());
        buf.extend_from_slice(&last.map_or(-1, |b| b.last_offset).to_be_bytes());
        buf.extend_from_slice(&last.map_or(0, BatchMetadata::offset_delta).to_be_bytes());
        buf.extend_from_slice(&e.last_timestamp.to_be_bytes());
        buf.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
        buf.extend_from_slice(&e.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
    }
    buf.extend_from_slice(EXTENSION_MAGIC);
    for e in entries {
        let older = e.batches.len().saturating_sub(1);
        buf.push(older as u8);
        for b in e.batches.iter().take(older) {
            buf.extend_from_slice(&b.last_seq.to_be_bytes());
            buf.extend_from_slice(&b.last_offset.to_be_bytes());
            buf.extend_from_slice(&b.offset_delta().to_be_bytes());
            buf.extend_from_slice(&b.timestamp.to_be_bytes());
        }
    }
    let crc = strata_protocol::records::crc32c(&buf[ENTRIES_START..]);
    buf[2..ENTRIES_START].copy_from_slice(&crc.to_be_bytes());
    buf
}

/// Why a snapshot file was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CorruptSnapshot {
    Version(i16),
    Crc,
    Truncated,
}

/// A cursor that never reads past the end.
struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], CorruptSnapshot> {
        let (head, rest) = self.0.split_at_checked(N).ok_or(CorruptSnapshot::Truncated)?;
        self.0 = rest;
        let mut out = [0u8; N];
        out.copy_from_slice(head);
        Ok(out)
    }
    fn i16(&mut self) -> Result<i16, CorruptSnapshot> {
        self.take().map(i16::from_be_bytes)
    }
    fn i32(&mut self) -> Result<i32, CorruptSnapshot> {
        self.take().map(i32::from_be_bytes)
    }
    fn i64(&mut self) -> Result<i64, CorruptSnapshot> {
        self.take().map(i64::from_be_bytes)
    }
}

/// Decodes a snapshot. Allocation is bounded by the bytes present, whatever the counts say.
pub(crate) fn decode(buf: &[u8]) -> Result<Vec<ProducerStateEntry>, CorruptSnapshot> {
    let mut cur = Cursor(buf);
    let version = cur.i16()?;
    if version != VERSION {
        return Err(CorruptSnapshot::Version(version));
    }
    let crc = u32::from_be_bytes(cur.take()?);
    if crc != strata_protocol::records::crc32c(&buf[ENTRIES_START..]) {
        return Err(CorruptSnapshot::Crc);
    }
    let count = cur.i32()?;
    let count = usize::try_from(count).map_err(|_| CorruptSnapshot::Truncated)?;
    if count > cur.0.len() / ENTRY_SIZE {
        return Err(CorruptSnapshot::Truncated);
    }
    let mut entries = Vec::with_capacity(count);
    for _ in 0..count {
        let producer_id = cur.i64()?;
        let producer_epoch = cur.i16()?;
        let last_seq = cur.i32()?;
        let last_offset = cur.i64()?;
        let offset_delta = cur.i32()?;
        let last_timestamp = cur.i64()?;
        let coordinator_epoch = cur.i32()?;
        let txn_first_offset = cur.i64()?;
        let mut entry = ProducerStateEntry::empty(producer_id);
        entry.producer_epoch = producer_epoch;
        entry.coordinator_epoch = coordinator_epoch;
        entry.last_timestamp = last_timestamp;
        entry.current_txn_first_offset = (txn_first_offset >= 0).then_some(txn_first_offset);
        if last_offset >= 0 {
            entry.batches.push_back(BatchMetadata::from_last(
                last_seq,
                last_offset,
                offset_delta,
                last_timestamp,
            ));
        }
        entries.push(entry);
    }
    if cur.0.starts_with(EXTENSION_MAGIC) {
        cur.0 = &cur.0[EXTENSION_MAGIC.len()..];
        for entry in &mut entries {
            let [older] = cur.take::<1>()?;
            let older = usize::from(older).min(NUM_BATCHES_TO_RETAIN - 1);
            let mut batches = Vec::with_capacity(older);
            for _ in 0..older {
                let last_seq = cur.i32()?;
                let last_offset = cur.i64()?;
                let offset_delta = cur.i32()?;
                let timestamp = cur.i64()?;
                batches.push(BatchMetadata::from_last(last_seq, last_offset, offset_delta, timestamp));
            }
            if !entry.batches.is_empty() {
                for b in batches.into_iter().rev() {
                    entry.batches.push_front(b);
                }
            }
        }
    }
    Ok(entries)
}

/// Writes a snapshot at `offset` (via a `.tmp` file and a rename), fsyncing if `sync`.
pub(crate) fn write<'a>(
    dir: &Path,
    offset: i64,
    entries: impl Iterator<Item = &'a ProducerStateEntry> + Clone,
    sync: bool,
) -> Result<()> {
    let path = snapshot_path(dir, offset);
    let tmp = dir.join(format!("{}{SNAPSHOT_SUFFIX}.tmp", crate::segment::file_stem(offset)));
    let bytes = encode(entries);
    let mut file = File::create(&tmp).map_err(|e| StorageError::io(IoOp::Open, &tmp, 0, e))?;
    file.write_all(&bytes).map_err(|e| StorageError::io(IoOp::Write, &tmp, 0, e))?;
    if sync {
        file.sync_all().map_err(|e| StorageError::io(IoOp::Sync, &tmp, 0, e))?;
    }
    drop(file);
    std::fs::rename(&tmp, &path).map_err(|e| StorageError::io(IoOp::Rename, &tmp, 0, e))?;
    if sync {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Reads the snapshot at `offset`: `Ok(Err(_))` when the file is corrupt.
pub(crate) fn read(dir: &Path, offset: i64) -> Result<Result<Vec<ProducerStateEntry>, CorruptSnapshot>> {
    let path = snapshot_path(dir, offset);
    let bytes = std::fs::read(&path).map_err(|e| StorageError::io(IoOp::Read, &path, 0, e))?;
    Ok(decode(&bytes))
}

/// Offsets of the snapshot files in `dir`, ascending.
pub(crate) fn list(dir: &Path) -> Result<Vec<i64>> {
    let mut offsets = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| StorageError::io(IoOp::ListDir, dir, 0, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| StorageError::io(IoOp::ListDir, dir, 0, e))?;
        let Ok(name) = entry.file_name().into_string() else { continue };
        let Some(stem) = name.strip_suffix(SNAPSHOT_SUFFIX) else { continue };
        if stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(offset) = stem.parse() {
                offsets.push(offset);
            }
        }
    }
    offsets.sort_unstable();
    Ok(offsets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(producer_id: i64, batches: &[(i32, i32, i64)], txn: Option<i64>) -> ProducerStateEntry {
        let mut e = ProducerStateEntry::empty(producer_id);
        for &(first_seq, last_seq, first_offset) in batches {
            let last_offset = first_offset + i64::from(last_seq - first_seq);
            e.add_batch(3, BatchMetadata { first_seq, last_seq, first_offset, last_offset, timestamp: 77 });
        }
        e.producer_epoch = 3;
        e.coordinator_epoch = 9;
        e.current_txn_first_offset = txn;
        e
    }

    #[test]
    fn round_trip_keeps_all_retained_batches() {
        let entries = vec![
            entry(1, &[(0, 4, 0), (5, 5, 10), (6, 9, 20), (10, 10, 30), (11, 12, 40)], None),
            entry(2, &[], Some(15)),
            entry(3, &[(0, 0, 7)], Some(7)),
        ];
        let bytes = encode(entries.iter());
        assert_eq!(decode(&bytes).unwrap(), entries);
    }

    #[test]
    fn kafka_layout_without_extension_keeps_the_last_batch() {
        let entries = [entry(1, &[(0, 4, 0), (5, 5, 10)], None)];
        let bytes = encode(entries.iter());
        // Kafka's part: version, crc, count, then one 46-byte entry.
        let kafka_len = ENTRIES_START + 4 + ENTRY_SIZE;
        assert_eq!(&bytes[..2], &1i16.to_be_bytes());
        assert_eq!(&bytes[6..10], &1i32.to_be_bytes());
        assert_eq!(&bytes[kafka_len..kafka_len + 8], EXTENSION_MAGIC);
        let mut kafka = bytes[..kafka_len].to_vec();
        let crc = strata_protocol::records::crc32c(&kafka[ENTRIES_START..]);
        kafka[2..6].copy_from_slice(&crc.to_be_bytes());
        let decoded = decode(&kafka).unwrap();
        assert_eq!(decoded[0].batches.len(), 1);
        assert_eq!(decoded[0].batches[0], entries[0].batches[1]);
    }

    #[test]
    fn corruption_is_detected_and_counts_are_not_trusted() {
        let entries = [entry(1, &[(0, 4, 0)], None)];
        let mut bytes = encode(entries.iter());
        bytes[12] ^= 1;
        assert_eq!(decode(&bytes), Err(CorruptSnapshot::Crc));
        assert_eq!(decode(&[0, 2, 0, 0, 0, 0]), Err(CorruptSnapshot::Version(2)));
        assert_eq!(decode(&[0, 1]), Err(CorruptSnapshot::Truncated));
        let mut huge = vec![0, 1, 0, 0, 0, 0];
        huge.extend_from_slice(&i32::MAX.to_be_bytes());
        let crc = strata_protocol::records::crc32c(&huge[ENTRIES_START..]);
        huge[2..6].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(decode(&huge), Err(CorruptSnapshot::Truncated));
    }

    #[test]
    fn write_list_read() {
        let dir = tempfile::tempdir().unwrap();
        let entries = vec![entry(5, &[(0, 1, 0)], None)];
        write(dir.path(), 42, entries.iter(), true).unwrap();
        write(dir.path(), 7, entries.iter(), false).unwrap();
        std::fs::write(dir.path().join("junk.snapshot"), b"x").unwrap();
        assert_eq!(list(dir.path()).unwrap(), vec![7, 42]);
        assert!(dir.path().join("00000000000000000042.snapshot").exists());
        assert_eq!(read(dir.path(), 42).unwrap().unwrap(), entries);
    }
}
