//! Adding partitions to a transaction (AddPartitionsToTxn v0-v3 from producers, v4+
//! batched from brokers, AddOffsetsToTxn) and the KIP-890 part 1 verification a
//! partition leader asks for before accepting a transactional produce.

use std::collections::{BTreeMap, BTreeSet};
use strata_protocol::messages::add_offsets_to_txn::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};
use strata_protocol::messages::add_partitions_to_txn::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult, AddPartitionsToTxnTopic, AddPartitionsToTxnTopicResult,
};
use strata_protocol::ErrorCode;

use super::coordinator::{AfterTransition, TransactionCoordinator};
use super::state::{TxnState, TxnTransit};
use super::waiting::{AddPartitionsOp, AddReply, Slot};
use super::{Action, RequestMeta, Response, TopicPartition, CONSUMER_OFFSETS_TOPIC};

/// The error a producer sees when verification (KIP-890 part 1) refuses its transactional
/// produce or TxnOffsetCommit: producers expect INVALID_PRODUCER_EPOCH rather than
/// PRODUCER_FENCED there, and clients that predate TRANSACTION_ABORTABLE (Produce below
/// v11, TxnOffsetCommit below v4) get INVALID_TXN_STATE instead, as Kafka's
/// `AddPartitionsToTxnManager` translates them.
pub fn verification_error_for_client(error: ErrorCode, client_supports_abortable: bool) -> ErrorCode {
    match error {
        ErrorCode::ProducerFenced => ErrorCode::InvalidProducerEpoch,
        ErrorCode::TransactionAbortable if !client_supports_abortable => ErrorCode::InvalidTxnState,
        other => other,
    }
}

/// A transactional produce's verification failure as Kafka's ReplicaManager answers it: a
/// retriable coordinator error becomes NOT_ENOUGH_REPLICAS (which older clients retry without
/// refreshing metadata; this broker serves no transaction version 2, so CONCURRENT_TRANSACTIONS
/// is translated too) naming the underlying error; the rest keep their code.
pub fn produce_verification_refusal(code: ErrorCode) -> (ErrorCode, String) {
    match code {
        ErrorCode::InvalidTxnState => (code, "Partition was not added to the transaction".into()),
        ErrorCode::ConcurrentTransactions
        | ErrorCode::NetworkException
        | ErrorCode::CoordinatorLoadInProgress
        | ErrorCode::CoordinatorNotAvailable
        | ErrorCode::NotCoordinator => (
            ErrorCode::NotEnoughReplicas,
            format!(
                "Unable to verify the partition has been added to the transaction. Underlying error: {}",
                code.name()
            ),
        ),
        _ => (code, format!("{} for this transaction", code.name())),
    }
}

fn all(partitions: &BTreeSet<TopicPartition>, error: ErrorCode) -> Vec<(TopicPartition, ErrorCode)> {
    partitions.iter().map(|tp| (tp.clone(), error)).collect()
}

fn flatten(topics: &[AddPartitionsToTxnTopic]) -> BTreeSet<TopicPartition> {
    topics.iter().flat_map(|t| t.partitions.iter().map(|&p| TopicPartition::new(t.name.clone(), p))).collect()
}

fn topic_results(
    errors: &[(TopicPartition, ErrorCode)],
    api_version: i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut by_topic: BTreeMap<&str, Vec<AddPartitionsToTxnPartitionResult>> = BTreeMap::new();
    for (tp, error) in errors {
        // Clients before v2 do not know PRODUCER_FENCED.
        let error = if api_version < 2 && *error == ErrorCode::ProducerFenced {
            ErrorCode::InvalidProducerEpoch
        } else {
            *error
        };
        by_topic.entry(tp.topic.as_str()).or_default().push(AddPartitionsToTxnPartitionResult {
            partition_index: tp.partition,
            partition_error_code: error.code(),
        });
    }
    by_topic
        .into_iter()
        .map(|(name, results_by_partition)| AddPartitionsToTxnTopicResult {
            name: name.to_owned(),
            results_by_partition,
        })
        .collect()
}

