//! The state of one transactional id and its transitions, after Kafka's
//! `TransactionMetadata`: a change is first *prepared* (the target is computed and the id
//! is marked as having a transition pending, which blocks every other change), then
//! written to `__transaction_state`, and only applied once the write succeeded.

use std::collections::BTreeSet;
use strata_protocol::ErrorCode;

use super::TopicPartition;

/// No producer id (Kafka's `RecordBatch.NO_PRODUCER_ID`).
pub(super) const NO_PRODUCER_ID: i64 = -1;
/// No producer epoch (Kafka's `RecordBatch.NO_PRODUCER_EPOCH`).
pub(super) const NO_PRODUCER_EPOCH: i16 = -1;

/// State of a transactional id, with Kafka's names and on-disk ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnState {
    /// No transaction: after InitProducerId or a completed transaction's cleanup.
    Empty,
    /// Partitions have been added; records may be in flight.
    Ongoing,
    /// EndTxn(commit) is written; COMMIT markers are being written.
    PrepareCommit,
    /// EndTxn(abort), a fence or a timeout is written; ABORT markers are being written.
    PrepareAbort,
    /// Every COMMIT marker is written.
    CompleteCommit,
    /// Every ABORT marker is written.
    CompleteAbort,
    /// The id is being expired (only ever a pending state here).
    Dead,
    /// The producer is being fenced before its transaction is aborted (only ever a
    /// pending state here, as in Kafka).
    PrepareEpochFence,
}

impl TxnState {
    /// True while one transaction is open or being completed: the states that carry a kept
    /// (KIP-939) transaction's written-under epoch; a new transaction starts from
    /// Empty/Complete* without one.
    pub fn holds_kept_epoch(self) -> bool {
        matches!(self, TxnState::Ongoing | TxnState::PrepareCommit | TxnState::PrepareAbort)
    }

    /// Every state, in id order.
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    /// The `TransactionStatus` byte of the log record.
    pub fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    /// The state with that record id.
    pub fn from_id(id: i8) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.id() == id)
    }

    /// The name DescribeTransactions and ListTransactions show (and filter on).
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// The state with that name.
    pub fn from_name(name: &str) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether an id in this state may be expired after `transactional.id.expiration.ms`.
    pub fn is_expiration_allowed(self) -> bool {
        matches!(self, TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort)
    }

    /// Kafka's `validPreviousStates`: whether `self` may follow `from`.
    fn may_follow(self, from: TxnState) -> bool {
        use TxnState::*;
        match self {
            Empty => matches!(from, Empty | CompleteCommit | CompleteAbort),
            Ongoing => matches!(from, Ongoing | Empty | CompleteCommit | CompleteAbort),
            PrepareCommit => from == Ongoing,
            PrepareAbort => matches!(from, Ongoing | PrepareEpochFence),
            CompleteCommit => from == PrepareCommit,
            CompleteAbort => from == PrepareAbort,
            Dead => matches!(from, Empty | CompleteAbort | CompleteCommit),
            PrepareEpochFence => from == Ongoing,
        }
    }
}

/// Kafka's `isEpochExhausted`: epochs stop at `i16::MAX - 1` so that the coordinator can
/// always fence the last producer with one more bump.
pub(super) fn is_epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// A read-only view of a transactional id, for the tests' checks.
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnSummary {
    /// Current producer id.
    pub producer_id: i64,
    /// Producer id before the last rotation (or -1).
    pub previous_producer_id: i64,
    /// Current producer epoch (-1 before the first InitProducerId is written).
    pub producer_epoch: i16,
    /// Epoch before the last KIP-360 bump (-1 if none); kept in memory only.
    pub last_producer_epoch: i16,
    /// `transaction.timeout.ms` of the producer.
    pub txn_timeout_ms: i32,
    /// Current state.
    pub state: TxnState,
    /// State being written, if a transition is pending.
    pub pending_state: Option<TxnState>,
    /// Partitions in the transaction (during Prepare*, those still without a marker).
    pub partitions: Vec<TopicPartition>,
    /// When the first partition was added (-1 when no transaction ran yet).
    pub txn_start_timestamp_ms: i64,
    /// When the id last changed.
    pub txn_last_update_timestamp_ms: i64,
}

