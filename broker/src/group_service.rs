//! The async shell around the group coordinator's state machine ([`crate::group`]).
//!
//! One task owns the [`GroupCoordinator`]: requests reach it over a channel, its
//! [`Action`]s are executed here (responses sent back on the request's oneshot, records
//! appended to `__consumer_offsets`), and its timers fire when the task wakes at
//! [`GroupCoordinator::next_deadline`]. No lock is held across an await; the state
//! machine is only ever touched by this task.
//!
//! `__consumer_offsets` is created through the controller on first use (FindCoordinator)
//! with `offsets.topic.num.partitions` partitions, `offsets.topic.replication.factor`
//! replicas and `cleanup.policy=compact`. The coordinator owns the partitions this broker
//! leads: when the metadata makes it leader of one, the partition is replayed from its
//! log (requests for its groups get COORDINATOR_LOAD_IN_PROGRESS meanwhile); when it
//! loses one, its groups are unloaded (NOT_COORDINATOR). Writes are appended as leader
//! and count as done once replicated (`acks=all`), in issue order per partition.

use crate::broker::Broker;
use crate::clock::now_ms;
use crate::group::{Action, AppendId, GroupConfig, GroupCoordinator, RequestMeta, RequestToken, Response};
use crate::internal_topics::{self, PendingAppends, CONSUMER_OFFSETS};
use crate::replica::Partition;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Weak};
use std::time::Duration;
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
    Call {
        meta: RequestMeta,
        request: Box<GroupRequest>,
        reply: oneshot::Sender<ResponseBody>,
    },
    TopicsDeleted(Vec<String>),
    TransactionCompleted {
        partition: i32,
        producer_id: i64,
        commit: bool,
    },
    /// The `__consumer_offsets` partitions this broker leads (partition → leader epoch),
    /// and the topic's partition count.
    Leadership {
        led: BTreeMap<i32, i32>,
        partitions: i32,
    },
    /// An append of this partition may be replicated now.
    AppendProgress(i32),
    /// A copy of the groups for the metrics endpoint.
    Snapshot(oneshot::Sender<crate::group::GroupsSnapshot>),
}

/// Handle to the group coordinator task.
#[derive(Debug, Clone)]
pub struct GroupService {
    broker: Weak<Broker>,
    partitions: i32,
    tx: mpsc::Sender<Command>,
    /// Broker-internal notifications (transaction outcomes, deleted topics): never
    /// dropped, so they do not share the bounded client request queue. Unbounded, yet
    /// bounded in practice: each is sent by the task's own append completions (one per
    /// append in flight) or by a metadata change (one per image the broker applies).
    internal: mpsc::UnboundedSender<Command>,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::Call { meta, .. } => write!(f, "Call({:?})", meta.token),
            Command::TopicsDeleted(t) => write!(f, "TopicsDeleted({t:?})"),
            Command::Leadership { led, .. } => write!(f, "Leadership({led:?})"),
            Command::AppendProgress(p) => write!(f, "AppendProgress({p})"),
            Command::Snapshot(_) => write!(f, "Snapshot"),
            Command::TransactionCompleted { producer_id, .. } => {
                write!(f, "TransactionCompleted({producer_id})")
            }
        }
    }
}

impl GroupService {
    /// Starts the coordinator task; it owns nothing until the metadata says this broker
    /// leads partitions of `__consumer_offsets` ([`GroupService::leadership`]).
    pub fn start(broker: &Arc<Broker>) -> GroupService {
        let (tx, rx) = mpsc::channel(1024);
        let (internal, internal_rx) = mpsc::unbounded_channel();
        let mut config = broker.config.coordinators.group.clone();
        // Groups hash over the partition count the topic really has.
        if let Some(t) = broker.metadata.current().topic(CONSUMER_OFFSETS) {
            config.offsets_topic_num_partitions = t.partitions.len() as i32;
        }
        let partitions = config.offsets_topic_num_partitions;
        let timeout = Duration::from_millis(broker.config.coordinators.offsets_commit_timeout_ms);
        let task = Task {
            broker: Arc::downgrade(broker),
            coordinator: GroupCoordinator::new(config),
            waiting: HashMap::new(),
            owned: BTreeMap::new(),
            pending: PendingAppends::new(timeout),
            internal: internal.clone(),
        };
        tokio::spawn(task.run(rx, internal_rx));
        GroupService { broker: Arc::downgrade(broker), partitions, tx, internal }
    }

    /// Creates `__consumer_offsets` through the controller if it does not exist yet.
    pub async fn ensure_topic(&self) -> Result<(), ErrorCode> {
        let broker = self.broker.upgrade().ok_or(ErrorCode::CoordinatorNotAvailable)?;
        if broker.metadata.current().topic(CONSUMER_OFFSETS).is_some() {
            return Ok(());
        }
        let rf = broker.config.cluster.offsets_topic_replication_factor;
        internal_topics::ensure_coordinator_topic(
            &broker,
            CONSUMER_OFFSETS,
            self.partitions,
            rf,
            broker.config.coordinators.offsets_topic_segment_bytes,
            &[("compression.type", "producer".to_string())],
        )
        .await
    }

