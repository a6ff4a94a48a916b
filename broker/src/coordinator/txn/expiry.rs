//! The coordinator's periodic work: aborting transactions open longer than their
//! timeout, and deleting transactional ids idle longer than
//! `transactional.id.expiration.ms`.

use std::collections::BTreeMap;
use strata_protocol::ErrorCode;

use super::coordinator::{AppendKind, PartitionState, TransactionCoordinator};
use super::records::TxnRecord;
use super::state::TxnState;
use super::waiting::EndReply;
use super::Action;

/// Most tombstones written in one append (Kafka bounds its batch by the partition's
/// maximum message size; a count is a simpler bound with the same purpose).
const MAX_TOMBSTONES_PER_APPEND: usize = 500;

impl TransactionCoordinator {
    /// Kafka's `abortTimedOutTransactions`: every Ongoing transaction of a served
    /// partition, with no transition pending, started more than its timeout ago is
    /// aborted with an epoch bump, so its producer is fenced. Two-phase-commit
    /// transactions (KIP-939) never time out: their outcome is their coordinator's.
    pub(super) fn abort_timed_out_transactions(&mut self, now_ms: i64, out: &mut Vec<Action>) {
        let mut timed_out: Vec<String> = self
            .txns
            .values()
            .filter(|t| t.state == TxnState::Ongoing && t.pending.is_none())
            .filter(|t| t.txn_timeout_ms != super::init::TWO_PHASE_COMMIT_TIMEOUT_MS)
            .filter(|t| t.txn_start_timestamp_ms.saturating_add(i64::from(t.txn_timeout_ms)) < now_ms)
            .filter(|t| self.partitions.get(&t.partition).is_some_and(|o| o.state == PartitionState::Active))
            .map(|t| t.transactional_id.clone())
            .collect();
        timed_out.sort();
        for id in timed_out {
            tracing::info!(transactional_id = %id, "transaction timed out");
            self.timed_out_aborts += 1;
            self.fence_and_abort(&id, EndReply::Timeout, now_ms, out);
        }
    }

    /// Kafka's `removeExpiredTransactionalIds`: ids with no transaction (Empty,
    /// CompleteCommit, CompleteAbort) and no pending transition, idle for
    /// `transactional.id.expiration.ms`, get a tombstone; they are removed once it is
    /// written (and not used in between).
    pub(super) fn expire_transactional_ids(&mut self, now_ms: i64, out: &mut Vec<Action>) {
        let cutoff = now_ms.saturating_sub(self.config.transactional_id_expiration_ms);
        let mut by_partition: BTreeMap<i32, Vec<(String, i16)>> = BTreeMap::new();
        for txn in self.txns.values_mut() {
            let served =
                self.partitions.get(&txn.partition).is_some_and(|o| o.state == PartitionState::Active);
            if served
                && txn.pending.is_none()
                && txn.state.is_expiration_allowed()
                && txn.txn_last_update_timestamp_ms <= cutoff
            {
                txn.pending = Some(TxnState::Dead);
                by_partition
                    .entry(txn.partition)
                    .or_default()
                    .push((txn.transactional_id.clone(), txn.producer_epoch));
            }
        }
        for (partition, mut ids) in by_partition {
            ids.sort();
            let load_id = self.partitions.get(&partition).map_or(0, |o| o.load_id);
            for chunk in ids.chunks(MAX_TOMBSTONES_PER_APPEND) {
                tracing::info!(partition, count = chunk.len(), "expiring idle transactional ids");
                let records = chunk.iter().map(|(id, _)| TxnRecord::tombstone(id)).collect();
                self.append(partition, load_id, records, AppendKind::Expire { ids: chunk.to_vec() }, out);
            }
        }
    }

    /// The tombstones are written (or failed): drop the ids still waiting for them.
    pub(super) fn on_expire_written(
        &mut self,
        ids: &[(String, i16)],
        owned: bool,
        result: Result<(), ErrorCode>,
    ) {
        if !owned {
            return;
        }
        for (id, epoch) in ids {
            let Some(txn) = self.txns.get_mut(id) else { continue };
            if txn.pending != Some(TxnState::Dead) {
                continue;
            }
            if result.is_ok() && txn.producer_epoch == *epoch {
                self.txns.remove(id);
            } else {
                tracing::warn!(transactional_id = %id, ?result, "transactional id not expired");
                txn.pending = None;
            }
        }
    }
}
