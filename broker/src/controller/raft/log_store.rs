//! The durable metadata log (`__cluster_metadata-0`): openraft's `RaftLogStorage` over
//! one file of checksummed frames, with every entry also kept in memory (the metadata log
//! is small and is purged after each snapshot).
//!
//! Files in the directory:
//! - `raft.log`: frame 0 is a [`LogHeader`] (format, last purged log id), then one frame
//!   per entry in index order. Frames are `[u32 length][u32 crc32c][JSON]`.
//! - `vote.json`: the last vote, replaced atomically and fsynced (Raft requires it).
//! - `committed.json`: the last committed log id, replaced atomically but not fsynced: it
//!   only lets a restart re-apply committed entries before a leader is known, and a stale
//!   value is always safe.
//!
//! Crash safety: an append is fsynced before openraft hears it is flushed, and a torn tail
//! (a crash mid-append, never acknowledged) is cut off on reopen. `truncate` shortens the
//! file with one `ftruncate` + fsync (old or new length after a crash). `purge` rewrites
//! the file without the purged prefix into `raft.log.tmp` and renames it over `raft.log`
//! (old or new file after a crash; an old one just means the purge is redone later).
//!
//! A full disk: appends, truncations and the vote are retried until they succeed
//! ([`WriteRetry`]), because openraft stops for good on any storage error. A purge that
//! cannot rewrite the file leaves the old one (a superset of the log, as after a crash
//! mid-purge) and is redone by the next purge; it needs as much free space as the log.

