//! The producer engine on `strata-client`: the same schedule, payloads and latency
//! accounting as the hand-written [`crate::produce`] engine, with batching, pipelining,
//! retries and memory accounting left to [`strata_client::producer::Producer`], so a
//! run measures what an application using the client gets.
//!
//! Each producer task generates due records in bursts, hands a burst to the client in
//! one call ([`Producer::send_borrowed`]: values are slices of the payload pool, as an
//! application's would be slices of its own buffers, copied once, into their batch)
//! and passes the deliveries with their due times to an acknowledgement task, which
//! awaits them in order and records each record's latency from its due time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use strata_client::producer::{BorrowedRecord, Deliveries, Producer, ProducerConfig};
use tokio::sync::mpsc;

use crate::payload::{Payloads, KEY_BYTES};
use crate::produce::{ProducerSettings, Quota, WallClock};
use crate::schedule::{latency, Schedule};
use crate::stats::Meter;

/// Records generated and handed to the client in one call.
const BURST: usize = 256;

/// One burst's deliveries, each with its record's due time, and the key+value bytes
/// of one record (all records of a run have the same size).
struct Burst {
    dues: Vec<Instant>,
    deliveries: Deliveries,
    record_bytes: u64,
}

/// The client configuration equivalent to the wire engine's settings: the same batch
/// size, linger, in-flight limit and buffer, no idempotence (the wire engine has none)
/// unless transactional.
fn client_config(settings: &ProducerSettings, index: usize) -> Result<ProducerConfig> {
    let mut c = ProducerConfig::new(&settings.bootstrap);
    let acks = if settings.acks < 0 { "all".to_string() } else { settings.acks.to_string() };
    let compression = format!("{:?}", settings.compression).to_lowercase();
    let mut entries = vec![
        ("client.id", settings.client_id.clone()),
        ("acks", acks),
        ("linger.ms", settings.linger.as_millis().to_string()),
        ("batch.size", settings.batch_size.to_string()),
        ("max.request.size", settings.max_request_size.to_string()),
        ("buffer.memory", settings.buffer_memory.to_string()),
        ("compression.type", compression),
        ("max.in.flight.requests.per.connection", settings.max_in_flight.to_string()),
        ("request.timeout.ms", settings.timeout_ms.to_string()),
    ];
    if settings.transactions.is_some() {
        let id = format!("strata-perf-{}-{index}", std::process::id());
        entries.push(("transactional.id", id));
    } else {
        entries.push(("enable.idempotence", "false".to_string()));
    }
    for (k, v) in entries {
        c.set(k, &v).with_context(|| format!("producer setting {k}={v}"))?;
    }
    Ok(c)
}

/// The bytes of one burst's records that are not slices of the payload pool (keys,
/// stamped values), kept until the burst is handed over; the records borrow them.
#[derive(Default)]
struct BurstBytes {
    /// One key per record when records are keyed.
    keys: Vec<[u8; KEY_BYTES]>,
    /// Where each record's value is.
    values: Vec<ValueAt>,
    /// Values built here rather than cut from the pool.
    built: Vec<u8>,
}

/// Where a value is: a start in the payload pool, or a range of [`BurstBytes::built`].
#[derive(Clone, Copy)]
enum ValueAt {
    Pool(usize),
    Built(usize, usize),
}

impl BurstBytes {
    /// Adds the next record's key and value.
    fn add(&mut self, payloads: &mut Payloads, stamp_ns: Option<u64>) {
        if let Some(k) = payloads.key() {
            self.keys.push(k.to_be_bytes());
        }
        let at = match (stamp_ns, payloads.value_start()) {
            (None, Some(start)) => ValueAt::Pool(start),
            (Some(stamp), _) => {
                let from = self.built.len();
                payloads.put_stamped_value(stamp, &mut self.built);
                ValueAt::Built(from, self.built.len())
            }
            (None, None) => {
                let from = self.built.len();
                self.built.extend_from_slice(&payloads.value());
                ValueAt::Built(from, self.built.len())
            }
        };
        self.values.push(at);
    }

    /// The burst's records, stamped with their due times.
    fn records<'a>(
        &'a self,
        pool: &'a [u8],
        value_size: usize,
        dues: &[Instant],
        clock: &WallClock,
    ) -> Vec<BorrowedRecord<'a>> {
        let values = self.values.iter().zip(dues).enumerate();
        values
            .map(|(i, (at, due))| BorrowedRecord {
                key: self.keys.get(i).map(|k| &k[..]),
                value: Some(match *at {
                    ValueAt::Pool(start) => &pool[start..start + value_size],
                    ValueAt::Built(from, to) => &self.built[from..to],
                }),
                timestamp: Some((clock.unix_ns(*due) / 1_000_000) as i64),
                ..BorrowedRecord::default()
            })
            .collect()
    }

    fn clear(&mut self) {
        self.keys.clear();
        self.values.clear();
        self.built.clear();
    }
}

/// One producer on the client: its schedule, payloads and the client producer.
pub struct ClientProducer {
    settings: ProducerSettings,
    topic: Arc<str>,
    producer: Producer,
    schedule: Schedule,
    payloads: Payloads,
    clock: WallClock,
    meter: Arc<Meter>,
}

