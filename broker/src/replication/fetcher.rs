//! Replica fetchers: one task per leader broker fetches, for every partition this
//! broker follows there, the batches after its log end (Fetch v15 with `ReplicaState`,
//! KIP-903), appends them as a follower, and takes the leader's high watermark and log
//! start offset from the answer (Kafka's `ReplicaFetcherThread`).
//!
//! Every request carries `LastFetchedEpoch` (KIP-595 style divergence check, Fetch
//! v12+): when the follower's log has a tail the leader does not, the leader answers
//! with a `DivergingEpoch` instead of data, and the follower truncates
//! ([`truncation_offset`]) before it fetches again. So a follower never appends after a
//! diverged tail, and never serves one (followers serve no consumers).
//!
//! Each fetcher keeps an incremental fetch session (KIP-227) with its leader, as Kafka's
//! followers do (`strata_protocol::fetch_session`): after the first full request it sends only the
//! partitions whose fetch state changed (a partition it appended to has a new fetch
//! offset) and the ones it stopped fetching, and the leader answers only the partitions
//! with something new. A broker following thousands of partitions on one leader then
//! sends and parses a handful per fetch rather than all of them.

use crate::metadata::MetadataImage;
use crate::net::PeerClient;
use crate::node::Node;
use crate::replica::{FetchedFrom, Partition};
use crate::replication::throttle;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use strata_protocol::codec::Uuid;
use strata_protocol::fetch_session::FetchSession;
use strata_protocol::messages::fetch::{
    FetchPartition, FetchRequest, FetchResponse, FetchTopic, ForgottenTopic, PartitionData, ReplicaState,
};
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};
use strata_storage::StorageError;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Fetch version used between brokers: topic ids and `ReplicaState` (KIP-903).
const FETCH_VERSION: i16 = 15;

/// A partition a fetcher fetches.
#[derive(Debug, Clone)]
struct Target {
    partition: Arc<Partition>,
    /// Skip the partition until then (after an error the metadata should resolve).
    backoff_until: Option<Instant>,
}

type Key = (String, i32);

/// One fetcher: the partitions it fetches from one leader, and how to wake it.
#[derive(Debug)]
struct Fetcher {
    targets: Arc<Mutex<HashMap<Key, Target>>>,
    wake: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

/// All fetchers of this broker, by leader node id.
#[derive(Debug)]
pub struct FetcherManager {
    node: Arc<Node>,
    fetchers: Mutex<HashMap<i32, Fetcher>>,
}

impl FetcherManager {
    /// No fetcher yet: one starts for each leader this node follows a partition of.
    pub fn new(node: Arc<Node>) -> FetcherManager {
        FetcherManager { node, fetchers: Mutex::new(HashMap::new()) }
    }

    /// Fetches `partition` from `leader` from now on (and from no other leader).
    pub fn add(&self, partition: Arc<Partition>, leader: i32) {
        let key: Key = (partition.topic.to_string(), partition.index);
        let mut fetchers = self.fetchers.lock().unwrap_or_else(|p| p.into_inner());
        for (id, f) in fetchers.iter() {
            if *id != leader {
                f.targets.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
            }
        }
        let fetcher = fetchers.entry(leader).or_insert_with(|| {
            let targets = Arc::new(Mutex::new(HashMap::new()));
            let wake = Arc::new(Notify::new());
            let task = tokio::spawn(run(self.node.clone(), leader, targets.clone(), wake.clone()));
            Fetcher { targets, wake, task }
        });
        fetcher
            .targets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, Target { partition, backoff_until: None });
        fetcher.wake.notify_one();
    }

    /// Stops fetching `topic`-`index` from anyone.
    pub fn remove(&self, topic: &str, index: i32) {
        let key: Key = (topic.to_string(), index);
        let fetchers = self.fetchers.lock().unwrap_or_else(|p| p.into_inner());
        for f in fetchers.values() {
            f.targets.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
        }
    }