use super::files::{self, blocking, decode_frame, encode_frame, DirLock, Frame, StoreError};
use super::retry::WriteRetry;
use super::types::{Entry, LogId, StorageError, TypeConfig, Vote};
use openraft::storage::{LogFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::{OptionalSend, StorageIOError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

const LOG_FILE: &str = "raft.log";
const VOTE_FILE: &str = "vote.json";
const COMMITTED_FILE: &str = "committed.json";
/// The version of `raft.log`'s layout, in its header.
const LOG_FORMAT: u32 = 1;

/// The first frame of `raft.log`.
#[derive(Debug, Serialize, Deserialize)]
struct LogHeader {
    format: u32,
    /// Everything up to this id has been purged (it is in a snapshot).
    last_purged: Option<LogId>,
}

/// The log in memory, shared with the readers openraft's replication tasks use.
#[derive(Debug, Default)]
struct LogEntries {
    last_purged: Option<LogId>,
    entries: BTreeMap<u64, Entry>,
}

impl LogEntries {
    fn last_log_id(&self) -> Option<LogId> {
        self.entries.values().next_back().map(|e| e.log_id).or(self.last_purged)
    }

    /// The index the next appended entry must have.
    fn next_index(&self) -> u64 {
        self.last_log_id().map_or(0, |id| id.index + 1)
    }

    fn range(&self, range: impl RangeBounds<u64>) -> Vec<Entry> {
        self.entries.range(range).map(|(_, e)| e.clone()).collect()
    }
}

/// The open `raft.log` and where each entry's frame starts, used only by the writer.
#[derive(Debug)]
struct LogFile {
    path: PathBuf,
    file: File,
    /// The file's length: where the next frame goes.
    end: u64,
    /// Entry index to the byte offset of its frame.
    offsets: BTreeMap<u64, u64>,
}

impl LogFile {
    fn open_for_append(path: &Path, end: u64, offsets: BTreeMap<u64, u64>) -> Result<LogFile, StoreError> {
        let file = OpenOptions::new().append(true).open(path).map_err(|e| StoreError::io("open", path, e))?;
        Ok(LogFile { path: path.to_path_buf(), file, end, offsets })
    }

    /// Writes a fresh `raft.log` (header, then `entries`) atomically and opens it.
    fn rewrite(dir: &Path, last_purged: Option<LogId>, entries: &[Entry]) -> Result<LogFile, StoreError> {
        let header = LogHeader { format: LOG_FORMAT, last_purged };
        let mut buf = Vec::new();
        let json = serde_json::to_vec(&header)
            .map_err(|source| StoreError::Encode { what: "log header", source })?;
        encode_frame(&mut buf, &json)?;
        let mut offsets = BTreeMap::new();
        for entry in entries {
            offsets.insert(entry.log_id.index, buf.len() as u64);
            encode_entry(&mut buf, entry)?;
        }
        files::atomic_write(dir, LOG_FILE, &buf, true)?;
        LogFile::open_for_append(&dir.join(LOG_FILE), buf.len() as u64, offsets)
    }

    /// Appends pre-encoded frames (`starts` are their offsets within `frames`) and fsyncs.
    fn append(&mut self, frames: &[u8], starts: &[(u64, u64)]) -> Result<(), StoreError> {
        let written = self.file.write_all(frames).and_then(|()| self.file.sync_data());
        if let Err(e) = written {
            // Leave no half frame for the next append to follow; reopen would cut it anyway.
            let _ = self.file.set_len(self.end);
            return Err(StoreError::io("append", &self.path, e));
        }
        for (index, start) in starts {
            self.offsets.insert(*index, self.end + start);
        }
        self.end += frames.len() as u64;
        Ok(())
    }

    /// Drops every entry at `index` and after.
    fn truncate(&mut self, index: u64) -> Result<(), StoreError> {
        let Some((_, &offset)) = self.offsets.range(index..).next() else { return Ok(()) };
        self.file.set_len(offset).map_err(|e| StoreError::io("truncate", &self.path, e))?;
        self.file.sync_data().map_err(|e| StoreError::io("fsync", &self.path, e))?;
        self.offsets.split_off(&index);
        self.end = offset;
        Ok(())
    }
}

fn encode_entry(buf: &mut Vec<u8>, entry: &Entry) -> Result<(), StoreError> {
    let json =
        serde_json::to_vec(entry).map_err(|source| StoreError::Encode { what: "log entry", source })?;
    encode_frame(buf, &json)
}

/// Reads `raft.log` back (creating it when absent), cutting off a torn tail.
fn load_log(dir: &Path) -> Result<(LogEntries, LogFile), StoreError> {
    files::remove_stale_tmp(dir, LOG_FILE)?;
    let path = dir.join(LOG_FILE);
    let Some(bytes) = files::read_optional(dir, LOG_FILE)? else {
        return Ok((LogEntries::default(), LogFile::rewrite(dir, None, &[])?));
    };
    let corrupt = |offset: usize, reason: String| StoreError::Corrupt {
        path: path.clone(),
        offset: offset as u64,
        reason,
    };
    // The header is only ever written by an atomic rewrite, so a bad one is corruption.
    let (header, mut pos) = match decode_frame(&bytes) {
        Frame::Whole { payload, len } => {
            let header: LogHeader =
                serde_json::from_slice(payload).map_err(|e| corrupt(0, format!("log header: {e}")))?;
            (header, len)
        }
        Frame::End | Frame::Torn { .. } => return Err(corrupt(0, "missing or damaged log header".into())),
    };
    if header.format != LOG_FORMAT {
        return Err(corrupt(0, format!("unknown log format {}", header.format)));
    }
    let mut log = LogEntries { last_purged: header.last_purged, entries: BTreeMap::new() };
    let mut offsets = BTreeMap::new();
    loop {
        match decode_frame(bytes.get(pos..).unwrap_or_default()) {
            Frame::End => break,
            Frame::Torn { reason } => {
                tracing::warn!(
                    path = %path.display(),
                    offset = pos,
                    dropped_bytes = bytes.len() - pos,
                    reason,
                    "metadata log ends in a torn frame; truncating it there"
                );
                let file = OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(|e| StoreError::io("open", &path, e))?;
                file.set_len(pos as u64).map_err(|e| StoreError::io("truncate", &path, e))?;
                file.sync_all().map_err(|e| StoreError::io("fsync", &path, e))?;
                break;
            }
            Frame::Whole { payload, len } => {
                // The checksum matched, so an undecodable entry is not a torn write:
                // refuse to start rather than drop acknowledged entries.
                let entry: Entry =
                    serde_json::from_slice(payload).map_err(|e| corrupt(pos, format!("log entry: {e}")))?;
                let expected = log.next_index();
                if entry.log_id.index != expected {
                    return Err(corrupt(
                        pos,
                        format!("entry {} where {expected} was expected", entry.log_id),
                    ));
                }
                offsets.insert(expected, pos as u64);
                log.entries.insert(expected, entry);
                pos += len;
            }
        }
    }
    let file = LogFile::open_for_append(&path, pos as u64, offsets)?;
    Ok((log, file))
}

/// The openraft log storage of one quorum member.
#[derive(Debug)]
pub(crate) struct LogStore {
    dir: PathBuf,
    log: Arc<RwLock<LogEntries>>,
    file: Arc<Mutex<LogFile>>,
    vote: Option<Vote>,
    committed: Option<LogId>,
    /// The committed index + 1 (0: none), for [`super::MetadataQuorum::status`].
    committed_index: Arc<AtomicU64>,
    /// The last write of the committed index failed (warned once until one succeeds).
    committed_write_failed: bool,
    /// The last purge could not rewrite the file (warned once until one succeeds).
    purge_write_failed: bool,
    /// Retries the writes Raft needs durable while they fail.
    retry: WriteRetry,
    _lock: Arc<DirLock>,
}

/// A reader of the in-memory log for openraft's replication tasks.
#[derive(Debug, Clone)]
pub(crate) struct LogReader {
    log: Arc<RwLock<LogEntries>>,
}

fn read_log(log: &RwLock<LogEntries>) -> std::sync::RwLockReadGuard<'_, LogEntries> {
    // The guarded map is only changed by infallible BTreeMap operations.
    log.read().unwrap_or_else(PoisonError::into_inner)
}

fn write_log(log: &RwLock<LogEntries>) -> std::sync::RwLockWriteGuard<'_, LogEntries> {
    log.write().unwrap_or_else(PoisonError::into_inner)
}

