//! The Kafka producer, behaving like the Java client's: records are partitioned
//! ([`partitioner`]), gathered per partition into batches ([`accumulator`]) and sent as
//! soon as they are ready by whoever notices (the appending caller, the task reading
//! the broker's answers, or a background sender for lingering batches and retries;
//! Produce requests pipelined up to `max.in.flight.requests.per.connection`), retried
//! until `delivery.timeout.ms`, idempotent by default ([`idempotence`]: no duplicate and no reordering on retries)
//! and transactional with a `transactional.id` ([`transaction`]).
//!
//! ```no_run
//! # async fn demo() -> strata_client::Result<()> {
//! use strata_client::producer::{Producer, ProducerConfig, ProducerRecord};
//! let mut config = ProducerConfig::new("127.0.0.1:9092");
//! config.set("linger.ms", "10")?;
//! let producer = Producer::new(config).await?;
//! let delivery = producer.send(ProducerRecord::new("orders").key("k").value("v")).await?;
//! let metadata = delivery.await?;
//! println!("{}-{} at {}", metadata.topic, metadata.partition, metadata.offset);
//! producer.close().await?;
//! # Ok(()) }
//! ```

pub mod accumulator;
pub mod config;
pub mod idempotence;
pub mod partitioner;
pub mod record;
mod sender;
pub mod transaction;
mod transactional;
mod two_phase;

pub use config::{Acks, ProducerConfig};
pub use idempotence::ProducerIdAndEpoch;
pub use record::{BorrowedRecord, Deliveries, DeliveryFuture, ProducerRecord, RecordMetadata};
pub use transaction::TxnPhase;
pub use two_phase::PreparedTxnState;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::metadata::TopicInfo;
use accumulator::{record_size, Accumulator, RecordParts, Target, TopicMeta};
use bytes::Bytes;
use idempotence::Mode;
use record::BatchSlot;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use strata_protocol::records::{NewRecord, RecordHeader};
use strata_protocol::ErrorCode;
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinHandle;
use transaction::TransactionState;

/// Everything the sender and the callers share, under one lock never held across `.await`.
pub(crate) struct State {
    pub acc: Accumulator,
    pub pid: ProducerIdAndEpoch,
    /// An idempotent producer's epoch must be bumped (KIP-360) once nothing is in flight.
    pub bump_needed: bool,
    pub bumping: bool,
    pub node_in_flight: HashMap<i32, usize>,
    pub total_in_flight: usize,
    pub flush_up_to: Option<u64>,
    pub closing: bool,
    pub refresh: BTreeSet<Arc<str>>,
    pub refreshing: bool,
    /// Brokers the sender is connecting to for waiting batches.
    pub connecting: HashSet<i32>,
    /// When the sender task next wakes by itself (`None`: only when woken), so a
    /// caller that leaves a batch lingering wakes it only if it must look sooner.
    pub sender_wakes_at: Option<Instant>,
    pub txn: Option<TransactionState>,
    /// A fatal error of a producer without a transactional id (fenced, not authorized).
    pub fatal: Option<Error>,
}

pub(crate) struct Shared {
    pub config: ProducerConfig,
    pub client: Client,
    pub state: Mutex<State>,
    /// Held from a drain until its requests are queued on their connections, so
    /// requests leave in drain order; taken before the state lock is let go.
    pub send_lock: Mutex<()>,
    /// Wakes the sender: new batches, answers, metadata.
    pub wake: Notify,
    /// Batches finished (flush and abort wait on it).
    pub progress: Notify,
    /// `buffer.memory`, in bytes of records.
    pub memory: Semaphore,
    pub mode: Mode,
    pub metrics: Counters,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub requests_sent: AtomicU64,
    pub records_acked: AtomicU64,
    pub batches_retried: AtomicU64,
    pub batches_failed: AtomicU64,
    pub epoch_bumps: AtomicU64,
}

