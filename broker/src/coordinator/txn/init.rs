//! InitProducerId: producer ids and epochs for idempotent and transactional producers,
//! fencing of zombies by epoch bumps, KIP-360 epoch bumps requested by the producer
//! itself, and producer id rotation when the epochs are exhausted.

use strata_protocol::messages::init_producer_id::InitProducerIdRequest;
use strata_protocol::ErrorCode;

use super::coordinator::{AfterTransition, TransactionCoordinator};
use super::state::{
    is_epoch_exhausted, TxnMetadata, TxnState, TxnTransit, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
};
use super::waiting::{respond_init, EndReply, NO_ONGOING};
use super::{Action, RequestMeta};

/// What InitProducerId does to an existing id.
enum InitStep {
    /// Write the new producer id / epoch, then answer with it.
    Write(TxnTransit),
    /// A transaction is ongoing: fence its producer and abort it; the client is told
    /// CONCURRENT_TRANSACTIONS and retries.
    FenceAndAbort,
    /// KIP-939 `keep_prepared_txn`: the ongoing transaction stays open under the bumped
    /// epoch (so the restarted producer can commit or abort it); the answer names the
    /// producer id and epoch the transaction was written with.
    Keep(TxnTransit, (i64, i16)),
}

/// The timeout a two-phase-commit transaction is stored with (as Kafka does): it is never
/// aborted for taking long, since only its external coordinator may decide its outcome.
pub(super) const TWO_PHASE_COMMIT_TIMEOUT_MS: i32 = i32::MAX;

impl TransactionCoordinator {
    /// InitProducerId (every version). Without a transactional id (idempotent producer)
    /// a fresh producer id with epoch 0 is answered at once. With one, the id's epoch is
    /// bumped (or its producer id rotated) and answered once written; if a transaction is
    /// ongoing it is aborted first and the client gets CONCURRENT_TRANSACTIONS to retry.
    /// v3+ requests carrying a producer id and epoch (KIP-360) are fenced unless they
    /// match the current producer (or repeat a bump whose answer was lost).
    ///
    /// v6 (KIP-939): `enable_2pc` (allowed only with `transaction.two.phase.commit.enable`,
    /// otherwise TRANSACTIONAL_ID_AUTHORIZATION_FAILED as Kafka answers) stores the
    /// transaction with no timeout; `keep_prepared_txn` (only with `enable_2pc`) bumps the
    /// epoch without aborting an ongoing transaction and names it in the answer.
    pub fn init_producer_id(
        &mut self,
        meta: &RequestMeta,
        request: &InitProducerIdRequest,
        now_ms: i64,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        let (token, version) = (meta.token, meta.api_version);
        let Some(transactional_id) = request.transactional_id.as_deref() else {
            let answer = self.producer_ids.next_producer_id().map(|id| (id, 0));
            respond_init(&mut out, token, version, answer, NO_ONGOING);
            return out;
        };
        let expected = match (request.producer_id, request.producer_epoch) {
            (NO_PRODUCER_ID, NO_PRODUCER_EPOCH) => None,
            (NO_PRODUCER_ID, _) | (_, NO_PRODUCER_EPOCH) => {
                respond_init(&mut out, token, version, Err(ErrorCode::InvalidRequest), NO_ONGOING);
                return out;
            }
            (producer_id, epoch) => Some((producer_id, epoch)),
        };
        let two_phase = request.enable_2pc;
        let timeout_ms = if two_phase { TWO_PHASE_COMMIT_TIMEOUT_MS } else { request.transaction_timeout_ms };
        let check = if transactional_id.is_empty() || (request.keep_prepared_txn && !two_phase) {
            Err(ErrorCode::InvalidRequest)
        } else if two_phase && !self.config.two_phase_commit_enable {
            Err(ErrorCode::TransactionalIdAuthorizationFailed)
        } else if !two_phase && (timeout_ms <= 0 || timeout_ms > self.config.transaction_max_timeout_ms) {
            Err(ErrorCode::InvalidTransactionTimeout)
        } else {
            self.active_term(transactional_id).map(|_| ())
        };
        let keep = request.keep_prepared_txn;
        let step = check
            .and_then(|()| self.get_or_create(transactional_id, timeout_ms, now_ms))
            .and_then(|()| self.prepare_init(transactional_id, timeout_ms, expected, keep, now_ms));
        match step {
            Err(error) => respond_init(&mut out, token, version, Err(error), NO_ONGOING),
            Ok(InitStep::Write(transit)) => {
                let then =
                    AfterTransition::InitProducerId { token, api_version: version, ongoing: NO_ONGOING };
                self.append_transition(transactional_id, transit, then, &mut out);
            }
            Ok(InitStep::Keep(transit, ongoing)) => {
                tracing::info!(
                    transactional_id,
                    producer_id = ongoing.0,
                    epoch = ongoing.1,
                    "keeping the prepared transaction (KIP-939)"
                );
                let then = AfterTransition::InitProducerId { token, api_version: version, ongoing };
                self.append_transition(transactional_id, transit, then, &mut out);
            }
            Ok(InitStep::FenceAndAbort) => {
                let reply = EndReply::InitProducerId { token, api_version: version };
                self.fence_and_abort(transactional_id, reply, now_ms, &mut out);
            }
        }
        out
    }

