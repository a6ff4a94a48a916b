//! Internal topics that coordinators keep their state in (`__consumer_offsets`,
//! `__transaction_state`): creating them through the controller on first use, appending
//! coordinator records as the partition's leader and waiting until they are replicated
//! (Kafka's coordinators write with `acks=all`), and reading a partition back from its
//! start when a coordinator takes it over.

use crate::broker::Broker;
use crate::replica::{Partition, WaitError};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use strata_protocol::messages::create_topics::{CreatableTopic, CreatableTopicConfig, CreateTopicsRequest};
use strata_protocol::records::{NewRecord, RecordBatch, RecordBatches};
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};
use strata_storage::AppendOrigin;

/// Name of the group coordinator's topic.
pub const CONSUMER_OFFSETS: &str = "__consumer_offsets";

/// Creates a coordinator's compacted topic unless it exists: `partitions` partitions,
/// `replication_factor` replicas, `segment_bytes` segments (the broker's
/// `offsets.topic.segment.bytes` or `transaction.state.log.segment.bytes`), and the given `compression.type` (and `min.insync.replicas`
/// when given). Returns once this broker's metadata shows the topic.
pub async fn ensure_coordinator_topic(
    broker: &Arc<Broker>,
    name: &str,
    partitions: i32,
    replication_factor: i16,
    segment_bytes: i64,
    extra: &[(&str, String)],
) -> Result<(), ErrorCode> {
    if broker.metadata.current().topic(name).is_some() {
        return Ok(());
    }
    let mut configs = vec![
        CreatableTopicConfig { name: "cleanup.policy".into(), value: Some("compact".into()) },
        CreatableTopicConfig { name: "segment.bytes".into(), value: Some(segment_bytes.to_string()) },
    ];
    for (k, v) in extra {
        configs.push(CreatableTopicConfig { name: k.to_string(), value: Some(v.clone()) });
    }
    let request = CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: name.to_string(),
            num_partitions: partitions,
            replication_factor,
            assignments: Vec::new(),
            configs,
        }],
        timeout_ms: 30_000,
        validate_only: false,
    };
    let timeout = Duration::from_millis(broker.config.cluster.quorum_request_timeout_ms.max(2000));
    let answer = broker.controller_channel().call(RequestBody::CreateTopics(request), 7, timeout).await;
    match answer {
        Ok(ResponseBody::CreateTopics(r)) => {
            let code = r.topics.first().map_or(0, |t| t.error_code);
            if code != 0 && code != ErrorCode::TopicAlreadyExists.code() {
                let message = r.topics.first().and_then(|t| t.error_message.clone()).unwrap_or_default();
                tracing::warn!(topic = name, error = code, %message, "cannot create internal topic");
                return Err(ErrorCode::CoordinatorNotAvailable);
            }
        }
        Ok(_) | Err(_) => return Err(ErrorCode::CoordinatorNotAvailable),
    }
    let image = broker.await_topics_applied(&[name.to_string()], Duration::from_secs(5)).await;
    if image.topic(name).is_some() {
        Ok(())
    } else {
        Err(ErrorCode::CoordinatorNotAvailable)
    }
}

/// The partitions of `topic` that the current metadata says this broker leads but that a
/// coordinator has not loaded (`owned`): between the metadata showing a new leadership and
/// the coordinator being told of it, requests for them should be retried, not redirected.
pub fn awaiting_load(broker: &Broker, topic: &str, owned: &BTreeMap<i32, i32>) -> BTreeSet<i32> {
    let image = broker.metadata.current();
    let Some(t) = image.topic(topic) else { return BTreeSet::new() };
    let me = broker.config.node_id;
    t.partitions
        .iter()
        .filter(|p| p.leader == me && !owned.contains_key(&p.partition))
        .map(|p| p.partition)
        .collect()
}

/// How long a sleeping coordinator task may sleep before its state machine's next
/// deadline (`None`: nothing scheduled, wake up hourly anyway).
pub fn until_deadline(deadline_ms: Option<i64>, now_ms: i64) -> Duration {
    match deadline_ms {
        Some(deadline) => Duration::from_millis((deadline - now_ms).clamp(0, 3_600_000) as u64),
        None => Duration::from_secs(3600),
    }
}