/// Counts of what the producer did, for monitoring and for tests that must know a fault
/// really hit requests in flight.
///
/// ```
/// let m = strata_client::producer::ProducerMetrics::default();
/// assert_eq!(m.batches_retried, 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProducerMetrics {
    /// Produce requests sent (acks=1/all).
    pub requests_sent: u64,
    /// Records acknowledged.
    pub records_acked: u64,
    /// Batches sent again after a retriable failure.
    pub batches_retried: u64,
    /// Batches failed for good.
    pub batches_failed: u64,
    /// Idempotent epoch bumps (KIP-360).
    pub epoch_bumps: u64,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until `done` holds, re-checking after every finished batch.
    pub(crate) async fn wait_until(&self, mut done: impl FnMut(&mut State) -> bool) {
        loop {
            let notified = self.progress.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if done(&mut self.lock()) {
                return;
            }
            notified.await;
        }
    }
}

/// A Kafka producer. `send` may be called from many tasks at once (share it in an
/// `Arc`); dropping it sends what is buffered in the background, [`Producer::close`]
/// waits for that.
///
/// ```no_run
/// # async fn demo() -> strata_client::Result<()> {
/// use strata_client::producer::{Producer, ProducerConfig, ProducerRecord};
/// let producer = Producer::new(ProducerConfig::new("127.0.0.1:9092")).await?;
/// for i in 0..100 {
///     producer.send(ProducerRecord::new("t").value(format!("v{i}"))).await?;
/// }
/// producer.flush().await?;
/// # Ok(()) }
/// ```
pub struct Producer {
    shared: Arc<Shared>,
    sender: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("transactional_id", &self.shared.config.transactional_id)
            .field("pid", &self.shared.lock().pid)
            .finish()
    }
}

impl Producer {
    /// Connects to the cluster, gets a producer id for an idempotent producer without
    /// a transactional id (a transactional one gets it in [`Producer::init_transactions`])
    /// and starts the sender.
    pub async fn new(config: ProducerConfig) -> Result<Producer> {
        let config = config.validated()?;
        let client = Client::connect_with_in_flight(config.client.clone(), config.max_in_flight).await?;
        let transactional = config.transactional_id.is_some();
        let mode = Mode { idempotent: config.enable_idempotence, transactional };
        let state = State {
            acc: Accumulator::new(config.batch_size, config.compression, transactional)
                .with_compression_level(config.compression_level()),
            pid: ProducerIdAndEpoch::NONE,
            bump_needed: false,
            bumping: false,
            node_in_flight: HashMap::new(),
            total_in_flight: 0,
            flush_up_to: None,
            closing: false,
            refresh: BTreeSet::new(),
            refreshing: false,
            connecting: HashSet::new(),
            sender_wakes_at: None,
            txn: transactional.then(TransactionState::new),
            fatal: None,
        };
        let shared = Arc::new(Shared {
            memory: Semaphore::new(config.buffer_memory.min(Semaphore::MAX_PERMITS)),
            config,
            client,
            state: Mutex::new(state),
            send_lock: Mutex::new(()),
            wake: Notify::new(),
            progress: Notify::new(),
            mode,
            metrics: Counters::default(),
        });
        if mode.idempotent && !transactional {
            let pid = sender::init_idempotent_pid(&shared, ProducerIdAndEpoch::NONE).await?;
            shared.lock().pid = pid;
        }
        let sender = tokio::spawn(sender::run(shared.clone()));
        Ok(Producer { shared, sender: Mutex::new(Some(sender)) })
    }

    /// The cluster view and connections this producer uses.
    pub fn client(&self) -> &Client {
        &self.shared.client
    }

    /// The producer id and epoch (`id = -1` without idempotence or before
    /// `init_transactions`).
    pub fn producer_id_and_epoch(&self) -> ProducerIdAndEpoch {
        self.shared.lock().pid
    }

    /// What the producer has done so far.
    pub fn metrics(&self) -> ProducerMetrics {
        let c = &self.shared.metrics;
        ProducerMetrics {
            requests_sent: c.requests_sent.load(Ordering::Relaxed),
            records_acked: c.records_acked.load(Ordering::Relaxed),
            batches_retried: c.batches_retried.load(Ordering::Relaxed),
            batches_failed: c.batches_failed.load(Ordering::Relaxed),
            epoch_bumps: c.epoch_bumps.load(Ordering::Relaxed),
        }
    }

