//! `ProducerStateManager`: per partition, what each producer id has appended recently
//! (idempotence), which transactions are open and which completed ones may not be
//! replicated yet (last stable offset, aborted transactions). Kafka's `ProducerStateManager`, `ProducerStateEntry` and
//! `ProducerAppendInfo`, as a pure core: the [`crate::Log`] owns one under its lock, asks
//! it to validate an append before writing ([`ProducerStateManager::prepare_update`]),
//! applies the result after, and persists it as snapshots ([`snapshot`]) from which it is
//! rebuilt, with a replay of the log after the snapshot, when the log is opened or
//! truncated.

mod entry;
mod snapshot;
mod update;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

pub(crate) use entry::BatchMetadata;
use entry::ProducerStateEntry;
pub(crate) use update::{CompletedTxn, Origin, ProducerStateUpdate};

use crate::error::Result;
use crate::index::AbortedTxn;
use crate::segment::remove_if_exists;

/// A producer known to a partition, as DescribeProducers (KIP-664) reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveProducer {
    /// The producer id.
    pub producer_id: i64,
    /// Its current epoch.
    pub producer_epoch: i16,
    /// Last sequence appended in that epoch, -1 if none.
    pub last_sequence: i32,
    /// Max timestamp of its last batch or marker.
    pub last_timestamp: i64,
    /// Epoch of the coordinator that wrote its last marker, -1 if none.
    pub coordinator_epoch: i32,
    /// First offset of its open transaction, -1 if none.
    pub current_txn_start_offset: i64,
}

/// Producer state of one partition plus the bookkeeping of its snapshot files.
#[derive(Debug)]
pub(crate) struct ProducerStateManager {
    dir: PathBuf,
    producers: HashMap<i64, ProducerStateEntry>,
    /// Open transactions by first offset -> producer id.
    ongoing_txns: BTreeMap<i64, i64>,
    /// Kafka's `unreplicatedTxns`: transactions completed by a marker not yet below the
    /// high watermark, by first offset -> marker offset. A new leader may lack the
    /// marker, so they stay unstable until the high watermark passes it.
    unreplicated_txns: BTreeMap<i64, i64>,
    /// The state reflects every batch below this offset.
    map_end_offset: i64,
    /// Offset of the last snapshot written or loaded.
    last_snap_offset: i64,
    /// Offsets of the snapshot files on disk.
    snapshots: BTreeSet<i64>,
}

impl ProducerStateManager {
    /// An empty state for the partition directory `dir`, aware of its snapshot files.
    pub(crate) fn new(dir: &Path) -> Result<Self> {
        Ok(ProducerStateManager {
            dir: dir.to_path_buf(),
            producers: HashMap::new(),
            ongoing_txns: BTreeMap::new(),
            unreplicated_txns: BTreeMap::new(),
            map_end_offset: 0,
            last_snap_offset: 0,
            snapshots: snapshot::list(dir)?.into_iter().collect(),
        })
    }

    /// Applies a validated update whose batches were written below `map_end_offset`.
    /// Returns the transactions it aborted, with the last stable offset right after
    /// each marker, for the transaction index (in marker order). Completed transactions
    /// become unreplicated until [`Self::on_high_watermark_updated`] passes their markers.
    pub(crate) fn apply(&mut self, update: ProducerStateUpdate, map_end_offset: i64) -> Vec<AbortedTxn> {
        self.producers.extend(update.entries);
        for (first_offset, producer_id) in update.started_txns {
            self.ongoing_txns.insert(first_offset, producer_id);
        }
        let mut aborted = Vec::new();
        for txn in update.completed_txns {
            if txn.aborted {
                aborted.push(AbortedTxn {
                    producer_id: txn.producer_id,
                    first_offset: txn.first_offset,
                    last_offset: txn.last_offset,
                    last_stable_offset: self.last_stable_offset_after(&txn),
                });
            }
            let open = self.ongoing_txns.remove(&txn.first_offset);
            debug_assert!(open.is_some(), "completed a transaction that was not open: {txn:?}");
            self.unreplicated_txns.insert(txn.first_offset, txn.last_offset);
        }
        debug_assert!(map_end_offset >= self.map_end_offset, "producer state cannot go back");
        self.map_end_offset = map_end_offset;
        aborted
    }

    /// The LSO once `completed` ends: the first transaction still open by another
    /// producer, else just after the marker.
    fn last_stable_offset_after(&self, completed: &CompletedTxn) -> i64 {
        self.ongoing_txns
            .iter()
            .find(|(_, producer_id)| **producer_id != completed.producer_id)
            .map_or(completed.last_offset + 1, |(first_offset, _)| *first_offset)
    }

    /// First offset of the oldest open transaction.
    pub(crate) fn first_undecided_offset(&self) -> Option<i64> {
        self.ongoing_txns.keys().next().copied()
    }

