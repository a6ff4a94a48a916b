//! The group coordinator as a [`Shard`] of the coordinator runtime, and the handle the
//! handlers use ([`GroupService`]).
//!
//! `__consumer_offsets` is created through the controller on first use (FindCoordinator)
//! with `offsets.topic.num.partitions` partitions, `offsets.topic.replication.factor`
//! replicas and `cleanup.policy=compact`. The coordinator owns the partitions this broker
//! leads: when the metadata makes it leader of one, the partition is replayed from its
//! log (requests for its groups get COORDINATOR_LOAD_IN_PROGRESS meanwhile); when it
//! loses one, its groups are unloaded (NOT_COORDINATOR). Writes are appended as leader
//! and count as done once replicated (`acks=all`), in issue order per partition.

use super::{Action, AppendId, GroupConfig, GroupCoordinator, RequestMeta, RequestToken, Response};
use crate::coordinator::internal_topics::{self, CONSUMER_OFFSETS};
use crate::coordinator::runtime::{self, Coordinator, Events, Handled, Output, Shard};
use crate::coordinator::writer::{BatchContext, LogWriter};
use crate::node::Node;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use strata_protocol::messages::{
    delete_groups::DeleteGroupsRequest, describe_groups::DescribeGroupsRequest, heartbeat::HeartbeatRequest,
    join_group::JoinGroupRequest, leave_group::LeaveGroupRequest, list_groups::ListGroupsRequest,
    offset_commit::OffsetCommitRequest, offset_delete::OffsetDeleteRequest, offset_fetch::OffsetFetchRequest,
    sync_group::SyncGroupRequest, txn_offset_commit::TxnOffsetCommitRequest,
};
use strata_protocol::records::ControlRecordType;
use strata_protocol::{ErrorCode, ResponseBody};
use tokio::sync::oneshot;

/// A group request the state machine answers (possibly later).
#[derive(Debug)]
pub enum GroupRequest {
    /// JoinGroup.
    Join(JoinGroupRequest),
    /// SyncGroup.
    Sync(SyncGroupRequest),
    /// Heartbeat.
    Heartbeat(HeartbeatRequest),
    /// LeaveGroup.
    Leave(LeaveGroupRequest),
    /// OffsetCommit.
    Commit(OffsetCommitRequest),
    /// OffsetDelete.
    OffsetDelete(OffsetDeleteRequest),
    /// DeleteGroups.
    DeleteGroups(DeleteGroupsRequest),
    /// TxnOffsetCommit (answered once the transactional offsets are written).
    TxnCommit(TxnOffsetCommitRequest),
    /// OffsetFetch (answered at once).
    Fetch(OffsetFetchRequest),
    /// ListGroups (answered at once).
    List(ListGroupsRequest),
    /// DescribeGroups (answered at once).
    Describe(DescribeGroupsRequest),
}

/// What reaches the group coordinator besides client requests.
#[derive(Debug)]
pub enum GroupEvent {
    /// Topics were deleted: their committed offsets go (tombstones are written).
    TopicsDeleted(Vec<String>),
    /// A transaction marker was written to `partition` of `__consumer_offsets`.
    TransactionCompleted {
        /// The partition.
        partition: i32,
        /// Whose transaction.
        producer_id: i64,
        /// Committed (true) or aborted.
        commit: bool,
    },
    /// A copy of the groups for the metrics endpoint.
    Snapshot(oneshot::Sender<super::GroupsSnapshot>),
}

/// The group coordinator's state machine as the runtime drives it.
#[derive(Debug)]
pub struct GroupShard {
    coordinator: GroupCoordinator,
}

impl GroupShard {
    /// A shard hashing groups over `config`'s partition count.
    pub fn new(config: GroupConfig) -> GroupShard {
        GroupShard { coordinator: GroupCoordinator::new(config) }
    }
}

/// The coordinator's actions as runtime outputs.
fn outputs(actions: Vec<Action>) -> Vec<Output<GroupShard>> {
    actions
        .into_iter()
        .map(|action| match action {
            Action::Respond { token, response } => {
                Output::Respond { token: token.0, response: response_body(response) }
            }
            Action::Append { id, partition, producer, records } => Output::Append {
                id,
                partition,
                producer: producer.map(|p| (p.producer_id, p.producer_epoch)),
                records: records.iter().map(|r| (r.key_bytes(), r.value_bytes())).collect(),
            },
        })
        .collect()
}

