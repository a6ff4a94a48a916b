//! The metadata state machine: applies committed metadata batches to a
//! [`MetadataImage`], publishes each new image to the broker's [`MetadataCache`], and
//! keeps the latest snapshot in `snapshot.json`.
//!
//! The image lives in memory only; a restart loads `snapshot.json` and openraft replays the
//! committed entries after it from the log. A snapshot file is the same JSON document that
//! travels to a lagging follower in InstallSnapshot ([`SnapshotFile`]: the openraft meta
//! plus the [`ImageSnapshot`]), replaced atomically and fsynced.

use super::files::{self, DirLock, StoreError};
use super::retry::WriteRetry;
use super::types::{Entry, LogId, Snapshot, SnapshotMeta, StorageError, StoredMembership, TypeConfig};
use crate::metadata::{ApplyOutcome, ImageSnapshot, MetadataCache, MetadataImage};
use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, OptionalSend, RaftSnapshotBuilder, StorageIOError};
use serde::{Deserialize, Serialize};
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

const SNAPSHOT_FILE: &str = "snapshot.json";
/// The version of the snapshot document.
const SNAPSHOT_FORMAT: u32 = 1;

/// A snapshot on disk and on the wire.
#[derive(Debug, Serialize, Deserialize)]
struct SnapshotFile {
    format: u32,
    meta: SnapshotMeta,
    image: ImageSnapshot,
}

impl SnapshotFile {
    fn decode(bytes: &[u8], path: &Path) -> Result<SnapshotFile, StoreError> {
        let corrupt = |reason: String| StoreError::Corrupt { path: path.to_path_buf(), offset: 0, reason };
        let file: SnapshotFile =
            serde_json::from_slice(bytes).map_err(|e| corrupt(format!("snapshot: {e}")))?;
        if file.format != SNAPSHOT_FORMAT {
            return Err(corrupt(format!("unknown snapshot format {}", file.format)));
        }
        let covered = file.meta.last_log_id.map_or(0, |id| id.index);
        if file.image.applied_index != covered {
            return Err(corrupt(format!(
                "image applied up to {} but the snapshot covers up to {covered}",
                file.image.applied_index
            )));
        }
        Ok(file)
    }
}

/// The current snapshot, shared by the state machine and the builders openraft runs
/// concurrently with it.
#[derive(Debug)]
pub(crate) struct SnapshotStore {
    dir: PathBuf,
    /// The meta and the encoded [`SnapshotFile`] of the latest snapshot.
    current: Mutex<Option<(SnapshotMeta, Vec<u8>)>>,
    /// Makes snapshot ids unique among the snapshots this process builds.
    built: AtomicU64,
    /// Retries storing a snapshot while the disk is full: openraft would stop on the
    /// error, and a snapshot must be durable before the log it covers is purged.
    retry: WriteRetry,
    _lock: Arc<DirLock>,
}

impl SnapshotStore {
    /// Makes `bytes` (covering `meta`) the current snapshot, on disk then in memory,
    /// unless a newer one is already current (a snapshot installed while this one was
    /// being built). The lock is held only inside this blocking call.
    fn store(&self, meta: SnapshotMeta, bytes: Vec<u8>) -> Result<(), StoreError> {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if current.as_ref().is_some_and(|(m, _)| m.last_log_id > meta.last_log_id) {
            tracing::info!(snapshot = %meta, "a newer snapshot is already current; not storing this one");
            return Ok(());
        }
        files::atomic_write(&self.dir, SNAPSHOT_FILE, &bytes, true)?;
        tracing::info!(snapshot = %meta, bytes = bytes.len(), "stored a metadata snapshot");
        *current = Some((meta, bytes));
        Ok(())
    }

    fn current(&self) -> Option<Snapshot> {
        let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        current.as_ref().map(|(meta, bytes)| Snapshot {
            meta: meta.clone(),
            snapshot: Box::new(Cursor::new(bytes.clone())),
        })
    }
}

/// The openraft state machine of one quorum member.
#[derive(Debug)]
pub(crate) struct StateMachine {
    image: MetadataImage,
    last_applied: Option<LogId>,
    last_membership: StoredMembership,
    cache: Arc<MetadataCache>,
    snapshots: Arc<SnapshotStore>,
}

/// Builds one snapshot from the state at the moment openraft asked for the builder.
#[derive(Debug)]
pub(crate) struct SnapshotBuilder {
    image: ImageSnapshot,
    last_applied: Option<LogId>,
    last_membership: StoredMembership,
    snapshots: Arc<SnapshotStore>,
}

fn snapshot_error(meta: Option<&SnapshotMeta>, e: StoreError) -> StorageError {
    StorageIOError::write_snapshot(meta.map(|m| m.signature()), &e).into()
}

