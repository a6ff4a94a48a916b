//! The coordinator object: its state, the plumbing shared by the request handlers
//! (responses, appends, timers) and the dispatch of timer and append completions.

use bytes::Bytes;
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use strata_protocol::messages::delete_groups::DeletableGroupResult;
use strata_protocol::messages::join_group::JoinGroupRequestProtocol;
use strata_protocol::messages::offset_commit::OffsetCommitResponse;
use strata_protocol::messages::offset_delete::OffsetDeleteResponse;
use strata_protocol::messages::txn_offset_commit::TxnOffsetCommitResponse;
use strata_protocol::ErrorCode;

#[cfg(test)]
use super::classic_group::OffsetAndMetadata;
use super::classic_group::{CommittedOffset, Group, GroupState};
use super::partition::{partition_for_group, PartitionState};
use super::timer::{TimerKey, TimerTask, Timers};
use super::{Action, AppendId, GroupConfig, Record, RequestToken, Response, TransactionalProducer};

/// The classic group coordinator of one broker: every group of every
/// `__consumer_offsets` partition the broker coordinates. See the [module
/// documentation](super) for the contract with the shell.
pub struct GroupCoordinator {
    pub(super) config: GroupConfig,
    pub(super) groups: HashMap<String, Group>,
    pub(super) partitions: HashMap<i32, PartitionState>,
    /// Partitions the metadata says this broker leads but whose leadership the shell has
    /// not passed on yet: requests for them are told to retry (COORDINATOR_LOAD_IN_PROGRESS,
    /// as Kafka answers while it loads), not sent to look for another coordinator.
    awaiting_load: BTreeSet<i32>,
    pub(super) timers: Timers,
    pub(super) pending: HashMap<AppendId, Completion>,
    pub(super) delete_ops: HashMap<u64, DeleteGroupsOp>,
    /// (partition of `__consumer_offsets`, producer id) -> the groups of that partition
    /// holding pending transactional offsets of the producer, so a marker finds them
    /// without a scan. May name groups deleted since; those are skipped.
    pub(super) open_txns: HashMap<(i32, i64), BTreeSet<String>>,
    /// The next [`CommittedOffset::log_position`].
    next_log_position: u64,
    /// Rebalances started since this coordinator was created (for metrics).
    pub(super) rebalances: u64,
    next_append_id: u64,
    next_incarnation: u64,
    next_op_id: u64,
    /// Produces the unique part of member ids (a random UUID unless a test injects one).
    uuid_source: Box<dyn FnMut() -> String + Send>,
}

impl fmt::Debug for GroupCoordinator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupCoordinator")
            .field("groups", &self.groups.len())
            .field("partitions", &self.partitions)
            .field("pending_appends", &self.pending.len())
            .field("next_deadline", &self.timers.next_deadline())
            .finish()
    }
}

/// What to do when an append is acknowledged or fails.
#[derive(Debug)]
pub(super) enum Completion {
    /// Nothing waits on the write (metadata of a group that became Empty, expiry).
    Background,
    OffsetCommit {
        token: RequestToken,
        group_id: String,
        incarnation: u64,
        commits: Vec<(String, i32, CommittedOffset)>,
        response: OffsetCommitResponse,
    },
    /// TxnOffsetCommit: once written, the commits are pending for the producer.
    TxnOffsetCommit(TxnCommit),
    /// The leader's SyncGroup: the assignment becomes visible once written.
    SyncAssignment {
        group_id: String,
        incarnation: u64,
        generation: i32,
        assignment: HashMap<String, Bytes>,
    },
    StaticRejoin(StaticRejoin),
    OffsetDelete {
        token: RequestToken,
        response: OffsetDeleteResponse,
    },
    DeleteGroups {
        op: u64,
        groups: Vec<String>,
    },
}

/// A TxnOffsetCommit being written.
#[derive(Debug)]
pub(super) struct TxnCommit {
    pub token: RequestToken,
    pub group_id: String,
    pub incarnation: u64,
    pub producer_id: i64,
    pub commits: Vec<(String, i32, CommittedOffset)>,
    pub response: TxnOffsetCommitResponse,
}

