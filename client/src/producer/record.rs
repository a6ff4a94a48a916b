//! What goes into the producer and what comes back: [`ProducerRecord`] in, a
//! [`DeliveryFuture`] per record out, resolving to [`RecordMetadata`] once its batch is
//! acknowledged. All records of a batch share one completion slot, so a record costs
//! no allocation of its own beyond its bytes.

use crate::error::Result;
use crate::types::Header;
use bytes::Bytes;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
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
    /// Topic.
    pub topic: String,
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
    pub fn new(topic: impl Into<String>) -> ProducerRecord {
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

#[derive(Default)]
struct SlotState {
    result: Option<BatchResult>,
    wakers: Vec<Waker>,
}

/// The completion of one batch, shared by its records' futures.
#[derive(Default)]
pub(crate) struct BatchSlot {
    state: Mutex<SlotState>,
}

impl BatchSlot {
    /// Resolves every future of the batch; later calls are ignored.
    pub(crate) fn complete(&self, result: BatchResult) {
        let wakers = {
            let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if s.result.is_some() {
                return;
            }
            s.result = Some(result);
            std::mem::take(&mut s.wakers)
        };
        for w in wakers {
            w.wake();
        }
    }

    fn poll(&self, cx: &mut Context<'_>) -> Poll<BatchResult> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match &s.result {
            Some(r) => Poll::Ready(r.clone()),
            None => {
                if !s.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                    s.wakers.push(cx.waker().clone());
                }
                Poll::Pending
            }
        }
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
    pub(crate) topic: Arc<str>,
    pub(crate) partition: i32,
    pub(crate) index: i32,
    pub(crate) timestamp: i64,
}

impl std::fmt::Debug for DeliveryFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeliveryFuture")
            .field("topic", &self.topic)
            .field("partition", &self.partition)
            .finish()
    }
}

impl Future for DeliveryFuture {
    type Output = Result<RecordMetadata>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.slot.poll(cx).map(|r| {
            r.map(|(base_offset, append_time)| RecordMetadata {
                topic: this.topic.clone(),
                partition: this.partition,
                offset: if base_offset < 0 { -1 } else { base_offset + i64::from(this.index) },
                timestamp: if append_time >= 0 { append_time } else { this.timestamp },
            })
        })
    }
}