    /// Number of partitions fetched (for tests and metrics).
    pub fn partition_count(&self) -> usize {
        let fetchers = self.fetchers.lock().unwrap_or_else(|p| p.into_inner());
        fetchers.values().map(|f| f.targets.lock().unwrap_or_else(|p| p.into_inner()).len()).sum()
    }

    /// Stops every fetcher.
    pub fn shutdown(&self) {
        let mut fetchers = self.fetchers.lock().unwrap_or_else(|p| p.into_inner());
        for (_, f) in fetchers.drain() {
            f.task.abort();
        }
    }
}

/// The fetch loop for one leader.
async fn run(node: Arc<Node>, leader: i32, targets: Arc<Mutex<HashMap<Key, Target>>>, wake: Arc<Notify>) {
    let mut client: Option<PeerClient> = None;
    let mut session = FollowerSession::default();
    loop {
        let now = Instant::now();
        let active: Vec<Target> = {
            let t = targets.lock().unwrap_or_else(|p| p.into_inner());
            t.values().filter(|t| t.backoff_until.is_none_or(|u| u <= now)).cloned().collect()
        };
        let backoff = Duration::from_millis(node.config.cluster.replica_fetch_backoff_ms.max(10));
        if active.is_empty() {
            let _ = tokio::time::timeout(backoff, wake.notified()).await;
            continue;
        }
        let Some(addr) = node.inter_broker_address(leader) else {
            tokio::time::sleep(backoff).await;
            continue;
        };
        if client.as_ref().is_none_or(|c| c.addr() != addr) {
            client = Some(PeerClient::new(addr, format!("strata-replica-fetcher-{}", node.config.node_id)));
            // Another address may be another process: its sessions are not ours.
            session.reset();
        }
        let Some(c) = client.as_ref() else { continue };
        let (request, sent_epochs) = build_request(&node, &active, &mut session);
        let wait = Duration::from_millis(node.config.cluster.replica_fetch_wait_max_ms.max(0) as u64);
        let timeout = wait + Duration::from_millis(node.config.cluster.replica_socket_timeout_ms);
        match c.call(RequestBody::Fetch(request), FETCH_VERSION, timeout).await {
            Ok(ResponseBody::Fetch(response)) => {
                session.answered(response.error_code, response.session_id);
                handle_response(&node, leader, &targets, &active, &sent_epochs, response);
            }
            Ok(other) => {
                session.reset();
                tracing::error!(leader, api = ?other.api_key(), "unexpected answer to a replica fetch")
            }
            Err(e) => {
                // Whether the leader saw the request is unknown: start a new session.
                session.reset();
                tracing::debug!(leader, error = %e, "replica fetch failed; backing off");
                tokio::time::sleep(backoff).await;
            }
        }
    }
}

/// A partition in the session: its topic id and index.
type SessionKey = (Uuid, i32);

/// The follower's side of its fetch session with one leader.
type FollowerSession = FetchSession<SessionKey>;

/// Whether this broker's replica of `p` is throttled as a follower.
fn follower_throttled(broker: &Node, image: &MetadataImage, p: &Partition) -> bool {
    let me = broker.config.node_id;
    throttle::throttled(image, &p.topic, p.index, throttle::FOLLOWER_REPLICAS, me, me)
}

/// The leader epoch each partition of a request was fetched in (its `current_leader_epoch`).
type SentEpochs = HashMap<SessionKey, i32>;