impl ClientProducer {
    /// Creates the client producer (metadata, connections; a transactional one also
    /// gets its producer id), and learns the topic's partitions with a first empty
    /// look-up so the run does not start with a metadata round trip.
    pub async fn connect(
        index: usize,
        settings: ProducerSettings,
        topic: &str,
        meter: Arc<Meter>,
        clock: WallClock,
    ) -> Result<ClientProducer> {
        let producer =
            Producer::new(client_config(&settings, index)?).await.context("starting the client producer")?;
        if settings.transactions.is_some() {
            producer.init_transactions().await.context("init_transactions")?;
        }
        Ok(ClientProducer {
            schedule: Schedule::new(Instant::now(), settings.rate_per_producer),
            payloads: Payloads::new(settings.record_size, settings.keys, 0x5eed + index as u64),
            topic: Arc::from(topic),
            settings,
            producer,
            clock,
            meter,
        })
    }

    /// Starts the schedule at `start` (the producers of a run share one start).
    pub fn begin(mut self, start: Instant) -> ClientProducer {
        self.schedule = Schedule::new(start, self.settings.rate_per_producer);
        self
    }

    /// Generates and sends until `quota`, then flushes and waits for every
    /// acknowledgement.
    pub async fn run(mut self, quota: Quota) -> Result<()> {
        let (acks_tx, acks_rx) = mpsc::unbounded_channel::<Burst>();
        let acker = tokio::spawn(acknowledge(acks_rx, self.meter.clone()));
        let result = self.generate(quota, &acks_tx).await;
        drop(acks_tx);
        let flushed = self.producer.flush().await.context("flushing the client producer");
        acker.await.context("acknowledgement task panicked")?;
        self.producer.close().await.context("closing the client producer")?;
        result.and(flushed)
    }

    async fn generate(&mut self, quota: Quota, acks: &mpsc::UnboundedSender<Burst>) -> Result<()> {
        let per_txn = self.settings.transaction_records;
        let transactional = self.settings.transactions.is_some();
        let mut in_txn = 0u64;
        let pool: Bytes = self.payloads.pool().clone();
        let mut bytes = BurstBytes::default();
        let mut dues = Vec::with_capacity(BURST);
        loop {
            let now = Instant::now();
            let done = match quota {
                Quota::Records(n) => self.schedule.taken() >= n,
                Quota::Until(t) => now >= t,
            };
            if done {
                break;
            }
            if transactional && in_txn == 0 {
                self.producer.begin_transaction().context("begin_transaction")?;
            }
            let mut room = BURST as u64;
            if transactional {
                room = room.min(per_txn - in_txn);
            }
            if let Quota::Records(n) = quota {
                room = room.min(n - self.schedule.taken());
            }
            while (dues.len() as u64) < room {
                let Some(due) = self.schedule.take_due(now) else { break };
                let stamp = self.settings.stamp_values.then(|| self.clock.unix_ns(due));
                bytes.add(&mut self.payloads, stamp);
                dues.push(due);
            }
            if dues.is_empty() {
                self.wait(quota).await;
                continue;
            }
            let records = bytes.records(&pool, self.settings.record_size, &dues, &self.clock);
            let record_bytes = records.first().map_or(0, record_bytes);
            let n = records.len() as u64;
            let deliveries = self.producer.send_borrowed(&self.topic, &records).await.context("send")?;
            drop(records);
            bytes.clear();
            let burst = Burst {
                dues: std::mem::replace(&mut dues, Vec::with_capacity(BURST)),
                deliveries,
                record_bytes,
            };
            // The acknowledgement task only ends after this one stops sending.
            let _ = acks.send(burst);
            in_txn += n;
            if transactional && in_txn >= per_txn {
                self.producer.commit_transaction().await.context("commit_transaction")?;
                self.meter.add_transactions(1);
                in_txn = 0;
            }
        }
        if transactional && in_txn > 0 {
            self.producer.commit_transaction().await.context("commit_transaction")?;
            self.meter.add_transactions(1);
        }
        Ok(())
    }

    /// Sleeps until the next record is due (at most 1 ms, so a deadline is kept).
    async fn wait(&self, quota: Quota) {
        let now = Instant::now();
        let mut wake = self.schedule.next_due().unwrap_or(now + Duration::from_millis(1));
        if let Quota::Until(t) = quota {
            wake = wake.min(t);
        }
        if wake > now {
            tokio::time::sleep_until(wake.into()).await;
        }
    }
}

fn record_bytes(r: &BorrowedRecord<'_>) -> u64 {
    (r.key.map_or(0, <[u8]>::len) + r.value.map_or(0, <[u8]>::len)) as u64
}

/// Awaits every delivery in order, counting acknowledged records and their latency
/// from their due time, and failed records with the first error. The clock is read
/// once per burst and after each wait, not per record: the records of one batch are
/// acknowledged at one instant.
async fn acknowledge(mut bursts: mpsc::UnboundedReceiver<Burst>, meter: Arc<Meter>) {
    let mut latencies = Vec::with_capacity(BURST);
    while let Some(mut burst) = bursts.recv().await {
        let (mut records, mut bytes) = (0u64, 0u64);
        let mut now = Instant::now();
        let mut dues = burst.dues.iter();
        loop {
            let waits = !burst.deliveries.is_next_ready();
            let Some((n, result)) = burst.deliveries.next_batch().await else { break };
            if waits {
                now = Instant::now();
            }
            let batch = dues.by_ref().take(n);
            match result {
                Ok(()) => {
                    latencies.extend(batch.map(|&due| latency(due, now)));
                    records += n as u64;
                    bytes += n as u64 * burst.record_bytes;
                }
                Err(e) => meter.error(n as u64, || format!("produce failed: {e}")),
            }
        }
        meter.add(records, bytes);
        meter.record_latencies(latencies.drain(..));
    }
}