/// Everything the coordinator knows about one transactional id.
#[derive(Debug, Clone)]
pub(super) struct TxnMetadata {
    pub transactional_id: String,
    /// `__transaction_state` partition of the id.
    pub partition: i32,
    pub producer_id: i64,
    pub previous_producer_id: i64,
    pub producer_epoch: i16,
    pub last_producer_epoch: i16,
    pub txn_timeout_ms: i32,
    pub state: TxnState,
    pub pending: Option<TxnState>,
    pub partitions: BTreeSet<TopicPartition>,
    pub txn_start_timestamp_ms: i64,
    pub txn_last_update_timestamp_ms: i64,
    /// The epoch an ongoing transaction was written under, once a KIP-939 keep has moved
    /// the producer past it (-1 otherwise): the identity every later keep names, so a
    /// twice-restarted producer still recognises what its checkpoint stored.
    pub kept_txn_epoch: i16,
    /// An epoch fence was prepared (and the epoch bumped in memory) but its write failed:
    /// the next fence reuses the epoch instead of bumping again (never returned to a
    /// client, so reusing it is safe).
    pub has_failed_epoch_fence: bool,
}

/// The target of a prepared transition (Kafka's `TxnTransitMetadata`): what is written
/// to the log and, once written, applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TxnTransit {
    pub producer_id: i64,
    pub previous_producer_id: i64,
    pub producer_epoch: i16,
    pub last_producer_epoch: i16,
    pub txn_timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<TopicPartition>,
    pub txn_start_timestamp_ms: i64,
    pub txn_last_update_timestamp_ms: i64,
    /// [`TxnMetadata::kept_txn_epoch`] after the transition.
    pub kept_txn_epoch: i16,
}

impl TxnMetadata {
    /// A transactional id seen for the first time: no epoch yet, no transaction.
    pub fn new(
        transactional_id: &str,
        partition: i32,
        producer_id: i64,
        txn_timeout_ms: i32,
        now_ms: i64,
    ) -> TxnMetadata {
        TxnMetadata {
            transactional_id: transactional_id.to_owned(),
            partition,
            producer_id,
            previous_producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            txn_timeout_ms,
            state: TxnState::Empty,
            pending: None,
            partitions: BTreeSet::new(),
            txn_start_timestamp_ms: -1,
            txn_last_update_timestamp_ms: now_ms,
            kept_txn_epoch: NO_PRODUCER_EPOCH,
            has_failed_epoch_fence: false,
        }
    }

    /// The (producer id, epoch) the ongoing transaction's records carry: what
    /// `prepare_transaction` handed the client and a KIP-939 keep names.
    pub fn ongoing_identity(&self) -> (i64, i16) {
        let epoch = if self.kept_txn_epoch >= 0 { self.kept_txn_epoch } else { self.producer_epoch };
        (self.producer_id, epoch)
    }

    #[cfg(test)]
    pub fn summary(&self) -> TxnSummary {
        TxnSummary {
            producer_id: self.producer_id,
            previous_producer_id: self.previous_producer_id,
            producer_epoch: self.producer_epoch,
            last_producer_epoch: self.last_producer_epoch,
            txn_timeout_ms: self.txn_timeout_ms,
            state: self.state,
            pending_state: self.pending,
            partitions: self.partitions.iter().cloned().collect(),
            txn_start_timestamp_ms: self.txn_start_timestamp_ms,
            txn_last_update_timestamp_ms: self.txn_last_update_timestamp_ms,
        }
    }

    pub fn is_epoch_exhausted(&self) -> bool {
        is_epoch_exhausted(self.producer_epoch)
    }

