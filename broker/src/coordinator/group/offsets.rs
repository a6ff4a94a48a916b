//! OffsetCommit, OffsetFetch, OffsetDelete and offset expiry.
//!
//! A commit becomes visible to OffsetFetch once its record is written (Kafka's
//! `pendingOffsetCommits`); a transactional one once its transaction commits
//! ([`super::txn_offsets`]). Deletions and expiry apply at once and are then written; they
//! drop pending transactional offsets of the partitions they delete too, as replaying
//! their tombstones does in Kafka.

use std::collections::BTreeSet;
use strata_protocol::messages::offset_commit::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use strata_protocol::messages::offset_delete::{
    OffsetDeleteRequest, OffsetDeleteResponse, OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use strata_protocol::messages::offset_fetch::{
    OffsetFetchRequest, OffsetFetchResponse, OffsetFetchResponseGroup, OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions, OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use strata_protocol::ErrorCode;

use super::classic_group::{CommittedOffset, Group, GroupState, OffsetAndMetadata};
use super::coordinator::{commit_append_error, respond, Completion, GroupCoordinator};
use super::partition::java_string_length;
use super::records::{OffsetCommitKey, OffsetCommitValue, Record};
use super::{Action, AppendId, RequestMeta, RequestToken, Response};

/// OffsetCommit v9 answers GROUP_ID_NOT_FOUND for an unknown group (older: ILLEGAL_GENERATION).
const FIRST_COMMIT_VERSION_WITH_GROUP_ID_NOT_FOUND: i16 = 9;
/// OffsetFetch v8 batches groups.
const FIRST_BATCHED_FETCH_VERSION: i16 = 8;
/// OffsetFetch v2 added the top-level error code; before, errors go in each partition.
const FIRST_FETCH_VERSION_WITH_TOP_LEVEL_ERROR: i16 = 2;
/// OffsetFetch v7 added `require_stable` (KIP-447).
const FIRST_FETCH_VERSION_WITH_REQUIRE_STABLE: i16 = 7;

fn commit_error_response(req: &OffsetCommitRequest, code: ErrorCode) -> OffsetCommitResponse {
    OffsetCommitResponse {
        topics: req
            .topics
            .iter()
            .map(|t| OffsetCommitResponseTopic {
                name: t.name.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| OffsetCommitResponsePartition {
                        partition_index: p.partition_index,
                        error_code: code.code(),
                    })
                    .collect(),
            })
            .collect(),
        ..OffsetCommitResponse::default()
    }
}

/// The record of a commit.
pub(super) fn commit_record(group: &str, topic: &str, partition: i32, o: &OffsetAndMetadata) -> Record {
    Record::OffsetCommit {
        key: OffsetCommitKey { group: group.to_owned(), topic: topic.to_owned(), partition },
        value: Some(OffsetCommitValue {
            offset: o.committed_offset,
            leader_epoch: o.leader_epoch.unwrap_or(-1),
            metadata: o.metadata.clone(),
            commit_timestamp: o.commit_timestamp_ms,
            expire_timestamp: o.expire_timestamp_ms.unwrap_or(-1),
        }),
    }
}

/// Whether `offset` of `group` has passed its retention at `now_ms`.
fn is_expired(group: &Group, offset: &OffsetAndMetadata, now_ms: i64, retention_ms: i64) -> bool {
    let Some(base_ms) = group.expiry_base_ms(offset) else {
        return false;
    };
    match offset.expire_timestamp_ms {
        Some(expire_ms) => now_ms >= expire_ms,
        None => now_ms.saturating_sub(base_ms) >= retention_ms,
    }
}

impl GroupCoordinator {
    /// Handles an OffsetCommit request; answered once the commits are written.
    pub fn commit_offsets(
        &mut self,
        meta: &RequestMeta,
        req: OffsetCommitRequest,
        now_ms: i64,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        let token = meta.token;
        // The empty group id is allowed, as in Kafka, for old clients.
        if let Some(code) = self.coordinator_error(&req.group_id) {
            respond(&mut out, token, Response::OffsetCommit(commit_error_response(&req, code)));
            return out;
        }
        let generation = req.generation_id_or_member_epoch;
        if !self.groups.contains_key(&req.group_id) {
            if generation >= 0 {
                let code = if meta.api_version >= FIRST_COMMIT_VERSION_WITH_GROUP_ID_NOT_FOUND {
                    ErrorCode::GroupIdNotFound
                } else {
                    ErrorCode::IllegalGeneration
                };
                respond(&mut out, token, Response::OffsetCommit(commit_error_response(&req, code)));
                return out;
            }
            // A consumer without group management: a "simple" group holds its offsets.
            self.create_group(&req.group_id, now_ms);
        }
        let group_id = req.group_id.clone();
        self.with_group(&group_id, |c, group| c.commit(group, token, req, now_ms, &mut out));
        out
    }

    fn commit(
        &mut self,
        group: &mut Group,
        token: RequestToken,
        req: OffsetCommitRequest,
        now_ms: i64,
        out: &mut Vec<Action>,
    ) {
        let instance = req.group_instance_id.as_deref();
        let generation = req.generation_id_or_member_epoch;
        if let Err(code) = group.validate_offset_commit(&req.member_id, instance, generation, false) {
            respond(out, token, Response::OffsetCommit(commit_error_response(&req, code)));
            return;
        }
        if matches!(group.state, GroupState::Stable | GroupState::PreparingRebalance) {
            // Commits keep a classic member's session alive.
            if let Some(member) = group.members.get(&req.member_id) {
                let deadline = now_ms.saturating_add(i64::from(member.session_timeout_ms));
                self.schedule_heartbeat(&group.group_id, &req.member_id, deadline);
            }
        }
        let expire_timestamp_ms =
            (req.retention_time_ms != -1).then(|| now_ms.saturating_add(req.retention_time_ms));
        let mut response = commit_error_response(&req, ErrorCode::None);
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
                    commit_timestamp_ms: if p.commit_timestamp == -1 { now_ms } else { p.commit_timestamp },
                    expire_timestamp_ms,
                };
                commits.push((topic.name.clone(), p.partition_index, offset));
            }
        }
        if commits.is_empty() {
            respond(out, token, Response::OffsetCommit(response));
            return;
        }
        let (commits, records) = self.number_commits(&group.group_id, commits);
        let keys: Vec<(String, i32)> = commits.iter().map(|(t, p, _)| (t.clone(), *p)).collect();
        let completion = Completion::OffsetCommit {
            token,
            group_id: group.group_id.clone(),
            incarnation: group.incarnation,
            commits,
            response,
        };
        let id = self.append(out, group.partition, records, completion);
        for key in keys {
            group.pending_commits.entry(key).or_default().insert(id);
        }
    }

    /// Gives each commit its log position and builds its record; the caller appends the
    /// records right away (see [`GroupCoordinator::next_log_position`]).
    pub(super) fn number_commits(
        &mut self,
        group_id: &str,
        commits: Vec<(String, i32, OffsetAndMetadata)>,
    ) -> (Vec<(String, i32, CommittedOffset)>, Vec<Record>) {
        let records = commits.iter().map(|(t, p, o)| commit_record(group_id, t, *p, o)).collect();
        let numbered = commits
            .into_iter()
            .map(|(t, p, offset)| (t, p, CommittedOffset { offset, log_position: self.next_log_position() }))
            .collect();
        (numbered, records)
    }

    /// The commits of append `id` are written (or not): make them visible unless the
    /// group or the partition's offset was deleted meanwhile (or a transaction committed
    /// a newer record of the partition), and answer the client.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_commit_written(
        &mut self,
        id: AppendId,
        result: Result<(), ErrorCode>,
        token: RequestToken,
        group_id: &str,
        incarnation: u64,
        commits: Vec<(String, i32, CommittedOffset)>,
        mut response: OffsetCommitResponse,
        out: &mut Vec<Action>,
    ) {
        if let Some(group) = self.groups.get_mut(group_id).filter(|g| g.incarnation == incarnation) {
            for (topic, partition, offset) in commits {
                let key = (topic, partition);
                let still_pending = match group.pending_commits.get_mut(&key) {
                    Some(ids) => {
                        let present = ids.remove(&id);
                        if ids.is_empty() {
                            group.pending_commits.remove(&key);
                        }
                        present
                    }
                    None => false,
                };
                if still_pending && result.is_ok() {
                    group.put_offset_if_newer(&key.0, key.1, offset);
                }
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
        respond(out, token, Response::OffsetCommit(response));
    }

    /// Handles an OffsetFetch request of any version (v8+: each group in turn). With
    /// `require_stable` (v7+, KIP-447), a partition whose offset is being committed (a
    /// transaction not yet completed, or a write in flight) is answered
    /// UNSTABLE_OFFSET_COMMIT, and the client retries.
    pub fn fetch_offsets(&self, api_version: i16, req: &OffsetFetchRequest) -> OffsetFetchResponse {
        let require_stable = api_version >= FIRST_FETCH_VERSION_WITH_REQUIRE_STABLE && req.require_stable;
        if api_version >= FIRST_BATCHED_FETCH_VERSION {
            let groups =
                req.groups
                    .iter()
                    .map(|g| {
                        let topics: Option<Vec<(String, Vec<i32>)>> = g.topics.as_ref().map(|ts| {
                            ts.iter().map(|t| (t.name.clone(), t.partition_indexes.clone())).collect()
                        });
                        self.fetch_group_offsets(&g.group_id, topics.as_deref(), require_stable)
                    })
                    .collect();
            return OffsetFetchResponse { groups, ..OffsetFetchResponse::default() };
        }
        let requested: Option<Vec<(String, Vec<i32>)>> = req
            .topics
            .as_ref()
            .map(|ts| ts.iter().map(|t| (t.name.clone(), t.partition_indexes.clone())).collect());
        let group = self.fetch_group_offsets(&req.group_id, requested.as_deref(), require_stable);
        let mut topics: Vec<OffsetFetchResponseTopic> = group
            .topics
            .into_iter()
            .map(|t| OffsetFetchResponseTopic {
                name: t.name,
                partitions: t
                    .partitions
                    .into_iter()
                    .map(|p| OffsetFetchResponsePartition {
                        partition_index: p.partition_index,
                        committed_offset: p.committed_offset,
                        committed_leader_epoch: p.committed_leader_epoch,
                        metadata: p.metadata,
                        error_code: p.error_code,
                    })
                    .collect(),
            })
            .collect();
        if group.error_code != 0 && api_version < FIRST_FETCH_VERSION_WITH_TOP_LEVEL_ERROR {
            topics = requested
                .unwrap_or_default()
                .into_iter()
                .map(|(name, partitions)| OffsetFetchResponseTopic {
                    name,
                    partitions: partitions
                        .into_iter()
                        .map(|partition_index| OffsetFetchResponsePartition {
                            partition_index,
                            committed_offset: -1,
                            error_code: group.error_code,
                            ..OffsetFetchResponsePartition::default()
                        })
                        .collect(),
                })
                .collect();
        }
        OffsetFetchResponse { topics, error_code: group.error_code, ..OffsetFetchResponse::default() }
    }

    /// The committed offsets of one group: of `topics`, or of every committed partition
    /// when `None`. Partitions without a commit answer offset -1. With `require_stable`,
    /// partitions with an offset commit in progress (pending transactional offsets or a
    /// write in flight) answer UNSTABLE_OFFSET_COMMIT instead.
    pub fn fetch_group_offsets(
        &self,
        group_id: &str,
        topics: Option<&[(String, Vec<i32>)]>,
        require_stable: bool,
    ) -> OffsetFetchResponseGroup {
        let mut response =
            OffsetFetchResponseGroup { group_id: group_id.to_owned(), ..OffsetFetchResponseGroup::default() };
        if let Some(code) = self.coordinator_error(group_id) {
            response.error_code = code.code();
            return response;
        }
        let group = self.groups.get(group_id).filter(|g| !g.is(GroupState::Dead));
        let unstable = |topic: &str, partition: i32| {
            require_stable && group.is_some_and(|g| g.is_offset_unstable(topic, partition))
        };
        let entry = |topic: &str, offset: Option<&CommittedOffset>, partition_index: i32| match offset {
            _ if unstable(topic, partition_index) => OffsetFetchResponsePartitions {
                partition_index,
                committed_offset: -1,
                committed_leader_epoch: -1,
                metadata: Some(String::new()),
                error_code: ErrorCode::UnstableOffsetCommit.code(),
            },
            Some(CommittedOffset { offset: o, .. }) => OffsetFetchResponsePartitions {
                partition_index,
                committed_offset: o.committed_offset,
                committed_leader_epoch: o.leader_epoch.unwrap_or(-1),
                metadata: Some(o.metadata.clone()),
                error_code: 0,
            },
            None => OffsetFetchResponsePartitions {
                partition_index,
                committed_offset: -1,
                committed_leader_epoch: -1,
                metadata: Some(String::new()),
                error_code: 0,
            },
        };
        response.topics = match topics {
            Some(topics) => topics
                .iter()
                .map(|(name, partitions)| {
                    let committed = group.and_then(|g| g.offsets.get(name));
                    OffsetFetchResponseTopics {
                        name: name.clone(),
                        partitions: partitions
                            .iter()
                            .map(|p| entry(name, committed.and_then(|c| c.get(p)), *p))
                            .collect(),
                    }
                })
                .collect(),
            None => group
                .map(|g| {
                    g.offsets
                        .iter()
                        .map(|(name, partitions)| OffsetFetchResponseTopics {
                            name: name.clone(),
                            partitions: partitions.iter().map(|(p, o)| entry(name, Some(o), *p)).collect(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
        };
        response
    }

    /// Handles an OffsetDelete request: the offsets are removed at once and the client
    /// answered once the tombstones are written.
    pub fn delete_offsets(
        &mut self,
        meta: &RequestMeta,
        req: &OffsetDeleteRequest,
        _now_ms: i64,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        let top_error = |code: ErrorCode| OffsetDeleteResponse {
            error_code: code.code(),
            ..OffsetDeleteResponse::default()
        };
        let early = if let Some(code) = self.coordinator_error(&req.group_id) {
            Some(code)
        } else if req.group_id.is_empty() {
            Some(ErrorCode::InvalidGroupId)
        } else {
            match self.groups.get(&req.group_id) {
                None => Some(ErrorCode::GroupIdNotFound),
                Some(g) if g.is(GroupState::Dead) => Some(ErrorCode::GroupIdNotFound),
                Some(g) if !g.is(GroupState::Empty) && !g.uses_consumer_protocol() => {
                    Some(ErrorCode::NonEmptyGroup)
                }
                Some(_) => None,
            }
        };
        if let Some(code) = early {
            respond(&mut out, meta.token, Response::OffsetDelete(top_error(code)));
            return out;
        }
        let token = meta.token;
        self.with_group(&req.group_id, |c, group| {
            let mut records = Vec::new();
            let mut response = OffsetDeleteResponse::default();
            for topic in &req.topics {
                let subscribed = group.is_subscribed_to_topic(&topic.name);
                let mut partitions = Vec::with_capacity(topic.partitions.len());
                for p in &topic.partitions {
                    let mut code = ErrorCode::None;
                    if subscribed {
                        code = ErrorCode::GroupSubscribedToTopic;
                    } else {
                        let key = (topic.name.clone(), p.partition_index);
                        let pending = group.pending_commits.remove(&key).is_some();
                        let txn_pending = group.remove_pending_txn_offsets(&topic.name, p.partition_index);
                        if group.remove_offset(&topic.name, p.partition_index).is_some()
                            || pending
                            || txn_pending
                        {
                            records.push(Record::offset_tombstone(
                                &group.group_id,
                                &topic.name,
                                p.partition_index,
                            ));
                        }
                    }
                    partitions.push(OffsetDeleteResponsePartition {
                        partition_index: p.partition_index,
                        error_code: code.code(),
                    });
                }
                response.topics.push(OffsetDeleteResponseTopic { name: topic.name.clone(), partitions });
            }
            if records.is_empty() {
                respond(&mut out, token, Response::OffsetDelete(response));
            } else {
                let completion = Completion::OffsetDelete { token, response };
                c.append(&mut out, group.partition, records, completion);
            }
        });
        out
    }

    /// Topics were deleted: their committed offsets go too, in every group served here
    /// (Kafka's `onPartitionsDeleted`). Returns one append of tombstones per
    /// `__consumer_offsets` partition involved.
    pub fn delete_offsets_of_topics(&mut self, topics: &[String], _now_ms: i64) -> Vec<Action> {
        let mut out = Vec::new();
        let mut by_partition: std::collections::BTreeMap<i32, Vec<Record>> = Default::default();
        for group in self.groups.values_mut() {
            if self.partitions.get(&group.partition) != Some(&super::PartitionState::Active) {
                continue;
            }
            for topic in topics {
                let partitions: BTreeSet<i32> =
                    group.offsets.get(topic).map(|p| p.keys().copied().collect()).unwrap_or_default();
                let pending: BTreeSet<i32> = group
                    .pending_commits
                    .keys()
                    .cloned()
                    .chain(group.pending_txn_partitions())
                    .filter(|(t, _)| t == topic)
                    .map(|(_, p)| p)
                    .collect();
                for p in partitions.union(&pending) {
                    group.remove_offset(topic, *p);
                    group.pending_commits.remove(&(topic.clone(), *p));
                    group.remove_pending_txn_offsets(topic, *p);
                    let records = by_partition.entry(group.partition).or_default();
                    records.push(Record::offset_tombstone(&group.group_id, topic, *p));
                }
            }
        }
        for (partition, records) in by_partition {
            self.append(&mut out, partition, records, Completion::Background);
        }
        out
    }

    /// Kafka's `cleanupGroupMetadata` for one partition: deletes expired offsets, then
    /// Empty groups left without offsets. An offset with a commit in progress (written
    /// or transactional) does not expire, and a group with an open transaction's
    /// offsets is kept.
    pub(super) fn expire_offsets(&mut self, partition: i32, now_ms: i64, out: &mut Vec<Action>) {
        let retention_ms = self.config.offsets_retention_ms;
        let mut records = Vec::new();
        let mut deleted = BTreeSet::new();
        for group in self.groups.values_mut().filter(|g| g.partition == partition) {
            let mut expired = Vec::new();
            let mut all_expired = true;
            for (topic, partitions) in &group.offsets {
                if group.is_subscribed_to_topic(topic) {
                    all_expired = false;
                    continue;
                }
                for (p, committed) in partitions {
                    let pending = group.is_offset_unstable(topic, *p);
                    if !pending && is_expired(group, &committed.offset, now_ms, retention_ms) {
                        expired.push((topic.clone(), *p));
                    } else {
                        all_expired = false;
                    }
                }
            }
            for (topic, p) in &expired {
                group.remove_offset(topic, *p);
                records.push(Record::offset_tombstone(&group.group_id, topic, *p));
            }
            if all_expired
                && group.is(GroupState::Empty)
                && group.pending_commits.is_empty()
                && group.txn_offsets.is_empty()
            {
                records.push(Record::group_tombstone(&group.group_id));
                deleted.insert(group.group_id.clone());
            }
            if !expired.is_empty() {
                tracing::info!(group_id = %group.group_id, offsets = expired.len(), "expired offsets");
            }
        }
        for group_id in &deleted {
            self.groups.remove(group_id);
        }
        self.cancel_group_timers(&deleted);
        if !records.is_empty() {
            self.append(out, partition, records, Completion::Background);
        }
    }
}
