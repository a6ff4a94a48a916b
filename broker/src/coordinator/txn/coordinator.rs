//! The coordinator object: its state, ownership of `__transaction_state` partitions, and
//! the plumbing shared by the request handlers (appends and their completion, retries,
//! the timers of [`TransactionCoordinator::tick`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use strata_protocol::ErrorCode;

use super::records::{transit_record, TxnRecord};
#[cfg(test)]
use super::state::TxnSummary;
use super::state::{TxnMetadata, TxnTransit};
use super::waiting::{respond_init, AddPartitionsOp, AddReply, EndReply, MarkerSend, MarkerTxn, NO_ONGOING};
use super::{partition_for_transactional_id, Action, AppendId, ProducerIdSource, RequestToken, TxnConfig};

/// Whether this broker currently coordinates a `__transaction_state` partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionState {
    /// Leader, replaying the log: its ids answer COORDINATOR_LOAD_IN_PROGRESS.
    Loading,
    /// Loaded: its ids are served.
    Active,
}

/// This broker's term as coordinator of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ownership {
    pub state: PartitionState,
    /// Leader epoch of the partition, carried on markers.
    pub coordinator_epoch: i32,
    /// Distinguishes terms even if the shell reuses a coordinator epoch: work started
    /// in an earlier term is never applied to a later one.
    pub load_id: u64,
}

/// The transaction coordinator of one broker: every transactional id of every
/// `__transaction_state` partition it leads. See the [module documentation](super) for
/// the contract with the shell.
pub struct TransactionCoordinator {
    pub(super) config: TxnConfig,
    pub(super) producer_ids: Box<dyn ProducerIdSource>,
    pub(super) txns: HashMap<String, TxnMetadata>,
    pub(super) partitions: HashMap<i32, Ownership>,
    /// Partitions the metadata says this broker leads but whose leadership the shell has
    /// not passed on yet: requests for them are told to retry (COORDINATOR_LOAD_IN_PROGRESS),
    /// not sent to look for another coordinator.
    awaiting_load: BTreeSet<i32>,
    pub(super) pending_appends: HashMap<AppendId, PendingAppend>,
    pub(super) add_ops: HashMap<u64, AddPartitionsOp>,
    /// Transactions whose markers are being written (Kafka's
    /// `transactionsWithPendingMarkers`), by transactional id.
    pub(super) marker_txns: HashMap<String, MarkerTxn>,
    pub(super) marker_sends: HashMap<super::MarkerId, MarkerSend>,
    /// Work waiting for its backoff, by (deadline, sequence).
    pub(super) retries: BTreeMap<(i64, u64), Retry>,
    pub(super) next_abort_scan_ms: Option<i64>,
    pub(super) next_expiry_scan_ms: Option<i64>,
    /// Transactions aborted because they outlived their timeout (for metrics).
    pub(super) timed_out_aborts: u64,
    next_seq: u64,
}

impl fmt::Debug for TransactionCoordinator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransactionCoordinator")
            .field("transactional_ids", &self.txns.len())
            .field("partitions", &self.partitions)
            .field("pending_appends", &self.pending_appends.len())
            .field("transactions_with_pending_markers", &self.marker_txns.len())
            .field("next_deadline", &self.next_deadline())
            .finish()
    }
}

/// An append in flight and what to do when it completes.
#[derive(Debug)]
pub(super) struct PendingAppend {
    pub partition: i32,
    pub load_id: u64,
    pub kind: AppendKind,
}

#[derive(Debug)]
pub(super) enum AppendKind {
    /// One id's prepared transition.
    Transition { transactional_id: String, transit: TxnTransit, then: AfterTransition },
    /// Tombstones of expired ids, each with the epoch it had when its expiry was prepared.
    Expire { ids: Vec<(String, i16)> },
}

/// Who waits on a transition.
#[derive(Debug)]
pub(super) enum AfterTransition {
    /// InitProducerId: answer with the new producer id and epoch.
    InitProducerId { token: RequestToken, api_version: i16, ongoing: (i64, i16) },
    /// AddPartitionsToTxn / AddOffsetsToTxn.
    AddPartitions(AddReply),
    /// A Prepare* record: answer, then write the markers.
    Prepare { reply: EndReply, epoch_fence: bool },
    /// A Complete* record: nobody waits.
    Complete,
}