    /// Queues `record` and returns the future of its acknowledgement. Waits only for
    /// the topic's metadata (the first time) and for `buffer.memory`, each at most
    /// `max.block.ms`.
    pub async fn send(&self, record: ProducerRecord) -> Result<DeliveryFuture> {
        let now = if record.timestamp.is_some() { 0 } else { now_ms() };
        let prepared = self.prepare(record, now)?;
        self.reserve(prepared.size).await?;
        let result = self.append(&prepared).await;
        if result.is_err() {
            self.shared.memory.add_permits(prepared.size);
        }
        result
    }

    /// Queues `records` in order and returns their futures in the same order: what
    /// [`Producer::send`] does for each, at a fraction of the cost per record, for
    /// callers that produce in bursts. The records share one lock acquisition and one
    /// `buffer.memory` reservation per chunk of up to half of `buffer.memory`, and
    /// those without a timestamp share one clock read (the time of this call).
    ///
    /// On an error, the records before the failing one are queued and are sent (their
    /// futures are dropped, which does not cancel them) and none after it is.
    ///
    /// ```no_run
    /// # async fn demo(p: strata_client::producer::Producer) -> strata_client::Result<()> {
    /// use std::sync::Arc;
    /// use strata_client::producer::ProducerRecord;
    /// let topic: Arc<str> = Arc::from("t");
    /// let records = (0..100).map(|i| ProducerRecord::new(topic.clone()).value(format!("v{i}")));
    /// let mut deliveries = p.send_all(records).await?;
    /// while let Some(result) = deliveries.next().await {
    ///     result?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn send_all(&self, records: impl IntoIterator<Item = ProducerRecord>) -> Result<Deliveries> {
        let now = now_ms();
        let records = records.into_iter();
        let hint = records.size_hint().0;
        self.queue_all(records.map(|r| self.prepare(r, now)), hint).await
    }

    /// Queues `records` for `topic` in order and returns their acknowledgements in the
    /// same order, as [`Producer::send_all`] does (its errors too), copying each
    /// record's bytes into its batch before it returns: for callers whose bytes live in
    /// their own buffers, with no [`ProducerRecord`] to build per record.
    ///
    /// ```no_run
    /// # async fn demo(p: strata_client::producer::Producer) -> strata_client::Result<()> {
    /// use strata_client::producer::BorrowedRecord;
    /// let lines = "alice:1\nbob:2\n";
    /// let records: Vec<BorrowedRecord<'_>> = lines
    ///     .lines()
    ///     .filter_map(|l| l.split_once(':'))
    ///     .map(|(k, v)| BorrowedRecord::new(v.as_bytes()).key(k.as_bytes()))
    ///     .collect();
    /// let mut deliveries = p.send_borrowed("scores", &records).await?;
    /// while let Some(result) = deliveries.next().await {
    ///     result?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn send_borrowed(&self, topic: &str, records: &[BorrowedRecord<'_>]) -> Result<Deliveries> {
        let now = now_ms();
        let lent = records.iter().map(|record| {
            let view =
                Lent { topic, target: self.target(record.partition, record.key), record, now, size: 0 };
            let size = self.checked_size(&view)?;
            Ok(Lent { size, ..view })
        });
        self.queue_all(lent, records.len()).await
    }

    /// Queues records in order, chunk by chunk of up to half of `buffer.memory` (one
    /// reservation per chunk), and returns their acknowledgements; on an error the
    /// records before it stay queued.
    async fn queue_all<A: Appendable>(
        &self,
        records: impl Iterator<Item = Result<A>>,
        hint: usize,
    ) -> Result<Deliveries> {
        let mut futures = Deliveries::with_capacity(hint);
        let chunk_bytes = (self.shared.config.buffer_memory / 2).max(1);
        let mut pending: Vec<A> = Vec::with_capacity(hint.min(4096));
        let mut pending_bytes = 0;
        for record in records {
            let record = match record {
                Ok(r) => r,
                Err(e) => {
                    self.append_all(&mut pending, pending_bytes, &mut futures).await?;
                    return Err(e);
                }
            };
            if !pending.is_empty() && pending_bytes + record.size() > chunk_bytes {
                self.append_all(&mut pending, pending_bytes, &mut futures).await?;
                pending_bytes = 0;
            }
            pending_bytes += record.size();
            pending.push(record);
        }
        self.append_all(&mut pending, pending_bytes, &mut futures).await?;
        Ok(futures)
    }

    /// Where a record goes: its partition, else its key's hash, else the sticky partition.
    fn target(&self, partition: Option<i32>, key: Option<&[u8]>) -> Target {
        match (partition, key) {
            (Some(p), _) => Target::Partition(p),
            (None, Some(key)) if !self.shared.config.partitioner_ignore_keys => {
                Target::Key(partitioner::murmur2(key) & 0x7fff_ffff)
            }
            _ => Target::Sticky,
        }
    }

    /// The record's `buffer.memory` size, refusing a record no request or buffer could hold.
    fn checked_size(&self, record: &impl RecordParts) -> Result<usize> {
        let config = &self.shared.config;
        let size = record_size(record);
        if size > config.max_request_size || size > config.buffer_memory {
            return Err(Error::Kafka {
                code: ErrorCode::MessageTooLarge,
                message: Some(format!(
                    "a record of {size} bytes is larger than max.request.size or buffer.memory"
                )),
            });
        }
        Ok(size)
    }

    /// Turns a record into what the accumulator appends: its target, the batch form
    /// of its fields and its size, refusing a record no request or buffer could hold.
    fn prepare(&self, record: ProducerRecord, now: i64) -> Result<Prepared> {
        let target = self.target(record.partition, record.key.as_deref());
        let headers = if record.headers.is_empty() {
            Vec::new()
        } else {
            record
                .headers
                .into_iter()
                .map(|h| RecordHeader { key: Bytes::from(h.key), value: h.value })
                .collect()
        };
        let timestamp = record.timestamp.unwrap_or(now);
        let new = NewRecord { timestamp, key: record.key, value: record.value, headers };
        let size = self.checked_size(&new)?;
        Ok(Prepared { topic: record.topic, target, new, size })
    }

    /// Appends a record whose memory is reserved, learning the topic's metadata first
    /// if the accumulator does not know it yet.
    async fn append(&self, record: &Prepared) -> Result<DeliveryFuture> {
        let shared = &self.shared;
        loop {
            let appended = {
                let mut guard = shared.lock();
                let st = &mut *guard;
                check_open(st)?;
                let mut future = None;
                let timestamp = record.parts().timestamp();
                let opened = append_one(st, record, |slot, index| {
                    future = Some(DeliveryFuture { slot: slot.clone(), index, timestamp })
                })?;
                opened.zip(future)
            };
            match appended {
                Some((opened, future)) => {
                    if opened {
                        // The batch before it is full: send it from here.
                        sender::pump(shared, shared.lock());
                    }
                    return Ok(future);
                }
                None => self.learn_topic(record.topic()).await?,
            }
        }
    }

    /// Reserves `bytes` (the sum of `pending`'s sizes) and appends every record of
    /// `pending`, [`APPENDS_PER_LOCK`] per hold of the state lock (and one more hold per
    /// topic whose metadata must be learnt), pushing their futures; `pending` is empty
    /// afterwards. On an error the memory of the records not appended is given back.
    async fn append_all<A: Appendable>(
        &self,
        pending: &mut Vec<A>,
        bytes: usize,
        futures: &mut Deliveries,
    ) -> Result<()> {
        if pending.is_empty() {
            return Ok(());
        }
        let shared = &self.shared;
        let reserved = self.reserve(bytes).await;
        let reserved_ok = reserved.is_ok();
        let mut appended = 0;
        let result = match reserved {
            Err(e) => Err(e),
            Ok(()) => loop {
                let step = {
                    let mut guard = shared.lock();
                    let st = &mut *guard;
                    let mut opened_any = false;
                    let step = check_open(st).and_then(|()| {
                        let upto = (appended + APPENDS_PER_LOCK).min(pending.len());
                        for record in &pending[appended..upto] {
                            let timestamp = record.parts().timestamp();
                            let push = |slot: &Arc<_>, index| futures.push(slot, index, timestamp);
                            let Some(opened) = append_one(st, record, push)? else {
                                return Ok(Some(record.topic().to_owned()));
                            };
                            opened_any |= opened;
                            appended += 1;
                        }
                        Ok(None)
                    });
                    if opened_any {
                        // Batches before the new ones are full: send them from here.
                        sender::pump(shared, guard);
                    }
                    step
                };
                match step {
                    Ok(None) if appended == pending.len() => break Ok(()),
                    // Let the reader task in between (it sends the next request).
                    Ok(None) => continue,
                    Ok(Some(topic)) => {
                        if let Err(e) = self.learn_topic(&topic).await {
                            break Err(e);
                        }
                    }
                    Err(e) => break Err(e),
                }
            },
        };
        if result.is_err() && reserved_ok {
            let unused: usize = pending[appended..].iter().map(A::size).sum();
            shared.memory.add_permits(unused);
        }
        pending.clear();
        result
    }

    /// Fetches a topic's metadata into the accumulator (the first send to it).
    async fn learn_topic(&self, topic: &str) -> Result<()> {
        let info = self.topic_info(topic).await?;
        self.shared.lock().acc.set_meta(topic, topic_meta(&info));
        Ok(())
    }

    /// Sends every record queued so far without waiting for `linger.ms` and waits until
    /// each is acknowledged or failed.
    pub async fn flush(&self) -> Result<()> {
        let last = {
            let mut st = self.shared.lock();
            let Some(last) = st.acc.last_id() else { return Ok(()) };
            st.flush_up_to = Some(st.flush_up_to.map_or(last, |f| f.max(last)));
            last
        };
        self.shared.wake.notify_one();
        self.shared.wait_until(|st| st.acc.done_up_to(last)).await;
        Ok(())
    }

    /// Flushes, stops the sender and closes the connections; later sends fail with
    /// [`Error::Closed`].
    pub async fn close(&self) -> Result<()> {
        self.flush().await?;
        self.shared.lock().closing = true;
        self.shared.wake.notify_one();
        let sender = self.sender.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(sender) = sender {
            let _ = sender.await;
        }
        self.shared.client.close();
        Ok(())
    }

    /// The topic's partitions, from the cluster view or (first send to it) a Metadata
    /// request that may create it, retried up to `max.block.ms`.
    async fn topic_info(&self, topic: &str) -> Result<Arc<TopicInfo>> {
        let known = |t: &Arc<TopicInfo>| usable(t);
        if let Some(t) = self.shared.client.cluster().topic(topic).filter(|t| known(t)) {
            return Ok(t.clone());
        }
        let deadline = Instant::now() + self.shared.config.max_block;
        let mut attempt = 0;
        loop {
            let cluster = self.shared.client.refresh_metadata_creating(&[topic.to_string()]).await?;
            let info = cluster.topic(topic).cloned();
            let error = match info {
                Some(t) if known(&t) => return Ok(t),
                Some(t) => t.error.map(Error::kafka),
                None => None,
            }
            .unwrap_or_else(|| Error::kafka(ErrorCode::UnknownTopicOrPartition));
            if !error.is_retriable() {
                return Err(error);
            }
            if Instant::now() >= deadline {
                return Err(Error::timeout(format!("metadata of {topic} within max.block.ms ({error})")));
            }
            tokio::time::sleep(self.shared.config.client.backoff(attempt)).await;
            attempt += 1;
        }
    }

    /// Takes `size` bytes of `buffer.memory`, waiting up to `max.block.ms`.
    async fn reserve(&self, size: usize) -> Result<()> {
        let permits = u32::try_from(size).map_err(|_| Error::kafka(ErrorCode::MessageTooLarge))?;
        if let Ok(p) = self.shared.memory.try_acquire_many(permits) {
            p.forget();
            return Ok(());
        }
        match tokio::time::timeout(self.shared.config.max_block, self.shared.memory.acquire_many(permits))
            .await
        {
            Ok(Ok(p)) => {
                p.forget();
                Ok(())
            }
            Ok(Err(_)) => Err(Error::Closed),
            Err(_) => Err(Error::timeout("buffer.memory stayed full for max.block.ms")),
        }
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        // The sender sends what is queued, then stops.
        self.shared.lock().closing = true;
        self.shared.wake.notify_one();
    }
}

