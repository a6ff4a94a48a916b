//! Measurements: an HDR latency histogram, live counters shared by a run's tasks, the
//! once-a-second progress line and the final summary (text and JSON).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::json::Json;

/// Highest latency the histogram tracks exactly (larger values are clamped): one hour.
const MAX_LATENCY_US: u64 = 3_600_000_000;

/// Latencies in microseconds, 3 significant digits, from 1 µs to an hour.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    hist: Histogram<u64>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// An empty histogram.
    pub fn new() -> LatencyHistogram {
        LatencyHistogram {
            hist: Histogram::new_with_bounds(1, MAX_LATENCY_US, 3)
                .expect("constant histogram bounds are valid"),
        }
    }

    /// Records one latency (clamped to the tracked range).
    pub fn record(&mut self, latency: Duration) {
        let us = (latency.as_micros() as u64).clamp(1, MAX_LATENCY_US);
        self.hist.saturating_record(us);
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.hist.add(&other.hist);
    }

    /// Number of values recorded.
    pub fn len(&self) -> u64 {
        self.hist.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// Forgets every value.
    pub fn reset(&mut self) {
        self.hist.reset();
    }

    /// The figures reported.
    pub fn summary(&self) -> LatencySummary {
        let ms = |us: u64| us as f64 / 1000.0;
        LatencySummary {
            count: self.hist.len(),
            avg_ms: self.hist.mean() / 1000.0,
            p50_ms: ms(self.hist.value_at_quantile(0.50)),
            p99_ms: ms(self.hist.value_at_quantile(0.99)),
            p999_ms: ms(self.hist.value_at_quantile(0.999)),
            max_ms: ms(self.hist.max()),
        }
    }
}

/// Latency figures in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LatencySummary {
    /// Values recorded.
    pub count: u64,
    /// Mean.
    pub avg_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// 99.9th percentile.
    pub p999_ms: f64,
    /// Maximum.
    pub max_ms: f64,
}

impl LatencySummary {
    /// As a JSON object.
    pub fn to_json(&self) -> Json {
        Json::object()
            .with("count", self.count)
            .with("avg", self.avg_ms)
            .with("p50", self.p50_ms)
            .with("p99", self.p99_ms)
            .with("p99_9", self.p999_ms)
            .with("max", self.max_ms)
    }

    /// One line of text.
    pub fn to_text(&self) -> String {
        format!(
            "avg {:.2} ms, p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms",
            self.avg_ms, self.p50_ms, self.p99_ms, self.p999_ms, self.max_ms
        )
    }
}

#[derive(Debug, Default)]
struct Latencies {
    total: LatencyHistogram,
    interval: LatencyHistogram,
}

/// Live counters of one side of a run (produce or consume), updated by its tasks and
/// read by the progress line and the summary.
#[derive(Debug)]
pub struct Meter {
    name: &'static str,
    records: AtomicU64,
    bytes: AtomicU64,
    wire_bytes: AtomicU64,
    error_records: AtomicU64,
    transactions: AtomicU64,
    latencies: Mutex<Latencies>,
    first_error: Mutex<Option<String>>,
    last_progress: Mutex<(Instant, u64, u64)>,
}

impl Meter {
    /// A meter named `name` ("produce", "consume", "end-to-end").
    pub fn new(name: &'static str) -> Meter {
        Meter {
            name,
            records: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            wire_bytes: AtomicU64::new(0),
            error_records: AtomicU64::new(0),
            transactions: AtomicU64::new(0),
            latencies: Mutex::new(Latencies::default()),
            first_error: Mutex::new(None),
            last_progress: Mutex::new((Instant::now(), 0, 0)),
        }
    }

