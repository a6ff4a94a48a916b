//! Replication throttles (Kafka's KIP-73 replication quotas), so a partition moved to a
//! new broker does not take the leader's disk and network from clients: a broker-wide
//! rate for what it serves to throttled followers as a leader
//! (`leader.replication.throttled.rate`) and for what it fetches for throttled replicas
//! as a follower (`follower.replication.throttled.rate`), dynamic broker configs; and per
//! topic, which replicas are throttled (`leader.replication.throttled.replicas`,
//! `follower.replication.throttled.replicas`: `*` or `partition:broker,...`). As in
//! Kafka, only replicas out of the ISR are ever throttled, so an in-sync follower (and
//! with it `acks=all`) never waits for a quota.

pub use crate::config::throttle::{
    FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS, UNLIMITED,
};
use crate::metadata::MetadataImage;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// One direction's byte rate: a token bucket holding at most one second of the rate,
/// full at first. `exceeded` once what was recorded outran the rate; the bytes already
/// read are never refused, so a fetch over the rate only delays the next one.
#[derive(Debug)]
pub struct ReplicationQuota {
    rate: AtomicU64,
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Default for ReplicationQuota {
    fn default() -> Self {
        ReplicationQuota {
            rate: AtomicU64::new(UNLIMITED),
            bucket: Mutex::new(Bucket { tokens: 0.0, at: Instant::now() }),
        }
    }
}

impl ReplicationQuota {
    /// Sets the rate in bytes per second ([`UNLIMITED`] turns the quota off); a new rate
    /// starts with a full second of it.
    pub fn set_rate(&self, bytes_per_sec: u64) {
        if self.rate.swap(bytes_per_sec, Ordering::AcqRel) != bytes_per_sec {
            let mut b = self.bucket.lock().unwrap_or_else(|p| p.into_inner());
            *b = Bucket { tokens: bytes_per_sec as f64, at: Instant::now() };
        }
    }

    /// The rate in force, bytes per second.
    pub fn rate(&self) -> u64 {
        self.rate.load(Ordering::Acquire)
    }

    /// Whether throttled replicas must wait now.
    pub fn exceeded(&self) -> bool {
        self.exceeded_at(Instant::now())
    }

    /// Counts `bytes` replicated for throttled replicas.
    pub fn record(&self, bytes: usize) {
        self.record_at(bytes, Instant::now());
    }

    fn exceeded_at(&self, now: Instant) -> bool {
        let rate = self.rate();
        if rate >= UNLIMITED {
            return false;
        }
        let mut b = self.bucket.lock().unwrap_or_else(|p| p.into_inner());
        refill(&mut b, rate, now);
        b.tokens <= 0.0
    }

    fn record_at(&self, bytes: usize, now: Instant) {
        let rate = self.rate();
        if rate >= UNLIMITED || bytes == 0 {
            return;
        }
        let mut b = self.bucket.lock().unwrap_or_else(|p| p.into_inner());
        refill(&mut b, rate, now);
        b.tokens -= bytes as f64;
    }
}

fn refill(b: &mut Bucket, rate: u64, now: Instant) {
    let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
    b.at = now;
    b.tokens = (b.tokens + elapsed * rate as f64).min(rate as f64);
}

/// Whether a throttled-replicas value names `partition` on `broker` (`*`: every one).
pub fn names(value: &str, partition: i32, broker: i32) -> bool {
    let value = value.trim();
    value == "*"
        || value.split(',').any(|item| {
            item.trim().split_once(':').is_some_and(|(p, b)| {
                p.trim().parse::<i32>() == Ok(partition) && b.trim().parse::<i32>() == Ok(broker)
            })
        })
}

/// Whether `replica` of `topic`-`partition` is throttled: out of the partition's ISR and
/// named for broker `me` by the topic's `list` config ([`LEADER_REPLICAS`] on a leader,
/// [`FOLLOWER_REPLICAS`] on a follower).
pub fn throttled(
    image: &MetadataImage,
    topic: &str,
    partition: i32,
    list: &str,
    me: i32,
    replica: i32,
) -> bool {
    let Some(t) = image.topic(topic) else { return false };
    let Some(value) = t.configs.get(list) else { return false };
    names(value, partition, me)
        && image.partition(topic, partition).is_some_and(|p| !p.isr.contains(&replica))
}

/// A rate from the dynamic broker configs: this broker's, else the cluster default's,
/// else unlimited.
pub fn rate_of(
    key: &str,
    this_broker: Option<&std::collections::BTreeMap<String, String>>,
    cluster: Option<&std::collections::BTreeMap<String, String>>,
) -> u64 {
    [this_broker, cluster]
        .into_iter()
        .flatten()
        .find_map(|m| m.get(key).and_then(|v| v.trim().parse::<u64>().ok()))
        .unwrap_or(UNLIMITED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_quota_is_exceeded_once_a_second_of_its_rate_is_spent_and_recovers_at_the_rate() {
        let q = ReplicationQuota::default();
        let t0 = Instant::now();
        q.record_at(10 << 20, t0);
        assert!(!q.exceeded_at(t0), "no limit by default");
        q.set_rate(1000);
        let t0 = Instant::now();
        assert!(!q.exceeded_at(t0), "a new rate starts with a second of it");
        q.record_at(600, t0);
        assert!(!q.exceeded_at(t0));
        q.record_at(600, t0);
        assert!(q.exceeded_at(t0), "1200 bytes against 1000");
        assert!(q.exceeded_at(t0 + Duration::from_millis(150)), "200 bytes over recover in 200 ms");
        assert!(!q.exceeded_at(t0 + Duration::from_millis(250)));
        // Idle time fills the bucket to one second of the rate, no more.
        q.record_at(1500, t0 + Duration::from_secs(60));
        assert!(q.exceeded_at(t0 + Duration::from_secs(60)));
        q.set_rate(UNLIMITED);
        assert!(!q.exceeded_at(t0 + Duration::from_secs(60)), "turned off");
    }

    #[test]
    fn throttled_replicas_are_star_or_partition_broker_pairs() {
        use crate::config::keys::validate_replicas;
        for ok in ["", "*", "0:1", "0:1, 1:2,2:0"] {
            assert_eq!(validate_replicas(ok), Ok(()), "{ok:?}");
        }
        for bad in ["x", "0", "0:", "a:1", "0:1,", "-1:2", "*,0:1"] {
            assert!(validate_replicas(bad).is_err(), "{bad:?}");
        }
        assert!(names("*", 7, 3));
        assert!(names("0:1, 2:3", 2, 3));
        assert!(!names("0:1,2:3", 2, 1));
        assert!(!names("", 0, 0));
    }

    #[test]
    fn a_broker_rate_falls_back_to_the_cluster_default_then_to_none() {
        let mine = [(LEADER_RATE.to_string(), "100".to_string())].into();
        let cluster =
            [(LEADER_RATE.to_string(), "5".to_string()), (FOLLOWER_RATE.to_string(), "7".to_string())].into();
        assert_eq!(rate_of(LEADER_RATE, Some(&mine), Some(&cluster)), 100);
        assert_eq!(rate_of(FOLLOWER_RATE, Some(&mine), Some(&cluster)), 7);
        assert_eq!(rate_of(FOLLOWER_RATE, Some(&mine), None), UNLIMITED);
    }
}