    /// The groups this coordinator holds, for a metrics scrape; `None` if the task has
    /// stopped. Goes through the bounded request queue, so scrapes cannot pile up.
    pub async fn snapshot(&self) -> Option<crate::group::GroupsSnapshot> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(Command::Snapshot(reply)).await.ok()?;
        rx.await.ok()
    }

    /// The `__consumer_offsets` partition that coordinates `group_id`.
    pub fn partition_for(&self, group_id: &str) -> i32 {
        crate::group::partition_for_group(group_id, self.partitions)
    }

    /// The metadata says this broker leads `led` (partition → leader epoch) of the
    /// topic's `partitions`: partitions newly led are loaded, lost ones unloaded.
    pub fn leadership(&self, led: BTreeMap<i32, i32>, partitions: i32) {
        let _ = self.internal.send(Command::Leadership { led, partitions });
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
    /// Partitions loaded, with the leader epoch they were loaded in.
    owned: BTreeMap<i32, i32>,
    pending: PendingAppends<AppendId>,
    internal: mpsc::UnboundedSender<Command>,
}

impl Task {
    async fn run(mut self, mut rx: mpsc::Receiver<Command>, mut internal: mpsc::UnboundedReceiver<Command>) {
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
            Command::Leadership { led, partitions } => self.leadership(&broker, led, partitions),
            Command::AppendProgress(partition) => self.progress(&broker, partition),
            Command::Snapshot(reply) => {
                let _ = reply.send(self.coordinator.snapshot());
            }
            Command::TransactionCompleted { partition, producer_id, commit } => {
                let actions = self.coordinator.complete_transaction(partition, producer_id, commit, now_ms());
                self.execute(actions);
            }
            Command::TopicsDeleted(topics) => {
                let actions = self.coordinator.delete_offsets_of_topics(&topics, now_ms());
                self.execute(actions);
            }
            Command::Call { meta, request, reply } => {
                let now = now_ms();
                let awaiting = internal_topics::awaiting_load(&broker, CONSUMER_OFFSETS, &self.owned);
                self.coordinator.set_awaiting_load(awaiting);
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

    /// Loads the partitions newly led (or led in a new epoch) and unloads those lost.
    fn leadership(&mut self, broker: &Arc<Broker>, led: BTreeMap<i32, i32>, partitions: i32) {
        if partitions > 0
            && self.owned.is_empty()
            && partitions != self.coordinator.config().offsets_topic_num_partitions
        {
            // The topic exists with another partition count than configured: hash over it.
            let config =
                GroupConfig { offsets_topic_num_partitions: partitions, ..self.coordinator.config().clone() };
            self.coordinator = GroupCoordinator::new(config);
        }
        let lost: Vec<i32> =
            self.owned.iter().filter(|(p, e)| led.get(p) != Some(e)).map(|(p, _)| *p).collect();
        for partition in lost {
            self.owned.remove(&partition);
            tracing::info!(partition, "group coordinator unloading a __consumer_offsets partition");
            let actions = self.coordinator.unload(partition, now_ms());
            self.execute(actions);
        }
        for (&partition, &epoch) in &led {
            if self.owned.contains_key(&partition) {
                continue;
            }
            let Some(p) = broker.replicas.get(CONSUMER_OFFSETS, partition).filter(|p| p.is_leader()) else {
                continue;
            };
            self.owned.insert(partition, epoch);
            self.load(&p, partition);
        }
    }

    /// Replays one `__consumer_offsets` partition into the state machine.
    fn load(&mut self, p: &Partition, partition: i32) {
        let mut actions = self.coordinator.begin_load(partition, now_ms());
        let c = &mut self.coordinator;
        let mut bad = 0usize;
        let replayed = internal_topics::replay(p, |batch, key, value| {
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
        });
        if let Err(code) = replayed {
            tracing::error!(
                partition,
                error = code.name(),
                "cannot replay __consumer_offsets; not serving it"
            );
            self.owned.remove(&partition);
            actions.extend(self.coordinator.unload(partition, now_ms()));
            self.execute(actions);
            return;
        }
        if bad > 0 {
            tracing::warn!(partition, records = bad, "skipped unreadable __consumer_offsets records");
        }
        actions.extend(self.coordinator.complete_load(partition, now_ms()));
        tracing::info!(partition, "group coordinator loaded a __consumer_offsets partition");
        self.execute(actions);
    }

    /// Completes the replicated appends of `partition`, in order.
    fn progress(&mut self, broker: &Arc<Broker>, partition: i32) {
        let (done, head) = self.pending.progress(broker, partition);
        let mut actions = Vec::new();
        for (id, result) in done {
            actions.extend(self.coordinator.append_complete(id, result, now_ms()));
        }
        if let Some(head) = head {
            self.watch(partition, head);
        }
        self.execute(actions);
    }

    /// Wakes the task when `head` may be replicated.
    fn watch(&self, partition: i32, head: internal_topics::Appended) {
        let deadline = self.pending.head_deadline(partition).unwrap_or_else(tokio::time::Instant::now);
        let tx = self.internal.clone();
        tokio::spawn(async move {
            internal_topics::wait_replicated(head, deadline).await;
            let _ = tx.send(Command::AppendProgress(partition));
        });
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
                    match self.append(partition, producer, &records) {
                        Err(code) => queue.extend(self.coordinator.append_complete(id, Err(code), now_ms())),
                        Ok(appended) => {
                            let Some(broker) = self.broker.upgrade() else { continue };
                            if self.pending.push(partition, id, appended) {
                                let (done, head) = self.pending.progress(&broker, partition);
                                for (id, result) in done {
                                    queue.extend(self.coordinator.append_complete(id, result, now_ms()));
                                }
                                if let Some(head) = head {
                                    self.watch(partition, head);
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    fn append(
        &self,
        partition: i32,
        producer: Option<crate::group::TransactionalProducer>,
        records: &[crate::group::Record],
    ) -> Result<internal_topics::Appended, ErrorCode> {
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
