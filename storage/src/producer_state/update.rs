//! Validating an append against producer state (Kafka's `ProducerAppendInfo`): epochs,
//! sequences and transaction boundaries, computed without touching the state so that
//! a refused append leaves nothing behind. The result is applied after the write.

use std::collections::{HashMap, HashSet};

use strata_protocol::records::{ControlRecordType, NO_PRODUCER_EPOCH};

use super::entry::{in_sequence, BatchMetadata, ProducerStateEntry};
use super::ProducerStateManager;
use crate::error::{Result, StorageError};
use crate::log::BatchInfo;

/// Where an append comes from, which decides how strictly it is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// A producer: epochs, sequences and transaction state are enforced.
    Client,
    /// The broker's coordinators (markers, group writes): epochs are enforced, sequences
    /// are not.
    Coordinator,
    /// Replication or replay of the log: the leader validated it; state just follows.
    Replication,
}

/// A transaction ended by a marker of this append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CompletedTxn {
    pub(crate) producer_id: i64,
    pub(crate) first_offset: i64,
    /// Offset of the marker.
    pub(crate) last_offset: i64,
    pub(crate) aborted: bool,
}

/// The validated effect of an append on producer state.
#[derive(Debug, Default)]
pub(crate) struct ProducerStateUpdate {
    /// Updated entries, replacing the current ones.
    pub(crate) entries: HashMap<i64, ProducerStateEntry>,
    /// Transactions begun: (first offset, producer id).
    pub(crate) started_txns: Vec<(i64, i64)>,
    pub(crate) completed_txns: Vec<CompletedTxn>,
    /// Producers with a data batch earlier in this append.
    with_data: HashSet<i64>,
}

impl ProducerStateManager {
    /// Checks `batches` (with their final offsets) against the current state and returns
    /// the update to apply once they are written. `Origin::Replication` never fails.
    pub(crate) fn prepare_update(
        &self,
        batches: &[BatchInfo],
        origin: Origin,
    ) -> Result<ProducerStateUpdate> {
        let mut update = ProducerStateUpdate::default();
        for batch in batches.iter().filter(|b| b.producer_id >= 0) {
            self.prepare_batch(&mut update, batch, origin)?;
        }
        Ok(update)
    }

    /// For a producer's retry: the retained batch with the same epoch and sequence range
    /// as one of `batches`, if any (checked for client appends before anything else).
    ///
    /// A transactional batch can only retry a batch of the transaction still open: one that
    /// matches a batch of a transaction already ended is a new batch that reuses its sequence
    /// numbers (librdkafka 2.16 does so after an abort that purged a written batch), and taking
    /// it for a retry would leave it unwritten while its transaction commits. It is left to the
    /// sequence check, which refuses it (OUT_OF_ORDER_SEQUENCE_NUMBER). Kafka's check compares
    /// epoch and range only, and loses the batch (docs/compatibility.md).
    pub(crate) fn find_duplicate(&self, batches: &[BatchInfo]) -> Option<BatchMetadata> {
        batches.iter().filter(|b| b.producer_id >= 0 && !b.is_control).find_map(|b| {
            let entry = self.producers.get(&b.producer_id)?;
            let original = entry.find_duplicate(b.producer_epoch, b.base_sequence, b.last_sequence)?;
            let in_open_txn =
                entry.current_txn_first_offset.is_some_and(|first| original.first_offset >= first);
            (!b.is_transactional || in_open_txn).then_some(original)
        })
    }

