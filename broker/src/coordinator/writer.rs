//! How a coordinator reaches its internal topic (Kafka's `PartitionWriter`): append a
//! batch as the partition's leader, learn when it is replicated, read a partition back
//! from its start, and know which partitions this broker leads. [`LogWriter`] does it on
//! this broker's partitions; the runtime's tests use one in memory.

use crate::node::Node;
use crate::replica::{Partition, WaitError};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use strata_protocol::records::{NewRecord, RecordBatch, RecordBatches};
use strata_protocol::ErrorCode;
use strata_storage::AppendOrigin;
use tokio::time::Instant;

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

/// A future the runtime waits on without holding anything of the writer.
pub type Wait = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The internal topic as a coordinator runtime sees it.
pub trait PartitionWriter: Send + Sync + 'static {
    /// Where an append landed, to ask whether it is replicated.
    type Appended: Clone + Send + 'static;

    /// Appends `records` (key, value or tombstone) as one batch to `topic`-`partition`
    /// as its leader; with `producer = Some((id, epoch))` as that producer's
    /// transactional batch. Refused (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, a
    /// storage error) without effect.
    fn append(
        &self,
        topic: &str,
        partition: i32,
        records: &[(Bytes, Option<Bytes>)],
        producer: Option<(i64, i16)>,
        now_ms: i64,
    ) -> Result<Self::Appended, ErrorCode>;

    /// `None` while the append waits for replication, else its outcome.
    fn replicated(&self, appended: &Self::Appended) -> Option<Result<(), ErrorCode>>;

    /// Resolves once `appended` may be replicated (or leadership was lost, or
    /// `deadline` passed); the runtime then asks [`PartitionWriter::replicated`].
    fn wait_replicated(&self, appended: Self::Appended, deadline: Instant) -> Wait;

    /// Whether this broker leads `topic`-`partition` now (so it can load it).
    fn leads(&self, topic: &str, partition: i32) -> bool;

    /// Calls `f(batch, key, value)` for every keyed record of `topic`-`partition` from its
    /// log start to its log end, in offset order, control records included.
    fn replay(
        &self,
        topic: &str,
        partition: i32,
        f: &mut dyn FnMut(BatchContext, Bytes, Option<Bytes>),
    ) -> Result<(), ErrorCode>;

    /// The partitions of `topic` the metadata says this broker leads that are not in
    /// `owned` (loaded): their requests should be retried, not redirected.
    fn awaiting_load(&self, topic: &str, owned: &BTreeMap<i32, i32>) -> BTreeSet<i32>;
}

/// The internal topics on this broker's own partitions.
#[derive(Debug, Clone)]
pub struct LogWriter {
    node: Arc<Node>,
}

impl LogWriter {
    /// Writes through `node`'s partitions.
    pub fn new(node: Arc<Node>) -> LogWriter {
        LogWriter { node }
    }

    /// `min.insync.replicas` of `p`'s topic.
    fn min_insync_replicas(&self, p: &Partition) -> usize {
        let image = self.node.metadata.current();
        let configs = image.topic(&p.topic).map(|t| t.configs.clone()).unwrap_or_default();
        self.node.topic_defaults().resolve(&configs, "min.insync.replicas").0.parse().unwrap_or(1)
    }
}

/// Where a [`LogWriter`] append landed: replicated once the high watermark passes
/// `last_offset` in `leader_epoch`.
#[derive(Debug, Clone)]
pub struct Appended {
    partition: Arc<Partition>,
    last_offset: i64,
    leader_epoch: i32,
}

impl PartitionWriter for LogWriter {
    type Appended = Appended;

    fn append(
        &self,
        topic: &str,
        partition: i32,
        records: &[(Bytes, Option<Bytes>)],
        producer: Option<(i64, i16)>,
        now_ms: i64,
    ) -> Result<Appended, ErrorCode> {
        let p = self.node.leader_partition(topic, partition).map_err(|_| ErrorCode::NotLeaderOrFollower)?;
        if p.isr_size() < self.min_insync_replicas(&p) {
            return Err(ErrorCode::NotEnoughReplicas);
        }
        let mut builder = strata_protocol::records::RecordBatchBuilder::new(0);
        if let Some((producer_id, producer_epoch)) = producer {
            // No sequence, as Kafka's coordinators write them.
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

    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below the minimum meanwhile.
    fn replicated(&self, a: &Appended) -> Option<Result<(), ErrorCode>> {
        let p = &a.partition;
        if !p.is_leader() || p.leader_epoch() != a.leader_epoch {
            return Some(Err(ErrorCode::NotLeaderOrFollower));
        }
        if p.high_watermark() <= a.last_offset {
            return None;
        }
        if p.isr_size() < self.min_insync_replicas(p) {
            return Some(Err(ErrorCode::NotEnoughReplicasAfterAppend));
        }
        Some(Ok(()))
    }

    fn wait_replicated(&self, a: Appended, deadline: Instant) -> Wait {
        Box::pin(async move {
            let outcome = a.partition.wait_for_high_watermark(a.last_offset, a.leader_epoch, deadline).await;
            if let Err(WaitError::Timeout) = outcome {
                tracing::debug!(topic = %a.partition.topic, partition = a.partition.index, "coordinator append not replicated in time");
            }
        })
    }

    fn leads(&self, topic: &str, partition: i32) -> bool {
        self.node.replicas.get(topic, partition).is_some_and(|p| p.is_leader())
    }

    /// A new leader's log is the partition's truth: what it holds above the high
    /// watermark is committed as soon as the followers fetch it, so a coordinator loads
    /// all of it (as Kafka's does).
    fn replay(
        &self,
        topic: &str,
        partition: i32,
        f: &mut dyn FnMut(BatchContext, Bytes, Option<Bytes>),
    ) -> Result<(), ErrorCode> {
        let p = self.node.replicas.get(topic, partition).ok_or(ErrorCode::NotLeaderOrFollower)?;
        replay(&p, f)
    }

    fn awaiting_load(&self, topic: &str, owned: &BTreeMap<i32, i32>) -> BTreeSet<i32> {
        let image = self.node.metadata.current();
        let Some(t) = image.topic(topic) else { return BTreeSet::new() };
        let me = self.node.config.node_id;
        t.partitions
            .iter()
            .filter(|p| p.leader == me && !owned.contains_key(&p.partition))
            .map(|p| p.partition)
            .collect()
    }
}

/// Reads every keyed record of `p` from its log start to its log end.
fn replay(p: &Partition, f: &mut dyn FnMut(BatchContext, Bytes, Option<Bytes>)) -> Result<(), ErrorCode> {
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
