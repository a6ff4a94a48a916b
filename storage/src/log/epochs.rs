//! The log's side of the leader epoch cache: the queries replication makes
//! (OffsetForLeaderEpoch, a follower's `LastFetchedEpoch`), the epoch a new leader
//! takes, and keeping the [`LeaderEpochCache`] and its `leader-epoch-checkpoint`
//! consistent with the segments through appends, truncations, log start moves and
//! loading (where a missing or corrupt checkpoint is rebuilt from the batch headers).

use std::path::Path;

use super::{Log, LogInner};
use crate::error::{Result, StorageError};
use crate::leader_epoch::checkpoint::{self, UnusableCheckpoint};
use crate::leader_epoch::{EpochEntry, LeaderEpochCache};

impl Log {
    /// The newest leader epoch of the log (of its last batch, or of the leadership
    /// recorded by [`Log::assign_epoch_start_offset`]); `None` for a log without
    /// epochs. A follower sends it as the Fetch `LastFetchedEpoch` (KIP-320).
    pub fn latest_epoch(&self) -> Option<i32> {
        self.read_inner().leader_epochs.latest_epoch()
    }

    /// Kafka's `endOffsetForEpoch`, for OffsetForLeaderEpoch and the Fetch
    /// DivergingEpoch check: the newest epoch <= `epoch` this log knows and where it
    /// ends (the start of the next epoch, or the log end offset for the latest epoch,
    /// read under the same lock). If every known epoch is newer than `epoch` the answer
    /// is (`epoch`, start of the earliest), as in Kafka since 2.1. `None` when `epoch`
    /// is -1 or newer than every epoch, or the log has no epochs: the caller answers
    /// UNDEFINED_EPOCH (-1) and UNDEFINED_EPOCH_OFFSET (-1).
    pub fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        let inner = self.read_inner();
        inner.leader_epochs.end_offset_for(epoch, inner.log_end_offset())
    }

    /// The leader epoch of the record at `offset`: the newest epoch starting at or
    /// before it (Kafka's `epochForOffset`), e.g. the `leaderEpoch` ListOffsets returns
    /// with an offset; `None` if no epoch starts that early.
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        self.read_inner().leader_epochs.epoch_for_offset(offset)
    }

    /// Every (epoch, start offset) entry, oldest first (tests and admin tools).
    pub fn leader_epoch_entries(&self) -> Vec<(i32, i64)> {
        self.read_inner().leader_epochs.entries().iter().map(|e| (e.epoch, e.start_offset)).collect()
    }

    /// Records that leader epoch `epoch` starts at `offset`, durably, before any batch
    /// of that epoch is written: the broker calls it with the log end offset when it
    /// becomes leader (Kafka's `maybeAssignEpochStartOffset` at `makeLeader`, KAFKA-7415),
    /// so that it answers OffsetForLeaderEpoch for the previous epoch with where its own
    /// log ended, whatever followers hold.
    ///
    /// The epoch already latest is a no-op; a newer one replaces entries starting at or
    /// after `offset`. `StaleLeaderEpoch` if `epoch` is older than the latest (leader
    /// epochs never go back; a negative epoch counts as older, and on a log without
    /// epochs records nothing); `OffsetOutOfRange` if `offset` is outside
    /// [log start offset, log end offset].
    pub fn assign_epoch_start_offset(&self, epoch: i32, offset: i64) -> Result<()> {
        let mut inner = self.write_inner();
        self.check_open(&inner)?;
        check_not_stale(&inner, epoch)?;
        let log_end_offset = inner.log_end_offset();
        if offset < inner.log_start_offset || offset > log_end_offset {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start_offset: inner.log_start_offset,
                log_end_offset,
            });
        }
        if inner.leader_epochs.is_new_epoch(epoch) {
            self.assign_new_epochs(&mut inner, &[EpochEntry { epoch, start_offset: offset }])?;
        }
        self.publish(&inner);
        Ok(())
    }

    /// Assigns `new_epochs` (each newer than the one before, as [`LeaderEpochCache::is_new_epoch`]
    /// checked) and persists the cache, before the batches starting them are written, so
    /// the checkpoint never lacks an epoch the log holds. Returns the cache as it was,
    /// for the caller to restore if the write then fails (`None` if nothing changed).
    /// If persisting fails the cache is restored here and nothing may be written.
    pub(super) fn assign_new_epochs(
        &self,
        inner: &mut LogInner,
        new_epochs: &[EpochEntry],
    ) -> Result<Option<LeaderEpochCache>> {
        if new_epochs.is_empty() {
            return Ok(None);
        }
        let before = inner.leader_epochs.clone();
        for entry in new_epochs {
            inner.leader_epochs.assign(entry.epoch, entry.start_offset);
        }
        if let Err(e) = checkpoint::write(&self.dir, &inner.leader_epochs) {
            inner.leader_epochs = before;
            return Err(e);
        }
        tracing::info!(
            topic = %self.topic,
            partition = self.partition,
            epochs = ?new_epochs,
            "new leader epoch"
        );
        Ok(Some(before))
    }

    /// The log now ends at its log end offset after a truncation: epochs starting there
    /// or later go, in memory (persist with [`Log::persist_epochs`] if this returns
    /// true, once the rest of the truncation is done).
    pub(super) fn cut_epochs_at_log_end(&self, inner: &mut LogInner) -> bool {
        let log_end_offset = inner.log_end_offset();
        let cut = inner.leader_epochs.truncate_from_end(log_end_offset);
        if cut {
            tracing::info!(
                topic = %self.topic,
                partition = self.partition,
                log_end_offset,
                latest_epoch = ?inner.leader_epochs.latest_epoch(),
                "truncated leader epochs"
            );
        }
        cut
    }

    /// The log start offset moved up (retention, DeleteRecords): the epoch covering it
    /// now starts there, durably if the cache changed.
    pub(super) fn move_epochs_to_log_start(&self, inner: &mut LogInner) -> Result<()> {
        if inner.leader_epochs.truncate_from_start(inner.log_start_offset) {
            self.persist_epochs(inner)?;
        }
        Ok(())
    }

    /// Writes the cache to `leader-epoch-checkpoint`.
    pub(super) fn persist_epochs(&self, inner: &LogInner) -> Result<()> {
        checkpoint::write(&self.dir, &inner.leader_epochs)
    }
}

