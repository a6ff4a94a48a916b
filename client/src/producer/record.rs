//! What goes into the producer and what comes back: [`ProducerRecord`] in, a
//! [`DeliveryFuture`] per record out, resolving to [`RecordMetadata`] once its batch is
//! acknowledged. All records of a batch share one completion slot, so a record costs
//! no allocation of its own beyond its bytes.

use crate::error::Result;
use crate::types::Header;
use bytes::Bytes;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};

/// A record to send.
///
/// ```
/// use strata_client::producer::ProducerRecord;
/// let r = ProducerRecord::new("orders").key("k").value("v").partition(2).header("h", Some("x"));
/// assert_eq!(r.partition, Some(2));
/// assert_eq!(r.headers.len(), 1);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ProducerRecord {
    /// Topic. Shared, so a caller sending many records to one topic clones a pointer
    /// rather than allocating a name per record.
    pub topic: Arc<str>,
    /// An explicit partition; `None` lets the partitioner choose.
    pub partition: Option<i32>,
    /// Key; `None` is a null key (sticky partitioning).
    pub key: Option<Bytes>,
    /// Value; `None` is a null value (a tombstone).
    pub value: Option<Bytes>,
    /// Headers, in order.
    pub headers: Vec<Header>,
    /// Create time in ms since the epoch; `None` stamps the time of `send`.
    pub timestamp: Option<i64>,
}

impl ProducerRecord {
    /// A record for `topic` with no key, value or headers.
    pub fn new(topic: impl Into<Arc<str>>) -> ProducerRecord {
        ProducerRecord { topic: topic.into(), ..ProducerRecord::default() }
    }

    /// Sets the key.
    pub fn key(mut self, key: impl Into<Bytes>) -> ProducerRecord {
        self.key = Some(key.into());
        self
    }

    /// Sets the value.
    pub fn value(mut self, value: impl Into<Bytes>) -> ProducerRecord {
        self.value = Some(value.into());
        self
    }

    /// Sends to this partition.
    pub fn partition(mut self, partition: i32) -> ProducerRecord {
        self.partition = Some(partition);
        self
    }

    /// Sets the create time.
    pub fn timestamp(mut self, timestamp_ms: i64) -> ProducerRecord {
        self.timestamp = Some(timestamp_ms);
        self
    }

    /// Adds a header.
    pub fn header(mut self, key: impl Into<String>, value: Option<impl Into<Bytes>>) -> ProducerRecord {
        self.headers.push(Header { key: key.into(), value: value.map(Into::into) });
        self
    }
}

/// A record whose bytes the caller keeps: [`Producer::send_borrowed`] copies them into
/// their batch before it returns, as it would copy a [`ProducerRecord`]'s, so a caller
/// sending from its own buffers (values serialized into a reused buffer, slices of a
/// larger block) needs no `Bytes` per record and no owned record to move through the
/// call.
///
/// [`Producer::send_borrowed`]: super::Producer::send_borrowed
///
/// ```
/// use strata_client::producer::BorrowedRecord;
/// let line = b"alice:1";
/// let r = BorrowedRecord::new(&line[6..]).key(&line[..5]).partition(2);
/// assert_eq!(r.key, Some(&b"alice"[..]));
/// assert_eq!(r.value, Some(&b"1"[..]));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct BorrowedRecord<'a> {
    /// An explicit partition; `None` lets the partitioner choose.
    pub partition: Option<i32>,
    /// Key; `None` is a null key (sticky partitioning).
    pub key: Option<&'a [u8]>,
    /// Value; `None` is a null value (a tombstone).
    pub value: Option<&'a [u8]>,
    /// Headers, in order.
    pub headers: &'a [Header],
    /// Create time in ms since the epoch; `None` stamps the time of the call.
    pub timestamp: Option<i64>,
}

impl<'a> BorrowedRecord<'a> {
    /// A record with this value and no key or headers.
    pub fn new(value: &'a [u8]) -> BorrowedRecord<'a> {
        BorrowedRecord { value: Some(value), ..BorrowedRecord::default() }
    }

    /// Sets the key.
    pub fn key(mut self, key: &'a [u8]) -> BorrowedRecord<'a> {
        self.key = Some(key);
        self
    }

    /// Sends to this partition.
    pub fn partition(mut self, partition: i32) -> BorrowedRecord<'a> {
        self.partition = Some(partition);
        self
    }

    /// Sets the create time.
    pub fn timestamp(mut self, timestamp_ms: i64) -> BorrowedRecord<'a> {
        self.timestamp = Some(timestamp_ms);
        self
    }