    /// Counts `records` records carrying `bytes` bytes of keys and values.
    pub fn add(&self, records: u64, bytes: u64) {
        self.records.fetch_add(records, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts bytes that crossed the network (request or response frames).
    pub fn add_wire(&self, bytes: u64) {
        self.wire_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts committed transactions.
    pub fn add_transactions(&self, n: u64) {
        self.transactions.fetch_add(n, Ordering::Relaxed);
    }

    /// Records latencies (one lock for the lot).
    pub fn record_latencies(&self, latencies: impl IntoIterator<Item = Duration>) {
        let mut l = self.latencies.lock().unwrap_or_else(|e| e.into_inner());
        let Latencies { total, interval } = &mut *l;
        for d in latencies {
            total.record(d);
            interval.record(d);
        }
    }

    /// Counts `records` records that failed; keeps the first message for the summary.
    pub fn error(&self, records: u64, message: impl FnOnce() -> String) {
        self.error_records.fetch_add(records, Ordering::Relaxed);
        let mut first = self.first_error.lock().unwrap_or_else(|e| e.into_inner());
        if first.is_none() {
            *first = Some(message());
        }
    }

    /// Records counted so far.
    pub fn records(&self) -> u64 {
        self.records.load(Ordering::Relaxed)
    }

    /// Failed records so far.
    pub fn error_records(&self) -> u64 {
        self.error_records.load(Ordering::Relaxed)
    }

    /// The progress line since the previous call, and resets the interval histogram.
    pub fn progress_line(&self, run_start: Instant) -> String {
        let now = Instant::now();
        let records = self.records();
        let bytes = self.bytes.load(Ordering::Relaxed);
        let (dt, dr, db) = {
            let mut last = self.last_progress.lock().unwrap_or_else(|e| e.into_inner());
            let out = (now.duration_since(last.0).as_secs_f64().max(1e-9), records - last.1, bytes - last.2);
            *last = (now, records, bytes);
            out
        };
        let interval = {
            let mut l = self.latencies.lock().unwrap_or_else(|e| e.into_inner());
            let s = (!l.interval.is_empty()).then(|| l.interval.summary());
            l.interval.reset();
            s
        };
        let mut line = format!(
            "[{:6.1}s] {:<10} {:>10.0} rec/s {:>8.1} MB/s  total {:>10}",
            now.duration_since(run_start).as_secs_f64(),
            self.name,
            dr as f64 / dt,
            db as f64 / dt / 1e6,
            records,
        );
        if let Some(s) = interval {
            line.push_str(&format!(
                "  latency avg {:.2} p99 {:.2} max {:.2} ms",
                s.avg_ms, s.p99_ms, s.max_ms
            ));
        }
        let errors = self.error_records();
        if errors > 0 {
            line.push_str(&format!("  errors {errors}"));
        }
        line
    }

    /// The final figures over `elapsed`.
    pub fn summary(&self, elapsed: Duration) -> Summary {
        let l = self.latencies.lock().unwrap_or_else(|e| e.into_inner());
        Summary {
            name: self.name,
            records: self.records(),
            bytes: self.bytes.load(Ordering::Relaxed),
            wire_bytes: self.wire_bytes.load(Ordering::Relaxed),
            error_records: self.error_records(),
            first_error: self.first_error.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            elapsed,
            latency: (!l.total.is_empty()).then(|| l.total.summary()),
            transactions: self.transactions.load(Ordering::Relaxed),
        }
    }
}

/// Final figures of one side of a run.
#[derive(Debug, Clone)]
pub struct Summary {
    /// "produce", "consume" or "end-to-end".
    pub name: &'static str,
    /// Records acknowledged (produce) or read (consume).
    pub records: u64,
    /// Bytes of keys and values in those records.
    pub bytes: u64,
    /// Bytes of request (produce) or response (consume) frames.
    pub wire_bytes: u64,
    /// Records that failed.
    pub error_records: u64,
    /// The first failure, if any.
    pub first_error: Option<String>,
    /// Measured time.
    pub elapsed: Duration,
    /// Latency figures, if latencies were recorded.
    pub latency: Option<LatencySummary>,
    /// Transactions committed (transactional producers).
    pub transactions: u64,
}

impl Summary {
    /// Records per second.
    pub fn records_per_sec(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Megabytes (10^6 bytes) of keys and values per second.
    pub fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64().max(1e-9) / 1e6
    }

    /// As a JSON object.
    pub fn to_json(&self) -> Json {
        Json::object()
            .with("records", self.records)
            .with("bytes", self.bytes)
            .with("wire_bytes", self.wire_bytes)
            .with("errors", self.error_records)
            .with("first_error", self.first_error.clone())
            .with("elapsed_s", self.elapsed.as_secs_f64())
            .with("records_per_sec", self.records_per_sec())
            .with("mb_per_sec", self.mb_per_sec())
            .with("latency_ms", self.latency.map_or(Json::Null, |l| l.to_json()))
            .with("transactions", self.transactions)
    }

    /// Human-readable lines.
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "{}: {} records, {:.1} MB in {:.2} s: {:.0} records/s, {:.2} MB/s",
            self.name,
            self.records,
            self.bytes as f64 / 1e6,
            self.elapsed.as_secs_f64(),
            self.records_per_sec(),
            self.mb_per_sec(),
        );
        if let Some(l) = &self.latency {
            s.push_str(&format!("\n{} latency: {}", self.name, l.to_text()));
        }
        if self.transactions > 0 {
            s.push_str(&format!("\n{}: {} transactions committed", self.name, self.transactions));
        }
        if self.error_records > 0 {
            s.push_str(&format!(
                "\n{}: {} records failed; first error: {}",
                self.name,
                self.error_records,
                self.first_error.as_deref().unwrap_or("?")
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_reports_percentiles_in_ms() {
        let mut h = LatencyHistogram::new();
        for ms in 1..=1000u64 {
            h.record(Duration::from_millis(ms));
        }
        let s = h.summary();
        assert_eq!(s.count, 1000);
        assert!((s.p50_ms - 500.0).abs() < 1.0, "{s:?}");
        assert!((s.p99_ms - 990.0).abs() < 1.0, "{s:?}");
        assert!((s.p999_ms - 999.0).abs() < 1.0, "{s:?}");
        assert!((s.max_ms - 1000.0).abs() < 1.0, "{s:?}");
        assert!((s.avg_ms - 500.5).abs() < 1.0, "{s:?}");
        let mut other = LatencyHistogram::new();
        other.record(Duration::from_secs(7200));
        h.merge(&other);
        assert!((h.summary().max_ms - 3_600_000.0).abs() < 3600.0, "clamped");
    }

    #[test]
    fn meter_counts_and_summarises() {
        let m = Meter::new("produce");
        m.add(10, 10_240);
        m.add_wire(11_000);
        m.record_latencies((1..=10).map(Duration::from_millis));
        m.error(2, || "REQUEST_TIMED_OUT".into());
        m.error(1, || "second".into());
        let line = m.progress_line(Instant::now());
        assert!(line.contains("produce") && line.contains("errors 3"), "{line}");
        let s = m.summary(Duration::from_secs(2));
        assert_eq!(s.records, 10);
        assert_eq!(s.records_per_sec(), 5.0);
        assert!((s.mb_per_sec() - 0.00512).abs() < 1e-9);
        assert_eq!(s.first_error.as_deref(), Some("REQUEST_TIMED_OUT"));
        let json = s.to_json().to_string();
        assert!(json.contains("\"records\":10") && json.contains("\"errors\":3"), "{json}");
        assert!(json.contains("\"latency_ms\":{\"count\":10,"), "{json}");
    }
}