    /// A new transactional id gets a producer id at once (epoch -1 until the first bump
    /// is written), as Kafka's `putTransactionStateIfNotExists`.
    fn get_or_create(
        &mut self,
        transactional_id: &str,
        timeout_ms: i32,
        now_ms: i64,
    ) -> Result<(), ErrorCode> {
        if self.txns.contains_key(transactional_id) {
            return Ok(());
        }
        let producer_id = self.producer_ids.next_producer_id()?;
        let partition = self.partition_for(transactional_id);
        let txn = TxnMetadata::new(transactional_id, partition, producer_id, timeout_ms, now_ms);
        self.txns.insert(transactional_id.to_owned(), txn);
        Ok(())
    }

    /// Kafka's `prepareInitProducerIdTransit`.
    fn prepare_init(
        &mut self,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        keep_prepared: bool,
        now_ms: i64,
    ) -> Result<InitStep, ErrorCode> {
        let TransactionCoordinator { txns, producer_ids, .. } = self;
        let txn = txns.get_mut(transactional_id).ok_or(ErrorCode::NotCoordinator)?;
        if txn.pending.is_some() {
            return Err(ErrorCode::ConcurrentTransactions);
        }
        // A KIP-360 caller must be the current producer, a producer whose id was just
        // created, or the previous producer retrying the bump that exhausted its epochs.
        let valid_caller = |(producer_id, epoch): (i64, i16)| {
            txn.producer_epoch == NO_PRODUCER_EPOCH
                || producer_id == txn.producer_id
                || (producer_id == txn.previous_producer_id && is_epoch_exhausted(epoch))
        };
        if expected.is_some_and(|e| !valid_caller(e)) {
            return Err(ErrorCode::ProducerFenced);
        }
        match txn.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => Err(ErrorCode::ConcurrentTransactions),
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                // Rotate unless a KIP-360 caller holds an older epoch (a retry or a zombie).
                let caller_is_current = expected.iter().all(|&(_, e)| e == txn.producer_epoch);
                if txn.is_epoch_exhausted() && caller_is_current {
                    let producer_id = producer_ids.next_producer_id()?;
                    tracing::info!(
                        transactional_id,
                        producer_id,
                        "producer epochs exhausted; new producer id"
                    );
                    Ok(InitStep::Write(txn.prepare_rotation(
                        producer_id,
                        timeout_ms,
                        expected.is_some(),
                        now_ms,
                    )))
                } else {
                    let transit =
                        txn.prepare_increment_epoch(timeout_ms, expected.map(|(_, e)| e), now_ms)?;
                    Ok(InitStep::Write(transit))
                }
            }
            TxnState::Ongoing if keep_prepared => {
                let ongoing = txn.ongoing_identity();
                Ok(InitStep::Keep(txn.prepare_keep_ongoing(timeout_ms, now_ms)?, ongoing))
            }
            TxnState::Ongoing => Ok(InitStep::FenceAndAbort),
            TxnState::Dead | TxnState::PrepareEpochFence => {
                tracing::error!(transactional_id, state = ?txn.state, "transactional id in a state never stored");
                Err(ErrorCode::UnknownServerError)
            }
        }
    }
}
