//! The producer: records generated on a schedule (see [`crate::schedule`]), gathered
//! into per-partition batches like Kafka's record accumulator (sealed when full or
//! when `linger` expires), and sent as pipelined Produce requests, at most
//! `max_in_flight` per connection.
//!
//! Each producer task owns one connection per partition leader. The sending side
//! blocks when a connection has `max_in_flight` requests outstanding; a reader task
//! per connection takes the responses in order and records, for every record, the
//! time from its due time to the acknowledgement.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use strata_protocol::messages::produce::{PartitionProduceData, ProduceRequest, TopicProduceData};
use strata_protocol::records::{Compression, NewRecord, RecordBatchBuilder};
use strata_protocol::{RequestBody, ResponseBody};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

use crate::cli::KeyDistribution;
use crate::cluster::{error_name, TopicLayout};
use crate::payload::{key_bytes, partition_for_key, Payloads, KEY_BYTES};
use crate::schedule::{latency, Schedule};
use crate::stats::Meter;
use crate::txn::{Transactions, TxnVersions};
use crate::wire::{Connection, FrameReader, FrameWriter, Sent};

/// Records generated between two looks at lingering batches and the send queue.
const MAX_BURST: usize = 1024;
/// How long an acks=0 producer waits, at the end, for the broker to close the
/// connection after the last request.
const ACKS0_CLOSE_TIMEOUT: Duration = Duration::from_secs(10);
/// Per-record overhead allowance when deciding whether a record fits a batch.
const RECORD_OVERHEAD: usize = 24;

/// How the producers behave; shared by all producer tasks.
#[derive(Debug, Clone)]
pub struct ProducerSettings {
    /// client.id.
    pub client_id: String,
    /// Produce version negotiated with the broker.
    pub version: i16,
    /// acks.
    pub acks: i16,
    /// Produce request timeout.
    pub timeout_ms: i32,
    /// linger.ms.
    pub linger: Duration,
    /// batch.size.
    pub batch_size: usize,
    /// max.request.size.
    pub max_request_size: usize,
    /// buffer.memory.
    pub buffer_memory: u64,
    /// Codec.
    pub compression: Compression,
    /// max.in.flight.requests.per.connection.
    pub max_in_flight: usize,
    /// Offered records/s per producer (0 = unthrottled).
    pub rate_per_producer: f64,
    /// Value size.
    pub record_size: usize,
    /// Key distribution.
    pub keys: KeyDistribution,
    /// Stamp each value with its due time (end-to-end runs).
    pub stamp_values: bool,
    /// Bootstrap address (transactional producers look up their coordinator there).
    pub bootstrap: String,
    /// Transaction API versions when producing transactionally.
    pub transactions: Option<TxnVersions>,
    /// Records per transaction.
    pub transaction_records: u64,
}

/// When a producer stops generating.
#[derive(Debug, Clone, Copy)]
pub enum Quota {
    /// After this many records.
    Records(u64),
    /// At this instant.
    Until(Instant),
}

impl Quota {
    /// Splits a total record count between `producers`; a deadline is shared.
    pub fn split(self, producers: usize, index: usize) -> Quota {
        match self {
            Quota::Records(n) => {
                let p = producers as u64;
                let i = index as u64;
                Quota::Records(n / p + u64::from(i < n % p))
            }
            until => until,
        }
    }
}

/// Converts monotonic instants to wall-clock time for record timestamps and stamps.
#[derive(Debug, Clone, Copy)]
pub struct WallClock {
    instant: Instant,
    unix_ns: u64,
}

impl WallClock {
    /// Pairs now's instant with now's wall-clock time.
    pub fn now() -> WallClock {
        let unix_ns = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        WallClock { instant: Instant::now(), unix_ns }
    }

    /// Nanoseconds since the Unix epoch at `t`.
    pub fn unix_ns(&self, t: Instant) -> u64 {
        if t >= self.instant {
            self.unix_ns + t.duration_since(self.instant).as_nanos() as u64
        } else {
            self.unix_ns.saturating_sub(self.instant.duration_since(t).as_nanos() as u64)
        }
    }
}

