//! The broker's Prometheus metrics (issue 13): counters kept on the hot paths, gauges
//! read from existing state at scrape time, and the `/metrics` endpoint serving both.
//!
//! Names follow what the Prometheus JMX exporter's usual Kafka rules make of Kafka's
//! MBeans (`kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=t` becomes
//! `kafka_server_brokertopicmetrics_bytesin_total{topic="t"}`), so dashboards built for
//! Kafka keep working; `docs/operations.md` lists the mapping.
//!
//! Cost on produce and fetch: a few relaxed atomic adds on counters that were created
//! once per topic and are reached through the partition (no lock, no allocation, no map
//! lookup per request). Everything else (log sizes, offsets, ISR state, group lag) is
//! read when Prometheus scrapes.

mod exposition;
mod histogram;
pub mod http;

pub use exposition::render;
pub use histogram::LatencyHistogram;

use crate::controller::election::NO_LEADER;
use crate::metadata::MetadataImage;
use dashmap::DashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata_protocol::ApiKey;

/// API keys get a latency histogram and a request counter each up to this key (Kafka's
/// keys are below 100).
const MAX_API_KEY: usize = 100;

/// Counters of one topic (Kafka's `BrokerTopicMetrics` with a `topic` tag), shared by
/// the topic's partitions on this broker. Kept after the topic is deleted, so counters
/// never go backwards within a process.
#[derive(Debug, Default)]
pub struct TopicMetrics {
    /// Bytes of record batches appended by producers (`BytesInPerSec`).
    pub bytes_in: AtomicU64,
    /// Records appended by producers (`MessagesInPerSec`).
    pub messages_in: AtomicU64,
    /// Bytes of records sent to consumers (`BytesOutPerSec`).
    pub bytes_out: AtomicU64,
    /// Bytes of records sent to followers (`ReplicationBytesOutPerSec`).
    pub replication_bytes_out: AtomicU64,
    /// Partitions of produce requests addressed to this broker as leader (`TotalProduceRequestsPerSec`).
    pub produce_requests: AtomicU64,
    /// Of those, the ones answered with an error (`FailedProduceRequestsPerSec`).
    pub failed_produce_requests: AtomicU64,
    /// Partitions of fetch requests read here as leader (`TotalFetchRequestsPerSec`).
    pub fetch_requests: AtomicU64,
    /// Of those, the ones answered with an error (`FailedFetchRequestsPerSec`).
    pub failed_fetch_requests: AtomicU64,
    /// ISR shrinks of this topic's partitions led here (`IsrShrinksPerSec`, summed broker-wide).
    pub isr_shrinks: AtomicU64,
    /// ISR expands (`IsrExpandsPerSec`, summed broker-wide).
    pub isr_expands: AtomicU64,
}

impl TopicMetrics {
    /// A successful produce to one partition of the topic.
    pub fn produced(&self, bytes: usize, records: u64) {
        self.produce_requests.fetch_add(1, Ordering::Relaxed);
        self.bytes_in.fetch_add(bytes as u64, Ordering::Relaxed);
        self.messages_in.fetch_add(records, Ordering::Relaxed);
    }

    /// A produce to one partition of the topic that failed.
    pub fn produce_failed(&self) {
        self.produce_requests.fetch_add(1, Ordering::Relaxed);
        self.failed_produce_requests.fetch_add(1, Ordering::Relaxed);
    }

