//! The consumer: fetch loops over statically assigned partitions (no group protocol,
//! so it works against brokers without group coordination), one connection per leader
//! per consumer, one fetch in flight per connection as Kafka consumers do.
//!
//! Every fetched batch has its CRC checked (unless disabled) and its records decoded,
//! so the consumer does the work a real client does; key and value bytes are counted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use strata_protocol::messages::fetch::{FetchPartition, FetchRequest, FetchTopic};
use strata_protocol::records::RecordBatches;
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};

use crate::cluster::{error_name, TopicLayout};
use crate::payload::read_stamp;
use crate::stats::Meter;
use crate::wire::{Connection, Sent};

/// Cap on the decompressed size of one fetched batch.
const MAX_UNCOMPRESSED_BATCH: usize = 64 << 20;

/// How the consumers fetch.
#[derive(Debug, Clone)]
pub struct ConsumerSettings {
    /// client.id.
    pub client_id: String,
    /// Fetch version negotiated with the broker.
    pub version: i16,
    /// fetch.max.wait.ms.
    pub max_wait_ms: i32,
    /// fetch.max.bytes.
    pub max_bytes: i32,
    /// max.partition.fetch.bytes.
    pub partition_max_bytes: i32,
    /// check.crcs.
    pub check_crc: bool,
    /// isolation.level=read_committed: read up to the last stable offset and drop
    /// records of aborted transactions.
    pub read_committed: bool,
    /// Read the end-to-end stamp from each value and record its latency.
    pub stamped: bool,
}

/// When consumers stop: whichever condition is met first.
#[derive(Debug)]
pub struct StopWhen {
    /// Total records to read across consumers; `u64::MAX` for no count (may be
    /// lowered while running, as end-to-end runs do once producers are done).
    pub records: AtomicU64,
    /// A deadline.
    pub until: Option<Instant>,
    /// End offset per partition: a partition is done once read up to it.
    pub end_offsets: Option<Vec<i64>>,
    /// Give up when no record arrives for this long (a --records count larger than
    /// the topic would otherwise wait forever); `None` waits.
    pub idle_timeout: Option<Duration>,
}

impl StopWhen {
    /// Whether the record count or the deadline is reached.
    pub fn reached(&self, meter: &Meter) -> bool {
        meter.records() >= self.records.load(Ordering::Relaxed)
            || self.until.is_some_and(|t| Instant::now() >= t)
    }
}

/// Partitions of consumer `index` out of `consumers`: every `consumers`-th one.
pub fn assignment(partitions: usize, consumers: usize, index: usize) -> Vec<usize> {
    (index..partitions).step_by(consumers.max(1)).collect()
}

