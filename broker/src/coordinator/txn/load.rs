//! Taking over and giving up `__transaction_state` partitions: loading the ids from the
//! log, resuming the markers of prepared transactions, and dropping a partition's state
//! when leadership moves.

use bytes::Bytes;
use std::collections::BTreeSet;

use super::coordinator::{Ownership, PartitionState, Retry, TransactionCoordinator};
use super::records::{RecordError, TxnRecord};
use super::state::{TxnMetadata, TxnState, NO_PRODUCER_EPOCH};
use super::Action;

impl TransactionCoordinator {
    /// This broker became leader of `partition` of `__transaction_state` at leader epoch
    /// `coordinator_epoch`: its ids answer COORDINATOR_LOAD_IN_PROGRESS until
    /// [`TransactionCoordinator::complete_load`]. Any state of an earlier term is dropped
    /// first.
    pub fn begin_load(&mut self, partition: i32, coordinator_epoch: i32, now_ms: i64) -> Vec<Action> {
        if let Some(previous) = self.partitions.get(&partition) {
            if coordinator_epoch < previous.coordinator_epoch {
                tracing::warn!(
                    partition,
                    coordinator_epoch,
                    previous = previous.coordinator_epoch,
                    "coordinator epoch went backwards"
                );
            }
        }
        let out = self.unload(partition, now_ms);
        let load_id = self.next_seq();
        let ownership = Ownership { state: PartitionState::Loading, coordinator_epoch, load_id };
        self.partitions.insert(partition, ownership);
        tracing::info!(partition, coordinator_epoch, "loading transaction state partition");
        out
    }

    /// Applies one record of `partition` read from the log while loading (`value` `None`
    /// for a tombstone). Records with another key version are skipped, as Kafka skips
    /// them; records of states Kafka never writes are refused. The shell passes every
    /// keyed record of the partition, in log order; on an error it may skip the record.
    pub fn replay(&mut self, partition: i32, key: Bytes, value: Option<Bytes>) -> Result<(), RecordError> {
        match TxnRecord::decode(key, value)? {
            Some(record) => self.replay_record(partition, record),
            None => Ok(()),
        }
    }

    /// Applies one decoded record of `partition`; see [`TransactionCoordinator::replay`].
    pub fn replay_record(&mut self, partition: i32, record: TxnRecord) -> Result<(), RecordError> {
        let id = record.transactional_id;
        let expected = self.partition_for(&id);
        if expected != partition {
            // Kafka files it under the partition being loaded, where lookups (by the
            // id's own partition) never find it; skipping it has the same effect.
            tracing::warn!(transactional_id = %id, partition, expected, "transaction record in an unexpected partition (transaction.state.log.num.partitions changed?); skipped");
            return Ok(());
        }
        let Some(value) = record.value else {
            self.txns.remove(&id);
            return Ok(());
        };
        let state = value.state()?;
        if matches!(state, TxnState::Dead | TxnState::PrepareEpochFence) {
            return Err(RecordError::UnexpectedState(state));
        }
        let partitions: BTreeSet<_> = value.partitions().into_iter().collect();
        let txn = TxnMetadata {
            transactional_id: id.clone(),
            partition: expected,
            producer_id: value.producer_id,
            previous_producer_id: value.previous_producer_id,
            producer_epoch: value.producer_epoch,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            txn_timeout_ms: value.transaction_timeout_ms,
            state,
            pending: None,
            partitions,
            txn_start_timestamp_ms: value.transaction_start_timestamp_ms,
            txn_last_update_timestamp_ms: value.transaction_last_update_timestamp_ms,
            kept_txn_epoch: if state.holds_kept_epoch() {
                value.kept_txn_producer_epoch
            } else {
                NO_PRODUCER_EPOCH
            },
            has_failed_epoch_fence: false,
        };
        self.txns.insert(id, txn);
        Ok(())
    }

    /// The log of `partition` is replayed: serve its ids, and resume the markers of the
    /// transactions found in PrepareCommit / PrepareAbort (their EndTxn was answered, so
    /// they must complete).
    pub fn complete_load(&mut self, partition: i32, now_ms: i64) -> Vec<Action> {
        let mut out = Vec::new();
        let Some(ownership) = self.partitions.get_mut(&partition) else {
            tracing::warn!(partition, "complete_load without begin_load; ignored");
            return out;
        };
        ownership.state = PartitionState::Active;
        let mut prepared: Vec<String> = self
            .txns
            .values()
            .filter(|t| t.partition == partition)
            .filter(|t| matches!(t.state, TxnState::PrepareCommit | TxnState::PrepareAbort))
            .map(|t| t.transactional_id.clone())
            .collect();
        prepared.sort();
        for id in &prepared {
            tracing::info!(transactional_id = %id, partition, "resuming markers of a prepared transaction");
            self.start_markers(id, now_ms, &mut out);
        }
        let abort_interval = self.config.abort_timed_out_transaction_cleanup_interval_ms.max(1);
        let expiry_interval = self.config.remove_expired_transaction_cleanup_interval_ms.max(1);
        self.next_abort_scan_ms.get_or_insert(now_ms.saturating_add(abort_interval));
        self.next_expiry_scan_ms.get_or_insert(now_ms.saturating_add(expiry_interval));
        let count = self.txns.values().filter(|t| t.partition == partition).count();
        tracing::info!(
            partition,
            transactional_ids = count,
            prepared = prepared.len(),
            "transaction state partition loaded"
        );
        out
    }

    /// This broker no longer leads `partition`: its ids, markers in flight and retries
    /// are dropped (the next leader resumes from the log). Writes still in flight are
    /// answered NOT_COORDINATOR when the shell completes them.
    pub fn unload(&mut self, partition: i32, _now_ms: i64) -> Vec<Action> {
        let Some(ownership) = self.partitions.remove(&partition) else { return Vec::new() };
        let load_id = ownership.load_id;
        self.txns.retain(|_, t| t.partition != partition);
        self.marker_txns.retain(|_, m| m.load_id != load_id);
        self.marker_sends.retain(|_, s| s.load_id != load_id);
        self.retries.retain(|_, r| match r {
            Retry::Markers { load_id: l, .. } | Retry::Complete { load_id: l, .. } => *l != load_id,
        });
        if self.partitions.is_empty() {
            self.next_abort_scan_ms = None;
            self.next_expiry_scan_ms = None;
        }
        tracing::info!(partition, "unloaded transaction state partition");
        Vec::new()
    }
}