    /// Kafka's `firstUnstableOffset`: first offset of the oldest transaction that is open
    /// or completed by a marker the high watermark has not passed.
    pub(crate) fn first_unstable_offset(&self) -> Option<i64> {
        let unreplicated = self.unreplicated_txns.keys().next().copied();
        match (self.first_undecided_offset(), unreplicated) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The high watermark (or the log start offset) reached `offset`: completed
    /// transactions whose markers are below it are stable.
    pub(crate) fn on_high_watermark_updated(&mut self, offset: i64) {
        self.unreplicated_txns.retain(|_, marker_offset| *marker_offset >= offset);
    }

    /// The unreplicated transactions whose markers are below `offset`, as (first
    /// offset, marker offset): what a truncation to `offset` leaves completed.
    pub(crate) fn unreplicated_below(&self, offset: i64) -> Vec<(i64, i64)> {
        self.unreplicated_txns.iter().filter(|(_, marker)| **marker < offset).map(|(f, m)| (*f, *m)).collect()
    }

    /// Puts back unreplicated transactions saved before a rebuild whose replay started
    /// after their markers (so did not see them complete).
    pub(crate) fn restore_unreplicated(&mut self, txns: Vec<(i64, i64)>) {
        for (first_offset, marker_offset) in txns {
            debug_assert!(!self.ongoing_txns.contains_key(&first_offset), "completed transaction reopened");
            self.unreplicated_txns.insert(first_offset, marker_offset);
        }
    }

    /// Every known producer, by id.
    pub(crate) fn active_producers(&self) -> Vec<ActiveProducer> {
        let mut out: Vec<ActiveProducer> = self
            .producers
            .values()
            .map(|e| ActiveProducer {
                producer_id: e.producer_id,
                producer_epoch: e.producer_epoch,
                last_sequence: e.last_seq(),
                last_timestamp: e.last_timestamp,
                coordinator_epoch: e.coordinator_epoch,
                current_txn_start_offset: e.current_txn_first_offset.unwrap_or(-1),
            })
            .collect();
        out.sort_by_key(|p| p.producer_id);
        out
    }

    /// Forgets producers idle for `expiration_ms` without an open transaction; returns
    /// how many.
    pub(crate) fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, e| !e.is_expired(now_ms, expiration_ms));
        before - self.producers.len()
    }

    #[cfg(test)]
    pub(crate) fn map_end_offset(&self) -> i64 {
        self.map_end_offset
    }

    /// Moves the end of the state forward over offsets that hold no producer batches
    /// (e.g. the base of a new segment).
    pub(crate) fn set_map_end_offset(&mut self, offset: i64) {
        self.map_end_offset = offset;
    }

    /// Writes a snapshot at the map end offset unless the last one is already there.
    /// Returns whether one was written.
    pub(crate) fn take_snapshot(&mut self, sync: bool) -> Result<bool> {
        if self.map_end_offset <= self.last_snap_offset && self.snapshots.contains(&self.map_end_offset) {
            return Ok(false);
        }
        let mut entries: Vec<&ProducerStateEntry> = self.producers.values().collect();
        entries.sort_by_key(|e| e.producer_id);
        snapshot::write(&self.dir, self.map_end_offset, entries.into_iter(), sync)?;
        self.snapshots.insert(self.map_end_offset);
        self.last_snap_offset = self.map_end_offset;
        tracing::debug!(dir = %self.dir.display(), offset = self.map_end_offset, producers = self.producers.len(), "wrote producer snapshot");
        Ok(true)
    }

    /// Empties the state, which then covers nothing below `offset`.
    pub(crate) fn reset_to(&mut self, offset: i64) {
        self.producers.clear();
        self.ongoing_txns.clear();
        self.unreplicated_txns.clear();
        self.map_end_offset = offset;
        self.last_snap_offset = offset;
    }

    /// Resets to the newest readable snapshot within `[min_offset, max_offset]`,
    /// deleting corrupt ones on the way and leaving out producers already expired at
    /// `now_ms`. Returns its offset, or `None` (state empty) if there is none.
    pub(crate) fn load_latest_snapshot(
        &mut self,
        min_offset: i64,
        max_offset: i64,
        now_ms: i64,
        expiration_ms: i64,
    ) -> Result<Option<i64>> {
        let candidates: Vec<i64> = self.snapshots.range(min_offset..=max_offset).rev().copied().collect();
        for offset in candidates {
            match snapshot::read(&self.dir, offset)? {
                Ok(entries) => {
                    self.reset_to(offset);
                    for entry in entries.into_iter().filter(|e| !e.is_expired(now_ms, expiration_ms)) {
                        if let Some(first_offset) = entry.current_txn_first_offset {
                            self.ongoing_txns.insert(first_offset, entry.producer_id);
                        }
                        self.producers.insert(entry.producer_id, entry);
                    }
                    tracing::debug!(dir = %self.dir.display(), offset, producers = self.producers.len(), "loaded producer snapshot");
                    return Ok(Some(offset));
                }
                Err(reason) => {
                    tracing::warn!(dir = %self.dir.display(), offset, ?reason, "deleting corrupt producer snapshot");
                    self.delete_snapshot(offset)?;
                }
            }
        }
        Ok(None)
    }

    /// Offsets of the snapshot files, ascending.
    pub(crate) fn snapshot_offsets(&self) -> Vec<i64> {
        self.snapshots.iter().copied().collect()
    }

    /// Deletes the snapshot files whose offset matches `doomed`.
    pub(crate) fn delete_snapshots_where(&mut self, doomed: impl Fn(i64) -> bool) -> Result<()> {
        let offsets: Vec<i64> = self.snapshots.iter().copied().filter(|o| doomed(*o)).collect();
        for offset in offsets {
            self.delete_snapshot(offset)?;
        }
        Ok(())
    }

    fn delete_snapshot(&mut self, offset: i64) -> Result<()> {
        self.snapshots.remove(&offset);
        remove_if_exists(&snapshot::snapshot_path(&self.dir, offset))
    }

    /// Number of known producers.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.producers.len()
    }
}

#[cfg(test)]
mod tests;