impl TransactionCoordinator {
    /// AddPartitionsToTxn: v0-v3 (one transaction, from a producer) and v4+ (a batch,
    /// from brokers, each transaction possibly `verify_only`). `partition_exists` is the
    /// shell's metadata: if any partition of a transaction does not exist the whole
    /// transaction fails (UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED).
    /// Additions are answered once written.
    pub fn add_partitions_to_txn(
        &mut self,
        meta: &RequestMeta,
        request: &AddPartitionsToTxnRequest,
        partition_exists: &dyn Fn(&str, i32) -> bool,
        now_ms: i64,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        let transactions: Vec<(String, i64, i16, bool, BTreeSet<TopicPartition>)> = if meta.api_version < 4 {
            vec![(
                request.v3_and_below_transactional_id.clone(),
                request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch,
                false,
                flatten(&request.v3_and_below_topics),
            )]
        } else {
            request
                .transactions
                .iter()
                .map(|t| {
                    (
                        t.transactional_id.clone(),
                        t.producer_id,
                        t.producer_epoch,
                        t.verify_only,
                        flatten(&t.topics),
                    )
                })
                .collect()
        };
        let op_id = self.next_seq();
        let mut op = AddPartitionsOp {
            token: meta.token,
            api_version: meta.api_version,
            slots: Vec::with_capacity(transactions.len()),
            remaining: 0,
        };
        for (index, (id, producer_id, epoch, verify_only, partitions)) in transactions.into_iter().enumerate()
        {
            let missing: Vec<&TopicPartition> =
                partitions.iter().filter(|tp| !partition_exists(&tp.topic, tp.partition)).collect();
            let errors = if id.is_empty() {
                Some(all(&partitions, ErrorCode::InvalidRequest))
            } else if !missing.is_empty() {
                let error_of = |tp: &TopicPartition| {
                    if missing.contains(&tp) {
                        ErrorCode::UnknownTopicOrPartition
                    } else {
                        ErrorCode::OperationNotAttempted
                    }
                };
                Some(partitions.iter().map(|tp| (tp.clone(), error_of(tp))).collect())
            } else if verify_only {
                let list: Vec<TopicPartition> = partitions.iter().cloned().collect();
                Some(self.verify_partitions(&id, producer_id, epoch, &list))
            } else {
                match self.prepare_add(&id, producer_id, epoch, &partitions, now_ms) {
                    Err(error) => Some(all(&partitions, error)),
                    Ok(transit) => {
                        let reply = AddReply::Partitions { op: op_id, index };
                        self.append_transition(&id, transit, AfterTransition::AddPartitions(reply), &mut out);
                        op.remaining += 1;
                        None
                    }
                }
            };
            op.slots.push(Slot { transactional_id: id, partitions, errors });
        }
        if op.remaining == 0 {
            respond_add_partitions(&mut out, op);
        } else {
            self.add_ops.insert(op_id, op);
        }
        out
    }

    /// AddOffsetsToTxn: adds the group's `__consumer_offsets` partition to the
    /// transaction, so TxnOffsetCommit may follow; answered once written.
    pub fn add_offsets_to_txn(
        &mut self,
        meta: &RequestMeta,
        request: &AddOffsetsToTxnRequest,
        now_ms: i64,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        let id = request.transactional_id.as_str();
        let partition = crate::coordinator::group::partition_for_group(
            &request.group_id,
            self.config.offsets_topic_num_partitions,
        );
        let partitions = BTreeSet::from([TopicPartition::new(CONSUMER_OFFSETS_TOPIC, partition)]);
        let prepared = if id.is_empty() {
            Err(ErrorCode::InvalidRequest)
        } else {
            self.prepare_add(id, request.producer_id, request.producer_epoch, &partitions, now_ms)
        };
        let reply = AddReply::Offsets { token: meta.token, api_version: meta.api_version };
        match prepared {
            Ok(transit) => {
                self.append_transition(id, transit, AfterTransition::AddPartitions(reply), &mut out)
            }
            Err(error) => self.finish_add(reply, error, &mut out),
        }
        out
    }