/// A batch still taking records.
struct OpenBatch {
    builder: RecordBatchBuilder,
    dues: Vec<Instant>,
    payload_bytes: u64,
    opened: Instant,
}

/// A batch ready to send.
struct SealedBatch {
    partition: i32,
    data: Bytes,
    dues: Vec<Instant>,
    payload_bytes: u64,
}

/// A request on the wire with what is needed to account for its answer.
struct InFlight {
    sent: Sent,
    batches: Vec<SealedBatch>,
    _permit: OwnedSemaphorePermit,
}

/// One connection to a partition leader.
struct Link {
    writer: FrameWriter,
    permits: Arc<Semaphore>,
    in_flight: Option<mpsc::UnboundedSender<InFlight>>,
    reader: Option<JoinHandle<Result<()>>>,
    /// The receiving half when no reader task runs (acks=0).
    idle_reader: Option<FrameReader>,
    ready: std::collections::VecDeque<SealedBatch>,
}

/// State shared between a producer and its reader tasks.
struct Shared {
    topic: String,
    meter: Arc<Meter>,
    /// Bytes of sealed and in-flight batches (buffer.memory accounting).
    buffered: AtomicU64,
}

/// One producer: its schedule, batches and connections.
pub struct Producer {
    settings: ProducerSettings,
    layout: TopicLayout,
    shared: Arc<Shared>,
    schedule: Schedule,
    payloads: Payloads,
    clock: WallClock,
    open: Vec<Option<OpenBatch>>,
    /// Link index of each partition's leader.
    link_of: Vec<usize>,
    links: Vec<Link>,
    sticky: usize,
    /// Transactional state with --transactions.
    txn: Option<Transactions>,
}

impl Producer {
    /// Connects to every leader of `layout`.
    pub async fn connect(
        index: usize,
        settings: ProducerSettings,
        layout: TopicLayout,
        meter: Arc<Meter>,
        clock: WallClock,
    ) -> Result<Producer> {
        let shared = Arc::new(Shared { topic: layout.topic.clone(), meter, buffered: AtomicU64::new(0) });
        let mut addrs: Vec<&str> = Vec::new();
        let mut link_of = Vec::with_capacity(layout.partition_count());
        for p in 0..layout.partition_count() {
            let addr = layout.leader_addr(p)?;
            let i = match addrs.iter().position(|a| *a == addr) {
                Some(i) => i,
                None => {
                    addrs.push(addr);
                    addrs.len() - 1
                }
            };
            link_of.push(i);
        }
        let mut links = Vec::with_capacity(addrs.len());
        for addr in addrs {
            let conn = Connection::connect(addr, &settings.client_id).await?;
            links.push(Link::start(conn, &settings, &shared));
        }
        let partitions = layout.partition_count();
        let txn = match settings.transactions {
            Some(versions) => {
                let id = format!("strata-perf-{}-{index}", std::process::id());
                Some(
                    Transactions::init(&settings.bootstrap, &settings.client_id, versions, id, partitions)
                        .await?,
                )
            }
            None => None,
        };
        Ok(Producer {
            txn,
            schedule: Schedule::new(Instant::now(), settings.rate_per_producer),
            payloads: Payloads::new(settings.record_size, settings.keys, 0x5eed + index as u64),
            clock,
            open: (0..partitions).map(|_| None).collect(),
            link_of,
            links,
            // Spread keyless producers over partitions from the start.
            sticky: index % partitions,
            settings,
            layout,
            shared,
        })
    }

    /// Starts the schedule at `start` (the producers of a run share one start).
    pub fn begin(mut self, start: Instant) -> Producer {
        self.schedule = Schedule::new(start, self.settings.rate_per_producer);
        self
    }

