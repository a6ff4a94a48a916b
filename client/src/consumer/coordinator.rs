//! The async shell around [`Membership`]: one task per subscribed consumer carries out
//! what the state machine asks (FindCoordinator, JoinGroup, the leader's assignment,
//! SyncGroup, heartbeats) and feeds the answers back. The state machine sits behind a
//! std mutex that is only ever held between awaits, never across one. Offsets are
//! committed and fetched here too, with the generation the membership is in.

use super::assignor;
use super::membership::{Action, Membership};
use crate::client::{Client, CoordinatorKind};
use crate::error::{Error, Result};
use crate::types::{ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use strata_protocol::messages::offset_commit::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use strata_protocol::messages::offset_fetch::{OffsetFetchRequest, OffsetFetchRequestTopic};
use strata_protocol::{ApiKey, RequestBody, ResponseBody};
use tokio::sync::{mpsc, oneshot, Notify};

/// What the consumer and the membership task share.
pub(crate) struct Group {
    pub membership: Mutex<Membership>,
    /// Wakes the task: callbacks done, a new subscription, close.
    pub wake: Notify,
    /// Wakes `poll`: callbacks are waiting.
    pub events: Notify,
    pub stopped: AtomicBool,
}

impl Group {
    pub fn lock(&self) -> MutexGuard<'_, Membership> {
        self.membership.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Runs the membership until the group is stopped.
pub(crate) async fn drive(client: Client, group: Arc<Group>, group_id: String, join_timeout: Duration) {
    while !group.stopped.load(Ordering::Acquire) {
        let action = group.lock().next_action(Instant::now());
        match action {
            Action::FindCoordinator => {
                client.forget_coordinator(CoordinatorKind::Group, &group_id);
                let r = client.coordinator(CoordinatorKind::Group, &group_id).await.map(|_| ());
                group.lock().on_coordinator(Instant::now(), r);
            }
            Action::Join(request) => {
                let r = call(&client, &group_id, RequestBody::JoinGroup(request), Some(join_timeout)).await;
                let r = r.and_then(|body| match body {
                    ResponseBody::JoinGroup(r) => Ok(r),
                    _ => Err(Error::protocol("coordinator", "JoinGroup answered with another API")),
                });
                group.lock().on_join(Instant::now(), r);
            }
            Action::Assign { strategy, members } => {
                let topics: BTreeSet<String> =
                    members.iter().flat_map(|m| m.subscription.topics.iter().cloned()).collect();
                let topics: Vec<String> = topics.into_iter().collect();
                let counts = match client.refresh_metadata(&topics).await {
                    Ok(cluster) => topics
                        .iter()
                        .filter_map(|t| {
                            cluster
                                .topic(t)
                                .filter(|i| i.error.is_none())
                                .map(|i| (t.clone(), i.partitions.len() as i32))
                        })
                        .collect(),
                    Err(e) => {
                        tracing::warn!(error = %e, "no metadata for the assignment; assigning what is known");
                        BTreeMap::new()
                    }
                };
                let assignment = assignor::assign(strategy, &counts, &members);
                let mut m = group.lock();
                m.set_assignment_snapshot(counts.iter().map(|(t, n)| (t.clone(), *n as usize)).collect());
                m.on_assignment(&assignment);
            }
            Action::Sync(request) => {
                let r = call(&client, &group_id, RequestBody::SyncGroup(request), None).await;
                let r = r.and_then(|body| match body {
                    ResponseBody::SyncGroup(r) => Ok(r),
                    _ => Err(Error::protocol("coordinator", "SyncGroup answered with another API")),
                });
                group.lock().on_sync(Instant::now(), r);
            }
            Action::Heartbeat(request) => {
                let r = call(&client, &group_id, RequestBody::Heartbeat(request), None).await;
                let r = r.and_then(|body| match body {
                    ResponseBody::Heartbeat(r) => Ok(r),
                    _ => Err(Error::protocol("coordinator", "Heartbeat answered with another API")),
                });
                group.lock().on_heartbeat(Instant::now(), r);
            }
            Action::Leave(request) => {
                if let Err(e) = call(&client, &group_id, RequestBody::LeaveGroup(request), None).await {
                    tracing::debug!(error = %e, "LeaveGroup failed");
                }
            }
            Action::WaitUntil(at) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(at.into()) => {}
                    _ = group.wake.notified() => {}
                }
            }
            Action::Idle => {
                if group.lock().awaiting_callbacks() {
                    group.events.notify_one();
                }
                group.wake.notified().await;
            }
        }
        if group.lock().awaiting_callbacks() {
            group.events.notify_one();
        }
    }
}