    /// KIP-890 part 1: may `producer_id`/`producer_epoch` write transactionally to these
    /// partitions? A leader asks before appending a transactional batch (or the
    /// coordinator answers a `verify_only` AddPartitionsToTxn): each partition gets NONE
    /// if it is in the producer's ongoing transaction, TRANSACTION_ABORTABLE if not; the
    /// whole request gets INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED or
    /// CONCURRENT_TRANSACTIONS (while the transaction ends) as Kafka answers. Translate
    /// for the producer with [`verification_error_for_client`].
    pub fn verify_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TopicPartition],
    ) -> Vec<(TopicPartition, ErrorCode)> {
        let whole = |error: ErrorCode| partitions.iter().map(|tp| (tp.clone(), error)).collect();
        if transactional_id.is_empty() {
            return whole(ErrorCode::InvalidRequest);
        }
        if let Err(error) = self.active_term(transactional_id) {
            return whole(error);
        }
        let Some(txn) = self.txns.get(transactional_id) else {
            return whole(ErrorCode::InvalidProducerIdMapping);
        };
        if txn.producer_id != producer_id {
            return whole(ErrorCode::InvalidProducerIdMapping);
        }
        if txn.producer_epoch != producer_epoch {
            return whole(ErrorCode::ProducerFenced);
        }
        if matches!(txn.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
            return whole(ErrorCode::ConcurrentTransactions);
        }
        partitions
            .iter()
            .map(|tp| {
                let error = if txn.partitions.contains(tp) {
                    ErrorCode::None
                } else {
                    ErrorCode::TransactionAbortable
                };
                (tp.clone(), error)
            })
            .collect()
    }

    /// Kafka's `handleAddPartitionsToTransaction` up to the write: the transition to
    /// write, or the answer (NONE when the partitions are already in the transaction).
    fn prepare_add(
        &mut self,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &BTreeSet<TopicPartition>,
        now_ms: i64,
    ) -> Result<TxnTransit, ErrorCode> {
        self.active_term(id)?;
        let txn = self.txns.get_mut(id).ok_or(ErrorCode::InvalidProducerIdMapping)?;
        if txn.producer_id != producer_id {
            return Err(ErrorCode::InvalidProducerIdMapping);
        }
        if txn.producer_epoch != producer_epoch {
            return Err(ErrorCode::ProducerFenced);
        }
        if txn.pending.is_some() || matches!(txn.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
            return Err(ErrorCode::ConcurrentTransactions);
        }
        if txn.state == TxnState::Ongoing && partitions.is_subset(&txn.partitions) {
            return Err(ErrorCode::None);
        }
        Ok(txn.prepare_add_partitions(partitions, now_ms))
    }

    /// Answers whoever waited for partitions to be added (`error` NONE on success).
    pub(super) fn finish_add(&mut self, reply: AddReply, error: ErrorCode, out: &mut Vec<Action>) {
        match reply {
            AddReply::Offsets { token, api_version } => {
                let error = if api_version < 2 && error == ErrorCode::ProducerFenced {
                    ErrorCode::InvalidProducerEpoch
                } else {
                    error
                };
                let response = AddOffsetsToTxnResponse { throttle_time_ms: 0, error_code: error.code() };
                out.push(Action::Respond { token, response: Response::AddOffsetsToTxn(response) });
            }
            AddReply::Partitions { op: op_id, index } => {
                let Some(op) = self.add_ops.get_mut(&op_id) else { return };
                let Some(slot) = op.slots.get_mut(index) else { return };
                if slot.errors.is_none() {
                    slot.errors = Some(all(&slot.partitions, error));
                    op.remaining -= 1;
                }
                if op.remaining == 0 {
                    if let Some(op) = self.add_ops.remove(&op_id) {
                        respond_add_partitions(out, op);
                    }
                }
            }
        }
    }
}

fn respond_add_partitions(out: &mut Vec<Action>, op: AddPartitionsOp) {
    let version = op.api_version;
    let mut response = AddPartitionsToTxnResponse::default();
    for slot in op.slots {
        let topic_results = topic_results(&slot.errors.unwrap_or_default(), version);
        if version < 4 {
            response.results_by_topic_v3_and_below = topic_results;
        } else {
            response
                .results_by_transaction
                .push(AddPartitionsToTxnResult { transactional_id: slot.transactional_id, topic_results });
        }
    }
    out.push(Action::Respond { token: op.token, response: Response::AddPartitionsToTxn(response) });
}