fn to_storage(e: StoreError) -> StorageError {
    StorageIOError::write_logs(&e).into()
}

impl LogStore {
    /// Opens (or creates) the log in `dir`; its durable writes retry through `retry`.
    /// Blocking: call it from a blocking task.
    pub(crate) fn open(dir: &Path, lock: Arc<DirLock>, retry: WriteRetry) -> Result<LogStore, StoreError> {
        let (log, file) = load_log(dir)?;
        files::remove_stale_tmp(dir, VOTE_FILE)?;
        files::remove_stale_tmp(dir, COMMITTED_FILE)?;
        let vote =
            match files::read_optional(dir, VOTE_FILE)? {
                None => None,
                Some(bytes) => Some(serde_json::from_slice::<Vote>(&bytes).map_err(|e| {
                    StoreError::Corrupt { path: dir.join(VOTE_FILE), offset: 0, reason: format!("vote: {e}") }
                })?),
            };
        let committed = read_committed(dir, log.last_log_id())?;
        tracing::info!(
            dir = %dir.display(),
            entries = log.entries.len(),
            last_purged = ?log.last_purged,
            last_log = ?log.last_log_id(),
            ?vote,
            ?committed,
            "opened the metadata log"
        );
        Ok(LogStore {
            dir: dir.to_path_buf(),
            log: Arc::new(RwLock::new(log)),
            file: Arc::new(Mutex::new(file)),
            vote,
            committed,
            committed_index: Arc::new(AtomicU64::new(committed.map_or(0, |c| c.index + 1))),
            committed_write_failed: false,
            purge_write_failed: false,
            retry,
            _lock: lock,
        })
    }

    /// A shared view of the committed index + 1 (0: nothing committed yet).
    pub(crate) fn committed_index(&self) -> Arc<AtomicU64> {
        self.committed_index.clone()
    }

    /// Appends `entries` (the next indexes of the log) and returns once they are fsynced.
    pub(crate) async fn append_entries(&mut self, entries: Vec<Entry>) -> Result<(), StoreError> {
        let mut frames = Vec::new();
        let mut starts = Vec::with_capacity(entries.len());
        let next = read_log(&self.log).next_index();
        for (expected, entry) in (next..).zip(&entries) {
            if entry.log_id.index != expected {
                return Err(StoreError::Invariant(format!(
                    "append of {} where index {expected} is next",
                    entry.log_id
                )));
            }
            starts.push((expected, frames.len() as u64));
            encode_entry(&mut frames, entry)?;
        }
        if entries.is_empty() {
            return Ok(());
        }
        {
            let mut log = write_log(&self.log);
            for entry in entries {
                log.entries.insert(entry.log_id.index, entry);
            }
        }
        let file = self.file.clone();
        self.retry
            .run("append", move || file.lock().map_err(|_| StoreError::Poisoned)?.append(&frames, &starts))
            .await
    }

    /// Drops the entries at `index` and after (conflicting, uncommitted entries).
    pub(crate) async fn truncate_from(&mut self, index: u64) -> Result<(), StoreError> {
        write_log(&self.log).entries.split_off(&index);
        let file = self.file.clone();
        self.retry
            .run("truncate", move || file.lock().map_err(|_| StoreError::Poisoned)?.truncate(index))
            .await
    }