/// Sends a request to the group coordinator; a lost connection or a moved coordinator
/// makes the client forget it (the membership then finds it again).
async fn call(
    client: &Client,
    group_id: &str,
    body: RequestBody,
    timeout: Option<Duration>,
) -> Result<ResponseBody> {
    let result = async {
        let (_, conn) = client.coordinator(CoordinatorKind::Group, group_id).await?;
        let version = conn.version(body.api_key())?;
        let rx = conn.submit(version, &body).await?;
        match timeout {
            Some(t) => conn.await_reply_within(rx, t).await,
            None => conn.await_reply(rx).await,
        }
    }
    .await;
    match result {
        Ok(r) => Ok(r.body),
        Err(e) => {
            client.on_coordinator_error(CoordinatorKind::Group, group_id, &e);
            Err(e)
        }
    }
}

/// Commits `offsets` for the member `meta` describes (generation -1 and no member id for
/// a consumer outside the group's membership), retrying while the coordinator moves or
/// loads, up to `request.timeout.ms`.
pub(crate) async fn commit(
    client: &Client,
    meta: &ConsumerGroupMetadata,
    offsets: &BTreeMap<TopicPartition, OffsetAndMetadata>,
) -> Result<()> {
    if offsets.is_empty() {
        return Ok(());
    }
    let mut topics: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for (tp, o) in offsets {
        topics.entry(tp.topic.as_str()).or_default().push(OffsetCommitRequestPartition {
            partition_index: tp.partition,
            committed_offset: o.offset,
            committed_leader_epoch: o.leader_epoch.unwrap_or(-1),
            commit_timestamp: -1,
            committed_metadata: Some(o.metadata.clone()),
        });
    }
    let request = OffsetCommitRequest {
        group_id: meta.group_id.clone(),
        generation_id_or_member_epoch: meta.generation_id,
        member_id: meta.member_id.clone(),
        group_instance_id: meta.group_instance_id.clone(),
        retention_time_ms: -1,
        topics: topics
            .into_iter()
            .map(|(name, partitions)| OffsetCommitRequestTopic { name: name.to_string(), partitions })
            .collect(),
    };
    retrying(client, &meta.group_id, || async {
        let body = call(client, &meta.group_id, RequestBody::OffsetCommit(request.clone()), None).await?;
        let ResponseBody::OffsetCommit(r) = body else {
            return Err(Error::protocol("coordinator", "OffsetCommit answered with another API"));
        };
        let first = r.topics.iter().flat_map(|t| t.partitions.iter()).find(|p| p.error_code != 0);
        match first.and_then(|p| Error::from_code(p.error_code, None)) {
            Some(e) => {
                client.on_coordinator_error(CoordinatorKind::Group, &meta.group_id, &e);
                Err(e)
            }
            None => Ok(()),
        }
    })
    .await
}

type CommitJob =
    (ConsumerGroupMetadata, BTreeMap<TopicPartition, OffsetAndMetadata>, oneshot::Sender<Result<()>>);