    /// Sets the headers.
    pub fn headers(mut self, headers: &'a [Header]) -> BorrowedRecord<'a> {
        self.headers = headers;
        self
    }
}

/// Where an acknowledged record was written.
///
/// ```
/// use strata_client::producer::RecordMetadata;
/// let m = RecordMetadata { topic: "t".into(), partition: 0, offset: 7, timestamp: 1 };
/// assert_eq!(m.offset, 7);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordMetadata {
    /// Topic (shared by all records of the batch).
    pub topic: Arc<str>,
    /// Partition.
    pub partition: i32,
    /// Offset; -1 with `acks=0`.
    pub offset: i64,
    /// The record's create time, or the broker's append time on `LogAppendTime` topics.
    pub timestamp: i64,
}

/// How a batch ended: base offset and log append time (-1 for CreateTime), or an error.
pub(crate) type BatchResult = Result<(i64, i64)>;

/// The completion of one batch, shared by its records' futures. The result is set
/// once and read without a lock, so awaiting the futures of a finished batch (the
/// common case for all but its first record) costs an atomic load each; only a
/// future that must wait takes the lock, to leave its waker.
pub(crate) struct BatchSlot {
    /// The batch's partition, here rather than in every record's future.
    topic: Arc<str>,
    partition: i32,
    result: OnceLock<BatchResult>,
    wakers: Mutex<Vec<Waker>>,
}

impl BatchSlot {
    /// The slot of a new batch of `topic`-`partition`.
    pub(crate) fn new(topic: Arc<str>, partition: i32) -> BatchSlot {
        BatchSlot { topic, partition, result: OnceLock::new(), wakers: Mutex::new(Vec::new()) }
    }

    /// Resolves every future of the batch: sets its result and moves the wakers of the
    /// futures polled so far into `wakers`, for the caller to wake once it has let go of
    /// its locks (a wake-up is a syscall when the waiting task's worker sleeps); later
    /// calls are ignored.
    pub(crate) fn resolve(&self, result: BatchResult, wakers: &mut Vec<Waker>) {
        if self.result.set(result).is_err() {
            return;
        }
        // Set before the wakers are taken: a poll that found no result leaves its
        // waker under this lock and then looks again, so no wake-up is lost.
        wakers.append(&mut self.wakers.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// The batch's topic.
    pub(crate) fn topic(&self) -> &Arc<str> {
        &self.topic
    }

    /// The batch's partition.
    pub(crate) fn partition(&self) -> i32 {
        self.partition
    }

    fn is_complete(&self) -> bool {
        self.result.get().is_some()
    }

    /// A record's metadata from its batch's result.
    fn metadata(&self, result: &BatchResult, index: i32, timestamp: i64) -> Result<RecordMetadata> {
        result.clone().map(|(base_offset, append_time)| RecordMetadata {
            topic: self.topic.clone(),
            partition: self.partition,
            offset: if base_offset < 0 { -1 } else { base_offset + i64::from(index) },
            timestamp: if append_time >= 0 { append_time } else { timestamp },
        })
    }

    fn poll(&self, cx: &mut Context<'_>) -> Poll<&BatchResult> {
        if let Some(r) = self.result.get() {
            return Poll::Ready(r);
        }
        let mut wakers = self.wakers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = self.result.get() {
            return Poll::Ready(r);
        }
        if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

/// Resolves to the record's [`RecordMetadata`] once its batch is acknowledged, or to the
/// error that failed it. Dropping it does not cancel the send.
///
/// ```no_run
/// # async fn demo(p: strata_client::producer::Producer) -> strata_client::Result<()> {
/// use strata_client::producer::ProducerRecord;
/// let delivery = p.send(ProducerRecord::new("t").value("v")).await?;
/// let metadata = delivery.await?;
/// println!("at offset {}", metadata.offset);
/// # Ok(()) }
/// ```
pub struct DeliveryFuture {
    pub(crate) slot: Arc<BatchSlot>,
    pub(crate) index: i32,
    pub(crate) timestamp: i64,
}

impl std::fmt::Debug for DeliveryFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeliveryFuture")
            .field("topic", &self.slot.topic)
            .field("partition", &self.slot.partition)
            .finish()
    }
}

impl DeliveryFuture {
    /// The topic the record was queued for.
    pub fn topic(&self) -> &Arc<str> {
        &self.slot.topic
    }

    /// The partition the record was queued for.
    pub fn partition(&self) -> i32 {
        self.slot.partition
    }
}

impl Future for DeliveryFuture {
    type Output = Result<RecordMetadata>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let slot = &*this.slot;
        slot.poll(cx).map(|r| slot.metadata(r, this.index, this.timestamp))
    }
}

/// The acknowledgements of the records of one [`Producer::send_all`] call, in the
/// order they were given. It holds one reference per batch the records went to
/// rather than one per record, so handing out and awaiting a burst's results costs no
/// atomic reference counting per record (which, with the producer on one core and the
/// awaiting task on another, is a cache line moving between them for every record).
///
/// [`Producer::send_all`]: super::Producer::send_all
///
/// ```no_run
/// # async fn demo(p: strata_client::producer::Producer) -> strata_client::Result<()> {
/// use strata_client::producer::ProducerRecord;
/// let mut deliveries = p.send_all((0..10).map(|i| ProducerRecord::new("t").value(format!("{i}")))).await?;
/// while let Some(result) = deliveries.next().await {
///     println!("at offset {}", result?.offset);
/// }
/// # Ok(()) }
/// ```
#[derive(Default)]
pub struct Deliveries {
    slots: Vec<Arc<BatchSlot>>,
    records: Vec<Queued>,
    next: usize,
}

/// One record of [`Deliveries`]: its batch (an index into `slots`), its place in the
/// batch and its create time.
struct Queued {
    slot: u32,
    index: i32,
    timestamp: i64,
}

impl std::fmt::Debug for Deliveries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deliveries").field("records", &self.records.len()).field("next", &self.next).finish()
    }
}

