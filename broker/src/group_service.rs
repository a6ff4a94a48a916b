//! The async shell around the group coordinator's state machine ([`crate::group`]).
//!
//! One task owns the [`GroupCoordinator`]: requests reach it over a channel, its
//! [`Action`]s are executed here (responses sent back on the request's oneshot, records
//! appended to `__consumer_offsets`), and its timers fire when the task wakes at
//! [`GroupCoordinator::next_deadline`]. No lock is held across an await; the state
//! machine is only ever touched by this task.
//!
//! `__consumer_offsets` is created on first use (FindCoordinator, or any group request)
//! with `offsets.topic.num.partitions` partitions and `cleanup.policy=compact`; when it
//! already exists at start-up every partition is replayed before the first request is
//! served, so committed offsets survive restarts.

use crate::broker::Broker;
use crate::group::{Action, GroupConfig, GroupCoordinator, RequestMeta, RequestToken, Response};
use crate::handlers::now_ms;
use crate::internal_topics::{self, CONSUMER_OFFSETS};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Weak};
use strata_protocol::messages::{
    delete_groups::DeleteGroupsRequest, describe_groups::DescribeGroupsRequest, heartbeat::HeartbeatRequest,
    join_group::JoinGroupRequest, leave_group::LeaveGroupRequest, list_groups::ListGroupsRequest,
    offset_commit::OffsetCommitRequest, offset_delete::OffsetDeleteRequest, offset_fetch::OffsetFetchRequest,
    sync_group::SyncGroupRequest, txn_offset_commit::TxnOffsetCommitRequest,
};
use strata_protocol::records::ControlRecordType;
use strata_protocol::{ErrorCode, ResponseBody};
use tokio::sync::{mpsc, oneshot};

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

enum Command {
    Call { meta: RequestMeta, request: Box<GroupRequest>, reply: oneshot::Sender<ResponseBody> },
    EnsureTopic { reply: oneshot::Sender<Result<(), ErrorCode>> },
    TopicsDeleted(Vec<String>),
    TransactionCompleted { partition: i32, producer_id: i64, commit: bool },
}

/// Handle to the group coordinator task.
#[derive(Debug, Clone)]
pub struct GroupService {
    tx: mpsc::Sender<Command>,
    /// Broker-internal notifications (transaction outcomes, deleted topics): never
    /// dropped, so they do not share the bounded client request queue.
    internal: mpsc::UnboundedSender<Command>,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::Call { meta, .. } => write!(f, "Call({:?})", meta.token),
            Command::EnsureTopic { .. } => f.write_str("EnsureTopic"),
            Command::TopicsDeleted(t) => write!(f, "TopicsDeleted({t:?})"),
            Command::TransactionCompleted { producer_id, .. } => {
                write!(f, "TransactionCompleted({producer_id})")
            }
        }
    }
}

/// The coordinator settings from the broker configuration.
pub fn group_config(broker: &Broker) -> GroupConfig {
    let raw = &broker.config.raw;
    let get = |k: &str| raw.get(k).and_then(|v| v.parse::<i64>().ok());
    let defaults = GroupConfig::default();
    GroupConfig {
        offsets_topic_num_partitions: get("offsets.topic.num.partitions")
            .map_or(defaults.offsets_topic_num_partitions, |v| v as i32),
        group_min_session_timeout_ms: get("group.min.session.timeout.ms")
            .map_or(defaults.group_min_session_timeout_ms, |v| v as i32),
        group_max_session_timeout_ms: get("group.max.session.timeout.ms")
            .map_or(defaults.group_max_session_timeout_ms, |v| v as i32),
        group_initial_rebalance_delay_ms: get("group.initial.rebalance.delay.ms")
            .map_or(defaults.group_initial_rebalance_delay_ms, |v| v as i32),
        group_max_size: get("group.max.size").map_or(defaults.group_max_size, |v| v as usize),
        offset_metadata_max_bytes: get("offset.metadata.max.bytes")
            .map_or(defaults.offset_metadata_max_bytes, |v| v as usize),
        offsets_retention_ms: get("offsets.retention.minutes")
            .map_or(defaults.offsets_retention_ms, |v| v * 60_000),
        offsets_retention_check_interval_ms: get("offsets.retention.check.interval.ms")
            .map_or(defaults.offsets_retention_check_interval_ms, |v| v),
        ..defaults
    }
}