/// Runs asynchronous commits one after another, in the order they were asked for.
pub(crate) struct Committer {
    jobs: Option<mpsc::UnboundedSender<CommitJob>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Committer {
    pub fn start(client: Client) -> Committer {
        let (jobs, mut rx) = mpsc::unbounded_channel::<CommitJob>();
        let task = tokio::spawn(async move {
            while let Some((meta, offsets, done)) = rx.recv().await {
                let _ = done.send(commit(&client, &meta, &offsets).await);
            }
        });
        Committer { jobs: Some(jobs), task: Some(task) }
    }

    /// Waits for the queued commits to finish (on close), at most `timeout`.
    pub async fn finish(mut self, timeout: Duration) {
        self.jobs = None;
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(timeout, task).await;
        }
    }

    /// Queues a commit; the handle resolves with its outcome.
    pub fn commit(
        &self,
        meta: ConsumerGroupMetadata,
        offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
    ) -> tokio::task::JoinHandle<Result<()>> {
        let (done, rx) = oneshot::channel();
        let queued = self.jobs.as_ref().is_some_and(|j| j.send((meta, offsets, done)).is_ok());
        tokio::spawn(async move {
            if !queued {
                return Err(Error::Closed);
            }
            rx.await.unwrap_or(Err(Error::Closed))
        })
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The group's committed offsets of `partitions` (`None`: nothing committed), stable
/// ones only (`require_stable`, KIP-447: waits out pending transactional commits).
pub(crate) async fn committed(
    client: &Client,
    group_id: &str,
    partitions: &[TopicPartition],
) -> Result<BTreeMap<TopicPartition, Option<OffsetAndMetadata>>> {
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        topics.entry(tp.topic.as_str()).or_default().push(tp.partition);
    }
    let request = OffsetFetchRequest {
        group_id: group_id.to_string(),
        topics: Some(
            topics
                .into_iter()
                .map(|(name, partition_indexes)| OffsetFetchRequestTopic {
                    name: name.to_string(),
                    partition_indexes,
                })
                .collect(),
        ),
        groups: Vec::new(),
        require_stable: true,
    };
    retrying(client, group_id, || async {
        let (_, conn) = client.coordinator(CoordinatorKind::Group, group_id).await?;
        // v8+ batches groups in another layout; one group needs none of it.
        let version = conn.version_at_most(ApiKey::OffsetFetch, 7)?;
        let r = conn.call_at(version, RequestBody::OffsetFetch(request.clone())).await;
        let r = match r {
            Ok(r) => r.body,
            Err(e) => {
                client.on_coordinator_error(CoordinatorKind::Group, group_id, &e);
                return Err(e);
            }
        };
        let ResponseBody::OffsetFetch(r) = r else {
            return Err(Error::protocol(conn.addr(), "OffsetFetch answered with another API"));
        };
        if let Some(e) = Error::from_code(r.error_code, None) {
            client.on_coordinator_error(CoordinatorKind::Group, group_id, &e);
            return Err(e);
        }
        let mut out = BTreeMap::new();
        for t in &r.topics {
            for p in &t.partitions {
                if let Some(e) = Error::from_code(p.error_code, None) {
                    return Err(e);
                }
                let tp = TopicPartition::new(t.name.as_str(), p.partition_index);
                let value = (p.committed_offset >= 0).then(|| OffsetAndMetadata {
                    offset: p.committed_offset,
                    metadata: p.metadata.clone().unwrap_or_default(),
                    leader_epoch: Some(p.committed_leader_epoch).filter(|e| *e >= 0),
                });
                out.insert(tp, value);
            }
        }
        Ok(out)
    })
    .await
}

/// Runs `op` again while it fails retriably, up to `request.timeout.ms`.
async fn retrying<T, F, Fut>(client: &Client, group_id: &str, op: F) -> Result<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let deadline = Instant::now() + client.config().request_timeout;
    let mut attempt = 0;
    loop {
        match op().await {
            Err(e) if e.is_retriable() && Instant::now() < deadline => {
                tracing::debug!(group = group_id, error = %e, "retrying a group request");
                tokio::time::sleep(client.config().backoff(attempt)).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}
