//! Ending transactions: EndTxn from the producer, the coordinator's own aborts (fencing
//! on InitProducerId, timeouts), the markers written to every partition of the
//! transaction, and the COMPLETE record once they are all written.

use strata_protocol::messages::end_txn::{EndTxnRequest, EndTxnResponse};
use strata_protocol::ErrorCode;

use super::coordinator::{AfterTransition, Retry, TransactionCoordinator};
use super::state::{TxnState, TxnTransit, NO_PRODUCER_EPOCH, NO_PRODUCER_ID};
use super::waiting::{respond_init, EndReply, MarkerSend, MarkerTxn, NO_ONGOING};
use super::{Action, MarkerId, RequestMeta, RequestToken, Response, TopicPartition, TransactionResult};

/// What a marker outcome means for its partition (Kafka's
/// `TransactionMarkerRequestCompletionHandler`).
enum MarkerOutcome {
    /// The partition needs no (more) marker.
    Done,
    /// Try again after the backoff (leader moved, not enough replicas, timeout, ...).
    Retry,
    /// The producer or the coordinator has been superseded: stop writing markers for
    /// this transaction; the coordinator that superseded this one finishes it.
    Abandon,
}

fn marker_outcome(error: ErrorCode) -> MarkerOutcome {
    use ErrorCode::*;
    match error {
        // Kafka removes partitions that cannot take markers: the producer could not
        // have written transactional data to them either.
        None | UnsupportedForMessageFormat | UnsupportedVersion => MarkerOutcome::Done,
        InvalidProducerEpoch | TransactionCoordinatorFenced => MarkerOutcome::Abandon,
        UnknownTopicOrPartition
        | NotLeaderOrFollower
        | NotEnoughReplicas
        | NotEnoughReplicasAfterAppend
        | RequestTimedOut
        | KafkaStorageError
        | NetworkException
        | CoordinatorNotAvailable => MarkerOutcome::Retry,
        other => {
            // Kafka treats these as fatal; retrying keeps the transaction recoverable.
            tracing::error!(error = ?other, "unexpected error writing a transaction marker; retrying");
            MarkerOutcome::Retry
        }
    }
}