/// Where an append landed: wait for the high watermark to pass `last_offset` in
/// `leader_epoch` before treating it as written.
#[derive(Debug, Clone)]
pub struct Appended {
    /// The partition.
    pub partition: Arc<Partition>,
    /// Offset of the batch's last record.
    pub last_offset: i64,
    /// The leader epoch it was written in.
    pub leader_epoch: i32,
}

/// `min.insync.replicas` of `p`'s topic.
fn min_insync_replicas(broker: &Broker, p: &Partition) -> usize {
    let image = broker.metadata.current();
    let configs = image.topic(&p.topic).map(|t| t.configs.clone()).unwrap_or_default();
    broker.topic_defaults().resolve(&configs, "min.insync.replicas").0.parse().unwrap_or(1)
}

/// Appends `records` (key, value-or-tombstone) as one batch to `topic`-`partition` as its
/// leader; with `transactional = Some((producer id, epoch))` as a transactional batch of
/// that producer (no sequence, as Kafka's coordinators write them). Refused with
/// NOT_ENOUGH_REPLICAS when the ISR is below the topic's `min.insync.replicas`.
pub fn append(
    broker: &Broker,
    topic: &str,
    partition: i32,
    records: &[(Bytes, Option<Bytes>)],
    transactional: Option<(i64, i16)>,
    now_ms: i64,
) -> Result<Appended, ErrorCode> {
    let p = broker.leader_partition(topic, partition).map_err(|_| ErrorCode::NotLeaderOrFollower)?;
    if p.isr_size() < min_insync_replicas(broker, &p) {
        return Err(ErrorCode::NotEnoughReplicas);
    }
    let mut builder = strata_protocol::records::RecordBatchBuilder::new(0);
    if let Some((producer_id, producer_epoch)) = transactional {
        builder = builder.producer(producer_id, producer_epoch, -1).transactional(true);
    }
    for (key, value) in records {
        builder
            .append(&NewRecord::new(now_ms, Some(key.clone()), value.clone()))
            .map_err(|_| ErrorCode::UnknownServerError)?;
    }
    let batch = builder.build().map_err(|_| ErrorCode::UnknownServerError)?;
    let leader_epoch = p.leader_epoch();
    let info = p
        .append_as_leader(batch, AppendOrigin::Coordinator, now_ms)
        .map_err(|e| crate::errors::append_error_code(&e))?;
    Ok(Appended { partition: p, last_offset: info.last_offset, leader_epoch })
}

/// Whether an append is replicated: `None` while waiting, else its outcome
/// (NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below the minimum meanwhile).
pub fn replicated(broker: &Broker, a: &Appended) -> Option<Result<(), ErrorCode>> {
    let p = &a.partition;
    if !p.is_leader() || p.leader_epoch() != a.leader_epoch {
        return Some(Err(ErrorCode::NotLeaderOrFollower));
    }
    if p.high_watermark() <= a.last_offset {
        return None;
    }
    if p.isr_size() < min_insync_replicas(broker, p) {
        return Some(Err(ErrorCode::NotEnoughReplicasAfterAppend));
    }
    Some(Ok(()))
}

/// Appends that finished (with their outcomes, in order) and the head still pending.
pub type Progress<Id> = (Vec<(Id, Result<(), ErrorCode>)>, Option<Appended>);

/// Coordinator appends waiting to be replicated, in issue order per partition, so their
/// completions reach the state machine in the order the appends were made.
#[derive(Debug)]
pub struct PendingAppends<Id> {
    queues: HashMap<i32, VecDeque<(Id, Appended, tokio::time::Instant)>>,
    timeout: Duration,
}

impl<Id: Copy> PendingAppends<Id> {
    /// Appends time out after `timeout` (Kafka's `offsets.commit.timeout.ms`).
    pub fn new(timeout: Duration) -> PendingAppends<Id> {
        PendingAppends { queues: HashMap::new(), timeout }
    }