impl Deliveries {
    pub(crate) fn with_capacity(records: usize) -> Deliveries {
        Deliveries { slots: Vec::new(), records: Vec::with_capacity(records), next: 0 }
    }

    pub(crate) fn push(&mut self, slot: &Arc<BatchSlot>, index: i32, timestamp: i64) {
        if !self.slots.last().is_some_and(|s| Arc::ptr_eq(s, slot)) {
            self.slots.push(slot.clone());
        }
        let slot = (self.slots.len() - 1) as u32;
        self.records.push(Queued { slot, index, timestamp });
    }

    /// Records whose result has not been taken with [`Deliveries::next`] yet.
    pub fn len(&self) -> usize {
        self.records.len() - self.next
    }

    /// Whether every result has been taken.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the next record's result is there already (`next` would not wait):
    /// lets a caller timing acknowledgements read the clock only after a wait.
    pub fn is_next_ready(&self) -> bool {
        self.records.get(self.next).is_some_and(|q| self.slots[q.slot as usize].is_complete())
    }

    /// Waits for the next record's acknowledgement; `None` after the last.
    pub async fn next(&mut self) -> Option<Result<RecordMetadata>> {
        let q = self.records.get(self.next)?;
        let slot = &*self.slots[q.slot as usize];
        let result =
            std::future::poll_fn(|cx| slot.poll(cx).map(|r| slot.metadata(r, q.index, q.timestamp))).await;
        self.next += 1;
        Some(result)
    }

    /// Waits for the next run of records that went to one batch and so are
    /// acknowledged together: how many there are and how their batch ended. The
    /// per-batch way to take results, for callers that count rather than inspect
    /// each record (a load generator, a bulk loader); `None` after the last.
    pub async fn next_batch(&mut self) -> Option<(usize, Result<()>)> {
        let first = self.records.get(self.next)?;
        let at = first.slot;
        let run = self.records[self.next..].iter().take_while(|q| q.slot == at).count();
        let slot = &*self.slots[at as usize];
        let result = std::future::poll_fn(|cx| slot.poll(cx).map(|r| r.clone().map(|_| ()))).await;
        self.next += run;
        Some((run, result))
    }

    /// One future per record not taken yet, as [`super::Producer::send`] returns.
    pub fn into_futures(self) -> Vec<DeliveryFuture> {
        let Deliveries { slots, records, next } = self;
        records
            .into_iter()
            .skip(next)
            .map(|q| DeliveryFuture {
                slot: slots[q.slot as usize].clone(),
                index: q.index,
                timestamp: q.timestamp,
            })
            .collect()
    }
}