impl GroupService {
    /// Starts the coordinator task. If `__consumer_offsets` exists, its partitions are
    /// loaded first.
    pub fn start(broker: &Arc<Broker>) -> GroupService {
        let (tx, rx) = mpsc::channel(1024);
        let (internal, internal_rx) = mpsc::unbounded_channel();
        let mut config = group_config(broker);
        // Groups hash over the partition count the topic really has.
        if let Some(meta) = broker.topics.get(CONSUMER_OFFSETS) {
            config.offsets_topic_num_partitions = meta.partitions;
        }
        let task = Task {
            broker: Arc::downgrade(broker),
            coordinator: GroupCoordinator::new(config),
            waiting: HashMap::new(),
            loaded: false,
        };
        tokio::spawn(task.run(rx, internal_rx));
        GroupService { tx, internal }
    }

    /// Creates and loads `__consumer_offsets` if that has not happened yet.
    pub async fn ensure_topic(&self) -> Result<(), ErrorCode> {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Command::EnsureTopic { reply }).await.is_err() {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        rx.await.unwrap_or(Err(ErrorCode::CoordinatorNotAvailable))
    }

    /// Drops the committed offsets of deleted topics (tombstones are written).
    pub fn topics_deleted(&self, topics: Vec<String>) {
        let _ = self.internal.send(Command::TopicsDeleted(topics));
    }

    /// A transaction marker was written to `partition` of `__consumer_offsets`: the
    /// producer's pending transactional offsets there become committed or are dropped.
    pub fn transaction_completed(&self, partition: i32, producer_id: i64, commit: bool) {
        let command = Command::TransactionCompleted { partition, producer_id, commit };
        let _ = self.internal.send(command);
    }

    /// Sends `request` to the coordinator and waits for its answer (JoinGroup may wait
    /// for a whole rebalance).
    pub async fn call(&self, meta: RequestMeta, request: GroupRequest) -> Option<ResponseBody> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(Command::Call { meta, request: Box::new(request), reply }).await.ok()?;
        rx.await.ok()
    }
}

struct Task {
    broker: Weak<Broker>,
    coordinator: GroupCoordinator,
    waiting: HashMap<RequestToken, oneshot::Sender<ResponseBody>>,
    loaded: bool,
}

impl Task {
    async fn run(mut self, mut rx: mpsc::Receiver<Command>, mut internal: mpsc::UnboundedReceiver<Command>) {
        if let Some(broker) = self.broker.upgrade() {
            if broker.topics.get(CONSUMER_OFFSETS).is_some() {
                let _ = self.load(&broker);
            }
        }
        loop {
            let sleep = internal_topics::until_deadline(self.coordinator.next_deadline(), now_ms());
            tokio::select! {
                biased;
                Some(command) = internal.recv() => self.handle(command),
                command = rx.recv() => match command {
                    None => return,
                    Some(command) => self.handle(command),
                },
                _ = tokio::time::sleep(sleep) => {
                    let actions = self.coordinator.tick(now_ms());
                    self.execute(actions);
                }
            }
        }
    }

    fn handle(&mut self, command: Command) {
        let Some(broker) = self.broker.upgrade() else { return };
        match command {
            Command::EnsureTopic { reply } => {
                let _ = reply.send(self.load(&broker));
            }
            Command::TransactionCompleted { partition, producer_id, commit } => {
                if !self.loaded {
                    let _ = self.load(&broker);
                }
                let actions = self.coordinator.complete_transaction(partition, producer_id, commit, now_ms());
                self.execute(actions);
            }
            Command::TopicsDeleted(topics) => {
                if self.loaded {
                    let actions = self.coordinator.delete_offsets_of_topics(&topics, now_ms());
                    self.execute(actions);
                }
            }
            Command::Call { meta, request, reply } => {
                if !self.loaded {
                    let _ = self.load(&broker);
                }
                let now = now_ms();
                let c = &mut self.coordinator;
                let request = *request;
                let immediate: Option<ResponseBody> = match &request {
                    GroupRequest::Fetch(r) => Some(c.fetch_offsets(meta.api_version, r).into()),
                    GroupRequest::List(r) => Some(c.list_groups(r).into()),
                    GroupRequest::Describe(r) => Some(c.describe_groups(r).into()),
                    _ => None,
                };
                if let Some(response) = immediate {
                    let _ = reply.send(response);
                    return;
                }
                self.waiting.insert(meta.token, reply);
                let actions = match request {
                    GroupRequest::Join(r) => c.join_group(&meta, r, now),
                    GroupRequest::Sync(r) => c.sync_group(&meta, r, now),
                    GroupRequest::Heartbeat(r) => c.heartbeat(&meta, &r, now),
                    GroupRequest::Leave(r) => c.leave_group(&meta, &r, now),
                    GroupRequest::Commit(r) => c.commit_offsets(&meta, r, now),
                    GroupRequest::OffsetDelete(r) => c.delete_offsets(&meta, &r, now),
                    GroupRequest::DeleteGroups(r) => c.delete_groups(&meta, &r, now),
                    GroupRequest::TxnCommit(r) => c.txn_offset_commit(&meta, r, now),
                    GroupRequest::Fetch(_) | GroupRequest::List(_) | GroupRequest::Describe(_) => Vec::new(),
                };
                self.execute(actions);
            }
        }
    }

