//! A latency histogram of fixed buckets in atomics: observing is a few relaxed adds, no
//! lock (prometheus-client's own histogram takes a lock per observation).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the buckets in milliseconds, as Kafka reports request times.
pub const BUCKETS_MS: [f64; 14] =
    [0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0];

/// Request times in milliseconds, encoded as a Prometheus histogram at scrape time.
#[derive(Debug, Default)]
pub struct LatencyHistogram {
    /// Non-cumulative counts per bucket; the last one is +Inf.
    counts: [AtomicU64; BUCKETS_MS.len() + 1],
    sum_us: AtomicU64,
}

impl LatencyHistogram {
    /// Records one observation.
    pub fn observe(&self, elapsed: Duration) {
        let us = elapsed.as_micros().min(u128::from(u64::MAX)) as u64;
        let ms = us as f64 / 1000.0;
        let i = BUCKETS_MS.iter().position(|b| ms <= *b).unwrap_or(BUCKETS_MS.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    /// Sum (ms), count and per-bucket (not cumulative) counts, as prometheus-client's
    /// encoder takes them. The count is the sum of the buckets read, so they agree even
    /// while requests are recorded.
    pub fn snapshot(&self) -> (f64, u64, Vec<(f64, u64)>) {
        let mut count = 0;
        let mut buckets = Vec::with_capacity(BUCKETS_MS.len() + 1);
        for (i, c) in self.counts.iter().enumerate() {
            let n = c.load(Ordering::Relaxed);
            count += n;
            buckets.push((BUCKETS_MS.get(i).copied().unwrap_or(f64::INFINITY), n));
        }
        (self.sum_us.load(Ordering::Relaxed) as f64 / 1000.0, count, buckets)
    }

    /// Observations so far (for the tests' checks).
    #[cfg(test)]
    pub fn count(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_their_bucket() {
        let h = LatencyHistogram::default();
        h.observe(Duration::from_micros(300));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(60));
        let (sum, count, buckets) = h.snapshot();
        assert_eq!(count, 3);
        assert_eq!(buckets[0], (0.5, 1));
        assert_eq!(buckets[3], (5.0, 1));
        assert_eq!(*buckets.last().unwrap(), (f64::INFINITY, 1));
        assert_eq!(buckets.iter().map(|b| b.1).sum::<u64>(), 3);
        assert!((sum - 60_003.3).abs() < 0.01, "{sum}");
    }
}