/// `StaleLeaderEpoch` if `epoch` is older than the newest epoch of the log.
pub(super) fn check_not_stale(inner: &LogInner, epoch: i32) -> Result<()> {
    match inner.leader_epochs.latest_epoch() {
        Some(latest_epoch) if epoch < latest_epoch => {
            Err(StorageError::StaleLeaderEpoch { epoch, latest_epoch })
        }
        _ => Ok(()),
    }
}

/// The cache of a log being loaded: the checkpoint if it is usable, else an empty cache
/// and `true` (the load then rebuilds it from the batch headers).
pub(super) fn read_checkpoint(dir: &Path) -> (LeaderEpochCache, bool) {
    match checkpoint::read(dir) {
        Ok(cache) => (cache, false),
        Err(UnusableCheckpoint::Missing) => {
            tracing::info!(dir = %dir.display(), "no leader epoch checkpoint, rebuilding it from the log");
            (LeaderEpochCache::new(), true)
        }
        Err(UnusableCheckpoint::Corrupt(reason)) => {
            tracing::warn!(dir = %dir.display(), reason, "unusable leader epoch checkpoint, rebuilding it from the log");
            (LeaderEpochCache::new(), true)
        }
    }
}

/// Settles a loaded cache against the log: epochs starting at or after the log end go
/// (a torn tail lost their batches, or an epoch was taken at the log end and nothing
/// written, which Kafka also forgets on load), the earliest moves up to the log start,
/// and the checkpoint is rewritten if that changed anything or the cache was rebuilt.
pub(super) fn settle_loaded(dir: &Path, inner: &mut LogInner, rebuilt: bool) -> Result<()> {
    let log_end_offset = inner.log_end_offset();
    let cut = inner.leader_epochs.truncate_from_end(log_end_offset);
    let moved = inner.leader_epochs.truncate_from_start(inner.log_start_offset);
    if cut || moved || rebuilt {
        tracing::debug!(
            dir = %dir.display(),
            entries = inner.leader_epochs.entries().len(),
            rebuilt,
            "wrote leader epoch checkpoint after load"
        );
        checkpoint::write(dir, &inner.leader_epochs)?;
    }
    Ok(())
}