impl StateMachine {
    /// Loads the latest snapshot in `dir` (if any) and publishes its image to `cache`.
    /// Blocking: call it from a blocking task.
    pub(crate) fn open(
        dir: &Path,
        cache: Arc<MetadataCache>,
        lock: Arc<DirLock>,
        retry: WriteRetry,
    ) -> Result<StateMachine, StoreError> {
        files::remove_stale_tmp(dir, SNAPSHOT_FILE)?;
        let loaded = match files::read_optional(dir, SNAPSHOT_FILE)? {
            None => None,
            Some(bytes) => {
                let file = SnapshotFile::decode(&bytes, &dir.join(SNAPSHOT_FILE))?;
                Some((file, bytes))
            }
        };
        let mut sm = StateMachine {
            image: MetadataImage::default(),
            last_applied: None,
            last_membership: StoredMembership::default(),
            cache,
            snapshots: Arc::new(SnapshotStore {
                dir: dir.to_path_buf(),
                current: Mutex::new(None),
                built: AtomicU64::new(0),
                retry,
                _lock: lock,
            }),
        };
        if let Some((file, bytes)) = loaded {
            tracing::info!(snapshot = %file.meta, "loaded the metadata snapshot");
            sm.image = MetadataImage::from_snapshot(file.image);
            sm.last_applied = file.meta.last_log_id;
            sm.last_membership = file.meta.last_membership.clone();
            *sm.snapshots.current.lock().unwrap_or_else(PoisonError::into_inner) = Some((file.meta, bytes));
            sm.publish();
        }
        Ok(sm)
    }

    fn publish(&self) {
        self.cache.publish(Arc::new(self.image.clone()));
    }

