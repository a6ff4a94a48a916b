//! The record accumulator: per partition a queue of batches, the last one open for
//! appends, built in place by [`RecordBatchBuilder`] (compression is applied when a batch
//! is sealed for sending). Pure and synchronous: the producer calls it under a lock
//! that is never held across an `.await`, and the sender drains ready batches from it.
//!
//! A batch is ready when it is full (`batch.size`), has waited `linger.ms`, is covered by
//! a flush, the producer is closing, or (a retry) its backoff has passed. A retried batch
//! goes back into its queue in creation order, ahead of newer ones, and is sent again
//! only once nothing else of its partition is in flight, so per-partition order holds.

use super::idempotence::{PartitionSequence, ProducerIdAndEpoch};
use super::partitioner::next_sticky;
use super::record::BatchSlot;
use crate::error::{Error, Result};
use bytes::{Bytes, BytesMut};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata_protocol::records::{Compression, HeaderParts, NewRecord, RecordBatchBuilder, RecordBatchMut};

/// Bytes a record may add beyond its key, value and headers (length, attributes,
/// timestamp and offset deltas, the varints of each field).
pub(crate) const RECORD_OVERHEAD: usize = 21;
/// Per header beyond its key and value.
const HEADER_OVERHEAD: usize = 10;
/// Where the producer id, epoch and base sequence sit in a v2 batch header.
const PRODUCER_ID_AT: usize = 43;

/// A record as the accumulator appends it, whatever holds its bytes: a [`NewRecord`]
/// of the producer's owned records, or a view of a caller's borrowed ones.
pub(crate) trait RecordParts {
    /// How its headers are held.
    type Header: HeaderParts;
    fn timestamp(&self) -> i64;
    fn key(&self) -> Option<&[u8]>;
    fn value(&self) -> Option<&[u8]>;
    fn headers(&self) -> &[Self::Header];
}

impl RecordParts for NewRecord {
    type Header = strata_protocol::records::RecordHeader;

    fn timestamp(&self) -> i64 {
        self.timestamp
    }

    fn key(&self) -> Option<&[u8]> {
        self.key.as_deref()
    }

    fn value(&self) -> Option<&[u8]> {
        self.value.as_deref()
    }

    fn headers(&self) -> &[Self::Header] {
        &self.headers
    }
}

impl HeaderParts for crate::types::Header {
    fn key(&self) -> &[u8] {
        self.key.as_bytes()
    }

    fn value(&self) -> Option<&[u8]> {
        self.value.as_deref()
    }
}

/// An upper bound of the bytes `record` adds to a batch.
pub(crate) fn record_size(record: &impl RecordParts) -> usize {
    let mut n = RECORD_OVERHEAD + record.key().map_or(0, <[u8]>::len);
    n += record.value().map_or(0, <[u8]>::len);
    for h in record.headers() {
        n += HEADER_OVERHEAD + h.key().len() + h.value().map_or(0, <[u8]>::len);
    }
    n
}

/// Where an appended record went.
pub(crate) struct Appended<'a> {
    /// Its batch's completion.
    pub slot: &'a Arc<BatchSlot>,
    /// Its index in the batch (offset delta).
    pub index: i32,
    /// The partition of the batch it opened, if it opened one.
    pub opened: Option<i32>,
}

impl std::fmt::Debug for Appended<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Appended")
            .field("partition", &self.slot.partition())
            .field("index", &self.index)
            .field("opened", &self.opened)
            .finish()
    }
}