/// The next request to the leader, and the leader epoch of every partition it fetches
/// (also those an incremental session leaves out): an answer is applied only while the
/// partition still follows the leader in that epoch.
fn build_request(
    broker: &Node,
    active: &[Target],
    session: &mut FollowerSession,
) -> (FetchRequest, SentEpochs) {
    let c = &broker.config.cluster;
    // Throttled replicas out of the ISR sit out while the follower's quota is spent
    // (KIP-73); leaving the request drops them from the session until they return.
    let image = broker.metadata.current();
    let quota_spent = broker.follower_quota.exceeded();
    let wanted: Vec<(SessionKey, FetchPartition)> = active
        .iter()
        .filter(|t| !(quota_spent && follower_throttled(broker, &image, &t.partition)))
        .map(|t| {
            let p = &t.partition;
            let fp = FetchPartition {
                partition: p.index,
                current_leader_epoch: p.leader_epoch(),
                fetch_offset: p.log.log_end_offset(),
                last_fetched_epoch: p.log.latest_epoch().unwrap_or(-1),
                log_start_offset: p.log.log_start_offset(),
                partition_max_bytes: c.replica_fetch_max_bytes,
                ..Default::default()
            };
            ((p.topic_id, p.index), fp)
        })
        .collect();
    let sent_epochs = wanted.iter().map(|(key, fp)| (*key, fp.current_leader_epoch)).collect();
    let plan = session.plan(wanted);
    let mut by_topic: HashMap<Uuid, Vec<FetchPartition>> = HashMap::new();
    for ((topic_id, _), fp) in plan.partitions {
        by_topic.entry(topic_id).or_default().push(fp);
    }
    let mut forgotten: HashMap<Uuid, Vec<i32>> = HashMap::new();
    for (topic_id, partition) in plan.forgotten {
        forgotten.entry(topic_id).or_default().push(partition);
    }
    let request = FetchRequest {
        replica_id: broker.config.node_id,
        replica_state: ReplicaState {
            replica_id: broker.config.node_id,
            replica_epoch: broker.broker_epoch(),
        },
        max_wait_ms: c.replica_fetch_wait_max_ms,
        min_bytes: c.replica_fetch_min_bytes,
        max_bytes: c.replica_fetch_response_max_bytes,
        isolation_level: 0,
        session_id: plan.id,
        session_epoch: plan.epoch,
        topics: by_topic
            .into_iter()
            .map(|(topic_id, partitions)| FetchTopic { topic_id, partitions, ..Default::default() })
            .collect(),
        forgotten_topics_data: forgotten
            .into_iter()
            .map(|(topic_id, partitions)| ForgottenTopic { topic_id, partitions, ..Default::default() })
            .collect(),
        ..Default::default()
    };
    (request, sent_epochs)
}

fn handle_response(
    broker: &Node,
    leader: i32,
    targets: &Mutex<HashMap<Key, Target>>,
    active: &[Target],
    sent_epochs: &SentEpochs,
    response: FetchResponse,
) {
    let backoff = Duration::from_millis(broker.config.cluster.replica_fetch_backoff_ms.max(10));
    if response.error_code != 0 {
        let code = ErrorCode::from_code(response.error_code);
        if matches!(code, Some(ErrorCode::FetchSessionIdNotFound | ErrorCode::InvalidFetchSessionEpoch)) {
            // The leader restarted or evicted the session: the next request opens another.
            tracing::debug!(leader, error = response.error_code, "replica fetch session lost");
        } else {
            tracing::warn!(leader, error = response.error_code, "replica fetch refused");
        }
        return;
    }
    let answered = response.responses.iter().map(|t| t.partitions.len()).sum();
    let index = TargetIndex::new(active, answered);
    let image = broker.metadata.current();
    for topic in response.responses {
        for pd in topic.partitions {
            let Some(target) = index.get(topic.topic_id, pd.partition_index) else {
                continue;
            };
            let p = &target.partition;
            // The partition may have moved to another leader or epoch meanwhile: the answer
            // is then stale (re-checked under the role lock when the log is changed).
            let Some(&leader_epoch) = sent_epochs.get(&(p.topic_id, p.index)) else { continue };
            let fetched = FetchedFrom { leader, leader_epoch };
            if p.follower_of() != Some(leader) || p.leader_epoch() != leader_epoch {
                continue;
            }
            if follower_throttled(broker, &image, p) {
                broker.follower_quota.record(pd.records.as_ref().map_or(0, |r| r.len()));
            }
            if let Err(code) = apply_partition(broker, p, fetched, pd) {
                let delay = if code == ErrorCode::UnknownLeaderEpoch { backoff / 4 } else { backoff };
                let key = (p.topic.to_string(), p.index);
                if let Some(t) = targets.lock().unwrap_or_else(|x| x.into_inner()).get_mut(&key) {
                    t.backoff_until = Some(Instant::now() + delay);
                }
            }
        }
    }
}