/// A KIP-345 static member that rejoined a Stable group under a new member id without a
/// rebalance; undone if the group metadata cannot be written.
#[derive(Debug)]
pub(super) struct StaticRejoin {
    pub group_id: String,
    pub incarnation: u64,
    pub generation: i32,
    pub instance_id: String,
    pub old_member_id: String,
    pub new_member_id: String,
    pub old_protocols: Vec<JoinGroupRequestProtocol>,
    pub old_rebalance_timeout_ms: i32,
    pub old_session_timeout_ms: i32,
    pub leader_before: Option<String>,
}

/// A DeleteGroups request waiting for its tombstones, one append per partition.
#[derive(Debug)]
pub(super) struct DeleteGroupsOp {
    pub token: RequestToken,
    pub results: Vec<DeletableGroupResult>,
    pub remaining: usize,
}

/// Kafka's `appendGroupMetadataErrorToResponseError`: the client-facing error for a
/// failed write of group metadata. The input is already a Kafka code; only the codes of
/// the write path are translated, the rest pass through as Kafka passes them.
pub(super) fn group_append_error(e: ErrorCode) -> ErrorCode {
    use ErrorCode::*;
    match e {
        UnknownTopicOrPartition | NotEnoughReplicas | NotEnoughReplicasAfterAppend | RequestTimedOut => {
            CoordinatorNotAvailable
        }
        NotLeaderOrFollower | KafkaStorageError => NotCoordinator,
        MessageTooLarge | RecordListTooLarge | InvalidFetchSize => UnknownServerError,
        other => other,
    }
}

/// The client-facing error for a failed write of offset commits (too large a batch is
/// the client's INVALID_COMMIT_OFFSET_SIZE).
pub(super) fn commit_append_error(e: ErrorCode) -> ErrorCode {
    use ErrorCode::*;
    match e {
        MessageTooLarge | RecordListTooLarge | InvalidFetchSize => InvalidCommitOffsetSize,
        other => group_append_error(other),
    }
}

pub(super) fn respond(out: &mut Vec<Action>, token: RequestToken, response: Response) {
    out.push(Action::Respond { token, response });
}

impl GroupCoordinator {
    /// A coordinator that owns no partition yet, with random member ids.
    pub fn new(config: GroupConfig) -> GroupCoordinator {
        GroupCoordinator::with_uuid_source(config, Box::new(|| uuid::Uuid::new_v4().hyphenated().to_string()))
    }