impl Shard for GroupShard {
    type Meta = RequestMeta;
    type Request = GroupRequest;
    type Event = GroupEvent;
    type AppendId = AppendId;
    type Effect = std::convert::Infallible;
    const TOPIC: &'static str = CONSUMER_OFFSETS;
    const NAME: &'static str = "group";

    fn token(meta: &RequestMeta) -> u64 {
        meta.token.0
    }

    fn handle(&mut self, meta: RequestMeta, request: GroupRequest, now: i64) -> Handled<Self> {
        let c = &mut self.coordinator;
        let actions = match request {
            GroupRequest::Fetch(r) => return Handled::Now(c.fetch_offsets(meta.api_version, &r).into()),
            GroupRequest::List(r) => return Handled::Now(c.list_groups(&r).into()),
            GroupRequest::Describe(r) => return Handled::Now(c.describe_groups(&r).into()),
            GroupRequest::Join(r) => c.join_group(&meta, r, now),
            GroupRequest::Sync(r) => c.sync_group(&meta, r, now),
            GroupRequest::Heartbeat(r) => c.heartbeat(&meta, &r, now),
            GroupRequest::Leave(r) => c.leave_group(&meta, &r, now),
            GroupRequest::Commit(r) => c.commit_offsets(&meta, r, now),
            GroupRequest::OffsetDelete(r) => c.delete_offsets(&meta, &r, now),
            GroupRequest::DeleteGroups(r) => c.delete_groups(&meta, &r, now),
            GroupRequest::TxnCommit(r) => c.txn_offset_commit(&meta, r, now),
        };
        Handled::Later(outputs(actions))
    }

    fn event(&mut self, event: GroupEvent, now: i64) -> Vec<Output<Self>> {
        match event {
            GroupEvent::TopicsDeleted(topics) => {
                outputs(self.coordinator.delete_offsets_of_topics(&topics, now))
            }
            GroupEvent::TransactionCompleted { partition, producer_id, commit } => {
                outputs(self.coordinator.complete_transaction(partition, producer_id, commit, now))
            }
            GroupEvent::Snapshot(reply) => {
                let _ = reply.send(self.coordinator.snapshot());
                Vec::new()
            }
        }
    }

    fn tick(&mut self, now: i64) -> Vec<Output<Self>> {
        outputs(self.coordinator.tick(now))
    }

    fn next_deadline(&self) -> Option<i64> {
        self.coordinator.next_deadline()
    }

    fn append_complete(
        &mut self,
        id: AppendId,
        result: Result<(), ErrorCode>,
        now: i64,
    ) -> Vec<Output<Self>> {
        outputs(self.coordinator.append_complete(id, result, now))
    }

    fn set_awaiting_load(&mut self, partitions: BTreeSet<i32>) {
        self.coordinator.set_awaiting_load(partitions);
    }

    /// The topic exists with another partition count than configured: hash over it.
    fn resize(&mut self, partitions: i32) {
        if partitions != self.coordinator.config().offsets_topic_num_partitions {
            let config =
                GroupConfig { offsets_topic_num_partitions: partitions, ..self.coordinator.config().clone() };
            self.coordinator = GroupCoordinator::new(config);
        }
    }

    fn begin_load(&mut self, partition: i32, _leader_epoch: i32, now: i64) -> Vec<Output<Self>> {
        outputs(self.coordinator.begin_load(partition, now))
    }

    fn replay(
        &mut self,
        partition: i32,
        batch: BatchContext,
        key: Bytes,
        value: Option<Bytes>,
    ) -> Result<(), ()> {
        let c = &mut self.coordinator;
        if batch.is_control {
            match ControlRecordType::parse_key(&key) {
                Ok(ControlRecordType::Commit) => c.replay_marker(partition, batch.producer_id, true),
                Ok(ControlRecordType::Abort) => c.replay_marker(partition, batch.producer_id, false),
                _ => {}
            }
            Ok(())
        } else if batch.is_transactional {
            c.replay_transactional(partition, batch.producer_id, key, value).map_err(|_| ())
        } else {
            c.replay(partition, key, value).map_err(|_| ())
        }
    }

    fn complete_load(&mut self, partition: i32, now: i64) -> Vec<Output<Self>> {
        outputs(self.coordinator.complete_load(partition, now))
    }

    fn unload(&mut self, partition: i32, now: i64) -> Vec<Output<Self>> {
        outputs(self.coordinator.unload(partition, now))
    }

    fn start_effect(&mut self, effect: std::convert::Infallible, _events: Events<Self>) {
        match effect {}
    }
}