/// Finds the target each partition of an answer is for. An incremental answer holds
/// few partitions, which a scan of `active` finds cheaply; one with many (a first full
/// answer, a busy leader) gets a map, since a scan per partition was quadratic with a
/// thousand partitions per leader.
struct TargetIndex<'a> {
    active: &'a [Target],
    map: Option<HashMap<(Uuid, i32), usize>>,
}

impl<'a> TargetIndex<'a> {
    /// Answers with more partitions than this are matched through a map.
    const SCAN_LIMIT: usize = 16;

    fn new(active: &'a [Target], answered: usize) -> Self {
        let map = (answered > Self::SCAN_LIMIT && active.len() > Self::SCAN_LIMIT).then(|| {
            active.iter().enumerate().map(|(i, t)| ((t.partition.topic_id, t.partition.index), i)).collect()
        });
        TargetIndex { active, map }
    }

    fn get(&self, topic_id: Uuid, index: i32) -> Option<&'a Target> {
        match &self.map {
            Some(map) => map.get(&(topic_id, index)).map(|&i| &self.active[i]),
            None => {
                self.active.iter().find(|t| t.partition.topic_id == topic_id && t.partition.index == index)
            }
        }
    }
}

/// Applies one partition's answer: truncation on divergence, else the records, the
/// high watermark and the log start offset. An error code means "back off this
/// partition for a while" (the metadata will say what changed).
fn apply_partition(
    broker: &Node,
    p: &Partition,
    fetched: FetchedFrom,
    pd: PartitionData,
) -> Result<(), ErrorCode> {
    match ErrorCode::from_code(pd.error_code).unwrap_or(ErrorCode::UnknownServerError) {
        ErrorCode::None => {}
        ErrorCode::OffsetOutOfRange => return out_of_range(p, fetched, pd.log_start_offset),
        code => {
            tracing::debug!(topic = %p.topic, partition = p.index, error = code.name(), "replica fetch error");
            return Err(code);
        }
    }
    if pd.diverging_epoch.epoch >= 0 || pd.diverging_epoch.end_offset >= 0 {
        let offset = truncation_offset(p, pd.diverging_epoch.epoch, pd.diverging_epoch.end_offset);
        tracing::info!(
            topic = %p.topic,
            partition = p.index,
            leader_epoch = pd.diverging_epoch.epoch,
            leader_end_offset = pd.diverging_epoch.end_offset,
            log_end_offset = p.log.log_end_offset(),
            truncate_to = offset,
            "log diverged from the leader's; truncating"
        );
        return p.truncate_to(offset, fetched).map(|_| ()).map_err(|e| storage_failure(p, &e));
    }
    if let Some(records) = pd.records.as_ref().and_then(|r| r.memory()).filter(|b| !b.is_empty()) {
        match p.append_as_follower(records, fetched) {
            Ok(Some(_)) => {}
            // No longer following that leader in that epoch: the answer is stale.
            Ok(None) => return Ok(()),
            Err(StorageError::UnexpectedAppendOffset { .. }) => {
                // Our log end moved since the request (a truncation); fetch again.
                return Ok(());
            }
            Err(e) => return Err(storage_failure(p, &e)),
        }
    }
    p.update_follower_high_watermark(pd.high_watermark);
    let leader_start = pd.log_start_offset;
    if leader_start > p.log.log_start_offset() {
        let upto = leader_start.min(p.log.log_end_offset());
        if let Err(e) = broker.replicas.delete_records(p, upto) {
            tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "cannot follow the leader's log start offset");
        }
    }
    Ok(())
}

fn storage_failure(p: &Partition, e: &StorageError) -> ErrorCode {
    tracing::error!(topic = %p.topic, partition = p.index, error = %e, "follower log operation failed");
    crate::errors::storage_error_code(e)
}