    /// Marks the transition to `transit.state` as pending and returns it. The previous
    /// producer id of the target is the current one, as in Kafka.
    #[allow(clippy::too_many_arguments)]
    fn prepare(
        &mut self,
        state: TxnState,
        producer_id: i64,
        producer_epoch: i16,
        last_producer_epoch: i16,
        txn_timeout_ms: i32,
        partitions: BTreeSet<TopicPartition>,
        txn_start_timestamp_ms: i64,
        now_ms: i64,
    ) -> TxnTransit {
        debug_assert!(
            self.pending.is_none(),
            "{}: transition while {:?} pending",
            self.transactional_id,
            self.pending
        );
        debug_assert!(
            state.may_follow(self.state),
            "{}: {:?} may not follow {:?}",
            self.transactional_id,
            state,
            self.state
        );
        debug_assert!(producer_epoch >= 0, "{}: negative epoch", self.transactional_id);
        self.pending = Some(state);
        TxnTransit {
            producer_id,
            previous_producer_id: self.producer_id,
            producer_epoch,
            last_producer_epoch,
            txn_timeout_ms,
            state,
            partitions,
            txn_start_timestamp_ms,
            // The last update never moves backwards, even if the clock does.
            txn_last_update_timestamp_ms: now_ms.max(self.txn_last_update_timestamp_ms),
            // Kept while the same transaction goes on; a new one starts from Empty/Complete.
            kept_txn_epoch: if state.holds_kept_epoch() { self.kept_txn_epoch } else { NO_PRODUCER_EPOCH },
        }
    }

    /// Kafka's `prepareIncrementProducerEpoch` (InitProducerId without rotation):
    /// `expected_epoch` is the epoch a KIP-360 request carries. PRODUCER_FENCED when it is
    /// neither the current epoch nor the one before the last bump; the epoch must not be
    /// exhausted unless the request is a retry (Kafka fails such a call as a server error).
    pub fn prepare_increment_epoch(
        &mut self,
        txn_timeout_ms: i32,
        expected_epoch: Option<i16>,
        now_ms: i64,
    ) -> Result<TxnTransit, ErrorCode> {
        let bumped = self.producer_epoch.checked_add(1).ok_or(ErrorCode::UnknownServerError);
        let (epoch, last_epoch) = match expected_epoch {
            None => (bumped?, NO_PRODUCER_EPOCH),
            Some(e) if self.producer_epoch == NO_PRODUCER_EPOCH || e == self.producer_epoch => {
                (bumped?, self.producer_epoch)
            }
            // A retry of a bump whose answer was lost: same epoch again, no new bump. A
            // new producer's InitProducerId resets the last epoch, so a zombie cannot
            // use this path once fenced.
            Some(e) if e == self.last_producer_epoch => (self.producer_epoch, self.last_producer_epoch),
            Some(_) => return Err(ErrorCode::ProducerFenced),
        };
        Ok(self.prepare(
            TxnState::Empty,
            self.producer_id,
            epoch,
            last_epoch,
            txn_timeout_ms,
            BTreeSet::new(),
            -1,
            now_ms,
        ))
    }

    /// Kafka's `prepareProducerIdRotation`: the epochs are exhausted, start over with a new
    /// producer id at epoch 0. A KIP-360 caller's epoch is remembered so its retry works.
    pub fn prepare_rotation(
        &mut self,
        new_producer_id: i64,
        txn_timeout_ms: i32,
        record_last_epoch: bool,
        now_ms: i64,
    ) -> TxnTransit {
        let last_epoch = if record_last_epoch { self.producer_epoch } else { NO_PRODUCER_EPOCH };
        self.prepare(
            TxnState::Empty,
            new_producer_id,
            0,
            last_epoch,
            txn_timeout_ms,
            BTreeSet::new(),
            -1,
            now_ms,
        )
    }

    /// KIP-939 `keep_prepared_txn`: the ongoing transaction stays Ongoing, with its
    /// partitions and start time, under the next epoch, which fences the producer that
    /// wrote it; its markers are later written with the new epoch. Exhausted epochs are
    /// refused (a new producer id could not complete a transaction written under the old).
    pub fn prepare_keep_ongoing(
        &mut self,
        txn_timeout_ms: i32,
        now_ms: i64,
    ) -> Result<TxnTransit, ErrorCode> {
        debug_assert_eq!(self.state, TxnState::Ongoing);
        if self.is_epoch_exhausted() {
            tracing::error!(
                transactional_id = %self.transactional_id,
                "producer epochs exhausted: the prepared transaction cannot be kept"
            );
            return Err(ErrorCode::UnknownServerError);
        }
        let (_, written_under) = self.ongoing_identity();
        let mut transit = self.prepare(
            TxnState::Ongoing,
            self.producer_id,
            self.producer_epoch + 1,
            self.producer_epoch,
            txn_timeout_ms,
            self.partitions.clone(),
            self.txn_start_timestamp_ms,
            now_ms,
        );
        transit.kept_txn_epoch = written_under;
        Ok(transit)
    }