/// How many records [`Producer::send_all`] appends per hold of the state lock: the
/// reader task that judges an answer and sends the next request needs the same lock,
/// and a hold as long as a whole burst of records made it sleep on the lock.
const APPENDS_PER_LOCK: usize = 32;

/// A record ready for the accumulator: its topic, where it goes, its parts and its
/// `buffer.memory` size. Owned ([`Prepared`], from `send` and `send_all`) or borrowed
/// ([`Lent`], from `send_borrowed`), appended by the same code.
trait Appendable {
    type Parts: RecordParts;
    fn topic(&self) -> &str;
    fn target(&self) -> Target;
    fn parts(&self) -> &Self::Parts;
    fn size(&self) -> usize;
}

/// A [`ProducerRecord`] ready for the accumulator.
struct Prepared {
    topic: Arc<str>,
    target: Target,
    new: NewRecord,
    size: usize,
}

impl Appendable for Prepared {
    type Parts = NewRecord;

    fn topic(&self) -> &str {
        &self.topic
    }

    fn target(&self) -> Target {
        self.target
    }

    fn parts(&self) -> &NewRecord {
        &self.new
    }

    fn size(&self) -> usize {
        self.size
    }
}

/// A [`BorrowedRecord`] ready for the accumulator: a view, nothing copied yet.
struct Lent<'a> {
    topic: &'a str,
    target: Target,
    record: &'a BorrowedRecord<'a>,
    /// The time of the call, for a record without a timestamp.
    now: i64,
    size: usize,
}