/// One batch of one partition, from its first record to its acknowledgement.
pub(crate) struct ProducerBatch {
    /// Creation order across the producer (flush and retry placement use it).
    pub id: u64,
    pub topic: Arc<str>,
    pub partition: i32,
    builder: Option<RecordBatchBuilder>,
    sealed: Option<Bytes>,
    stamp: (i64, i16, i32),
    /// Records in the batch.
    pub records: i32,
    /// `buffer.memory` bytes its records hold.
    pub memory: usize,
    pub created: Instant,
    pub slot: Arc<BatchSlot>,
    /// Sends so far.
    pub attempts: u32,
    /// Base sequence, -1 until first drained by an idempotent producer.
    pub sequence: i32,
    /// Not before this instant (a retry's backoff).
    pub retry_at: Option<Instant>,
    full: bool,
    /// Bytes of records so far (uncompressed), for `batch.size`.
    pub size: usize,
}

impl std::fmt::Debug for ProducerBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProducerBatch")
            .field("id", &self.id)
            .field("partition", &format_args!("{}-{}", self.topic, self.partition))
            .field("records", &self.records)
            .field("sequence", &self.sequence)
            .finish()
    }
}

impl ProducerBatch {
    /// The batch's bytes for a Produce request, stamped with `pid` and its sequence;
    /// built (and compressed) on the first call, re-stamped after an epoch bump.
    pub(crate) fn seal(&mut self, pid: ProducerIdAndEpoch) -> Result<Bytes> {
        let stamp = (pid.id, pid.epoch, if pid.is_set() { self.sequence } else { -1 });
        if let Some(builder) = self.builder.take() {
            let bytes = builder
                .producer(stamp.0, stamp.1, stamp.2)
                .build()
                .map_err(|e| Error::state(format!("building a batch of {}: {e}", self.topic)))?;
            self.sealed = Some(bytes);
            self.stamp = stamp;
        }
        let sealed = self.sealed.as_ref().ok_or_else(|| Error::state("a batch without records"))?;
        if self.stamp != stamp {
            let mut buf = BytesMut::from(&sealed[..]);
            buf[PRODUCER_ID_AT..PRODUCER_ID_AT + 8].copy_from_slice(&stamp.0.to_be_bytes());
            buf[PRODUCER_ID_AT + 8..PRODUCER_ID_AT + 10].copy_from_slice(&stamp.1.to_be_bytes());
            buf[PRODUCER_ID_AT + 10..PRODUCER_ID_AT + 14].copy_from_slice(&stamp.2.to_be_bytes());
            RecordBatchMut::new(&mut buf)
                .map_err(|e| Error::state(format!("re-stamping a batch: {e}")))?
                .recompute_crc();
            self.sealed = Some(buf.freeze());
            self.stamp = stamp;
        }
        Ok(self.sealed.clone().unwrap_or_default())
    }

    fn is_open(&self) -> bool {
        self.builder.is_some() && !self.full
    }

    /// The sealed batch, once the batch is finished (its buffer can be recycled).
    pub(crate) fn into_sealed(self) -> Option<Bytes> {
        self.sealed
    }
}

/// A partition's queue and sequence state.
#[derive(Default)]
pub(crate) struct PartitionQueue {
    pub batches: VecDeque<ProducerBatch>,
    pub seq: PartitionSequence,
}

struct TopicQueues {
    name: Arc<str>,
    sticky: Option<i32>,
    partitions: Vec<PartitionQueue>,
    meta: Option<TopicMeta>,
}

/// What partitioning needs of a topic's metadata, kept here so a send needs no lookup
/// in the cluster view (the sender refreshes it when the view changes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TopicMeta {
    /// Partition count.
    pub partitions: i32,
    /// Partitions with a leader (sticky partitioning picks among them).
    pub available: Vec<i32>,
}

/// Where a record goes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target {
    /// An explicit partition.
    Partition(i32),
    /// A keyed record: `toPositive(murmur2(key))`, taken modulo the partition count.
    Key(i32),
    /// An unkeyed record: the topic's sticky partition.
    Sticky,
}

impl TopicQueues {
    fn queue(&mut self, partition: i32) -> &mut PartitionQueue {
        let i = partition.max(0) as usize;
        while self.partitions.len() <= i {
            self.partitions.push(PartitionQueue { batches: VecDeque::new(), seq: PartitionSequence::new() });
        }
        &mut self.partitions[i]
    }

