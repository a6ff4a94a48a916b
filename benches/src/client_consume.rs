//! The consumer engine on `strata-client`: `--consumers` [`Consumer`]s polling, either
//! with partitions split statically (assign and seek, as the wire engine does) or as
//! members of one consumer group (`--group`: subscribe, partitions assigned by the
//! group protocol, offsets auto-committed), counting what `poll` returns.
//!
//! The stop conditions are the wire engine's ([`StopWhen`]): a record count, a
//! deadline, the end offsets seen at start-up (judged on the consumers' positions, so
//! transaction markers past the last record count as read) or a time without records.
//! Positions are shared between the consumers, so a group member left without
//! partitions stops when the others have read everything.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use strata_client::consumer::{Consumer, ConsumerConfig, NoopListener};
use strata_client::TopicPartition;

use crate::cli::{ConsumerOpts, StartFrom};
use crate::consume::{assignment, StopWhen};
use crate::payload::read_stamp;
use crate::stats::Meter;

/// How long one poll waits before the stop conditions are looked at again.
const POLL_TIMEOUT: Duration = Duration::from_millis(100);

/// What the consumers are told, beyond [`ConsumerOpts`].
#[derive(Debug, Clone)]
pub struct ClientConsumeSettings {
    /// Bootstrap address.
    pub bootstrap: String,
    /// client.id.
    pub client_id: String,
    /// Topic.
    pub topic: String,
    /// Where consumers without a committed offset start.
    pub from: StartFrom,
    /// Join this group instead of assigning partitions statically.
    pub group: Option<String>,
    /// Record each value's end-to-end stamp as a latency.
    pub stamped: bool,
}

/// Runs `opts.consumers` consumers from `start_offsets` (one per partition; the
/// static split seeks to them, a group starts from its committed offsets or `from`)
/// until `stop`.
pub async fn run(
    settings: ClientConsumeSettings,
    opts: &ConsumerOpts,
    start_offsets: Vec<i64>,
    stop: Arc<StopWhen>,
    meter: Arc<Meter>,
) -> Result<()> {
    let partitions = start_offsets.len();
    let positions: Arc<Vec<AtomicI64>> = Arc::new(start_offsets.iter().map(|&o| AtomicI64::new(o)).collect());
    let mut tasks = Vec::with_capacity(opts.consumers);
    for c in 0..opts.consumers {
        let mut consumer =
            Consumer::new(consumer_config(&settings, opts)?).await.context("starting the client consumer")?;
        match &settings.group {
            Some(_) => consumer.subscribe(&[&settings.topic], Box::new(NoopListener))?,
            None => {
                let mine: Vec<TopicPartition> = assignment(partitions, opts.consumers, c)
                    .into_iter()
                    .map(|p| TopicPartition::new(settings.topic.as_str(), p as i32))
                    .collect();
                consumer.assign(&mine)?;
                for tp in &mine {
                    consumer.seek(tp, start_offsets[tp.partition as usize])?;
                }
            }
        }
        let run = PollLoop {
            consumer,
            stop: stop.clone(),
            meter: meter.clone(),
            positions: positions.clone(),
            stamped: settings.stamped,
        };
        tasks.push(tokio::spawn(run.run()));
    }
    let mut first_error = None;
    for t in tasks {
        if let Err(e) = t.await.context("consumer task panicked").and_then(|r| r) {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

fn consumer_config(settings: &ClientConsumeSettings, opts: &ConsumerOpts) -> Result<ConsumerConfig> {
    let mut c = ConsumerConfig::new(&settings.bootstrap);
    let from = match settings.from {
        StartFrom::Earliest => "earliest",
        StartFrom::Latest => "latest",
    };
    let isolation = if opts.read_committed { "read_committed" } else { "read_uncommitted" };
    let mut entries = vec![
        ("client.id", settings.client_id.clone()),
        ("fetch.max.bytes", opts.fetch_max_bytes.to_string()),
        ("max.partition.fetch.bytes", opts.partition_max_bytes.to_string()),
        ("fetch.max.wait.ms", opts.fetch_max_wait_ms.to_string()),
        ("check.crcs", (!opts.no_check_crc).to_string()),
        ("isolation.level", isolation.to_string()),
        ("auto.offset.reset", from.to_string()),
        ("max.poll.records", "100000".to_string()),
    ];
    match &settings.group {
        Some(g) => entries.push(("group.id", g.clone())),
        None => entries.push(("enable.auto.commit", "false".to_string())),
    }
    for (k, v) in entries {
        c.set(k, &v).with_context(|| format!("consumer setting {k}={v}"))?;
    }
    Ok(c)
}

/// One consumer's poll loop.
struct PollLoop {
    consumer: Consumer,
    stop: Arc<StopWhen>,
    meter: Arc<Meter>,
    /// The furthest position any consumer reported, per partition.
    positions: Arc<Vec<AtomicI64>>,
    stamped: bool,
}

impl PollLoop {
    async fn run(mut self) -> Result<()> {
        let mut last_progress = (self.meter.records(), Instant::now());
        let mut stamps = Vec::new();
        while !self.done() {
            let seen = self.meter.records();
            if seen != last_progress.0 {
                last_progress = (seen, Instant::now());
            } else if self.stop.idle_timeout.is_some_and(|t| last_progress.1.elapsed() >= t) {
                eprintln!("note: no record arrived for {:?}; stopping", last_progress.1.elapsed());
                break;
            }
            let records = self.consumer.poll(POLL_TIMEOUT).await.context("poll")?;
            let now_ns = self.stamped.then(unix_ns);
            let mut bytes = 0u64;
            for r in &records {
                let value = r.value.as_deref().unwrap_or_default();
                bytes += (r.key.as_ref().map_or(0, |k| k.len()) + value.len()) as u64;
                if let (Some(now), Some(stamp)) = (now_ns, read_stamp(value)) {
                    stamps.push(Duration::from_nanos(now.saturating_sub(stamp)));
                }
            }
            self.meter.add(records.len() as u64, bytes);
            if !stamps.is_empty() {
                self.meter.record_latencies(stamps.drain(..));
            }
            for (tp, position) in self.consumer.positions() {
                if let Some(shared) = self.positions.get(tp.partition as usize) {
                    shared.fetch_max(position, Ordering::Relaxed);
                }
            }
        }
        self.consumer.close().await.context("closing the client consumer")
    }

    /// Whether the run is over: a count or deadline reached, or every partition read
    /// up to the end offsets seen at start-up.
    fn done(&self) -> bool {
        if self.stop.reached(&self.meter) {
            return true;
        }
        self.stop.end_offsets.as_ref().is_some_and(|ends| {
            ends.iter().zip(self.positions.iter()).all(|(end, at)| at.load(Ordering::Relaxed) >= *end)
        })
    }
}

fn unix_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}