/// The group coordinator as handlers see it.
#[derive(Debug, Clone)]
pub struct GroupService {
    node: Arc<Node>,
    /// `offsets.topic.num.partitions`, until the topic exists.
    partitions: i32,
    coordinator: Coordinator<GroupShard>,
}

impl GroupService {
    /// Starts the coordinator on `node`'s partitions; it owns nothing until the metadata
    /// says this broker leads partitions of `__consumer_offsets`
    /// ([`GroupService::leadership`]).
    pub fn start(node: Arc<Node>) -> GroupService {
        let mut config = node.config.coordinators.group.clone();
        // Groups hash over the partition count the topic really has.
        if let Some(t) = node.metadata.current().topic(CONSUMER_OFFSETS) {
            config.offsets_topic_num_partitions = t.partitions.len() as i32;
        }
        let partitions = node.config.coordinators.group.offsets_topic_num_partitions;
        let timeout = Duration::from_millis(node.config.coordinators.offsets_commit_timeout_ms);
        let writer = Arc::new(LogWriter::new(node.clone()));
        let coordinator = Coordinator::start(GroupShard::new(config), writer, timeout);
        GroupService { node, partitions, coordinator }
    }

    /// Creates `__consumer_offsets` through the controller if it does not exist yet.
    pub async fn ensure_topic(&self) -> Result<(), ErrorCode> {
        let node = &self.node;
        if node.metadata.current().topic(CONSUMER_OFFSETS).is_some() {
            return Ok(());
        }
        internal_topics::ensure_coordinator_topic(
            node,
            CONSUMER_OFFSETS,
            self.partitions,
            node.config.cluster.offsets_topic_replication_factor,
            node.config.coordinators.offsets_topic_segment_bytes,
            &[("compression.type", "producer".to_string())],
        )
        .await
    }

    /// The groups this coordinator holds, for a metrics scrape; `None` if the task has
    /// stopped. Goes through the bounded request queue, so scrapes cannot pile up.
    pub async fn snapshot(&self) -> Option<super::GroupsSnapshot> {
        let (reply, rx) = oneshot::channel();
        if !self.coordinator.send(GroupEvent::Snapshot(reply)).await {
            return None;
        }
        rx.await.ok()
    }

    /// The `__consumer_offsets` partition that coordinates `group_id`.
    pub fn partition_for(&self, group_id: &str) -> i32 {
        super::partition_for_group(group_id, self.partition_count())
    }

    /// The partition count of `__consumer_offsets`: the topic's once it exists (whatever
    /// `offsets.topic.num.partitions` says now), else the configured one.
    fn partition_count(&self) -> i32 {
        let image = self.node.metadata.current();
        image.topic(CONSUMER_OFFSETS).map_or(self.partitions, |t| t.partitions.len() as i32)
    }

    /// The metadata says this broker leads `led` (partition → leader epoch) of the
    /// topic's `partitions`: partitions newly led are loaded, lost ones unloaded.
    pub fn leadership(&self, led: BTreeMap<i32, i32>, partitions: i32) {
        self.coordinator.leadership(led, partitions);
    }

    /// Drops the committed offsets of deleted topics (tombstones are written).
    pub fn topics_deleted(&self, topics: Vec<String>) {
        self.coordinator.notify(GroupEvent::TopicsDeleted(topics));
    }

    /// A transaction marker was written to `partition` of `__consumer_offsets`: the
    /// producer's pending transactional offsets there become committed or are dropped.
    pub fn transaction_completed(&self, partition: i32, producer_id: i64, commit: bool) {
        self.coordinator.notify(GroupEvent::TransactionCompleted { partition, producer_id, commit });
    }

    /// Sends `request` to the coordinator and waits for its answer (JoinGroup may wait
    /// for a whole rebalance).
    pub async fn call(&self, meta: RequestMeta, request: GroupRequest) -> Option<ResponseBody> {
        self.coordinator.call(meta, request).await
    }
}

fn response_body(response: Response) -> ResponseBody {
    match response {
        Response::JoinGroup(r) => r.into(),
        Response::SyncGroup(r) => r.into(),
        Response::Heartbeat(r) => r.into(),
        Response::LeaveGroup(r) => r.into(),
        Response::OffsetCommit(r) => r.into(),
        Response::OffsetDelete(r) => r.into(),
        Response::DeleteGroups(r) => r.into(),
        Response::TxnOffsetCommit(r) => r.into(),
    }
}

/// A token unique among the requests in flight.
pub fn next_token() -> RequestToken {
    RequestToken(runtime::next_token())
}