    /// A fetch of one partition answered with `bytes` of records (or an error).
    pub fn fetched(&self, bytes: usize, follower: bool, failed: bool) {
        self.fetch_requests.fetch_add(1, Ordering::Relaxed);
        if failed {
            self.failed_fetch_requests.fetch_add(1, Ordering::Relaxed);
        }
        let out = if follower { &self.replication_bytes_out } else { &self.bytes_out };
        out.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// The committed ISR of a partition led here went from `before` to `after` replicas.
    pub fn isr_changed(&self, before: usize, after: usize) {
        if after < before {
            self.isr_shrinks.fetch_add(1, Ordering::Relaxed);
        } else if after > before {
            self.isr_expands.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Broker-wide metrics that are not per topic or read at scrape time.
#[derive(Debug)]
pub struct BrokerMetrics {
    topics: DashMap<Arc<str>, Arc<TopicMetrics>>,
    requests: Vec<RequestMetrics>,
    /// Open connections on every listener (`connection-count`).
    pub connections: AtomicI64,
    /// The log cleaner's work (`kafka.log:type=LogCleaner`).
    pub cleaner: CleanerMetrics,
    /// Leader elections seen in the metadata this broker applied (cluster-wide; see
    /// [`BrokerMetrics::metadata_applied`]).
    pub leader_elections: AtomicU64,
}

/// What the log cleaner thread did, written by it alone.
#[derive(Debug, Default)]
pub struct CleanerMetrics {
    /// Cleanings that rewrote segments.
    pub runs: AtomicU64,
    /// Bytes of the segments those cleanings rewrote.
    pub bytes_cleaned: AtomicU64,
    /// Dirty ratio of the dirtiest compacted log at the last pass, in percent (`f64` bits).
    max_dirty_percent: AtomicU64,
    /// Bytes written over bytes read by the last cleaning, in percent (`f64` bits).
    recopy_percent: AtomicU64,
}

impl CleanerMetrics {
    /// Records the dirtiest ratio (0..1) seen by a pass over the compacted logs.
    pub fn set_max_dirty_ratio(&self, ratio: f64) {
        self.max_dirty_percent.store((ratio * 100.0).to_bits(), Ordering::Relaxed);
    }

    /// Records one cleaning that read `read` bytes of segments and wrote `written`.
    pub fn cleaned(&self, read: u64, written: u64) {
        self.runs.fetch_add(1, Ordering::Relaxed);
        self.bytes_cleaned.fetch_add(read, Ordering::Relaxed);
        let recopy = if read == 0 { 0.0 } else { written as f64 * 100.0 / read as f64 };
        self.recopy_percent.store(recopy.to_bits(), Ordering::Relaxed);
    }

    fn max_dirty_percent(&self) -> f64 {
        f64::from_bits(self.max_dirty_percent.load(Ordering::Relaxed))
    }

    fn recopy_percent(&self) -> f64 {
        f64::from_bits(self.recopy_percent.load(Ordering::Relaxed))
    }
}

/// Per-API request counters and latency (`kafka.network:type=RequestMetrics`).
#[derive(Debug, Default)]
struct RequestMetrics {
    requests: AtomicU64,
    total_time: LatencyHistogram,
    local_time: LatencyHistogram,
    remote_time: LatencyHistogram,
    response_queue_time: LatencyHistogram,
    response_send_time: LatencyHistogram,
}

/// Where one request's time went, Kafka's `RequestMetrics` phases: what an operator
/// reads to tell a slow disk or handler (local) from waiting on followers or for data
/// (remote) and from a slow client or network (response queue and send). Strata has
/// no request queue (a connection's task handles its requests in order as it reads
/// them), so there is no `RequestQueueTimeMs`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestPhases {
    /// In the handler, minus the remote wait.
    pub local: Duration,
    /// Waiting on other replicas or for data: an `acks=all` produce until the high
    /// watermark passes its batches, a fetch parked for `fetch.min.bytes`.
    pub remote: Duration,
    /// From the response being ready to the connection's writer starting to write it
    /// (behind earlier responses of the connection).
    pub response_queue: Duration,
    /// Writing it to the socket (with the responses written in the same call).
    pub response_send: Duration,
    /// From reading the request to its response written; the sum of the others.
    pub total: Duration,
}

tokio::task_local! {
    /// The remote wait of the request being handled on this task (see [`remote_wait`]).
    static REMOTE_WAIT: std::cell::Cell<Duration>;
}

/// Runs a request's handler, returning its output and the time it spent in
/// [`remote_wait`]s.
pub async fn with_remote_wait<F: std::future::Future>(handler: F) -> (F::Output, Duration) {
    REMOTE_WAIT
        .scope(std::cell::Cell::new(Duration::ZERO), async {
            let out = handler.await;
            (out, REMOTE_WAIT.with(std::cell::Cell::get))
        })
        .await
}

/// Awaits `wait` and counts its time as the current request's remote time (outside a
/// [`with_remote_wait`] it is only awaited).
pub async fn remote_wait<F: std::future::Future>(wait: F) -> F::Output {
    let start = Instant::now();
    let out = wait.await;
    let _ = REMOTE_WAIT.try_with(|r| r.set(r.get() + start.elapsed()));
    out
}

impl Default for BrokerMetrics {
    fn default() -> Self {
        BrokerMetrics {
            topics: DashMap::new(),
            requests: (0..MAX_API_KEY).map(|_| RequestMetrics::default()).collect(),
            connections: AtomicI64::new(0),
            cleaner: CleanerMetrics::default(),
            leader_elections: AtomicU64::new(0),
        }
    }
}

impl BrokerMetrics {
    /// The counters of `topic`, created on first use (once per topic, when its first
    /// partition is hosted; the hot paths reach them through the partition).
    pub fn topic(&self, topic: &str) -> Arc<TopicMetrics> {
        if let Some(m) = self.topics.get(topic) {
            return m.clone();
        }
        self.topics.entry(Arc::from(topic)).or_default().clone()
    }

    /// Records a request of `api` once its response is written (or, without one, handled).
    pub fn request_done(&self, api: ApiKey, phases: &RequestPhases) {
        if let Some(r) = self.requests.get(api as usize) {
            r.requests.fetch_add(1, Ordering::Relaxed);
            r.total_time.observe(phases.total);
            r.local_time.observe(phases.local);
            r.remote_time.observe(phases.remote);
            r.response_queue_time.observe(phases.response_queue);
            r.response_send_time.observe(phases.response_send);
        }
    }

    /// The broker applied `next` after `previous`: every partition that got a live leader
    /// in a newer leader epoch counts as one election (Kafka's
    /// `ControllerStats,name=LeaderElectionRateAndTimeMs` count). Images the broker skipped
    /// between two applies can hide an election of the same partition, so this is a
    /// lower bound; every broker counts the same cluster-wide elections.
    pub fn metadata_applied(&self, previous: Option<&MetadataImage>, next: &MetadataImage) {
        let Some(previous) = previous else { return };
        let mut elections = 0;
        for (name, topic) in &next.topics {
            let Some(before) = previous.topics.get(name).filter(|t| t.id == topic.id) else { continue };
            for (p, was) in topic.partitions.iter().zip(&before.partitions) {
                if p.leader_epoch > was.leader_epoch && p.leader != NO_LEADER {
                    elections += 1;
                }
            }
        }
        if elections > 0 {
            self.leader_elections.fetch_add(elections, Ordering::Relaxed);
        }
    }

    /// A connection opened; the guard counts it closed when dropped.
    pub fn connection_opened(self: &Arc<Self>) -> ConnectionGuard {
        self.connections.fetch_add(1, Ordering::Relaxed);
        ConnectionGuard(self.clone())
    }

    fn topics_snapshot(&self) -> Vec<(Arc<str>, Arc<TopicMetrics>)> {
        let mut v: Vec<_> = self.topics.iter().map(|e| (e.key().clone(), e.value().clone())).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }
}

/// Counts an open connection until dropped.
#[derive(Debug)]
pub struct ConnectionGuard(Arc<BrokerMetrics>);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn remote_waits_add_up_within_a_request_and_count_nowhere_outside_one() {
        let local = Duration::from_millis(100);
        let handler = async {
            remote_wait(tokio::time::sleep(Duration::from_millis(30))).await;
            tokio::time::sleep(local).await; // the handler's own work
            remote_wait(tokio::time::sleep(Duration::from_millis(20))).await;
            7
        };
        let start = Instant::now();
        let (out, remote) = with_remote_wait(handler).await;
        let elapsed = start.elapsed();
        assert_eq!(out, 7);
        assert!(remote >= Duration::from_millis(50), "both waits count: {remote:?}");
        assert!(remote <= elapsed - local, "the handler's own work does not: {remote:?} of {elapsed:?}");
        // Outside a request it is only awaited.
        remote_wait(tokio::time::sleep(Duration::from_millis(1))).await;
        let (_, none) = with_remote_wait(async {}).await;
        assert_eq!(none, Duration::ZERO);
    }

    #[test]
    fn a_request_counts_once_in_every_phase() {
        let m = BrokerMetrics::default();
        let phases = RequestPhases {
            local: Duration::from_micros(200),
            remote: Duration::from_millis(40),
            response_queue: Duration::from_millis(2),
            response_send: Duration::from_micros(100),
            total: Duration::from_micros(42_300),
        };
        m.request_done(ApiKey::Produce, &phases);
        let r = &m.requests[ApiKey::Produce as usize];
        assert_eq!(r.requests.load(Ordering::Relaxed), 1);
        for h in [&r.total_time, &r.local_time, &r.remote_time, &r.response_queue_time, &r.response_send_time]
        {
            assert_eq!(h.count(), 1);
        }
        assert_eq!(r.remote_time.snapshot().0, 40.0);
        assert_eq!(r.total_time.snapshot().0, 42.3);
    }
}