/// Work deferred by a backoff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Retry {
    /// Re-send markers to the partitions that failed retriably.
    Markers { transactional_id: String, load_id: u64 },
    /// Re-write a COMPLETE record whose write failed.
    Complete { transactional_id: String, load_id: u64 },
}

/// Kafka's translation of a failed `__transaction_state` write into the error a client
/// sees (`appendTransactionToLog`). The input is already a Kafka code; only the codes of
/// the write path are translated.
pub(super) fn append_error(e: ErrorCode) -> ErrorCode {
    use ErrorCode::*;
    match e {
        UnknownTopicOrPartition | NotEnoughReplicas | NotEnoughReplicasAfterAppend | RequestTimedOut => {
            CoordinatorNotAvailable
        }
        NotLeaderOrFollower | KafkaStorageError => NotCoordinator,
        MessageTooLarge | RecordListTooLarge => UnknownServerError,
        other => other,
    }
}

impl TransactionCoordinator {
    /// A coordinator that owns no partition yet; new producer ids come from
    /// `producer_ids`.
    pub fn new(config: TxnConfig, producer_ids: Box<dyn ProducerIdSource>) -> TransactionCoordinator {
        TransactionCoordinator {
            config,
            producer_ids,
            txns: HashMap::new(),
            partitions: HashMap::new(),
            awaiting_load: BTreeSet::new(),
            pending_appends: HashMap::new(),
            add_ops: HashMap::new(),
            marker_txns: HashMap::new(),
            marker_sends: HashMap::new(),
            retries: BTreeMap::new(),
            next_abort_scan_ms: None,
            next_expiry_scan_ms: None,
            next_seq: 0,
            timed_out_aborts: 0,
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &TxnConfig {
        &self.config
    }

    /// The partition count of `__consumer_offsets` as it is now: AddOffsetsToTxn adds the
    /// partition that hashes the group over it, the one the group coordinator uses.
    pub fn set_offsets_topic_num_partitions(&mut self, partitions: i32) {
        if partitions > 0 {
            self.config.offsets_topic_num_partitions = partitions;
        }
    }

    /// The `__transaction_state` partition that coordinates `transactional_id`.
    pub fn partition_for(&self, transactional_id: &str) -> i32 {
        partition_for_transactional_id(transactional_id, self.config.transaction_state_log_num_partitions)
    }

    /// NOT_COORDINATOR if this broker does not own the id's partition,
    /// COORDINATOR_LOAD_IN_PROGRESS while it loads, `None` when the id is served.
    pub fn coordinator_error(&self, transactional_id: &str) -> Option<ErrorCode> {
        let partition = self.partition_for(transactional_id);
        match self.partitions.get(&partition) {
            None if self.awaiting_load.contains(&partition) => Some(ErrorCode::CoordinatorLoadInProgress),
            None => Some(ErrorCode::NotCoordinator),
            Some(o) if o.state == PartitionState::Loading => Some(ErrorCode::CoordinatorLoadInProgress),
            Some(_) => None,
        }
    }

    /// Records which partitions the metadata says this broker leads but are not loaded yet
    /// (the shell learns of a new leadership a little after the metadata shows it, so a
    /// client told by FindCoordinator to come here may arrive first).
    pub fn set_awaiting_load(&mut self, partitions: BTreeSet<i32>) {
        self.awaiting_load = partitions;
    }

    /// The coordinator epoch of an owned partition (for the tests' checks).
    #[cfg(test)]
    pub fn coordinator_epoch(&self, partition: i32) -> Option<i32> {
        self.partitions.get(&partition).map(|o| o.coordinator_epoch)
    }

    /// The state of a transactional id, `None` if unknown here (for the tests' checks).
    #[cfg(test)]
    pub fn transaction(&self, transactional_id: &str) -> Option<TxnSummary> {
        self.txns.get(transactional_id).map(TxnMetadata::summary)
    }

    /// Number of transactional ids held (for the tests' checks).
    #[cfg(test)]
    pub fn transactional_id_count(&self) -> usize {
        self.txns.len()
    }

    /// When [`TransactionCoordinator::tick`] next has work to do.
    pub fn next_deadline(&self) -> Option<i64> {
        let retry = self.retries.keys().next().map(|(deadline, _)| *deadline);
        [retry, self.next_abort_scan_ms, self.next_expiry_scan_ms].into_iter().flatten().min()
    }

    /// Runs everything due at `now_ms`: retries whose backoff ended, the abort of
    /// transactions past their timeout, the expiry of idle transactional ids.
    pub fn tick(&mut self, now_ms: i64) -> Vec<Action> {
        let mut out = Vec::new();
        let due: Vec<(i64, u64)> = self.retries.range(..=(now_ms, u64::MAX)).map(|(k, _)| *k).collect();
        for key in due {
            if let Some(retry) = self.retries.remove(&key) {
                self.run_retry(retry, now_ms, &mut out);
            }
        }
        let owns_any = !self.partitions.is_empty();
        if self.next_abort_scan_ms.is_some_and(|t| t <= now_ms) {
            self.abort_timed_out_transactions(now_ms, &mut out);
            let interval = self.config.abort_timed_out_transaction_cleanup_interval_ms.max(1);
            self.next_abort_scan_ms = owns_any.then(|| now_ms.saturating_add(interval));
        }
        if self.next_expiry_scan_ms.is_some_and(|t| t <= now_ms) {
            self.expire_transactional_ids(now_ms, &mut out);
            let interval = self.config.remove_expired_transaction_cleanup_interval_ms.max(1);
            self.next_expiry_scan_ms = owns_any.then(|| now_ms.saturating_add(interval));
        }
        out
    }

    /// Reports the outcome of an [`Action::Append`]: `Ok` once the records are durably
    /// in the log (`acks=all`), or the error the write failed with.
    pub fn append_complete(
        &mut self,
        id: AppendId,
        result: Result<(), ErrorCode>,
        now_ms: i64,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        let Some(pending) = self.pending_appends.remove(&id) else {
            tracing::warn!(append_id = id.0, "completion of an unknown transaction log append");
            return out;
        };
        if let Err(error) = result {
            tracing::warn!(
                append_id = id.0,
                partition = pending.partition,
                ?error,
                "transaction log append failed"
            );
        }
        let owned = self.owns(pending.partition, pending.load_id);
        match pending.kind {
            AppendKind::Expire { ids } => self.on_expire_written(&ids, owned, result),
            AppendKind::Transition { transactional_id, transit, then } => {
                let written = match (owned, self.txns.get_mut(&transactional_id)) {
                    (true, Some(txn)) => match result {
                        Ok(()) => {
                            txn.complete_transition(&transit);
                            Ok(())
                        }
                        Err(e) => {
                            txn.pending = None;
                            if matches!(then, AfterTransition::Prepare { epoch_fence: true, .. }) {
                                txn.has_failed_epoch_fence = true;
                            }
                            Err(append_error(e))
                        }
                    },
                    // The partition moved (or was reloaded) while the write was in flight:
                    // the new term decides, from the log.
                    _ => Err(ErrorCode::NotCoordinator),
                };
                self.after_transition(&transactional_id, then, written, pending.load_id, now_ms, &mut out);
            }
        }
        out
    }

    fn after_transition(
        &mut self,
        transactional_id: &str,
        then: AfterTransition,
        written: Result<(), ErrorCode>,
        load_id: u64,
        now_ms: i64,
        out: &mut Vec<Action>,
    ) {
        match then {
            AfterTransition::InitProducerId { token, api_version, ongoing } => {
                let ids = self.txns.get(transactional_id).map(|t| (t.producer_id, t.producer_epoch));
                let answer = match (written, ids) {
                    (Ok(()), Some((pid, epoch))) => Ok((pid, epoch)),
                    (Ok(()), None) => Err(ErrorCode::NotCoordinator),
                    (Err(e), _) => Err(e),
                };
                let ongoing = if answer.is_ok() { ongoing } else { NO_ONGOING };
                respond_init(out, token, api_version, answer, ongoing);
            }
            AfterTransition::AddPartitions(reply) => {
                self.finish_add(reply, written.err().unwrap_or(ErrorCode::None), out)
            }
            AfterTransition::Prepare { reply, .. } => {
                self.on_prepare_written(transactional_id, reply, written, now_ms, out)
            }
            AfterTransition::Complete => match written {
                Ok(()) => tracing::debug!(transactional_id, "transaction completed"),
                Err(ErrorCode::NotCoordinator) if !self.owns_id(transactional_id, load_id) => {
                    tracing::info!(
                        transactional_id,
                        "no longer coordinator; the next one completes the transaction"
                    )
                }
                Err(error) => {
                    tracing::warn!(
                        transactional_id,
                        ?error,
                        "writing the transaction's completion failed; retrying"
                    );
                    let retry = Retry::Complete { transactional_id: transactional_id.to_owned(), load_id };
                    self.schedule_retry(now_ms, retry);
                }
            },
        }
    }

    fn run_retry(&mut self, retry: Retry, now_ms: i64, out: &mut Vec<Action>) {
        match retry {
            Retry::Markers { transactional_id, load_id } => {
                if self.owns_id(&transactional_id, load_id) {
                    self.send_markers(&transactional_id, out);
                }
            }
            Retry::Complete { transactional_id, load_id } => {
                if self.owns_id(&transactional_id, load_id) {
                    self.maybe_write_completion(&transactional_id, now_ms, out);
                }
            }
        }
    }

    pub(super) fn schedule_retry(&mut self, now_ms: i64, retry: Retry) {
        let deadline = now_ms.saturating_add(self.config.marker_retry_backoff_ms.max(0));
        let seq = self.next_seq();
        self.retries.insert((deadline, seq), retry);
    }

    pub(super) fn next_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// Whether `partition` is still owned in the term `load_id` (loading or active).
    pub(super) fn owns(&self, partition: i32, load_id: u64) -> bool {
        self.partitions.get(&partition).is_some_and(|o| o.load_id == load_id)
    }

    /// Whether the partition of `transactional_id` is owned and active in term `load_id`.
    pub(super) fn owns_id(&self, transactional_id: &str, load_id: u64) -> bool {
        self.partitions
            .get(&self.partition_for(transactional_id))
            .is_some_and(|o| o.load_id == load_id && o.state == PartitionState::Active)
    }

    /// The active term of the id's partition, or the error to answer with.
    pub(super) fn active_term(&self, transactional_id: &str) -> Result<Ownership, ErrorCode> {
        match self.partitions.get(&self.partition_for(transactional_id)) {
            Some(o) if o.state == PartitionState::Active => Ok(*o),
            _ => Err(self.coordinator_error(transactional_id).unwrap_or(ErrorCode::NotCoordinator)),
        }
    }

    /// Writes a prepared transition of `transactional_id` (whose pending state is set).
    pub(super) fn append_transition(
        &mut self,
        transactional_id: &str,
        transit: TxnTransit,
        then: AfterTransition,
        out: &mut Vec<Action>,
    ) {
        let partition = self.partition_for(transactional_id);
        let load_id = self.partitions.get(&partition).map_or(0, |o| o.load_id);
        let record = transit_record(transactional_id, &transit, self.config.transaction_log_value_version);
        let kind = AppendKind::Transition { transactional_id: transactional_id.to_owned(), transit, then };
        self.append(partition, load_id, vec![record], kind, out);
    }

    pub(super) fn append(
        &mut self,
        partition: i32,
        load_id: u64,
        records: Vec<TxnRecord>,
        kind: AppendKind,
        out: &mut Vec<Action>,
    ) {
        let id = AppendId(self.next_seq());
        self.pending_appends.insert(id, PendingAppend { partition, load_id, kind });
        out.push(Action::Append { id, partition, records });
    }
}

/// What a metrics scrape reads of the coordinator.
#[derive(Debug, Clone, Default)]
pub struct TxnCoordinatorSnapshot {
    /// Transactional ids of the partitions served here, per state, in
    /// [`TxnState::ALL`](super::TxnState::ALL) order.
    pub by_state: [u64; 8],
    /// Transactions aborted by their timeout since the broker started.
    pub timed_out_aborts: u64,
}

impl TransactionCoordinator {
    /// Counts the ids of the partitions this coordinator serves by state.
    pub fn metrics_snapshot(&self) -> TxnCoordinatorSnapshot {
        let mut s = TxnCoordinatorSnapshot { timed_out_aborts: self.timed_out_aborts, ..Default::default() };
        for t in self.txns.values() {
            if let Some(i) = super::TxnState::ALL.iter().position(|st| *st == t.state) {
                s.by_state[i] += 1;
            }
        }
        s
    }
}