    fn fits(&self, partition: i32, size: usize, batch_size: usize) -> bool {
        self.partitions
            .get(partition.max(0) as usize)
            .and_then(|q| q.batches.back())
            .is_some_and(|b| b.is_open() && (b.records == 0 || b.size + size <= batch_size))
    }
}

/// What the sender needs to decide whether a partition's front batch goes now.
pub(crate) struct DrainRules<'a> {
    pub now: Instant,
    pub linger: Duration,
    pub delivery_timeout: Duration,
    /// Batches with an id up to this are ready regardless of linger (a flush).
    pub flush_up_to: Option<u64>,
    /// Everything is ready (closing).
    pub all_ready: bool,
    pub max_request_size: usize,
    pub idempotent: bool,
    /// The leader's node id of a partition, if known.
    pub leader: &'a dyn Fn(&str, i32) -> Option<i32>,
    /// Whether a node takes another request now (its in-flight limit).
    pub node_has_room: &'a dyn Fn(i32) -> bool,
    /// Whether a node has a usable connection; its batches wait (and it is reported
    /// in [`Drained::unready`]) until it has.
    pub node_ready: &'a dyn Fn(i32) -> bool,
    /// Whether a partition may send (a transaction has added it).
    pub partition_allowed: &'a mut dyn FnMut(&Arc<str>, i32) -> bool,
}

/// One drain's outcome.
#[derive(Default)]
pub(crate) struct Drained {
    /// Per node, the batches of one Produce request.
    pub requests: Vec<(i32, Vec<ProducerBatch>)>,
    /// Batches past `delivery.timeout.ms` before they were sent (again).
    pub expired: Vec<ProducerBatch>,
    /// When a lingering or backing-off batch becomes ready.
    pub next_ready: Option<Instant>,
    /// Topics with a ready batch whose leader is unknown.
    pub no_leader: Vec<Arc<str>>,
    /// Nodes with a ready batch but no usable connection, with the batch's topic.
    pub unready: Vec<(i32, Arc<str>)>,
}

/// Every partition's batches.
pub(crate) struct Accumulator {
    batch_size: usize,
    compression: Compression,
    compression_level: Option<i32>,
    transactional: bool,
    topics: Vec<TopicQueues>,
    index: HashMap<String, usize>,
    /// The topic of the last append: most producers send to one topic at a time, and
    /// comparing names is cheaper than hashing them.
    last: usize,
    next_id: u64,
    rotation: usize,
    incomplete: BTreeSet<u64>,
    /// Buffers of finished batches, for new batches to build in (see
    /// [`Accumulator::recycle`]).
    spare: Vec<Vec<u8>>,
}

/// Bytes of finished batches' buffers kept for new batches: enough for the batches in
/// flight and open at once in a busy producer, little enough to leave idle.
const SPARE_BYTES: usize = 4 << 20;

impl Accumulator {
    pub(crate) fn new(batch_size: usize, compression: Compression, transactional: bool) -> Accumulator {
        Accumulator {
            batch_size: batch_size.max(1),
            compression,
            compression_level: None,
            transactional,
            topics: Vec::new(),
            index: HashMap::new(),
            last: 0,
            next_id: 0,
            rotation: 0,
            incomplete: BTreeSet::new(),
            spare: Vec::new(),
        }
    }

    /// Compresses batches at `level` (the codec's default with `None`).
    pub(crate) fn with_compression_level(mut self, level: Option<i32>) -> Accumulator {
        self.compression_level = level;
        self
    }

    fn find(&mut self, topic: &str) -> Option<usize> {
        if self.topics.get(self.last).is_some_and(|t| &*t.name == topic) {
            return Some(self.last);
        }
        let i = *self.index.get(topic)?;
        self.last = i;
        Some(i)
    }