    /// Drops the entries up to and including `upto` (they are in a snapshot).
    pub(crate) async fn purge_upto(&mut self, upto: LogId) -> Result<(), StoreError> {
        let (last_purged, kept) = {
            let mut log = write_log(&self.log);
            if log.last_purged.is_some_and(|p| p.index >= upto.index) {
                return Ok(());
            }
            log.entries = log.entries.split_off(&(upto.index + 1));
            log.last_purged = Some(upto);
            (log.last_purged, log.entries.values().cloned().collect::<Vec<_>>())
        };
        let (file, dir) = (self.file.clone(), self.dir.clone());
        let rewritten = blocking(move || {
            let mut file = file.lock().map_err(|_| StoreError::Poisoned)?;
            *file = LogFile::rewrite(&dir, last_purged, &kept)?;
            Ok(())
        })
        .await;
        match rewritten {
            // The old file stays, holding the purged entries too: a later purge (or a
            // restart, which purges again after the snapshot) drops them.
            Err(e @ StoreError::Io { .. }) => {
                if !self.purge_write_failed {
                    tracing::warn!(error = %e, "cannot rewrite the metadata log to purge it; keeping it whole for now");
                }
                self.purge_write_failed = true;
                Ok(())
            }
            Err(e) => Err(e),
            Ok(()) => {
                self.purge_write_failed = false;
                Ok(())
            }
        }
    }
}

/// The saved committed id, clamped to the log that is actually present (a torn tail may
/// have taken entries the hint covered; entries up to it that remain are committed).
fn read_committed(dir: &Path, last_log: Option<LogId>) -> Result<Option<LogId>, StoreError> {
    let Some(bytes) = files::read_optional(dir, COMMITTED_FILE)? else { return Ok(None) };
    let committed = match serde_json::from_slice::<Option<LogId>>(&bytes) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "ignoring an unreadable committed.json (it is only a hint)");
            None
        }
    };
    Ok(match (committed, last_log) {
        (Some(c), Some(last)) if c.index > last.index => Some(last),
        (Some(_), None) => None,
        (c, _) => c,
    })
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        Ok(read_log(&self.log).range(range))
    }
}