/// Runs `consumers` consumers from `start_offsets` until `stop`; returns when all
/// fetch loops have ended.
pub async fn run(
    settings: ConsumerSettings,
    layout: TopicLayout,
    consumers: usize,
    start_offsets: Vec<i64>,
    stop: Arc<StopWhen>,
    meter: Arc<Meter>,
) -> Result<()> {
    let mut tasks = Vec::new();
    for c in 0..consumers {
        let mine = assignment(layout.partition_count(), consumers, c);
        // One fetch loop per leader among this consumer's partitions.
        let mut by_leader: std::collections::BTreeMap<String, Vec<(i32, i64)>> = Default::default();
        for p in mine {
            by_leader
                .entry(layout.leader_addr(p)?.to_string())
                .or_default()
                .push((p as i32, start_offsets[p]));
        }
        for (addr, partitions) in by_leader {
            let conn = Connection::connect(&addr, &settings.client_id).await?;
            let fetcher = Fetcher {
                conn,
                settings: settings.clone(),
                topic: layout.topic.clone(),
                partitions,
                stop: stop.clone(),
                meter: meter.clone(),
            };
            tasks.push(tokio::spawn(fetcher.run()));
        }
    }
    let mut first_error = None;
    for t in tasks {
        if let Err(e) = t.await.context("fetch task panicked").and_then(|r| r) {
            first_error.get_or_insert(e);
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// One fetch loop: a connection and the partitions it reads, with their next offsets.
struct Fetcher {
    conn: Connection,
    settings: ConsumerSettings,
    topic: String,
    partitions: Vec<(i32, i64)>,
    stop: Arc<StopWhen>,
    meter: Arc<Meter>,
}

impl Fetcher {
    fn wanted(&self) -> Vec<FetchPartition> {
        self.partitions
            .iter()
            .filter(|(p, offset)| match &self.stop.end_offsets {
                Some(ends) => *offset < ends[*p as usize],
                None => true,
            })
            .map(|&(partition, fetch_offset)| FetchPartition {
                partition,
                fetch_offset,
                partition_max_bytes: self.settings.partition_max_bytes,
                ..Default::default()
            })
            .collect()
    }

    /// Sends a Fetch for every partition still wanted; `None` when none is.
    async fn send_fetch(&mut self) -> Result<Option<Sent>> {
        let partitions = self.wanted();
        if partitions.is_empty() {
            return Ok(None);
        }
        let request = FetchRequest {
            replica_id: -1,
            max_wait_ms: self.settings.max_wait_ms,
            min_bytes: 1,
            max_bytes: self.settings.max_bytes,
            isolation_level: i8::from(self.settings.read_committed),
            session_id: 0,
            session_epoch: -1,
            topics: vec![FetchTopic { topic: self.topic.clone(), partitions, ..Default::default() }],
            ..Default::default()
        };
        Ok(Some(self.conn.writer.send(self.settings.version, &RequestBody::Fetch(request)).await?))
    }

    /// Fetches with one request always in flight, as Kafka consumers prefetch: as soon
    /// as a response arrives, the next offsets are read off its batch headers and the
    /// next Fetch goes out, then this response's records are checked and decoded while
    /// the broker serves the next one.
    async fn run(mut self) -> Result<()> {
        let mut last_progress = (self.meter.records(), Instant::now());
        let mut in_flight: Option<Sent> = None;
        loop {
            if self.stop.reached(&self.meter) {
                return Ok(());
            }
            let seen = self.meter.records();
            if seen != last_progress.0 {
                last_progress = (seen, Instant::now());
            } else if self.stop.idle_timeout.is_some_and(|t| last_progress.1.elapsed() >= t) {
                eprintln!(
                    "note: no record arrived for {:?}; stopping",
                    self.stop.idle_timeout.unwrap_or_default()
                );
                return Ok(());
            }
            let sent = match in_flight.take() {
                Some(sent) => sent,
                None => match self.send_fetch().await? {
                    Some(sent) => sent,
                    None => return Ok(()),
                },
            };
            let (body, frame_bytes) = self.conn.reader.receive(&sent).await?;
            self.meter.add_wire(frame_bytes as u64);
            let ResponseBody::Fetch(response) = body else {
                bail!("unexpected response to Fetch");
            };
            if response.error_code != 0 {
                bail!("fetch failed: {}", error_name(response.error_code));
            }
            // (slot, offset fetched from, records, aborted transactions)
            let mut fetched = Vec::new();
            for topic in response.responses {
                for pd in topic.partitions {
                    if pd.error_code != 0 {
                        bail!(
                            "fetch of partition {} failed: {}",
                            pd.partition_index,
                            error_name(pd.error_code)
                        );
                    }
                    let Some(slot) = self.partitions.iter().position(|(p, _)| *p == pd.partition_index)
                    else {
                        continue;
                    };
                    let records = pd.records.and_then(|r| r.memory()).unwrap_or_default();
                    let aborted: Vec<(i64, i64)> = pd
                        .aborted_transactions
                        .unwrap_or_default()
                        .iter()
                        .map(|a| (a.producer_id, a.first_offset))
                        .collect();
                    let from = self.partitions[slot].1;
                    self.partitions[slot].1 = next_fetch_offset(&records, from);
                    fetched.push((slot, from, records, aborted));
                }
            }
            in_flight = self.send_fetch().await?;
            for (slot, from, records, aborted) in fetched {
                let next = consume_records(&records, from, &aborted, &self.settings, &self.meter)
                    .with_context(|| format!("partition {} at offset {from}", self.partitions[slot].0))?;
                debug_assert_eq!(next, self.partitions[slot].1, "header walk and decoding disagree");
            }
        }
    }
}

/// The offset after the last whole batch of `records` past `offset` (a truncated last
/// batch is fetched again), from batch headers alone: what [`consume_records`] returns
/// for the same records.
fn next_fetch_offset(records: &Bytes, mut offset: i64) -> i64 {
    for batch in RecordBatches::new(records.clone()) {
        let Ok(batch) = batch else {
            break;
        };
        offset = offset.max(batch.next_offset());
    }
    offset
}

/// Reads the batches of one partition's fetched records from `offset`: checks CRCs,
/// decodes records, counts them (and their end-to-end latency when stamped), and
/// returns the next offset to fetch. A truncated last batch (brokers may cut the
/// response at the byte limit) is left for the next fetch. `aborted` lists the
/// (producer id, first offset) of aborted transactions in the range (read_committed
/// fetches): their batches are dropped up to each producer's abort marker, as Kafka
/// consumers do.
pub fn consume_records(
    records: &Bytes,
    mut offset: i64,
    aborted: &[(i64, i64)],
    settings: &ConsumerSettings,
    meter: &Meter,
) -> Result<i64> {
    let mut pending_aborts: Vec<(i64, i64)> = aborted.to_vec();
    pending_aborts.sort_by_key(|&(_, first)| std::cmp::Reverse(first));
    let mut aborting: Vec<i64> = Vec::new();
    let mut count = 0u64;
    let mut bytes = 0u64;
    let mut stamps: Vec<Duration> = Vec::new();
    let now_ns = settings
        .stamped
        .then(|| SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64));
    for batch in RecordBatches::new(records.clone()) {
        let Ok(batch) = batch else {
            break;
        };
        if batch.next_offset() <= offset {
            continue;
        }
        if settings.check_crc {
            batch.validate_crc().map_err(|e| anyhow::anyhow!("{}: {e}", ErrorCode::CorruptMessage.name()))?;
        }
        while pending_aborts.last().is_some_and(|&(_, first)| first <= batch.last_offset()) {
            if let Some((producer_id, _)) = pending_aborts.pop() {
                aborting.push(producer_id);
            }
        }
        let in_aborted = batch.is_transactional() && aborting.contains(&batch.producer_id());
        if batch.is_control() && in_aborted {
            // The abort marker closes that producer's aborted transaction.
            aborting.retain(|&p| p != batch.producer_id());
        }
        if !batch.is_control() && !in_aborted {
            for record in batch.records(MAX_UNCOMPRESSED_BATCH)? {
                let record = record?;
                if record.offset < offset {
                    continue;
                }
                count += 1;
                let value = record.value.as_deref().unwrap_or_default();
                bytes += (record.key.as_ref().map_or(0, Bytes::len) + value.len()) as u64;
                if let (Some(now), Some(stamp)) = (now_ns, read_stamp(value)) {
                    stamps.push(Duration::from_nanos(now.saturating_sub(stamp)));
                }
            }
        }
        offset = batch.next_offset();
    }
    meter.add(count, bytes);
    if !stamps.is_empty() {
        meter.record_latencies(stamps);
    }
    Ok(offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use strata_protocol::records::{NewRecord, RecordBatchBuilder};

    fn batch(base: i64, n: usize) -> Bytes {
        let mut b = RecordBatchBuilder::new(base);
        for i in 0..n {
            b.append(&NewRecord::new(
                i as i64,
                Some(Bytes::from_static(b"k")),
                Some(Bytes::from(vec![b'v'; 10])),
            ))
            .unwrap();
        }
        b.build().unwrap()
    }

    fn settings() -> ConsumerSettings {
        ConsumerSettings {
            client_id: "t".into(),
            version: 12,
            max_wait_ms: 0,
            max_bytes: 1 << 20,
            partition_max_bytes: 1 << 20,
            check_crc: true,
            read_committed: false,
            stamped: false,
        }
    }

    #[test]
    fn counts_records_from_the_fetch_offset_and_skips_a_torn_tail() {
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&batch(0, 5));
        buf.extend_from_slice(&batch(5, 5));
        let third = batch(10, 5);
        buf.extend_from_slice(&third[..third.len() - 3]);
        let meter = Meter::new("consume");
        let next = consume_records(&buf.clone().freeze(), 3, &[], &settings(), &meter).unwrap();
        assert_eq!(next, 10, "the torn batch is fetched again");
        let records = buf.clone().freeze();
        assert_eq!(next_fetch_offset(&records, 3), 10, "the prefetch offset agrees");
        assert_eq!(next_fetch_offset(&records, 12), 12, "never moves backwards");
        assert_eq!(next_fetch_offset(&Bytes::new(), 7), 7, "nothing fetched, nothing moves");
        assert_eq!(meter.records(), 7, "offsets 3..10");
        assert_eq!(meter.summary(Duration::from_secs(1)).bytes, 7 * 11);
    }

    #[test]
    fn a_corrupt_batch_is_an_error() {
        let mut b = BytesMut::from(&batch(0, 2)[..]);
        let last = b.len() - 1;
        b[last] ^= 0xff;
        let meter = Meter::new("consume");
        let err = consume_records(&b.freeze(), 0, &[], &settings(), &meter).unwrap_err();
        assert!(err.to_string().contains("CORRUPT_MESSAGE"), "{err}");
    }

    #[test]
    fn read_committed_drops_aborted_transactions_up_to_their_marker() {
        let txn = |base: i64, producer: i64| {
            let mut b = RecordBatchBuilder::new(base).producer(producer, 0, base as i32).transactional(true);
            for i in 0..2 {
                b.append(&NewRecord::new(i, None, Some(Bytes::from_static(b"v")))).unwrap();
            }
            b.build().unwrap()
        };
        let marker = |base: i64, producer: i64| {
            let mut b =
                RecordBatchBuilder::new(base).producer(producer, 0, -1).transactional(true).control(true);
            b.append(&NewRecord::new(0, Some(Bytes::from_static(&[0, 0, 0, 0])), Some(Bytes::new())))
                .unwrap();
            b.build().unwrap()
        };
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&txn(0, 7)); // aborted: 0, 1
        buf.extend_from_slice(&txn(2, 8)); // committed: 2, 3
        buf.extend_from_slice(&marker(4, 7)); // abort marker of 7
        buf.extend_from_slice(&txn(5, 7)); // a later transaction of 7: 5, 6
        let meter = Meter::new("consume");
        let mut s = settings();
        s.read_committed = true;
        let next = consume_records(&buf.freeze(), 0, &[(7, 0)], &s, &meter).unwrap();
        assert_eq!(next, 7);
        assert_eq!(meter.records(), 4, "offsets 2, 3, 5, 6");
    }

    #[test]
    fn partitions_are_split_round_robin() {
        assert_eq!(assignment(5, 2, 0), vec![0, 2, 4]);
        assert_eq!(assignment(5, 2, 1), vec![1, 3]);
        assert_eq!(assignment(1, 3, 2), Vec::<usize>::new());
    }
}