    /// Generates, batches and sends until `quota`, then flushes and waits for every
    /// answer.
    pub async fn run(mut self, quota: Quota) -> Result<()> {
        loop {
            let now = Instant::now();
            let quota_done = match quota {
                Quota::Records(n) => self.schedule.taken() >= n,
                Quota::Until(t) => now >= t,
            };
            if quota_done {
                break;
            }
            let mut max_burst = MAX_BURST as u64;
            if let Some(t) = &mut self.txn {
                if !t.open {
                    t.begin(&self.layout.topic).await?;
                }
                max_burst = max_burst.min(self.settings.transaction_records - t.records_in_txn);
            }
            let mut burst = 0;
            while burst < max_burst
                && self.shared.buffered.load(Ordering::Relaxed) < self.settings.buffer_memory
                && !matches!(quota, Quota::Records(n) if self.schedule.taken() >= n)
            {
                let Some(due) = self.schedule.take_due(now) else {
                    break;
                };
                self.append(due)?;
                burst += 1;
            }
            if let Some(t) = &mut self.txn {
                t.records_in_txn += burst;
            }
            self.seal_lingering(now)?;
            self.send_ready().await?;
            if self.txn.as_ref().is_some_and(|t| t.records_in_txn >= self.settings.transaction_records) {
                self.commit().await?;
            }
            if burst == 0 {
                self.wait(quota).await;
            }
        }
        self.flush().await
    }

    /// Sleeps until the next record is due, a batch's linger expires or buffer space
    /// frees up, whichever comes first.
    async fn wait(&self, quota: Quota) {
        let now = Instant::now();
        let mut wake = now + Duration::from_millis(1);
        if self.shared.buffered.load(Ordering::Relaxed) < self.settings.buffer_memory {
            if let Some(due) = self.schedule.next_due() {
                wake = due;
            }
            for b in self.open.iter().flatten() {
                wake = wake.min(b.opened + self.settings.linger);
            }
        }
        if let Quota::Until(t) = quota {
            wake = wake.min(t);
        }
        if wake > now {
            tokio::time::sleep_until(wake.into()).await;
        }
    }

    fn append(&mut self, due: Instant) -> Result<()> {
        let partitions = self.layout.partition_count();
        let key = self.payloads.key();
        let value = if self.settings.stamp_values {
            self.payloads.stamped_value(self.clock.unix_ns(due))
        } else {
            self.payloads.value()
        };
        let record_bytes = value.len() + key.map_or(0, |_| KEY_BYTES);
        let mut partition = key.map_or(self.sticky, |k| partition_for_key(k, partitions));
        let full = self.open[partition].as_ref().is_some_and(|b| {
            b.builder.uncompressed_size_in_bytes() + record_bytes + RECORD_OVERHEAD > self.settings.batch_size
        });
        if full {
            self.seal(partition)?;
            if key.is_none() {
                self.sticky = (self.sticky + 1) % partitions;
                partition = self.sticky;
            }
        }
        let compression = self.settings.compression;
        // A batch never grows past batch.size except by its first record.
        let batch_capacity = self.settings.batch_size.max(record_bytes + RECORD_OVERHEAD + 128);
        let batch = self.open[partition].get_or_insert_with(|| OpenBatch {
            builder: RecordBatchBuilder::new(0).compression(compression).with_capacity(batch_capacity),
            dues: Vec::new(),
            payload_bytes: 0,
            opened: Instant::now(),
        });
        let timestamp_ms = (self.clock.unix_ns(due) / 1_000_000) as i64;
        batch
            .builder
            .append(&NewRecord::new(timestamp_ms, key.map(key_bytes), Some(value)))
            .context("building a record batch")?;
        batch.dues.push(due);
        batch.payload_bytes += record_bytes as u64;
        Ok(())
    }

    fn seal(&mut self, partition: usize) -> Result<()> {
        let Some(batch) = self.open[partition].take() else {
            return Ok(());
        };
        let builder = match &mut self.txn {
            Some(t) => {
                let first = t.next_sequence(partition, batch.dues.len() as i32);
                batch.builder.producer(t.producer_id, t.producer_epoch, first).transactional(true)
            }
            None => batch.builder,
        };
        let data = builder.build().context("encoding a record batch")?;
        self.shared.buffered.fetch_add(data.len() as u64, Ordering::Relaxed);
        self.links[self.link_of[partition]].ready.push_back(SealedBatch {
            partition: partition as i32,
            data,
            dues: batch.dues,
            payload_bytes: batch.payload_bytes,
        });
        Ok(())
    }