    /// Applies one entry; the caller publishes once per batch of entries.
    fn apply_entry(&mut self, entry: Entry) -> Result<ApplyOutcome, StoreError> {
        let log_id = entry.log_id;
        if self.last_applied.is_some_and(|last| last.index >= log_id.index) {
            return Err(StoreError::Invariant(format!("apply of {log_id} after {:?}", self.last_applied)));
        }
        let outcome = match entry.payload {
            EntryPayload::Normal(batch) => self.image.apply_batch(log_id.index, &batch.0),
            EntryPayload::Blank => self.image.apply_batch(log_id.index, &[]),
            EntryPayload::Membership(membership) => {
                self.last_membership = StoredMembership::new(Some(log_id), membership);
                self.image.apply_batch(log_id.index, &[])
            }
        };
        self.last_applied = Some(log_id);
        debug_assert_eq!(self.image.applied_index, log_id.index);
        Ok(outcome)
    }
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        let seq = self.snapshots.built.fetch_add(1, Ordering::Relaxed) + 1;
        let snapshot_id = match self.last_applied {
            Some(id) => format!("{}-{}-{seq}", id.leader_id, id.index),
            None => format!("none-{seq}"),
        };
        let meta = SnapshotMeta {
            last_log_id: self.last_applied,
            last_membership: self.last_membership.clone(),
            snapshot_id,
        };
        let file = SnapshotFile { format: SNAPSHOT_FORMAT, meta: meta.clone(), image: self.image.clone() };
        let bytes = serde_json::to_vec(&file)
            .map_err(|source| snapshot_error(Some(&meta), StoreError::Encode { what: "snapshot", source }))?;
        let (store, stored_meta, stored_bytes) = (self.snapshots.clone(), meta.clone(), bytes.clone());
        let retry = self.snapshots.retry.clone();
        retry
            .run("store snapshot", move || store.store(stored_meta.clone(), stored_bytes.clone()))
            .await
            .map_err(|e| snapshot_error(Some(&meta), e))?;
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(bytes)) })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        Ok((self.last_applied, self.last_membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<ApplyOutcome>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut outcomes = Vec::new();
        for entry in entries {
            let log_id = entry.log_id;
            let outcome = self.apply_entry(entry).map_err(|e| StorageIOError::apply(log_id, &e))?;
            outcomes.push(outcome);
        }
        if !outcomes.is_empty() {
            self.publish();
        }
        Ok(outcomes)
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder {
        SnapshotBuilder {
            image: self.image.to_snapshot(),
            last_applied: self.last_applied,
            last_membership: self.last_membership.clone(),
            snapshots: self.snapshots.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let received = snapshot.into_inner();
        let path = self.snapshots.dir.join(SNAPSHOT_FILE);
        let file = SnapshotFile::decode(&received, &path).map_err(|e| snapshot_error(Some(meta), e))?;
        if file.meta.last_log_id != meta.last_log_id {
            let e = StoreError::Corrupt {
                path,
                offset: 0,
                reason: format!(
                    "received snapshot covers {:?}, not {:?}",
                    file.meta.last_log_id, meta.last_log_id
                ),
            };
            return Err(snapshot_error(Some(meta), e));
        }
        // Persist under openraft's meta, then switch the image: a crash in between
        // restarts from the new snapshot, which is what openraft expects after install.
        let on_disk = SnapshotFile { format: SNAPSHOT_FORMAT, meta: meta.clone(), image: file.image };
        let bytes = serde_json::to_vec(&on_disk)
            .map_err(|source| snapshot_error(Some(meta), StoreError::Encode { what: "snapshot", source }))?;
        let (store, stored_meta) = (self.snapshots.clone(), meta.clone());
        let retry = self.snapshots.retry.clone();
        retry
            .run("install snapshot", move || store.store(stored_meta.clone(), bytes.clone()))
            .await
            .map_err(|e| snapshot_error(Some(meta), e))?;
        tracing::info!(snapshot = %meta, "installed a metadata snapshot from the leader");
        self.image = MetadataImage::from_snapshot(on_disk.image);
        self.last_applied = meta.last_log_id;
        self.last_membership = meta.last_membership.clone();
        self.publish();
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        Ok(self.snapshots.current())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{MetadataBatch, MetadataRecord};
    use openraft::{CommittedLeaderId, Membership};
    use std::collections::{BTreeMap, BTreeSet};

    fn log_id(index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(1, 1), index)
    }

    fn open(dir: &Path, cache: Arc<MetadataCache>) -> StateMachine {
        let lock = Arc::new(DirLock::acquire(dir).expect("lock"));
        StateMachine::open(dir, cache, lock, WriteRetry::default()).expect("open")
    }

    fn entries() -> Vec<Entry> {
        let nodes = BTreeMap::from([(1, openraft::BasicNode::new("h:1"))]);
        let membership = Membership::new(vec![BTreeSet::from([1])], nodes);
        vec![
            Entry { log_id: log_id(0), payload: EntryPayload::Membership(membership) },
            Entry { log_id: log_id(1), payload: EntryPayload::Blank },
            Entry {
                log_id: log_id(2),
                payload: EntryPayload::Normal(MetadataBatch(vec![MetadataRecord::ClusterId {
                    cluster_id: "abc".into(),
                }])),
            },
        ]
    }

    #[tokio::test]
    async fn apply_publishes_and_a_snapshot_survives_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = Arc::new(MetadataCache::new());
        let mut sm = open(dir.path(), cache.clone());
        let outcomes = sm.apply(entries()).await.expect("apply");
        assert_eq!(outcomes.len(), 3);
        assert_eq!(cache.current().applied_index, 2);
        assert_eq!(cache.current().cluster_id.as_deref(), Some("abc"));
        let built = sm.get_snapshot_builder().await.build_snapshot().await.expect("build");
        assert_eq!(built.meta.last_log_id, Some(log_id(2)));
        drop(sm);

        let cache = Arc::new(MetadataCache::new());
        let mut sm = open(dir.path(), cache.clone());
        assert_eq!(cache.current().cluster_id.as_deref(), Some("abc"));
        let (applied, membership) = sm.applied_state().await.expect("state");
        assert_eq!(applied, Some(log_id(2)));
        assert_eq!(membership.log_id(), &Some(log_id(0)));
        let current = sm.get_current_snapshot().await.expect("get").expect("a snapshot");
        assert_eq!(current.meta.snapshot_id, built.meta.snapshot_id);
        // Re-applying an old entry is refused instead of moving the image backwards.
        assert!(sm.apply(entries().into_iter().take(1)).await.is_err());
    }

    #[tokio::test]
    async fn install_replaces_the_image_and_refuses_garbage() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut leader = open(dir.path(), Arc::new(MetadataCache::new()));
        leader.apply(entries()).await.expect("apply");
        let snapshot = leader.get_snapshot_builder().await.build_snapshot().await.expect("build");
        drop(leader);

        let other = tempfile::tempdir().expect("tempdir");
        let cache = Arc::new(MetadataCache::new());
        let mut follower = open(other.path(), cache.clone());
        let garbage = Box::new(Cursor::new(b"{\"format\":1}".to_vec()));
        assert!(follower.install_snapshot(&snapshot.meta, garbage).await.is_err());
        follower.install_snapshot(&snapshot.meta, snapshot.snapshot).await.expect("install");
        assert_eq!(cache.current().applied_index, 2);
        assert_eq!(cache.current().cluster_id.as_deref(), Some("abc"));
        assert!(other.path().join(SNAPSHOT_FILE).exists());
    }
}
