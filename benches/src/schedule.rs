//! When each record is due, so latency is measured from the time a record *should* have
//! been sent rather than when the load generator got round to sending it.
//!
//! A closed-loop generator that waits for the broker before sending the next record
//! hides stalls: while the broker is stuck, nothing is sent, so nothing records the
//! wait ("coordinated omission"). Here record `i` of a producer offered `rate`
//! records/s is due at `start + i / rate` whatever happens; if the generator falls
//! behind (back-pressure from in-flight limits or a slow broker), the overdue records
//! go out in a burst and each one's latency still counts from its own due time.
//!
//! Unthrottled runs (`rate == 0`) have no schedule: a record is "due" when it is
//! created, as in Kafka's producer perf test.

use std::time::{Duration, Instant};

/// The sending schedule of one producer. Pure: the caller passes `now`.
#[derive(Debug, Clone)]
pub struct Schedule {
    start: Instant,
    /// Nanoseconds between records; `None` when unthrottled.
    interval_ns: Option<f64>,
    taken: u64,
}

impl Schedule {
    /// A schedule of `rate_per_sec` records per second from `start`; 0 is unthrottled.
    pub fn new(start: Instant, rate_per_sec: f64) -> Schedule {
        let interval_ns = (rate_per_sec > 0.0).then(|| 1e9 / rate_per_sec);
        Schedule { start, interval_ns, taken: 0 }
    }

    /// Whether records are sent as fast as possible.
    pub fn is_unthrottled(&self) -> bool {
        self.interval_ns.is_none()
    }

    /// Records taken so far.
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// Due time of record `index`; `None` when unthrottled.
    pub fn due_time(&self, index: u64) -> Option<Instant> {
        self.interval_ns.map(|ns| self.start + Duration::from_nanos((index as f64 * ns) as u64))
    }

    /// Due time of the next record; `None` when unthrottled (always due).
    pub fn next_due(&self) -> Option<Instant> {
        self.due_time(self.taken)
    }

    /// Takes the next record if it is due at `now` and returns the time latency counts
    /// from: its due time, or `now` when unthrottled.
    pub fn take_due(&mut self, now: Instant) -> Option<Instant> {
        let due = match self.next_due() {
            None => now,
            Some(t) if t <= now => t,
            Some(_) => return None,
        };
        self.taken += 1;
        Some(due)
    }

    /// Records that are due at `now` but not yet taken (how far behind the generator
    /// is); 0 when unthrottled.
    pub fn backlog(&self, now: Instant) -> u64 {
        match self.interval_ns {
            None => 0,
            Some(ns) => {
                let elapsed = now.saturating_duration_since(self.start).as_nanos() as f64;
                let due = (elapsed / ns).floor() as u64 + 1;
                due.saturating_sub(self.taken)
            }
        }
    }
}

/// Latency of a record due at `due` and acknowledged (or consumed) at `done`, never
/// negative.
pub fn latency(due: Instant, done: Instant) -> Duration {
    done.saturating_duration_since(due)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::LatencyHistogram;

    #[test]
    fn records_are_due_at_fixed_intervals() {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0, 1000.0);
        assert_eq!(s.take_due(t0), Some(t0));
        assert_eq!(s.take_due(t0), None, "record 1 is due 1 ms later");
        let mut n = 0;
        while s.take_due(t0 + Duration::from_millis(10)).is_some() {
            n += 1;
        }
        assert_eq!(n, 10, "records 1..=10 are due by 10 ms");
        assert_eq!(s.taken(), 11);
        assert_eq!(s.next_due(), Some(t0 + Duration::from_millis(11)));
    }

    #[test]
    fn overdue_records_keep_their_own_due_times() {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0, 100.0);
        let late = t0 + Duration::from_millis(55);
        assert_eq!(s.backlog(late), 6);
        let dues: Vec<_> = std::iter::from_fn(|| s.take_due(late)).collect();
        assert_eq!(dues.len(), 6);
        for (i, d) in dues.iter().enumerate() {
            assert_eq!(*d, t0 + Duration::from_millis(10 * i as u64));
        }
        assert_eq!(s.backlog(late), 0);
    }

    #[test]
    fn unthrottled_is_always_due_now() {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0, 0.0);
        assert!(s.is_unthrottled());
        let later = t0 + Duration::from_secs(3);
        assert_eq!(s.take_due(later), Some(later));
        assert_eq!(s.take_due(later), Some(later));
        assert_eq!(s.next_due(), None);
        assert_eq!(s.backlog(later), 0);
    }

    /// A broker that answers in 0.5 ms but stalls once for 1 s, offered 1000 records/s.
    /// A closed-loop tool that only sends when the previous answer came back sees one
    /// slow request in 3000; measuring from the schedule charges every record offered
    /// during the stall and while the backlog drains.
    #[test]
    fn a_stall_is_charged_to_every_record_it_delayed() {
        let t0 = Instant::now();
        let rate = 1000.0;
        let service = Duration::from_micros(500);
        let stall_at = Duration::from_secs(1);
        let stall = Duration::from_secs(1);
        let mut schedule = Schedule::new(t0, rate);
        let mut corrected = LatencyHistogram::new();
        let mut naive = LatencyHistogram::new();
        let mut broker_free = t0;
        let mut stalled = false;
        while schedule.taken() < 3000 {
            // The generator sends the next record when it is due or, if behind, as
            // soon as the broker is free again (one record in flight).
            let due = schedule.next_due().unwrap();
            let send = due.max(broker_free);
            let mut done = send + service;
            if !stalled && send >= t0 + stall_at {
                stalled = true;
                done += stall;
            }
            broker_free = done;
            let due = schedule.take_due(send).unwrap();
            corrected.record(latency(due, done));
            naive.record(latency(send, done));
        }
        let c = corrected.summary();
        let n = naive.summary();
        // Naive: 2999 records at 0.5 ms and one at 1 s, so p99 stays at 0.5 ms.
        assert!(n.p99_ms < 0.6, "naive p99 {}", n.p99_ms);
        // Corrected: ~2000 records were due during the stall or the drain after it.
        assert!(c.p50_ms > 100.0, "corrected p50 {}", c.p50_ms);
        assert!(c.p99_ms > 900.0, "corrected p99 {}", c.p99_ms);
        assert!(c.max_ms >= 1000.0 && c.max_ms < 1010.0, "max {}", c.max_ms);
        assert!(c.avg_ms > 100.0 * n.avg_ms);
    }
}