    fn find_or_insert(&mut self, topic: &str) -> usize {
        if let Some(i) = self.find(topic) {
            return i;
        }
        let queues = TopicQueues { name: Arc::from(topic), sticky: None, partitions: Vec::new(), meta: None };
        self.topics.push(queues);
        let i = self.topics.len() - 1;
        self.index.insert(topic.to_string(), i);
        i
    }

    /// Records a topic's partitioning metadata.
    pub(crate) fn set_meta(&mut self, topic: &str, meta: TopicMeta) {
        let i = self.find_or_insert(topic);
        self.topics[i].meta = Some(meta);
    }

    /// Updates every known topic's metadata from `lookup` (a new cluster view).
    pub(crate) fn refresh_meta(&mut self, lookup: impl Fn(&str) -> Option<TopicMeta>) {
        for t in &mut self.topics {
            if let Some(meta) = lookup(&t.name) {
                if t.meta.as_ref() != Some(&meta) {
                    t.meta = Some(meta);
                }
            }
        }
    }

    /// Appends `record` (holding `memory` bytes of `buffer.memory`) to the partition
    /// `target` names, or to the topic's sticky partition (moving it when a new batch
    /// would be opened there, KIP-480). `Ok(None)`: the topic's metadata is not known
    /// yet. Returns where the record went (its batch's slot, which the caller clones
    /// into a future or shares between many records) and, when it opened a new batch,
    /// its partition.
    /// `clock` is read only when a batch is opened.
    pub(crate) fn append(
        &mut self,
        topic: &str,
        target: Target,
        record: &impl RecordParts,
        memory: usize,
        clock: &dyn Fn() -> Instant,
    ) -> Result<Option<Appended<'_>>> {
        let Some(t) = self.find(topic) else { return Ok(None) };
        let size = record_size(record);
        let batch_size = self.batch_size;
        let (compression, level, transactional) =
            (self.compression, self.compression_level, self.transactional);
        let tq = &mut self.topics[t];
        let Some(meta) = tq.meta.as_ref() else { return Ok(None) };
        let partitions = meta.partitions;
        let p = match target {
            Target::Partition(p) if p < 0 || p >= partitions => {
                return Err(Error::Kafka {
                    code: strata_protocol::ErrorCode::UnknownTopicOrPartition,
                    message: Some(format!("{topic}-{p}: the topic has {partitions} partitions")),
                })
            }
            Target::Partition(p) => p,
            Target::Key(hash) => hash % partitions.max(1),
            Target::Sticky => {
                let current = tq.sticky.filter(|s| *s < partitions);
                let mut p = match current {
                    Some(s) => s,
                    None => next_sticky(None, &meta.available, partitions),
                };
                if current.is_some() && !tq.fits(p, size, batch_size) {
                    p = next_sticky(Some(p), &meta.available, partitions);
                }
                tq.sticky = Some(p);
                p
            }
        };
        // The name is cloned for a new batch only, not per record.
        let new_batch = (!tq.fits(p, size, batch_size)).then(|| tq.name.clone());
        let queue = tq.queue(p);
        let mut opened = None;
        if let Some(name) = new_batch {
            if let Some(last) = queue.batches.back_mut() {
                last.full = true;
            }
            let id = self.next_id;
            self.next_id += 1;
            self.incomplete.insert(id);
            let mut builder = RecordBatchBuilder::new(0)
                .compression(compression)
                .compression_level(level)
                .transactional(transactional);
            if let Some(buffer) = self.spare.pop() {
                builder = builder.with_buffer(buffer);
            }
            let builder = builder.with_capacity(batch_size.min(1 << 20).max(size + 64));
            queue.batches.push_back(ProducerBatch {
                id,
                topic: name.clone(),
                partition: p,
                builder: Some(builder),
                sealed: None,
                stamp: (-1, -1, -1),
                records: 0,
                memory: 0,
                created: clock(),
                // A copy of the name of its own: the futures' metadata clone it per record
                // on the awaiting task's core, which must not bounce the cache line the
                // appending core reads the accumulator's name from.
                slot: Arc::new(BatchSlot::new(Arc::from(&*name), p)),
                attempts: 0,
                sequence: -1,
                retry_at: None,
                full: false,
                size: 0,
            });
            opened = Some(p);
        }
        let batch = queue.batches.back_mut().ok_or_else(|| Error::state("no open batch"))?;
        let builder = batch.builder.as_mut().ok_or_else(|| Error::state("batch already sealed"))?;
        let index = builder.len() as i32;
        builder
            .append_parts(record.timestamp(), record.key(), record.value(), record.headers())
            .map_err(|e| Error::state(format!("appending to a batch of {topic}: {e}")))?;
        batch.records += 1;
        batch.size += size;
        batch.memory += memory;
        if batch.size >= batch_size {
            batch.full = true;
        }
        Ok(Some(Appended { slot: &batch.slot, index, opened }))
    }

    /// Takes ready batches: per node, at most one batch per partition, up to
    /// `max.request.size` per request.
    pub(crate) fn drain(&mut self, rules: &mut DrainRules<'_>) -> Drained {
        let mut out = Drained::default();
        let mut by_node: HashMap<i32, (usize, Vec<ProducerBatch>)> = HashMap::new();
        let mut no_leader: Vec<Arc<str>> = Vec::new();
        let mut slots: Vec<(&mut TopicQueues, usize)> = Vec::new();
        for tq in self.topics.iter_mut() {
            let n = tq.partitions.len();
            slots.push((tq, n));
        }
        let total: usize = slots.iter().map(|(_, n)| n).sum();
        if total == 0 {
            return out;
        }
        self.rotation = (self.rotation + 1) % total;
        // Visit partitions starting at a rotating index, so a large request does not
        // always favour the same partitions.
        let mut order: Vec<(usize, usize)> = Vec::with_capacity(total);
        for (t, (_, n)) in slots.iter().enumerate() {
            for p in 0..*n {
                order.push((t, p));
            }
        }
        order.rotate_left(self.rotation);
        for (t, p) in order {
            let tq = &mut *slots[t].0;
            let name = tq.name.clone();
            let queue = &mut tq.partitions[p];
            // Expire batches waiting past the delivery timeout.
            while let Some(front) = queue.batches.front() {
                if rules.now.duration_since(front.created) < rules.delivery_timeout {
                    break;
                }
                if let Some(b) = queue.batches.pop_front() {
                    out.expired.push(b);
                }
            }
            let Some(front) = queue.batches.front() else { continue };
            if front.records == 0 {
                continue;
            }
            let retry = front.attempts > 0;
            if let Some(at) = front.retry_at {
                if at > rules.now {
                    out.next_ready = earliest(out.next_ready, at);
                    continue;
                }
            }
            if retry && queue.seq.in_flight > 0 {
                continue; // resent only once its partition has nothing in flight
            }
            let ready = retry
                || !front.is_open()
                || queue.batches.len() > 1
                || rules.all_ready
                || rules.flush_up_to.is_some_and(|f| front.id <= f)
                || rules.now.duration_since(front.created) >= rules.linger;
            if !ready {
                out.next_ready = earliest(out.next_ready, front.created + rules.linger);
                continue;
            }
            let partition = p as i32;
            let Some(node) = (rules.leader)(&name, partition) else {
                if !no_leader.contains(&name) {
                    no_leader.push(name.clone());
                }
                continue;
            };
            if !(rules.partition_allowed)(&name, partition) {
                continue;
            }
            if !by_node.contains_key(&node) && !(rules.node_ready)(node) {
                if !out.unready.iter().any(|(n, t)| *n == node && *t == name) {
                    out.unready.push((node, name.clone()));
                }
                continue;
            }
            let entry = by_node.entry(node).or_default();
            if entry.1.is_empty() && !(rules.node_has_room)(node) {
                continue;
            }
            let size = front.size;
            if !entry.1.is_empty() && entry.0 + size > rules.max_request_size {
                continue;
            }
            let Some(mut batch) = queue.batches.pop_front() else { continue };
            if rules.idempotent && batch.sequence < 0 {
                batch.sequence = queue.seq.assign(batch.records);
            }
            batch.full = true;
            queue.seq.in_flight += 1;
            entry.0 += size;
            entry.1.push(batch);
        }
        out.requests =
            by_node.into_iter().filter(|(_, (_, b))| !b.is_empty()).map(|(n, (_, b))| (n, b)).collect();
        out.no_leader = no_leader;
        out
    }

    /// A partition's queue, if it has one.
    pub(crate) fn queue(&mut self, topic: &str, partition: i32) -> Option<&mut PartitionQueue> {
        let t = self.find(topic)?;
        self.topics[t].partitions.get_mut(partition.max(0) as usize)
    }

    /// Puts a batch to be sent again back into its queue, in creation order.
    pub(crate) fn reenqueue(&mut self, batch: ProducerBatch) {
        let Some(t) = self.find(&batch.topic) else { return };
        let tq = &mut self.topics[t];
        let queue = tq.queue(batch.partition);
        let at = queue.batches.iter().position(|b| b.id > batch.id).unwrap_or(queue.batches.len());
        queue.batches.insert(at, batch);
    }

    /// Forgets a finished batch (for flush).
    pub(crate) fn completed(&mut self, id: u64) {
        self.incomplete.remove(&id);
    }

    /// Keeps a finished batch's buffer for a new batch, if nothing else holds it (the
    /// request that carried it is written) and it is a whole batch's: writing into
    /// memory already mapped costs far less than faulting in and zeroing new pages for
    /// every batch (allocations of a batch's size are `mmap`s in glibc's malloc).
    pub(crate) fn recycle(&mut self, sealed: Bytes) {
        let full_size = self.batch_size.min(1 << 20);
        if (self.spare.len() + 1) * full_size > SPARE_BYTES.max(full_size) {
            return;
        }
        if let Ok(mut buffer) = sealed.try_into_mut() {
            buffer.clear();
            let buffer = Vec::from(buffer);
            if buffer.capacity() >= full_size {
                self.spare.push(buffer);
            }
        }
    }

    /// The newest batch id so far, if any.
    pub(crate) fn last_id(&self) -> Option<u64> {
        self.next_id.checked_sub(1)
    }

    /// Whether every batch up to `id` has finished.
    pub(crate) fn done_up_to(&self, id: u64) -> bool {
        match self.incomplete.first() {
            Some(first) => *first > id,
            None => true,
        }
    }

    /// Whether no batch is unfinished.
    pub(crate) fn is_empty(&self) -> bool {
        self.incomplete.is_empty()
    }

    /// Takes every batch not sent yet (a transaction abort fails them).
    pub(crate) fn take_unsent(&mut self) -> Vec<ProducerBatch> {
        let mut out = Vec::new();
        for tq in self.topics.iter_mut() {
            for q in &mut tq.partitions {
                out.extend(q.batches.drain(..));
            }
        }
        out
    }

    /// Starts every partition's sequences over (a new producer epoch) and renumbers the
    /// batches waiting to be sent again, in order.
    pub(crate) fn reset_sequences(&mut self) {
        for tq in self.topics.iter_mut() {
            for q in &mut tq.partitions {
                let in_flight = q.seq.in_flight;
                q.seq = PartitionSequence::new();
                q.seq.in_flight = in_flight;
                for b in q.batches.iter_mut().filter(|b| b.sequence >= 0) {
                    b.sequence = q.seq.assign(b.records);
                }
            }
        }
    }
}

fn earliest(a: Option<Instant>, b: Instant) -> Option<Instant> {
    Some(a.map_or(b, |a| a.min(b)))
}

#[cfg(test)]
mod tests;
