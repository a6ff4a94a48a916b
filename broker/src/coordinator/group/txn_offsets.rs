//! Transactional offset commits (KIP-98): TxnOffsetCommit and the COMMIT/ABORT markers
//! that complete them.
//!
//! A TxnOffsetCommit is written as a transactional batch of its producer. Once written,
//! its offsets are *pending* for that producer (Kafka's
//! `pendingTransactionalOffsetCommits`): OffsetFetch does not see them, and a
//! `require_stable` fetch of their partitions answers UNSTABLE_OFFSET_COMMIT. The
//! producer's marker in the group's `__consumer_offsets` partition completes them: a
//! commit makes each the committed offset of its partition unless the committed one has
//! a newer record (a plain OffsetCommit written after it), an abort drops them. Replaying
//! the log does the same with the batches' producer ids and the control batches, so
//! memory and log agree.

use strata_protocol::messages::txn_offset_commit::{
    TxnOffsetCommitRequest, TxnOffsetCommitResponse, TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
};
use strata_protocol::ErrorCode;

use super::classic_group::{Group, OffsetAndMetadata, TopicPartition};
use super::coordinator::{commit_append_error, respond, Completion, GroupCoordinator, TxnCommit};
use super::partition::java_string_length;
use super::{Action, AppendId, RequestMeta, RequestToken, Response, TransactionalProducer};

/// The answer to `req` with `code` for every partition it names.
pub fn txn_commit_response(req: &TxnOffsetCommitRequest, code: ErrorCode) -> TxnOffsetCommitResponse {
    TxnOffsetCommitResponse {
        topics: req
            .topics
            .iter()
            .map(|t| TxnOffsetCommitResponseTopic {
                name: t.name.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| TxnOffsetCommitResponsePartition {
                        partition_index: p.partition_index,
                        error_code: code.code(),
                    })
                    .collect(),
            })
            .collect(),
        ..TxnOffsetCommitResponse::default()
    }
}

/// Removes append `id` from the in-flight commits of `key`; whether it was still listed.
fn unlist(group: &mut Group, key: &TopicPartition, id: AppendId) -> bool {
    let Some(ids) = group.pending_commits.get_mut(key) else {
        return false;
    };
    let present = ids.remove(&id);
    if ids.is_empty() {
        group.pending_commits.remove(key);
    }
    present
}

impl GroupCoordinator {
    /// Handles a TxnOffsetCommit request (v0-4): the valid commits are written as a
    /// transactional batch of the request's producer and the client is answered once
    /// written; they stay pending until [`GroupCoordinator::complete_transaction`].
    ///
    /// As in Kafka: an empty group id is INVALID_GROUP_ID; an unknown group is created
    /// as a simple group when `generation_id` is negative (always before v3), else
    /// ILLEGAL_GENERATION; v3+ requests naming a member or generation are checked against
    /// the group like OffsetCommit (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
    /// ILLEGAL_GENERATION), but the group's state is not (a transaction may commit during
    /// a rebalance); metadata over `offset.metadata.max.bytes` is
    /// OFFSET_METADATA_TOO_LARGE for that partition. Whether the producer's transaction
    /// includes this group (AddOffsetsToTxn) and its epoch is current is checked by the
    /// shell (`handlers/groups.rs`, KIP-890 verification) and the log (producer epoch), not
    /// here.
    pub fn txn_offset_commit(
        &mut self,
        meta: &RequestMeta,
        req: TxnOffsetCommitRequest,
        now_ms: i64,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        let token = meta.token;
        let early = if req.group_id.is_empty() {
            Some(ErrorCode::InvalidGroupId)
        } else {
            self.coordinator_error(&req.group_id)
        };
        if let Some(code) = early {
            respond(&mut out, token, Response::TxnOffsetCommit(txn_commit_response(&req, code)));
            return out;
        }
        if !self.groups.contains_key(&req.group_id) {
            if req.generation_id >= 0 {
                let response = txn_commit_response(&req, ErrorCode::IllegalGeneration);
                respond(&mut out, token, Response::TxnOffsetCommit(response));
                return out;
            }
            self.create_group(&req.group_id, now_ms);
        }
        let group_id = req.group_id.clone();
        self.with_group(&group_id, |c, group| c.txn_commit(group, token, req, now_ms, &mut out));
        out
    }

    fn txn_commit(
        &mut self,
        group: &mut Group,
        token: RequestToken,
        req: TxnOffsetCommitRequest,
        now_ms: i64,
        out: &mut Vec<Action>,
    ) {
        let instance = req.group_instance_id.as_deref();
        if let Err(code) = group.validate_offset_commit(&req.member_id, instance, req.generation_id, true) {
            respond(out, token, Response::TxnOffsetCommit(txn_commit_response(&req, code)));
            return;
        }
        let mut response = txn_commit_response(&req, ErrorCode::None);
        let mut commits = Vec::new();
        for (topic, topic_response) in req.topics.iter().zip(response.topics.iter_mut()) {
            for (p, p_response) in topic.partitions.iter().zip(topic_response.partitions.iter_mut()) {
                let metadata = p.committed_metadata.clone().unwrap_or_default();
                if java_string_length(&metadata) > self.config.offset_metadata_max_bytes {
                    p_response.error_code = ErrorCode::OffsetMetadataTooLarge.code();
                    continue;
                }
                let offset = OffsetAndMetadata {
                    committed_offset: p.committed_offset,
                    leader_epoch: (p.committed_leader_epoch >= 0).then_some(p.committed_leader_epoch),
                    metadata,
                    commit_timestamp_ms: now_ms,
                    // Transactional commits carry no retention of their own.
                    expire_timestamp_ms: None,
                };
                commits.push((topic.name.clone(), p.partition_index, offset));
            }
        }
        if commits.is_empty() {
            respond(out, token, Response::TxnOffsetCommit(response));
            return;
        }
        let (commits, records) = self.number_commits(&group.group_id, commits);
        let keys: Vec<TopicPartition> = commits.iter().map(|(t, p, _)| (t.clone(), *p)).collect();
        let producer =
            TransactionalProducer { producer_id: req.producer_id, producer_epoch: req.producer_epoch };
        let completion = Completion::TxnOffsetCommit(TxnCommit {
            token,
            group_id: group.group_id.clone(),
            incarnation: group.incarnation,
            producer_id: req.producer_id,
            commits,
            response,
        });
        let id = self.append_as(out, group.partition, Some(producer), records, completion);
        for key in keys {
            group.pending_commits.entry(key).or_default().insert(id);
        }
    }