    /// Kafka's `prepareAddPartitions`: the transaction starts (or continues) with these
    /// partitions added.
    pub fn prepare_add_partitions(&mut self, added: &BTreeSet<TopicPartition>, now_ms: i64) -> TxnTransit {
        let start = match self.state {
            TxnState::Empty | TxnState::CompleteAbort | TxnState::CompleteCommit => now_ms,
            _ => self.txn_start_timestamp_ms,
        };
        let partitions = self.partitions.union(added).cloned().collect();
        self.prepare(
            TxnState::Ongoing,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            partitions,
            start,
            now_ms,
        )
    }

    /// Kafka's `prepareAbortOrCommit` (transaction version 0: the epoch is unchanged).
    pub fn prepare_abort_or_commit(&mut self, state: TxnState, now_ms: i64) -> TxnTransit {
        self.prepare(
            state,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            self.partitions.clone(),
            self.txn_start_timestamp_ms,
            now_ms,
        )
    }

    /// Kafka's `prepareComplete`: every marker is written.
    pub fn prepare_complete(&mut self, now_ms: i64) -> TxnTransit {
        let state = if self.state == TxnState::PrepareCommit {
            TxnState::CompleteCommit
        } else {
            TxnState::CompleteAbort
        };
        // The transition is being written, so a failed fence is behind us.
        self.has_failed_epoch_fence = false;
        self.prepare(
            state,
            self.producer_id,
            self.producer_epoch,
            self.producer_epoch,
            self.txn_timeout_ms,
            BTreeSet::new(),
            self.txn_start_timestamp_ms,
            now_ms,
        )
    }

    /// Applies a transition whose record is written (Kafka's `completeTransitionTo`).
    pub fn complete_transition(&mut self, transit: &TxnTransit) {
        debug_assert_eq!(self.pending, Some(transit.state), "{}: unexpected transit", self.transactional_id);
        match transit.state {
            TxnState::Empty => {
                debug_assert!(
                    transit.producer_epoch == self.producer_epoch
                        || transit.producer_epoch == self.producer_epoch.wrapping_add(1)
                        || (transit.producer_epoch == 0 && transit.producer_id != self.producer_id),
                    "{}: invalid epoch bump",
                    self.transactional_id
                );
                self.txn_timeout_ms = transit.txn_timeout_ms;
                self.producer_epoch = transit.producer_epoch;
                self.last_producer_epoch = transit.last_producer_epoch;
                self.producer_id = transit.producer_id;
                self.previous_producer_id = transit.previous_producer_id;
                self.partitions.clear();
                self.txn_start_timestamp_ms = -1;
            }
            TxnState::Ongoing => {
                debug_assert!(self.partitions.is_subset(&transit.partitions));
                debug_assert!(
                    transit.producer_id == self.producer_id
                        && (transit.producer_epoch == self.producer_epoch
                            || transit.producer_epoch == self.producer_epoch + 1),
                    "{}: an ongoing transaction changes its epoch only by one bump (KIP-939)",
                    self.transactional_id
                );
                self.producer_epoch = transit.producer_epoch;
                self.last_producer_epoch = transit.last_producer_epoch;
                self.txn_timeout_ms = transit.txn_timeout_ms;
                self.txn_start_timestamp_ms = transit.txn_start_timestamp_ms;
                self.partitions.clone_from(&transit.partitions);
            }
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                debug_assert_eq!(self.partitions, transit.partitions);
            }
            TxnState::CompleteCommit | TxnState::CompleteAbort => {
                self.txn_start_timestamp_ms = transit.txn_start_timestamp_ms;
                self.partitions.clear();
            }
            TxnState::Dead | TxnState::PrepareEpochFence => {
                debug_assert!(false, "{}: {:?} is never written", self.transactional_id, transit.state);
            }
        }
        self.txn_last_update_timestamp_ms = transit.txn_last_update_timestamp_ms;
        self.kept_txn_epoch = transit.kept_txn_epoch;
        self.pending = None;
        self.state = transit.state;
    }
}