    /// Creates `__consumer_offsets` if needed and replays every partition into the
    /// state machine (once).
    fn load(&mut self, broker: &Arc<Broker>) -> Result<(), ErrorCode> {
        if self.loaded {
            return Ok(());
        }
        let partitions = self.coordinator.config().offsets_topic_num_partitions;
        internal_topics::ensure_coordinator_topic(
            broker,
            CONSUMER_OFFSETS,
            partitions,
            "offsets.topic.segment.bytes",
            "producer",
        )?;
        let partitions = broker.topics.get(CONSUMER_OFFSETS).map_or(partitions, |m| m.partitions);
        let mut actions = Vec::new();
        for partition in 0..partitions {
            let now = now_ms();
            actions.extend(self.coordinator.begin_load(partition, now));
            let c = &mut self.coordinator;
            let mut bad = 0usize;
            internal_topics::replay(broker, CONSUMER_OFFSETS, partition, |batch, key, value| {
                let outcome = if batch.is_control {
                    match ControlRecordType::parse_key(&key) {
                        Ok(ControlRecordType::Commit) => c.replay_marker(partition, batch.producer_id, true),
                        Ok(ControlRecordType::Abort) => c.replay_marker(partition, batch.producer_id, false),
                        _ => {}
                    }
                    Ok(())
                } else if batch.is_transactional {
                    c.replay_transactional(partition, batch.producer_id, key, value)
                } else {
                    c.replay(partition, key, value)
                };
                if outcome.is_err() {
                    bad += 1;
                }
            })?;
            if bad > 0 {
                tracing::warn!(partition, records = bad, "skipped unreadable __consumer_offsets records");
            }
            actions.extend(self.coordinator.complete_load(partition, now_ms()));
        }
        self.loaded = true;
        tracing::info!(partitions, "group coordinator loaded __consumer_offsets");
        self.execute(actions);
        Ok(())
    }

    /// Runs actions, including the completions that appends produce, until none remain.
    fn execute(&mut self, actions: Vec<Action>) {
        let mut queue: VecDeque<Action> = actions.into();
        while let Some(action) = queue.pop_front() {
            match action {
                Action::Respond { token, response } => {
                    if let Some(reply) = self.waiting.remove(&token) {
                        let _ = reply.send(response_body(response));
                    }
                }
                Action::Append { id, partition, producer, records } => {
                    let result = self.append(partition, producer, &records);
                    queue.extend(self.coordinator.append_complete(id, result, now_ms()));
                }
            }
        }
    }

    fn append(
        &self,
        partition: i32,
        producer: Option<crate::group::TransactionalProducer>,
        records: &[crate::group::Record],
    ) -> Result<(), ErrorCode> {
        let broker = self.broker.upgrade().ok_or(ErrorCode::CoordinatorNotAvailable)?;
        let encoded: Vec<_> = records.iter().map(|r| (r.key_bytes(), r.value_bytes())).collect();
        let transactional = producer.map(|p| (p.producer_id, p.producer_epoch));
        internal_topics::append(&broker, CONSUMER_OFFSETS, partition, &encoded, transactional, now_ms())
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

/// Unused ids are fine: tokens only need to be unique among requests in flight.
pub fn next_token() -> RequestToken {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    RequestToken(NEXT.fetch_add(1, Ordering::Relaxed))
}
