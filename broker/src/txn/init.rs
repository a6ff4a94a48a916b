//! InitProducerId: producer ids and epochs for idempotent and transactional producers,
//! fencing of zombies by epoch bumps, KIP-360 epoch bumps requested by the producer
//! itself, and producer id rotation when the epochs are exhausted.

use strata_protocol::messages::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use strata_protocol::ErrorCode;

use super::coordinator::{AfterTransition, TransactionCoordinator};
use super::end_txn::EndReply;
use super::state::{
    is_epoch_exhausted, TxnMetadata, TxnState, TxnTransit, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
};
use super::{Action, RequestMeta, RequestToken, Response};

/// What InitProducerId does to an existing id.
enum InitStep {
    /// Write the new producer id / epoch, then answer with it.
    Write(TxnTransit),
    /// A transaction is ongoing: fence its producer and abort it; the client is told
    /// CONCURRENT_TRANSACTIONS and retries.
    FenceAndAbort,
}

/// Answers InitProducerId. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v4, which
/// older clients do not understand otherwise.
pub(super) fn respond_init(
    out: &mut Vec<Action>,
    token: RequestToken,
    api_version: i16,
    answer: Result<(i64, i16), ErrorCode>,
) {
    let response = match answer {
        Ok((producer_id, producer_epoch)) => InitProducerIdResponse {
            throttle_time_ms: 0,
            error_code: ErrorCode::None.code(),
            producer_id,
            producer_epoch,
        },
        Err(error) => {
            let error = if api_version < 4 && error == ErrorCode::ProducerFenced {
                ErrorCode::InvalidProducerEpoch
            } else {
                error
            };
            InitProducerIdResponse {
                throttle_time_ms: 0,
                error_code: error.code(),
                producer_id: NO_PRODUCER_ID,
                producer_epoch: NO_PRODUCER_EPOCH,
            }
        }
    };
    out.push(Action::Respond { token, response: Response::InitProducerId(response) });
}

impl TransactionCoordinator {
    /// InitProducerId (every version). Without a transactional id (idempotent producer)
    /// a fresh producer id with epoch 0 is answered at once. With one, the id's epoch is
    /// bumped (or its producer id rotated) and answered once written; if a transaction is
    /// ongoing it is aborted first and the client gets CONCURRENT_TRANSACTIONS to retry.
    /// v3+ requests carrying a producer id and epoch (KIP-360) are fenced unless they
    /// match the current producer (or repeat a bump whose answer was lost).
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
            respond_init(&mut out, token, version, answer);
            return out;
        };
        let expected = match (request.producer_id, request.producer_epoch) {
            (NO_PRODUCER_ID, NO_PRODUCER_EPOCH) => None,
            (NO_PRODUCER_ID, _) | (_, NO_PRODUCER_EPOCH) => {
                respond_init(&mut out, token, version, Err(ErrorCode::InvalidRequest));
                return out;
            }
            (producer_id, epoch) => Some((producer_id, epoch)),
        };
        let timeout_ms = request.transaction_timeout_ms;
        let check = if transactional_id.is_empty() {
            Err(ErrorCode::InvalidRequest)
        } else if timeout_ms <= 0 || timeout_ms > self.config.transaction_max_timeout_ms {
            Err(ErrorCode::InvalidTransactionTimeout)
        } else {
            self.active_term(transactional_id).map(|_| ())
        };
        let step = check
            .and_then(|()| self.get_or_create(transactional_id, timeout_ms, now_ms))
            .and_then(|()| self.prepare_init(transactional_id, timeout_ms, expected, now_ms));
        match step {
            Err(error) => respond_init(&mut out, token, version, Err(error)),
            Ok(InitStep::Write(transit)) => {
                let then = AfterTransition::InitProducerId { token, api_version: version };
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
            TxnState::Ongoing => Ok(InitStep::FenceAndAbort),
            TxnState::Dead | TxnState::PrepareEpochFence => {
                tracing::error!(transactional_id, state = ?txn.state, "transactional id in a state never stored");
                Err(ErrorCode::UnknownServerError)
            }
        }
    }
}