    /// The transactional commits of append `id` are written (or not): unless their
    /// partitions' offsets were deleted meanwhile, they become pending for the producer.
    pub(super) fn on_txn_commit_written(
        &mut self,
        id: AppendId,
        result: Result<(), ErrorCode>,
        commit: TxnCommit,
        out: &mut Vec<Action>,
    ) {
        let TxnCommit { token, group_id, incarnation, producer_id, commits, mut response } = commit;
        if let Some(group) = self.groups.get_mut(&group_id).filter(|g| g.incarnation == incarnation) {
            let mut pending_any = false;
            for (topic, partition, committed) in commits {
                let key = (topic, partition);
                if unlist(group, &key, id) && result.is_ok() {
                    let pending = group.txn_offsets.entry(producer_id).or_default();
                    // Completions come in log order; the guard keeps a late one harmless.
                    if pending.get(&key).is_none_or(|p| p.log_position < committed.log_position) {
                        pending.insert(key, committed);
                    }
                    pending_any = true;
                }
            }
            if pending_any {
                self.open_txns.entry((group.partition, producer_id)).or_default().insert(group_id);
            }
        }
        if let Err(e) = result {
            let code = commit_append_error(e).code();
            for p in response.topics.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
                if p.error_code == 0 {
                    p.error_code = code;
                }
            }
        }
        respond(out, token, Response::TxnOffsetCommit(response));
    }

    /// A COMMIT (`commit`) or ABORT marker of `producer_id` has been appended to
    /// `partition` of `__consumer_offsets` (WriteTxnMarkers): the producer's pending
    /// offsets in that partition's groups become the committed offsets — each unless the
    /// partition's committed offset was written after it (Kafka keeps the most recent
    /// record) — or are dropped. Nothing needs writing; the returned actions are empty
    /// today.
    ///
    /// Call it once the marker is written and after every TxnOffsetCommit append of the
    /// producer that was issued before the marker has completed (the state machine does
    /// not know log offsets, so an append still in flight cannot be placed before or
    /// after the marker). If one is still in flight anyway, an abort drops it (it is
    /// part of the aborted transaction, or will be fenced), and a commit leaves it to
    /// become pending when written and to be completed by the producer's next marker:
    /// never visible unless committed.
    pub fn complete_transaction(
        &mut self,
        partition: i32,
        producer_id: i64,
        commit: bool,
        _now_ms: i64,
    ) -> Vec<Action> {
        self.apply_marker(partition, producer_id, commit);
        let in_flight: Vec<(AppendId, String, u64)> = self
            .pending
            .iter()
            .filter_map(|(id, completion)| match completion {
                Completion::TxnOffsetCommit(c) if c.producer_id == producer_id => {
                    Some((*id, c.group_id.clone(), c.incarnation))
                }
                _ => None,
            })
            .collect();
        for (id, group_id, incarnation) in in_flight {
            let Some(group) = self.groups.get_mut(&group_id) else {
                continue;
            };
            if group.incarnation != incarnation || group.partition != partition {
                continue;
            }
            tracing::warn!(
                group_id = %group_id,
                producer_id,
                commit,
                append_id = id.0,
                "transaction marker while an offset commit of the transaction is being written"
            );
            if !commit {
                let keys: Vec<TopicPartition> = group.pending_commits.keys().cloned().collect();
                for key in keys {
                    unlist(group, &key, id);
                }
            }
        }
        Vec::new()
    }

    /// Kafka's `replayEndTransactionMarker`, for the groups of one partition.
    pub(super) fn apply_marker(&mut self, partition: i32, producer_id: i64, commit: bool) {
        let Some(group_ids) = self.open_txns.remove(&(partition, producer_id)) else {
            return;
        };
        for group_id in group_ids {
            let Some(group) = self.groups.get_mut(&group_id).filter(|g| g.partition == partition) else {
                continue;
            };
            let Some(pending) = group.txn_offsets.remove(&producer_id) else {
                continue;
            };
            if !commit {
                tracing::debug!(group_id = %group_id, producer_id, offsets = pending.len(), "aborted transactional offsets");
                continue;
            }
            for ((topic, p), committed) in pending {
                if !group.put_offset_if_newer(&topic, p, committed) {
                    tracing::info!(
                        group_id = %group_id,
                        producer_id,
                        topic = %topic,
                        partition = p,
                        "transactional offset not applied: a newer commit of the partition exists"
                    );
                }
            }
        }
    }
}