    fn prepare_batch(
        &self,
        update: &mut ProducerStateUpdate,
        batch: &BatchInfo,
        origin: Origin,
    ) -> Result<()> {
        let producer_id = batch.producer_id;
        let committed = self.producers.get(&producer_id);
        let entry = update
            .entries
            .entry(producer_id)
            .or_insert_with(|| committed.cloned().unwrap_or_else(|| ProducerStateEntry::empty(producer_id)));
        check_epoch(entry, batch.producer_epoch, origin)?;
        if batch.is_control {
            let Some(marker) = batch.end_txn_marker else {
                // Other control types do not concern transactions.
                return Ok(());
            };
            if entry.coordinator_epoch > marker.coordinator_epoch {
                if origin != Origin::Replication {
                    return Err(StorageError::TransactionCoordinatorFenced {
                        producer_id,
                        coordinator_epoch: marker.coordinator_epoch,
                        current_coordinator_epoch: entry.coordinator_epoch,
                    });
                }
                tracing::info!(
                    producer_id,
                    offset = batch.base_offset,
                    "marker from an older coordinator epoch"
                );
            }
            // A marker without data in this partition changes no offsets: nothing to
            // complete or index.
            if let Some(first_offset) = entry.current_txn_first_offset.take() {
                update.completed_txns.push(CompletedTxn {
                    producer_id,
                    first_offset,
                    last_offset: batch.base_offset,
                    aborted: marker.control_type == ControlRecordType::Abort,
                });
            }
            entry.maybe_update_epoch(batch.producer_epoch);
            entry.coordinator_epoch = marker.coordinator_epoch;
            entry.last_timestamp = batch.max_timestamp;
            return Ok(());
        }
        if origin == Origin::Client {
            let committed_epoch = committed.map_or(NO_PRODUCER_EPOCH, |e| e.producer_epoch);
            check_sequence(entry, committed_epoch, update.with_data.contains(&producer_id), batch)?;
        }
        update.with_data.insert(producer_id);
        entry.add_batch(
            batch.producer_epoch,
            BatchMetadata {
                first_seq: batch.base_sequence,
                last_seq: batch.last_sequence,
                first_offset: batch.base_offset,
                last_offset: batch.last_offset,
                timestamp: batch.max_timestamp,
            },
        );
        match (entry.current_txn_first_offset, batch.is_transactional) {
            (Some(_), false) => {
                if origin != Origin::Replication {
                    return Err(StorageError::InvalidTxnState { producer_id });
                }
                tracing::warn!(
                    producer_id,
                    offset = batch.base_offset,
                    "non-transactional batch inside a transaction"
                );
            }
            (None, true) => {
                entry.current_txn_first_offset = Some(batch.base_offset);
                update.started_txns.push((batch.base_offset, producer_id));
            }
            _ => {}
        }
        Ok(())
    }
}

/// Refuses epochs older than the producer's (zombies); replication only warns.
fn check_epoch(entry: &ProducerStateEntry, epoch: i16, origin: Origin) -> Result<()> {
    if epoch >= entry.producer_epoch {
        return Ok(());
    }
    if origin == Origin::Replication {
        tracing::warn!(
            producer_id = entry.producer_id,
            epoch,
            current_epoch = entry.producer_epoch,
            "older epoch replicated"
        );
        return Ok(());
    }
    Err(StorageError::InvalidProducerEpoch {
        producer_id: entry.producer_id,
        epoch,
        current_epoch: entry.producer_epoch,
    })
}

/// Kafka's sequence rules (`ProducerAppendInfo.checkSequence`, since KIP-360):
/// - a new epoch of a known producer must start at sequence 0;
/// - within an epoch, the first sequence must follow the last one (wrapping at
///   i32::MAX);
/// - a producer the partition does not know (new, expired, or whose state went with
///   retention or DeleteRecords) may start at any sequence: UNKNOWN_PRODUCER_ID is no
///   longer returned. Unlike Kafka, later batches of that producer in the same append
///   must still follow the first one.
fn check_sequence(
    entry: &ProducerStateEntry,
    committed_epoch: i16,
    has_data_in_append: bool,
    batch: &BatchInfo,
) -> Result<()> {
    let first_seq = batch.base_sequence;
    let out_of_order = |last_sequence| StorageError::OutOfOrderSequence {
        producer_id: entry.producer_id,
        epoch: batch.producer_epoch,
        first_sequence: first_seq,
        last_sequence,
    };
    if batch.producer_epoch != entry.producer_epoch {
        if first_seq != 0 && entry.producer_epoch != NO_PRODUCER_EPOCH {
            return Err(out_of_order(-1));
        }
        return Ok(());
    }
    let last_seq = entry.last_seq();
    let unknown = committed_epoch == NO_PRODUCER_EPOCH && !has_data_in_append;
    if unknown || in_sequence(last_seq, first_seq) {
        Ok(())
    } else {
        Err(out_of_order(last_seq))
    }
}