    /// A coordinator whose member ids end in what `uuid_source` returns (for tests that
    /// need deterministic ids); each call must return a value never returned before.
    pub fn with_uuid_source(
        config: GroupConfig,
        uuid_source: Box<dyn FnMut() -> String + Send>,
    ) -> GroupCoordinator {
        GroupCoordinator {
            config,
            groups: HashMap::new(),
            partitions: HashMap::new(),
            awaiting_load: BTreeSet::new(),
            timers: Timers::default(),
            pending: HashMap::new(),
            delete_ops: HashMap::new(),
            open_txns: HashMap::new(),
            next_log_position: 0,
            next_append_id: 0,
            next_incarnation: 0,
            next_op_id: 0,
            rebalances: 0,
            uuid_source,
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// The `__consumer_offsets` partition that coordinates `group_id`.
    pub fn partition_for(&self, group_id: &str) -> i32 {
        partition_for_group(group_id, self.config.offsets_topic_num_partitions)
    }

    /// NOT_COORDINATOR if this broker does not own the group's partition,
    /// COORDINATOR_LOAD_IN_PROGRESS while it is loading, `None` when it is served.
    pub fn coordinator_error(&self, group_id: &str) -> Option<ErrorCode> {
        let partition = self.partition_for(group_id);
        match self.partitions.get(&partition) {
            None if self.awaiting_load.contains(&partition) => Some(ErrorCode::CoordinatorLoadInProgress),
            None => Some(ErrorCode::NotCoordinator),
            Some(PartitionState::Loading) => Some(ErrorCode::CoordinatorLoadInProgress),
            Some(PartitionState::Active) => None,
        }
    }

    /// Records which partitions the metadata says this broker leads but are not loaded yet
    /// (the shell learns of a new leadership a little after the metadata shows it, so a
    /// client told by FindCoordinator to come here may arrive first).
    pub fn set_awaiting_load(&mut self, partitions: BTreeSet<i32>) {
        self.awaiting_load = partitions;
    }

    /// The state of a group, `None` if it does not exist here (for the tests' checks).
    #[cfg(test)]
    pub fn group_state(&self, group_id: &str) -> Option<GroupState> {
        self.groups.get(group_id).map(|g| g.state)
    }

    /// The committed offset of a partition for a group (for the tests' checks).
    #[cfg(test)]
    pub fn committed_offset(
        &self,
        group_id: &str,
        topic: &str,
        partition: i32,
    ) -> Option<&OffsetAndMetadata> {
        self.groups.get(group_id)?.committed(topic, partition).map(|c| &c.offset)
    }

    /// The offset of a partition that `producer_id` committed for a group in a transaction
    /// not yet completed (invisible to OffsetFetch; for the tests' checks).
    #[cfg(test)]
    pub fn pending_transactional_offset(
        &self,
        group_id: &str,
        producer_id: i64,
        topic: &str,
        partition: i32,
    ) -> Option<&OffsetAndMetadata> {
        let pending = self.groups.get(group_id)?.txn_offsets.get(&producer_id)?;
        pending.get(&(topic.to_owned(), partition)).map(|c| &c.offset)
    }

    /// When [`GroupCoordinator::tick`] next has work to do.
    pub fn next_deadline(&self) -> Option<i64> {
        self.timers.next_deadline()
    }

    /// Fires every timer due at `now_ms` that existed when the call started.
    pub fn tick(&mut self, now_ms: i64) -> Vec<Action> {
        let mut out = Vec::new();
        let watermark = self.timers.watermark();
        while let Some((key, task)) = self.timers.pop_due(now_ms, watermark) {
            match (key, task) {
                (TimerKey::Heartbeat { group, member }, _) => {
                    self.expire_heartbeat(&group, &member, now_ms, &mut out)
                }
                (TimerKey::Join { group }, task) => self.on_join_timer(&group, task, now_ms, &mut out),
                (TimerKey::Sync { group }, TimerTask::ExpireSync { generation }) => {
                    self.expire_pending_sync(&group, generation, now_ms, &mut out)
                }
                (TimerKey::Sync { .. }, _) => {}
                (TimerKey::OffsetExpiry { partition }, _) => {
                    self.expire_offsets(partition, now_ms, &mut out);
                    if self.partitions.get(&partition) == Some(&PartitionState::Active) {
                        self.timers.schedule(
                            TimerKey::OffsetExpiry { partition },
                            now_ms.saturating_add(self.config.offsets_retention_check_interval_ms),
                            TimerTask::ExpireOffsets,
                        );
                    }
                }
            }
        }
        out
    }

    /// Reports the outcome of an [`Action::Append`]: `Ok` once the records are durably
    /// in the log, or the error the write failed with.
    pub fn append_complete(
        &mut self,
        id: AppendId,
        result: Result<(), ErrorCode>,
        now_ms: i64,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        let Some(completion) = self.pending.remove(&id) else {
            tracing::warn!(append_id = id.0, "completion of an unknown group append");
            return out;
        };
        if let Err(error) = result {
            tracing::warn!(append_id = id.0, ?error, "group coordinator append failed");
        }
        match completion {
            Completion::Background => {}
            Completion::OffsetCommit { token, group_id, incarnation, commits, response } => {
                self.on_commit_written(id, result, token, &group_id, incarnation, commits, response, &mut out)
            }
            Completion::TxnOffsetCommit(commit) => self.on_txn_commit_written(id, result, commit, &mut out),
            Completion::SyncAssignment { group_id, incarnation, generation, assignment } => self
                .on_assignment_written(
                    &group_id,
                    incarnation,
                    generation,
                    assignment,
                    result,
                    now_ms,
                    &mut out,
                ),
            Completion::StaticRejoin(rejoin) => {
                self.on_static_rejoin_written(rejoin, result, now_ms, &mut out)
            }
            Completion::OffsetDelete { token, mut response } => {
                if let Err(e) = result {
                    response.error_code = group_append_error(e).code();
                    response.topics.clear();
                }
                respond(&mut out, token, Response::OffsetDelete(response));
            }
            Completion::DeleteGroups { op, groups } => {
                self.on_group_tombstones_written(op, &groups, result, &mut out)
            }
        }
        out
    }

    /// Issues a plain append.
    pub(super) fn append(
        &mut self,
        out: &mut Vec<Action>,
        partition: i32,
        records: Vec<Record>,
        completion: Completion,
    ) -> AppendId {
        self.append_as(out, partition, None, records, completion)
    }

    /// Issues an append, transactional when `producer` is set.
    pub(super) fn append_as(
        &mut self,
        out: &mut Vec<Action>,
        partition: i32,
        producer: Option<TransactionalProducer>,
        records: Vec<Record>,
        completion: Completion,
    ) -> AppendId {
        let id = AppendId(self.next_append_id);
        self.next_append_id += 1;
        self.pending.insert(id, completion);
        out.push(Action::Append { id, partition, producer, records });
        id
    }

    /// Numbers an offset commit record about to be appended or just replayed; see
    /// [`CommittedOffset`]. Appends must be issued right after their records are
    /// numbered, so that numbers follow the order of the log.
    pub(super) fn next_log_position(&mut self) -> u64 {
        self.next_log_position += 1;
        self.next_log_position
    }

    /// Creates an empty group owned by this coordinator's partition for `group_id`:
    /// the first JoinGroup of a group, or the "simple" group that holds the offsets of
    /// consumers committing outside group management.
    pub(super) fn create_group(&mut self, group_id: &str, now_ms: i64) {
        let partition = self.partition_for(group_id);
        let group = Group::new(group_id, partition, self.new_incarnation(), now_ms);
        self.groups.insert(group_id.to_string(), group);
    }

    pub(super) fn new_incarnation(&mut self) -> u64 {
        self.next_incarnation += 1;
        self.next_incarnation
    }

    pub(super) fn new_op_id(&mut self) -> u64 {
        self.next_op_id += 1;
        self.next_op_id
    }

    /// Kafka's member id: `<group.instance.id or client.id>-<uuid>`.
    pub(super) fn generate_member_id(&mut self, prefix: &str) -> String {
        format!("{prefix}-{}", (self.uuid_source)())
    }

    pub(super) fn schedule_heartbeat(&mut self, group_id: &str, member_id: &str, deadline_ms: i64) {
        self.timers.schedule(
            TimerKey::Heartbeat { group: group_id.to_owned(), member: member_id.to_owned() },
            deadline_ms,
            TimerTask::ExpireHeartbeat,
        );
    }

    pub(super) fn cancel_heartbeat(&mut self, group_id: &str, member_id: &str) {
        self.timers.cancel(&TimerKey::Heartbeat { group: group_id.to_owned(), member: member_id.to_owned() });
    }

    /// Cancels every timer of the given groups.
    pub(super) fn cancel_group_timers(&mut self, group_ids: &BTreeSet<String>) {
        self.timers.cancel_where(|key| match key {
            TimerKey::Heartbeat { group, .. } | TimerKey::Join { group } | TimerKey::Sync { group } => {
                group_ids.contains(group)
            }
            TimerKey::OffsetExpiry { .. } => false,
        });
    }

    /// Runs `f` on the group with the group taken out of the map, so `f` can use the
    /// rest of the coordinator freely; the group is put back unless `f` left it Dead.
    pub(super) fn with_group<R>(
        &mut self,
        group_id: &str,
        f: impl FnOnce(&mut Self, &mut Group) -> R,
    ) -> Option<R> {
        let mut group = self.groups.remove(group_id)?;
        let result = f(self, &mut group);
        if !group.is(GroupState::Dead) {
            self.groups.insert(group.group_id.clone(), group);
        }
        Some(result)
    }
}