impl RaftLogReader<TypeConfig> for LogReader {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        Ok(read_log(&self.log).range(range))
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogReader;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let log = read_log(&self.log);
        Ok(LogState { last_purged_log_id: log.last_purged, last_log_id: log.last_log_id() })
    }

    async fn get_log_reader(&mut self) -> LogReader {
        LogReader { log: self.log.clone() }
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let bytes = serde_json::to_vec(vote)
            .map_err(|source| StorageIOError::write_vote(&StoreError::Encode { what: "vote", source }))?;
        let dir = self.dir.clone();
        self.retry
            .run("save vote", move || files::atomic_write(&dir, VOTE_FILE, &bytes, true))
            .await
            .map_err(|e| StorageIOError::write_vote(&e))?;
        self.vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        self.committed = committed;
        self.committed_index.store(committed.map_or(0, |c| c.index + 1), Ordering::Release);
        let bytes = serde_json::to_vec(&committed)
            .map_err(|source| to_storage(StoreError::Encode { what: "committed", source }))?;
        let dir = self.dir.clone();
        // Best effort (openraft does not need it: without it a restart re-derives the
        // commit from the quorum): a full disk must not stop the Raft core over it.
        if let Err(e) = blocking(move || files::atomic_write(&dir, COMMITTED_FILE, &bytes, false)).await {
            if !self.committed_write_failed {
                tracing::warn!(error = %e, "cannot record the committed index; going on without it");
            }
            self.committed_write_failed = true;
        } else {
            self.committed_write_failed = false;
        }
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        match self.append_entries(entries.into_iter().collect()).await {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(std::io::Error::other(e.to_string())));
                Err(to_storage(e))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.truncate_from(log_id.index).await.map_err(to_storage)
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.purge_upto(log_id).await.map_err(to_storage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{MetadataBatch, MetadataRecord};
    use openraft::{CommittedLeaderId, EntryPayload};

    fn entry(term: u64, index: u64) -> Entry {
        let log_id = LogId::new(CommittedLeaderId::new(term, 1), index);
        let batch = MetadataBatch(vec![MetadataRecord::ClusterId { cluster_id: format!("c{index}") }]);
        Entry { log_id, payload: EntryPayload::Normal(batch) }
    }

    fn open(dir: &Path) -> LogStore {
        let lock = Arc::new(DirLock::acquire(dir).expect("lock"));
        LogStore::open(dir, lock, WriteRetry::default()).expect("open")
    }

    async fn indexes(store: &mut LogStore) -> Vec<u64> {
        store.try_get_log_entries(..).await.expect("read").iter().map(|e| e.log_id.index).collect()
    }

    #[tokio::test]
    async fn a_torn_append_is_cut_off_and_the_vote_survives() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = open(dir.path());
        store.append_entries((0..5).map(|i| entry(1, i)).collect()).await.expect("append");
        store.save_vote(&Vote::new(3, 2)).await.expect("vote");
        drop(store);
        // A crash mid-append: the last frame is only partly on disk.
        let path = dir.path().join(LOG_FILE);
        let len = std::fs::metadata(&path).expect("stat").len();
        OpenOptions::new().write(true).open(&path).expect("open").set_len(len - 7).expect("cut");
        let mut store = open(dir.path());
        assert_eq!(indexes(&mut store).await, vec![0, 1, 2, 3]);
        assert_eq!(store.read_vote().await.expect("vote"), Some(Vote::new(3, 2)));
        // The file was cut at the torn frame, so later appends are readable after reopen.
        store.append_entries(vec![entry(2, 4), entry(2, 5)]).await.expect("append");
        drop(store);
        let mut store = open(dir.path());
        let entries = store.try_get_log_entries(..).await.expect("read");
        assert_eq!(entries.len(), 6);
        assert_eq!(entries[4].log_id, entry(2, 4).log_id);
    }

    #[tokio::test]
    async fn a_corrupt_frame_in_the_middle_truncates_there() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = open(dir.path());
        store.append_entries((0..4).map(|i| entry(1, i)).collect()).await.expect("append");
        let offset = store.file.lock().expect("file").offsets[&2];
        drop(store);
        let path = dir.path().join(LOG_FILE);
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[offset as usize + 12] ^= 0x40;
        std::fs::write(&path, &bytes).expect("write");
        let mut store = open(dir.path());
        assert_eq!(indexes(&mut store).await, vec![0, 1]);
        assert_eq!(std::fs::metadata(&path).expect("stat").len(), offset);
    }

    #[tokio::test]
    async fn truncate_and_purge_persist() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = open(dir.path());
        store.append_entries((0..10).map(|i| entry(1, i)).collect()).await.expect("append");
        store.truncate(entry(1, 7).log_id).await.expect("truncate");
        store.append_entries(vec![entry(2, 7)]).await.expect("append");
        store.purge(entry(1, 3).log_id).await.expect("purge");
        let err = store.append_entries(vec![entry(2, 9)]).await.expect_err("a gap is refused");
        assert!(matches!(err, StoreError::Invariant(_)), "{err}");
        drop(store);
        let mut store = open(dir.path());
        assert_eq!(indexes(&mut store).await, vec![4, 5, 6, 7]);
        let state = store.get_log_state().await.expect("state");
        assert_eq!(state.last_purged_log_id, Some(entry(1, 3).log_id));
        assert_eq!(state.last_log_id, Some(entry(2, 7).log_id));
        // Purging past the end (after a snapshot install) leaves only the purge marker.
        store.purge(entry(3, 20).log_id).await.expect("purge");
        drop(store);
        let mut store = open(dir.path());
        assert!(indexes(&mut store).await.is_empty());
        let state = store.get_log_state().await.expect("state");
        assert_eq!(state.last_log_id, Some(entry(3, 20).log_id));
        store.append_entries(vec![entry(3, 21)]).await.expect("append after the marker");
    }

    #[tokio::test]
    async fn an_interrupted_purge_leaves_the_old_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = open(dir.path());
        store.append_entries((0..3).map(|i| entry(1, i)).collect()).await.expect("append");
        drop(store);
        // A purge that crashed before its rename leaves a partial raft.log.tmp.
        std::fs::write(dir.path().join("raft.log.tmp"), b"\x00\x00\x01").expect("tmp");
        let mut store = open(dir.path());
        assert_eq!(indexes(&mut store).await, vec![0, 1, 2]);
        assert!(!dir.path().join("raft.log.tmp").exists());
    }

    #[tokio::test]
    async fn committed_is_clamped_to_the_log_present() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = open(dir.path());
        store.append_entries((0..3).map(|i| entry(1, i)).collect()).await.expect("append");
        store.save_committed(Some(entry(1, 9).log_id)).await.expect("committed");
        drop(store);
        let mut store = open(dir.path());
        assert_eq!(store.read_committed().await.expect("read"), Some(entry(1, 2).log_id));
        std::fs::write(dir.path().join(COMMITTED_FILE), b"{garbage").expect("write");
        drop(store);
        let mut store = open(dir.path());
        assert_eq!(store.read_committed().await.expect("read"), None);
    }
}