    /// Queues an append of `partition`. Returns true if its queue was empty: the caller
    /// then calls [`PendingAppends::progress`] (and starts a waiter if still pending).
    pub fn push(&mut self, partition: i32, id: Id, appended: Appended) -> bool {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let queue = self.queues.entry(partition).or_default();
        queue.push_back((id, appended, deadline));
        queue.len() == 1
    }

    /// Pops the appends of `partition` that are done, in order, with their outcomes;
    /// the head that is still pending (if any) is returned for the caller to wait on.
    pub fn progress(&mut self, broker: &Broker, partition: i32) -> Progress<Id> {
        let mut done = Vec::new();
        let Some(queue) = self.queues.get_mut(&partition) else { return (done, None) };
        let now = tokio::time::Instant::now();
        while let Some((id, appended, deadline)) = queue.front() {
            match replicated(broker, appended) {
                Some(outcome) => done.push((*id, outcome)),
                None if *deadline <= now => done.push((*id, Err(ErrorCode::RequestTimedOut))),
                None => break,
            }
            queue.pop_front();
        }
        let head = queue.front().map(|(_, a, _)| a.clone());
        if queue.is_empty() {
            self.queues.remove(&partition);
        }
        (done, head)
    }

    /// The deadline of `partition`'s oldest pending append.
    pub fn head_deadline(&self, partition: i32) -> Option<tokio::time::Instant> {
        self.queues.get(&partition).and_then(|q| q.front()).map(|(_, _, d)| *d)
    }
}

/// Waits until the high watermark of `appended`'s partition passes it, leadership is
/// lost, or `deadline`; the caller then calls [`PendingAppends::progress`].
pub async fn wait_replicated(appended: Appended, deadline: tokio::time::Instant) {
    let outcome = appended
        .partition
        .wait_for_high_watermark(appended.last_offset, appended.leader_epoch, deadline)
        .await;
    if let Err(WaitError::Timeout) = outcome {
        tracing::debug!(topic = %appended.partition.topic, partition = appended.partition.index, "coordinator append not replicated in time");
    }
}

/// What a replayed record's batch says about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchContext {
    /// Producer id of the batch (-1 for plain coordinator writes).
    pub producer_id: i64,
    /// Producer epoch of the batch.
    pub producer_epoch: i16,
    /// True for records written inside a transaction.
    pub is_transactional: bool,
    /// True for a control batch (transaction marker): key and value are the control
    /// record's.
    pub is_control: bool,
}

/// Calls `f(batch, key, value)` for every keyed record of `p` from its log start to its
/// log end, in offset order, control records included. A new leader's log is the
/// partition's truth: what it holds above the high watermark is committed as soon as
/// the followers fetch it, so a coordinator loads all of it (as Kafka's does).
pub fn replay(p: &Partition, mut f: impl FnMut(BatchContext, Bytes, Option<Bytes>)) -> Result<(), ErrorCode> {
    let max_uncompressed = p.log.config().max_uncompressed_batch_bytes;
    let mut offset = p.log.log_start_offset();
    let end = p.log.log_end_offset();
    while offset < end {
        let info =
            p.read_to_log_end(offset, 1 << 20, true).map_err(|e| crate::errors::storage_error_code(&e))?;
        let data = info.records.read_bytes().map_err(|_| ErrorCode::KafkaStorageError)?;
        if data.is_empty() {
            break;
        }
        for batch in RecordBatches::new(data) {
            let batch: RecordBatch = batch.map_err(|_| ErrorCode::CorruptMessage)?;
            let context = BatchContext {
                producer_id: batch.producer_id(),
                producer_epoch: batch.producer_epoch(),
                is_transactional: batch.is_transactional(),
                is_control: batch.is_control(),
            };
            for record in batch.records(max_uncompressed).map_err(|_| ErrorCode::CorruptMessage)? {
                let record = record.map_err(|_| ErrorCode::CorruptMessage)?;
                if record.offset >= offset {
                    if let Some(key) = record.key {
                        f(context, key, record.value);
                    }
                }
            }
            offset = offset.max(batch.next_offset());
        }
    }
    Ok(())
}