/// Answers EndTxn. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2.
fn respond_end_txn(
    out: &mut Vec<Action>,
    token: RequestToken,
    api_version: i16,
    answer: Result<(i64, i16), ErrorCode>,
) {
    let (error, producer_id, producer_epoch) = match answer {
        Ok((producer_id, epoch)) => (ErrorCode::None, producer_id, epoch),
        Err(ErrorCode::ProducerFenced) if api_version < 2 => {
            (ErrorCode::InvalidProducerEpoch, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        }
        Err(e) => (e, NO_PRODUCER_ID, NO_PRODUCER_EPOCH),
    };
    let response =
        EndTxnResponse { throttle_time_ms: 0, error_code: error.code(), producer_id, producer_epoch };
    out.push(Action::Respond { token, response: Response::EndTxn(response) });
}

fn prepare_state(result: TransactionResult) -> TxnState {
    match result {
        TransactionResult::Commit => TxnState::PrepareCommit,
        TransactionResult::Abort => TxnState::PrepareAbort,
    }
}

impl TransactionCoordinator {
    /// EndTxn (v0-v5, transaction version 0 semantics: no epoch bump). The answer comes
    /// once the PREPARE_COMMIT / PREPARE_ABORT record is written; the markers follow.
    /// A retry after completion with the same result is answered NONE; with the other
    /// result INVALID_TXN_STATE; during Prepare* with the same result
    /// CONCURRENT_TRANSACTIONS.
    pub fn end_txn(&mut self, meta: &RequestMeta, request: &EndTxnRequest, now_ms: i64) -> Vec<Action> {
        let mut out = Vec::new();
        let (token, api_version) = (meta.token, meta.api_version);
        let result = TransactionResult::from_committed(request.committed);
        let id = request.transactional_id.as_str();
        match self.prepare_end_txn(id, request.producer_id, request.producer_epoch, result, now_ms) {
            Ok(Some(transit)) => {
                let then = AfterTransition::Prepare {
                    reply: EndReply::EndTxn { token, api_version },
                    epoch_fence: false,
                };
                self.append_transition(id, transit, then, &mut out);
            }
            Ok(None) => {
                let ids = self
                    .txns
                    .get(id)
                    .map_or((NO_PRODUCER_ID, NO_PRODUCER_EPOCH), |t| (t.producer_id, t.producer_epoch));
                respond_end_txn(&mut out, token, api_version, Ok(ids));
            }
            Err(error) => respond_end_txn(&mut out, token, api_version, Err(error)),
        }
        out
    }

    /// Kafka's `endTransaction` for a client: `Ok(None)` when the transaction already
    /// ended this way.
    fn prepare_end_txn(
        &mut self,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        result: TransactionResult,
        now_ms: i64,
    ) -> Result<Option<TxnTransit>, ErrorCode> {
        if id.is_empty() {
            return Err(ErrorCode::InvalidRequest);
        }
        self.active_term(id)?;
        let txn = self.txns.get_mut(id).ok_or(ErrorCode::InvalidProducerIdMapping)?;
        if txn.producer_id != producer_id {
            return Err(ErrorCode::InvalidProducerIdMapping);
        }
        if txn.producer_epoch != producer_epoch {
            return Err(ErrorCode::ProducerFenced);
        }
        if txn.pending.is_some() {
            return Err(ErrorCode::ConcurrentTransactions);
        }
        let commit = result.is_commit();
        match txn.state {
            TxnState::Ongoing => Ok(Some(txn.prepare_abort_or_commit(prepare_state(result), now_ms))),
            TxnState::CompleteCommit if commit => Ok(None),
            TxnState::CompleteAbort if !commit => Ok(None),
            TxnState::PrepareCommit if commit => Err(ErrorCode::ConcurrentTransactions),
            TxnState::PrepareAbort if !commit => Err(ErrorCode::ConcurrentTransactions),
            TxnState::Empty
            | TxnState::CompleteCommit
            | TxnState::CompleteAbort
            | TxnState::PrepareCommit
            | TxnState::PrepareAbort => {
                tracing::debug!(transactional_id = id, state = ?txn.state, ?result, "EndTxn in a state that does not allow it");
                Err(ErrorCode::InvalidTxnState)
            }
            TxnState::Dead | TxnState::PrepareEpochFence => {
                tracing::error!(transactional_id = id, state = ?txn.state, "transactional id in a state never stored");
                Err(ErrorCode::UnknownServerError)
            }
        }
    }

    /// Kafka's `prepareFenceProducerEpoch` followed by an abort that is not from the
    /// client: the epoch is bumped at once (so the old producer is fenced from here on,
    /// and its markers carry the new epoch), then PREPARE_ABORT is written. If an earlier
    /// fence's write failed, its bumped epoch is reused rather than bumped again. The
    /// transaction must be Ongoing with no transition pending.
    pub(super) fn fence_and_abort(&mut self, id: &str, reply: EndReply, now_ms: i64, out: &mut Vec<Action>) {
        let Some(txn) = self.txns.get_mut(id) else { return };
        debug_assert!(txn.state == TxnState::Ongoing && txn.pending.is_none());
        if !txn.has_failed_epoch_fence {
            match txn.producer_epoch.checked_add(1) {
                Some(epoch) => txn.producer_epoch = epoch,
                None => {
                    tracing::error!(transactional_id = id, "producer epoch at its maximum; aborting unfenced")
                }
            }
        }
        txn.last_producer_epoch = NO_PRODUCER_EPOCH;
        let transit = txn.prepare_abort_or_commit(TxnState::PrepareAbort, now_ms);
        tracing::info!(
            transactional_id = id,
            producer_epoch = txn.producer_epoch,
            "fencing producer and aborting its transaction"
        );
        self.append_transition(id, transit, AfterTransition::Prepare { reply, epoch_fence: true }, out);
    }

    /// The Prepare* record is written (or failed): answer, then write the markers.
    pub(super) fn on_prepare_written(
        &mut self,
        id: &str,
        reply: EndReply,
        written: Result<(), ErrorCode>,
        now_ms: i64,
        out: &mut Vec<Action>,
    ) {
        let ids = self.txns.get(id).map(|t| (t.producer_id, t.producer_epoch));
        match (reply, &written) {
            (EndReply::EndTxn { token, api_version }, Ok(())) => {
                respond_end_txn(out, token, api_version, ids.ok_or(ErrorCode::NotCoordinator))
            }
            (EndReply::EndTxn { token, api_version }, Err(e)) => {
                respond_end_txn(out, token, api_version, Err(*e))
            }
            (EndReply::InitProducerId { token, api_version }, Ok(())) => {
                respond_init(out, token, api_version, Err(ErrorCode::ConcurrentTransactions), NO_ONGOING)
            }
            (EndReply::InitProducerId { token, api_version }, Err(e)) => {
                respond_init(out, token, api_version, Err(*e), NO_ONGOING)
            }
            (EndReply::Timeout, Ok(())) => {
                tracing::info!(transactional_id = id, "aborting timed-out transaction")
            }
            (EndReply::Timeout, Err(error)) => {
                tracing::warn!(transactional_id = id, ?error, "abort of a timed-out transaction failed")
            }
        }
        if written.is_ok() {
            self.start_markers(id, now_ms, out);
        }
    }

    /// Begins writing the markers of a transaction in Prepare* (after its record is
    /// written, or after loading found it there).
    pub(super) fn start_markers(&mut self, id: &str, now_ms: i64, out: &mut Vec<Action>) {
        let Some(txn) = self.txns.get(id) else { return };
        let result = match txn.state {
            TxnState::PrepareCommit => TransactionResult::Commit,
            TxnState::PrepareAbort => TransactionResult::Abort,
            _ => return,
        };
        let Some(term) = self.partitions.get(&txn.partition).copied() else { return };
        let marker_txn = MarkerTxn {
            load_id: term.load_id,
            coordinator_epoch: term.coordinator_epoch,
            producer_id: txn.producer_id,
            producer_epoch: txn.producer_epoch,
            result,
        };
        if let Some(previous) = self.marker_txns.insert(id.to_owned(), marker_txn) {
            tracing::info!(transactional_id = id, ?previous, "replaced pending markers");
        }
        if txn.partitions.is_empty() {
            self.maybe_write_completion(id, now_ms, out);
        } else {
            self.send_markers(id, out);
        }
    }

    /// Emits a [`Action::WriteMarkers`] for every partition still without its marker.
    pub(super) fn send_markers(&mut self, id: &str, out: &mut Vec<Action>) {
        let (Some(txn), Some(m)) = (self.txns.get(id), self.marker_txns.get(id).cloned()) else { return };
        if txn.partitions.is_empty() {
            return;
        }
        let partitions: Vec<TopicPartition> = txn.partitions.iter().cloned().collect();
        let marker_id = MarkerId(self.next_seq());
        let send = MarkerSend {
            transactional_id: id.to_owned(),
            load_id: m.load_id,
            partitions: partitions.clone(),
        };
        self.marker_sends.insert(marker_id, send);
        out.push(Action::WriteMarkers {
            id: marker_id,
            transactional_id: id.to_owned(),
            producer_id: m.producer_id,
            producer_epoch: m.producer_epoch,
            coordinator_epoch: m.coordinator_epoch,
            result: m.result,
            partitions,
        });
    }

    /// Reports the outcome of an [`Action::WriteMarkers`]: the error each partition's
    /// leader answered (NONE once the control batch is in its log). Report NONE also for
    /// a partition whose topic no longer exists (Kafka skips partitions without a leader);
    /// a partition left out of `results` is retried. Once every partition has its marker,
    /// the COMPLETE record is written.
    pub fn markers_complete(
        &mut self,
        id: MarkerId,
        results: &[(TopicPartition, ErrorCode)],
        now_ms: i64,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        let Some(send) = self.marker_sends.remove(&id) else {
            tracing::warn!(marker_id = id.0, "completion of unknown transaction markers");
            return out;
        };
        let txn_id = send.transactional_id.as_str();
        let current = self.marker_txns.get(txn_id).is_some_and(|m| m.load_id == send.load_id);
        if !current || !self.owns_id(txn_id, send.load_id) {
            tracing::info!(
                transactional_id = txn_id,
                "markers completed for a superseded coordinator term; ignored"
            );
            return out;
        }
        let Some(txn) = self.txns.get_mut(txn_id) else { return out };
        let (mut retry, mut abandon) = (false, false);
        for tp in &send.partitions {
            let error = results.iter().find(|(p, _)| p == tp).map_or(ErrorCode::RequestTimedOut, |(_, e)| *e);
            match marker_outcome(error) {
                MarkerOutcome::Done => {
                    txn.partitions.remove(tp);
                }
                MarkerOutcome::Retry => {
                    tracing::info!(transactional_id = txn_id, topic = %tp.topic, partition = tp.partition, ?error, "retrying transaction marker");
                    retry = true;
                }
                MarkerOutcome::Abandon => {
                    tracing::warn!(transactional_id = txn_id, topic = %tp.topic, partition = tp.partition, ?error, "transaction marker rejected; no more markers for this transaction");
                    abandon = true;
                }
            }
        }
        if abandon {
            self.marker_txns.remove(txn_id);
        } else if retry {
            self.schedule_retry(
                now_ms,
                Retry::Markers { transactional_id: txn_id.to_owned(), load_id: send.load_id },
            );
        } else {
            self.maybe_write_completion(txn_id, now_ms, &mut out);
        }
        out
    }

    /// Writes COMPLETE_COMMIT / COMPLETE_ABORT once no partition waits for its marker.
    pub(super) fn maybe_write_completion(&mut self, id: &str, now_ms: i64, out: &mut Vec<Action>) {
        let Some(txn) = self.txns.get_mut(id) else { return };
        let prepared = matches!(txn.state, TxnState::PrepareCommit | TxnState::PrepareAbort);
        if !prepared || txn.pending.is_some() || !txn.partitions.is_empty() {
            return;
        }
        self.marker_txns.remove(id);
        let transit = txn.prepare_complete(now_ms);
        self.append_transition(id, transit, AfterTransition::Complete, out);
    }
}
