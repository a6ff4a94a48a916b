//! The transactional calls of [`Producer`] and the coordinator requests behind them
//! (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn), each
//! retried on CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS and a moved
//! coordinator (found again) up to `max.block.ms`. The decisions live in the pure
//! [`super::transaction::TransactionState`].

use super::idempotence::ProducerIdAndEpoch;
use super::sender::finish;
use super::transaction::{abortable, fatal, TransactionState};
use super::{Producer, Shared};
use crate::client::CoordinatorKind;
use crate::connection::Connection;
use crate::error::{Error, Result};
use crate::types::{ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;
use strata_protocol::messages::add_offsets_to_txn::AddOffsetsToTxnRequest;
use strata_protocol::messages::add_partitions_to_txn::{AddPartitionsToTxnRequest, AddPartitionsToTxnTopic};
use strata_protocol::messages::end_txn::EndTxnRequest;
use strata_protocol::messages::init_producer_id::InitProducerIdRequest;
use strata_protocol::messages::txn_offset_commit::{
    TxnOffsetCommitRequest, TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use strata_protocol::{ApiKey, RequestBody, ResponseBody};

/// OPERATION_NOT_ATTEMPTED: a partition skipped because another in the request failed.
const OPERATION_NOT_ATTEMPTED: i16 = 55;

impl Producer {
    /// Gets the producer id and epoch of the `transactional.id` from its coordinator,
    /// fencing any older producer with the same id and finishing (aborting) its open
    /// transaction. Call once before the first transaction.
    pub async fn init_transactions(&self) -> Result<()> {
        let shared = &self.shared;
        let tid = transactional_id(shared)?;
        with_txn(shared, |t| t.may_init())?;
        let result = init_pid(shared, &tid, ProducerIdAndEpoch::NONE, false).await;
        let mut st = shared.lock();
        match result {
            Ok((pid, _)) => {
                st.pid = pid;
                st.acc.reset_sequences();
                if let Some(t) = st.txn.as_mut() {
                    t.initialized();
                }
                Ok(())
            }
            Err(e) => Err(categorize(st.txn.as_mut(), e)),
        }
    }

    /// Opens a transaction: records sent until commit or abort belong to it.
    pub fn begin_transaction(&self) -> Result<()> {
        transactional_id(&self.shared)?;
        with_txn(&self.shared, TransactionState::begin)
    }

    /// Commits consumed `offsets` of `group` as part of the transaction (the
    /// read-process-write loop): AddOffsetsToTxn to the transaction coordinator, then
    /// TxnOffsetCommit to the group coordinator with the consumer's generation, member id
    /// and instance id, so a zombie consumer's offsets are refused (KIP-447).
    pub async fn send_offsets_to_transaction(
        &self,
        offsets: &BTreeMap<TopicPartition, OffsetAndMetadata>,
        group: &ConsumerGroupMetadata,
    ) -> Result<()> {
        let shared = &self.shared;
        let tid = transactional_id(shared)?;
        with_txn(shared, |t| t.may_add_offsets())?;
        let pid = shared.lock().pid;
        let added = coordinator_call(
            shared,
            CoordinatorKind::Transaction,
            &tid,
            |conn| {
                let version = conn.version_at_most(ApiKey::AddOffsetsToTxn, 3)?;
                let request = AddOffsetsToTxnRequest {
                    transactional_id: tid.clone(),
                    producer_id: pid.id,
                    producer_epoch: pid.epoch,
                    group_id: group.group_id.clone(),
                };
                Ok((version, RequestBody::AddOffsetsToTxn(request)))
            },
            |body| match body {
                ResponseBody::AddOffsetsToTxn(r) => Error::from_code(r.error_code, None).map_or(Ok(()), Err),
                _ => Err(Error::protocol("?", "AddOffsetsToTxn answered with another API")),
            },
        )
        .await;
        if let Err(e) = added {
            return Err(categorize(shared.lock().txn.as_mut(), e));
        }
        if let Some(t) = shared.lock().txn.as_mut() {
            t.offsets_added = true;
        }
        let mut topics: Vec<TxnOffsetCommitRequestTopic> = Vec::new();
        for (tp, o) in offsets {
            let p = TxnOffsetCommitRequestPartition {
                partition_index: tp.partition,
                committed_offset: o.offset,
                committed_leader_epoch: o.leader_epoch.unwrap_or(-1),
                committed_metadata: Some(o.metadata.clone()),
            };
            match topics.iter_mut().find(|t| t.name == tp.topic) {
                Some(t) => t.partitions.push(p),
                None => {
                    topics.push(TxnOffsetCommitRequestTopic { name: tp.topic.clone(), partitions: vec![p] })
                }
            }
        }
        let committed = coordinator_call(
            shared,
            CoordinatorKind::Group,
            &group.group_id,
            |conn| {
                let version = conn.version(ApiKey::TxnOffsetCommit)?;
                let request = TxnOffsetCommitRequest {
                    transactional_id: tid.clone(),
                    group_id: group.group_id.clone(),
                    producer_id: pid.id,
                    producer_epoch: pid.epoch,
                    generation_id: group.generation_id,
                    member_id: group.member_id.clone(),
                    group_instance_id: group.group_instance_id.clone(),
                    topics: topics.clone(),
                };
                Ok((version, RequestBody::TxnOffsetCommit(request)))
            },
            |body| match body {
                ResponseBody::TxnOffsetCommit(r) => {
                    let code = r
                        .topics
                        .iter()
                        .flat_map(|t| t.partitions.iter())
                        .map(|p| p.error_code)
                        .find(|c| *c != 0);
                    code.and_then(|c| Error::from_code(c, None)).map_or(Ok(()), Err)
                }
                _ => Err(Error::protocol("?", "TxnOffsetCommit answered with another API")),
            },
        )
        .await;
        committed.map_err(|e| categorize(shared.lock().txn.as_mut(), e))
    }

    /// Flushes the transaction's records, then commits it (EndTxn). A retriable failure
    /// (a timeout) leaves it committing: call again. An abortable one requires
    /// [`Producer::abort_transaction`].
    pub async fn commit_transaction(&self) -> Result<()> {
        let shared = &self.shared;
        let tid = transactional_id(shared)?;
        with_txn(shared, TransactionState::begin_commit)?;
        self.flush().await?;
        let needs_end = {
            let st = shared.lock();
            let t = st.txn.as_ref().ok_or_else(|| Error::state("not transactional"))?;
            match &t.phase {
                super::TxnPhase::Abortable(e) => return Err(abortable(e.clone())),
                super::TxnPhase::Fatal(e) => return Err(e.clone()),
                _ => t.needs_end_txn(),
            }
        };
        let result = if needs_end { end_txn(shared, &tid, true).await } else { Ok(()) };
        with_txn(shared, |t| t.on_end(result))
    }

    /// Aborts the transaction: records not sent yet fail, those in flight are awaited,
    /// then EndTxn(abort). After an error that desynchronised sequences the epoch is
    /// bumped (KIP-360) so the producer can go on.
    pub async fn abort_transaction(&self) -> Result<()> {
        let shared = &self.shared;
        let tid = transactional_id(shared)?;
        {
            let mut guard = shared.lock();
            let st = &mut *guard;
            st.txn.as_mut().ok_or_else(|| Error::state("not transactional"))?.begin_abort()?;
            for b in st.acc.take_unsent() {
                let e = abortable(Error::state("the transaction was aborted before the record was sent"));
                finish(shared, st, b, Err(e));
            }
        }
        shared.progress.notify_waiters();
        shared.wait_until(|st| st.acc.is_empty() && !st.txn.as_ref().is_some_and(|t| t.adding)).await;
        let needs_end = shared.lock().txn.as_ref().is_some_and(TransactionState::needs_end_txn);
        let result = if needs_end { end_txn(shared, &tid, false).await } else { Ok(()) };
        with_txn(shared, |t| t.on_end(result))?;
        let (bump, pid) = {
            let st = shared.lock();
            (st.txn.as_ref().is_some_and(|t| t.bump_epoch), st.pid)
        };
        if bump {
            let result = init_pid(shared, &tid, pid, false).await;
            let mut st = shared.lock();
            match result {
                Ok((pid, _)) => {
                    st.pid = pid;
                    st.acc.reset_sequences();
                    if let Some(t) = st.txn.as_mut() {
                        t.initialized();
                    }
                }
                Err(e) => return Err(categorize(st.txn.as_mut(), e)),
            }
        }
        Ok(())
    }

    /// Where the transaction is (for callers deciding between abort and close).
    pub fn transaction_phase(&self) -> Option<super::TxnPhase> {
        self.shared.lock().txn.as_ref().map(|t| t.phase.clone())
    }
}

pub(super) fn transactional_id(shared: &Shared) -> Result<String> {
    shared.config.transactional_id.clone().ok_or_else(|| Error::state("no transactional.id is set"))
}

pub(super) fn with_txn<T>(shared: &Shared, f: impl FnOnce(&mut TransactionState) -> Result<T>) -> Result<T> {
    let mut st = shared.lock();
    f(st.txn.as_mut().ok_or_else(|| Error::state("no transactional.id is set"))?)
}

/// A failed coordinator call: retriable errors are handed back as they are (the call
/// may be made again); others move the transaction to abortable or fatal.
pub(super) fn categorize(txn: Option<&mut TransactionState>, e: Error) -> Error {
    if e.is_retriable() {
        return e;
    }
    let Some(txn) = txn else { return e };
    txn.fail(e.clone());
    if e.is_fatal() {
        fatal(e)
    } else {
        abortable(e)
    }
}

/// A request to a coordinator, retried up to `max.block.ms` while it answers retriably
/// or has moved.
async fn coordinator_call<T>(
    shared: &Shared,
    kind: CoordinatorKind,
    key: &str,
    request: impl Fn(&Connection) -> Result<(i16, RequestBody)>,
    answer: impl Fn(ResponseBody) -> Result<T>,
) -> Result<T> {
    let deadline = Instant::now() + shared.config.max_block;
    let mut attempt = 0;
    loop {
        let result = async {
            let (_, conn) = shared.client.coordinator(kind, key).await?;
            let (version, body) = request(&conn)?;
            answer(conn.call_at(version, body).await?.body)
        }
        .await;
        match result {
            Ok(t) => return Ok(t),
            Err(e) => {
                let moved = shared.client.on_coordinator_error(kind, key, &e);
                if (moved || e.is_retriable()) && Instant::now() < deadline {
                    tracing::debug!(error = %e, "retrying a coordinator request");
                    tokio::time::sleep(shared.config.client.backoff(attempt.min(3))).await;
                    attempt += 1;
                    continue;
                }
                return Err(e);
            }
        }
    }
}

/// InitProducerId for the transactional id; `current` set bumps that epoch (KIP-360).
/// With `transaction.two.phase.commit.enable` it asks for two-phase commit (v6,
/// KIP-939), and `keep_prepared` keeps an ongoing transaction, whose producer id and
/// epoch come back as the second value.
pub(super) async fn init_pid(
    shared: &Shared,
    tid: &str,
    current: ProducerIdAndEpoch,
    keep_prepared: bool,
) -> Result<(ProducerIdAndEpoch, Option<ProducerIdAndEpoch>)> {
    let timeout_ms = shared.config.transaction_timeout.as_millis().min(i32::MAX as u128) as i32;
    let two_phase = shared.config.two_phase_commit;
    coordinator_call(
        shared,
        CoordinatorKind::Transaction,
        tid,
        |conn| {
            let version = conn.version(ApiKey::InitProducerId)?;
            if two_phase && version < 6 {
                return Err(Error::state(format!(
                    "{} does not support two-phase commit (InitProducerId v6, KIP-939)",
                    conn.addr()
                )));
            }
            let (id, epoch) = if version >= 3 { (current.id, current.epoch) } else { (-1, -1) };
            let request = InitProducerIdRequest {
                transactional_id: Some(tid.to_string()),
                transaction_timeout_ms: timeout_ms,
                producer_id: id,
                producer_epoch: epoch,
                enable_2pc: two_phase,
                keep_prepared_txn: two_phase && keep_prepared,
            };
            Ok((version, RequestBody::InitProducerId(request)))
        },
        |body| match body {
            ResponseBody::InitProducerId(r) => match Error::from_code(r.error_code, None) {
                Some(e) => Err(e),
                None => {
                    let ongoing = (r.ongoing_txn_producer_id >= 0).then_some(ProducerIdAndEpoch {
                        id: r.ongoing_txn_producer_id,
                        epoch: r.ongoing_txn_producer_epoch,
                    });
                    Ok((ProducerIdAndEpoch { id: r.producer_id, epoch: r.producer_epoch }, ongoing))
                }
            },
            _ => Err(Error::protocol("?", "InitProducerId answered with another API")),
        },
    )
    .await
}

pub(super) async fn end_txn(shared: &Shared, tid: &str, commit: bool) -> Result<()> {
    let pid = shared.lock().pid;
    coordinator_call(
        shared,
        CoordinatorKind::Transaction,
        tid,
        |conn| {
            // v5 belongs to transactions v2 (KIP-890), whose epoch handling this client
            // does not speak.
            let version = conn.version_at_most(ApiKey::EndTxn, 4)?;
            let request = EndTxnRequest {
                transactional_id: tid.to_string(),
                producer_id: pid.id,
                producer_epoch: pid.epoch,
                committed: commit,
            };
            Ok((version, RequestBody::EndTxn(request)))
        },
        |body| match body {
            ResponseBody::EndTxn(r) => Error::from_code(r.error_code, None).map_or(Ok(()), Err),
            _ => Err(Error::protocol("?", "EndTxn answered with another API")),
        },
    )
    .await
}

/// AddPartitionsToTxn for `partitions` (the sender starts it when a partition of the
/// transaction has its first batch); the outcome goes to the transaction state.
pub(crate) async fn add_partitions(shared: Arc<Shared>, partitions: Vec<(Arc<str>, i32)>) {
    let result = match shared.config.transactional_id.clone() {
        Some(tid) => {
            let pid = shared.lock().pid;
            let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
            for (t, p) in &partitions {
                match topics.iter_mut().find(|x| *x.name == **t) {
                    Some(x) => x.partitions.push(*p),
                    None => {
                        topics.push(AddPartitionsToTxnTopic { name: t.to_string(), partitions: vec![*p] })
                    }
                }
            }
            coordinator_call(
                &shared,
                CoordinatorKind::Transaction,
                &tid,
                |conn| {
                    // v4+ is the brokers' batched form; producers use v3 and below.
                    let version = conn.version_at_most(ApiKey::AddPartitionsToTxn, 3)?;
                    let request = AddPartitionsToTxnRequest {
                        v3_and_below_transactional_id: tid.clone(),
                        v3_and_below_producer_id: pid.id,
                        v3_and_below_producer_epoch: pid.epoch,
                        v3_and_below_topics: topics.clone(),
                        ..Default::default()
                    };
                    Ok((version, RequestBody::AddPartitionsToTxn(request)))
                },
                |body| match body {
                    ResponseBody::AddPartitionsToTxn(r) => {
                        let codes = r
                            .results_by_topic_v3_and_below
                            .iter()
                            .flat_map(|t| t.results_by_partition.iter());
                        let code = codes
                            .map(|p| p.partition_error_code)
                            .filter(|c| *c != 0)
                            .min_by_key(|c| *c == OPERATION_NOT_ATTEMPTED);
                        code.and_then(|c| Error::from_code(c, None)).map_or(Ok(()), Err)
                    }
                    _ => Err(Error::protocol("?", "AddPartitionsToTxn answered with another API")),
                },
            )
            .await
        }
        None => Err(Error::state("no transactional.id is set")),
    };
    if let Err(e) = &result {
        tracing::warn!(error = %e, "AddPartitionsToTxn failed");
    }
    if let Some(t) = shared.lock().txn.as_mut() {
        t.on_added(&partitions, result);
    }
    shared.wake.notify_one();
    shared.progress.notify_waiters();
}