/// The leader no longer has our fetch offset: below its log start (retention ran while
/// we were away) we restart our log at its start; above its end we truncate to it.
fn out_of_range(p: &Partition, fetched: FetchedFrom, leader_log_start: i64) -> Result<(), ErrorCode> {
    let leo = p.log.log_end_offset();
    if leader_log_start >= 0 && leo < leader_log_start {
        tracing::warn!(topic = %p.topic, partition = p.index, log_end_offset = leo, leader_log_start, "behind the leader's log start; restarting the log there");
        return p.restart_log_at(leader_log_start, fetched).map_err(|e| storage_failure(p, &e));
    }
    Err(ErrorCode::OffsetOutOfRange)
}

/// Where to cut the follower's log given the leader's `(epoch, end_offset)` for our last
/// fetched epoch (Kafka's `AbstractFetcherThread.getOffsetTruncationState`): the end of
/// that epoch on both sides, never past our own log end.
pub fn truncation_offset(p: &Partition, leader_epoch: i32, leader_end_offset: i64) -> i64 {
    let leo = p.log.log_end_offset();
    if leader_end_offset < 0 {
        // The leader knows nothing at or below our epoch: keep what is committed.
        return p.high_watermark().min(leo);
    }
    if leader_epoch < 0 {
        return leader_end_offset.min(leo);
    }
    match p.log.end_offset_for_epoch(leader_epoch) {
        Some((epoch, end)) if epoch >= 0 && epoch != leader_epoch => {
            // We do not have the leader's epoch: cut to the end of our largest epoch
            // below it; the next fetch checks again from there.
            end.min(leo)
        }
        Some((epoch, end)) if epoch >= 0 => end.min(leader_end_offset).min(leo),
        _ => leader_end_offset.min(leo),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{PartitionRecord, TopicId};
    use crate::replica::ReplicaManager;
    use bytes::Bytes;
    use strata_protocol::records::{NewRecord, RecordBatchBuilder};
    use strata_storage::{LogConfig, LogManager};

    /// `count` one-record batches from `base` stamped with leader `epoch`.
    fn batches(base: i64, count: i64, epoch: i32) -> Bytes {
        let mut all = bytes::BytesMut::new();
        for i in 0..count {
            let mut b = RecordBatchBuilder::new(base + i).partition_leader_epoch(epoch);
            b.append(&NewRecord::new(1, None, Some(Bytes::from_static(b"v")))).expect("append");
            all.extend_from_slice(&b.build().expect("build"));
        }
        all.freeze()
    }

    /// What the follower below fetches from: node 2 in leader epoch 3.
    const FROM_2: FetchedFrom = FetchedFrom { leader: 2, leader_epoch: 3 };

    /// A follower of node 2 whose log holds epochs 0 (offsets 0..10) and 2 (10..15).
    fn follower(dir: &std::path::Path) -> Arc<Partition> {
        let logs = LogManager::open(dir, LogConfig::default(), 0).expect("logs");
        let replicas = ReplicaManager::new(logs, 1);
        let p = replicas.ensure("t", 0, Uuid([3; 16]), &LogConfig::default()).expect("partition");
        let record = PartitionRecord {
            topic_id: TopicId(Uuid([3; 16])),
            partition: 0,
            replicas: vec![1, 2],
            isr: vec![1, 2],
            leader: 2,
            leader_epoch: 3,
            partition_epoch: 3,
            adding_replicas: vec![],
            removing_replicas: vec![],
        };
        p.make_follower(&record);
        p.append_as_follower(batches(0, 10, 0), FROM_2).expect("epoch 0");
        p.append_as_follower(batches(10, 5, 2), FROM_2).expect("epoch 2");
        assert_eq!(p.log.latest_epoch(), Some(2));
        p
    }

    #[test]
    fn answers_are_matched_to_their_targets_by_scan_or_by_map() {
        let dir = tempfile::tempdir().expect("dir");
        let logs = LogManager::open(dir.path(), LogConfig::default(), 0).expect("logs");
        let replicas = ReplicaManager::new(logs, 1);
        let active: Vec<Target> = (0..40)
            .map(|i| Target {
                partition: replicas.ensure("t", i, Uuid([3; 16]), &LogConfig::default()).expect("partition"),
                backoff_until: None,
            })
            .collect();
        for answered in [1, 40] {
            let index = TargetIndex::new(&active, answered);
            assert_eq!(index.map.is_some(), answered > TargetIndex::SCAN_LIMIT);
            for i in [39, 0, 17] {
                assert_eq!(index.get(Uuid([3; 16]), i).map(|t| t.partition.index), Some(i));
            }
            assert!(index.get(Uuid([3; 16]), 40).is_none());
            assert!(index.get(Uuid([4; 16]), 0).is_none());
        }
    }

    #[test]
    fn a_tail_the_leader_never_had_is_cut_at_the_end_of_its_epoch() {
        let dir = tempfile::tempdir().expect("dir");
        let p = follower(dir.path());
        // The leader's epoch 2 ended at 12: our 12..15 were never replicated.
        assert_eq!(truncation_offset(&p, 2, 12), 12);
        // The leader has all of epoch 2 and more: nothing to cut.
        assert_eq!(truncation_offset(&p, 2, 40), 15);
    }

    #[test]
    fn an_epoch_the_follower_lacks_cuts_to_its_own_end_of_the_epoch_below() {
        let dir = tempfile::tempdir().expect("dir");
        let p = follower(dir.path());
        // Leader answers with epoch 1 (ending at 11): we have no epoch 1; our largest epoch
        // below it is 0, which ends at 10 here. Cut there and ask again.
        assert_eq!(truncation_offset(&p, 1, 11), 10);
    }

    #[test]
    fn a_leader_without_any_epoch_at_or_below_ours_keeps_only_what_is_committed() {
        let dir = tempfile::tempdir().expect("dir");
        let p = follower(dir.path());
        p.update_follower_high_watermark(7);
        assert_eq!(truncation_offset(&p, -1, -1), 7);
        assert_eq!(truncation_offset(&p, -1, 9), 9, "no epoch, an end offset: the smaller of it and ours");
    }

    #[test]
    fn an_answer_fetched_in_an_earlier_role_changes_nothing() {
        let dir = tempfile::tempdir().expect("dir");
        let p = follower(dir.path());
        let record = |leader: i32, leader_epoch: i32| PartitionRecord {
            topic_id: TopicId(Uuid([3; 16])),
            partition: 0,
            replicas: vec![1, 2],
            isr: vec![1, 2],
            leader,
            leader_epoch,
            partition_epoch: leader_epoch,
            adding_replicas: vec![],
            removing_replicas: vec![],
        };
        // A fetch sent to node 2 in epoch 3 was in flight while this replica followed
        // node 2 again in epoch 4: its answer is not applied.
        p.make_follower(&record(2, 4));
        assert_eq!(p.append_as_follower(batches(15, 2, 3), FROM_2).expect("stale"), None);
        assert!(!p.truncate_to(12, FROM_2).expect("stale"));
        p.restart_log_at(100, FROM_2).expect("stale");
        assert_eq!(p.log.log_end_offset(), 15, "a stale answer wrote, cut or restarted the log");
        // Nor once it leads: a new leader never appends its old leader's answer.
        p.make_leader(&record(1, 5), 0);
        let now = FetchedFrom { leader: 2, leader_epoch: 4 };
        assert_eq!(p.append_as_follower(batches(15, 2, 4), now).expect("leader"), None);
        assert!(!p.truncate_to(12, now).expect("leader"));
        assert_eq!(p.log.log_end_offset(), 15);
        assert_eq!(p.log.latest_epoch(), Some(5));
    }

    #[test]
    fn truncation_then_appending_the_leaders_data_converges() {
        let dir = tempfile::tempdir().expect("dir");
        let p = follower(dir.path());
        let cut = truncation_offset(&p, 2, 12);
        assert!(p.truncate_to(cut, FROM_2).expect("truncate"));
        assert_eq!(p.log.log_end_offset(), 12);
        p.append_as_follower(batches(12, 3, 3), FROM_2).expect("leader's epoch 3 data");
        assert_eq!(p.log.end_offset_for_epoch(2), Some((2, 12)));
        assert_eq!(p.log.latest_epoch(), Some(3));
    }
}