impl RecordParts for Lent<'_> {
    type Header = crate::types::Header;

    fn timestamp(&self) -> i64 {
        self.record.timestamp.unwrap_or(self.now)
    }

    fn key(&self) -> Option<&[u8]> {
        self.record.key
    }

    fn value(&self) -> Option<&[u8]> {
        self.record.value
    }

    fn headers(&self) -> &[Self::Header] {
        self.record.headers
    }
}

impl Appendable for Lent<'_> {
    type Parts = Self;

    fn topic(&self) -> &str {
        self.topic
    }

    fn target(&self) -> Target {
        self.target
    }

    fn parts(&self) -> &Self {
        self
    }

    fn size(&self) -> usize {
        self.size
    }
}

/// Appends one record under the state lock, handing its batch's slot and its index to
/// `take`; `Ok(None)`: the topic's metadata is not known yet. Otherwise returns
/// whether a new batch was opened (the sender must look).
fn append_one(
    st: &mut State,
    record: &impl Appendable,
    take: impl FnOnce(&Arc<BatchSlot>, i32),
) -> Result<Option<bool>> {
    let State { acc, txn, .. } = st;
    let Some(a) =
        acc.append(record.topic(), record.target(), record.parts(), record.size(), &Instant::now)?
    else {
        return Ok(None);
    };
    if let (Some(p), Some(txn)) = (a.opened, txn.as_mut()) {
        txn.note_partition((a.slot.topic().clone(), p));
    }
    take(a.slot, a.index);
    Ok(Some(a.opened.is_some()))
}

/// Why records may not be queued now, if they may not.
fn check_open(st: &State) -> Result<()> {
    if st.closing {
        return Err(Error::Closed);
    }
    if let Some(e) = &st.fatal {
        return Err(e.clone());
    }
    match &st.txn {
        Some(txn) => txn.may_send(),
        None => Ok(()),
    }
}

/// A topic's partitioning metadata from the cluster view.
pub(crate) fn topic_meta(info: &TopicInfo) -> TopicMeta {
    TopicMeta {
        partitions: info.partitions.len() as i32,
        available: info.partitions.iter().filter(|p| p.leader >= 0).map(|p| p.partition).collect(),
    }
}

/// Whether the view describes a topic well enough to send to it.
pub(crate) fn usable(info: &TopicInfo) -> bool {
    info.error.is_none() && !info.partitions.is_empty()
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