    fn seal_lingering(&mut self, now: Instant) -> Result<()> {
        for p in 0..self.open.len() {
            let expired = self.open[p].as_ref().is_some_and(|b| b.opened + self.settings.linger <= now);
            if expired {
                self.seal(p)?;
                if p == self.sticky {
                    self.sticky = (self.sticky + 1) % self.open.len();
                }
            }
        }
        Ok(())
    }

    async fn send_ready(&mut self) -> Result<()> {
        let transactional_id = self.txn.as_ref().map(|t| t.transactional_id.as_str());
        for link in &mut self.links {
            while !link.ready.is_empty() {
                link.send_one(&self.settings, &self.shared, transactional_id).await?;
            }
        }
        Ok(())
    }

    /// Sends everything of the open transaction, waits until all of it is
    /// acknowledged, and commits it.
    async fn commit(&mut self) -> Result<()> {
        for p in 0..self.open.len() {
            self.seal(p)?;
        }
        self.send_ready().await?;
        for link in &self.links {
            link.drain(self.settings.max_in_flight).await?;
        }
        if let Some(t) = &mut self.txn {
            t.commit().await?;
            self.shared.meter.add_transactions(1);
        }
        Ok(())
    }

    async fn flush(mut self) -> Result<()> {
        for p in 0..self.open.len() {
            self.seal(p)?;
        }
        self.send_ready().await?;
        if self.txn.as_ref().is_some_and(|t| t.open) {
            self.commit().await?;
        }
        let mut first_error = None;
        for link in &mut self.links {
            // Closing the queue lets the reader finish once the last answer is in.
            link.in_flight = None;
            if let Some(mut idle) = link.idle_reader.take() {
                // acks=0: nothing is answered, so close our side and wait for the
                // broker to close its side, which it does after handling what it read.
                link.writer.shutdown().await?;
                if !idle.wait_closed(ACKS0_CLOSE_TIMEOUT).await {
                    eprintln!("note: the broker did not close the connection within {ACKS0_CLOSE_TIMEOUT:?} after the last acks=0 request");
                }
            }
            if let Some(reader) = link.reader.take() {
                let result = reader.await.map_err(|e| anyhow!("reader task failed: {e}"));
                if let Err(e) = result.and_then(|r| r) {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Link {
    fn start(conn: Connection, settings: &ProducerSettings, shared: &Arc<Shared>) -> Link {
        let (writer, reader) = conn.into_split();
        let permits = Arc::new(Semaphore::new(settings.max_in_flight));
        let (tx, rx) = mpsc::unbounded_channel();
        let (reader, idle_reader) = if settings.acks == 0 {
            (None, Some(reader))
        } else {
            (Some(tokio::spawn(read_responses(reader, rx, shared.clone(), permits.clone()))), None)
        };
        Link { writer, permits, in_flight: Some(tx), reader, idle_reader, ready: Default::default() }
    }

    /// Sends one request with as many ready batches as fit (one per partition, as
    /// Kafka producers do), waiting for a free in-flight slot first.
    /// Waits until every request sent so far is answered.
    async fn drain(&self, max_in_flight: usize) -> Result<()> {
        let all = u32::try_from(max_in_flight).unwrap_or(u32::MAX);
        let _all = self
            .permits
            .acquire_many(all)
            .await
            .map_err(|_| anyhow!("the connection failed; see the reader's error"))?;
        Ok(())
    }

    async fn send_one(
        &mut self,
        settings: &ProducerSettings,
        shared: &Arc<Shared>,
        transactional_id: Option<&str>,
    ) -> Result<()> {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| anyhow!("the connection failed; see the reader's error"))?;
        let mut batches: Vec<SealedBatch> = Vec::new();
        let mut size = 0;
        let mut i = 0;
        while i < self.ready.len() {
            let b = &self.ready[i];
            let fits = batches.is_empty() || size + b.data.len() <= settings.max_request_size;
            if !fits {
                break;
            }
            if batches.iter().any(|x| x.partition == b.partition) {
                i += 1;
                continue;
            }
            size += b.data.len();
            if let Some(b) = self.ready.remove(i) {
                batches.push(b);
            }
        }
        let request = ProduceRequest {
            transactional_id: transactional_id.map(str::to_string),
            acks: settings.acks,
            timeout_ms: settings.timeout_ms,
            topic_data: vec![TopicProduceData {
                name: shared.topic.clone(),
                partition_data: batches
                    .iter()
                    .map(|b| PartitionProduceData { index: b.partition, records: Some(b.data.clone()) })
                    .collect(),
            }],
        };
        let sent = self.writer.send(settings.version, &RequestBody::Produce(request)).await?;
        shared.meter.add_wire(sent.frame_bytes as u64);
        if settings.acks == 0 {
            // No answer comes: a record counts as acknowledged once written.
            let now = Instant::now();
            for b in &batches {
                shared.meter.add(b.dues.len() as u64, b.payload_bytes);
                shared.meter.record_latencies(b.dues.iter().map(|&d| latency(d, now)));
                shared.buffered.fetch_sub(b.data.len() as u64, Ordering::Relaxed);
            }
            return Ok(());
        }
        let tx = self.in_flight.as_ref().ok_or_else(|| anyhow!("producer already flushed"))?;
        tx.send(InFlight { sent, batches, _permit: permit })
            .map_err(|_| anyhow!("the connection's reader stopped"))?;
        Ok(())
    }
}

/// Takes a connection's Produce responses in order and accounts for each batch. On
/// any failure it closes the in-flight semaphore so the sending side stops too.
async fn read_responses(
    mut reader: FrameReader,
    mut rx: mpsc::UnboundedReceiver<InFlight>,
    shared: Arc<Shared>,
    permits: Arc<Semaphore>,
) -> Result<()> {
    let result = async {
        while let Some(request) = rx.recv().await {
            let (body, _) = reader.receive(&request.sent).await?;
            let now = Instant::now();
            let ResponseBody::Produce(response) = body else {
                bail!("unexpected response to Produce");
            };
            for batch in &request.batches {
                let answer = response
                    .responses
                    .iter()
                    .filter(|t| t.name == shared.topic)
                    .flat_map(|t| t.partition_responses.iter())
                    .find(|p| p.index == batch.partition);
                let records = batch.dues.len() as u64;
                match answer {
                    Some(p) if p.error_code == 0 => {
                        shared.meter.add(records, batch.payload_bytes);
                        shared.meter.record_latencies(batch.dues.iter().map(|&d| latency(d, now)));
                    }
                    Some(p) => shared.meter.error(records, || {
                        format!(
                            "partition {}: {} {}",
                            batch.partition,
                            error_name(p.error_code),
                            p.error_message.as_deref().unwrap_or("")
                        )
                    }),
                    None => shared.meter.error(records, || {
                        format!("partition {}: missing from the response", batch.partition)
                    }),
                }
                shared.buffered.fetch_sub(batch.data.len() as u64, Ordering::Relaxed);
            }
        }
        Ok(())
    }
    .await;
    if result.is_err() {
        permits.close();
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_splits_records_exactly() {
        let parts: Vec<u64> = (0..3)
            .map(|i| match Quota::Records(10).split(3, i) {
                Quota::Records(n) => n,
                Quota::Until(_) => 0,
            })
            .collect();
        assert_eq!(parts, vec![4, 3, 3]);
    }

    #[test]
    fn wall_clock_maps_instants_both_ways() {
        let c = WallClock::now();
        let later = c.instant + Duration::from_millis(5);
        assert_eq!(c.unix_ns(later) - c.unix_ns, 5_000_000);
        if let Some(earlier) = c.instant.checked_sub(Duration::from_millis(2)) {
            assert_eq!(c.unix_ns - c.unix_ns(earlier), 2_000_000);
        }
    }
}
