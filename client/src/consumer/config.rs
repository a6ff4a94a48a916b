//! The consumer's settings under Kafka's key names and with the Java consumer's
//! defaults, so a `consumer.properties` carries over unchanged. Keys the consumer does
//! not know go on to the embedded [`ClientConfig`]; a key neither knows is an error.

use crate::config::{boolean, millis, number, split_list, ClientConfig};
use crate::error::{Error, Result};
use crate::types::IsolationLevel;
use std::time::Duration;

/// `auto.offset.reset`: where a partition without a committed offset (or whose
/// position fell out of the log) starts.
///
/// ```
/// use strata_client::consumer::{ConsumerConfig, OffsetReset};
/// let mut c = ConsumerConfig::new("h:9092");
/// assert_eq!(c.auto_offset_reset, OffsetReset::Latest);
/// c.set("auto.offset.reset", "earliest").unwrap();
/// assert_eq!(c.auto_offset_reset, OffsetReset::Earliest);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetReset {
    /// The log end: only records produced from now on.
    Latest,
    /// The log start.
    Earliest,
    /// Fail the poll with OFFSET_OUT_OF_RANGE / NO_OFFSET: the application decides.
    None,
}

/// One entry of `partition.assignment.strategy`.
///
/// ```
/// use strata_client::consumer::AssignmentStrategy;
/// let s = AssignmentStrategy::from_name("org.apache.kafka.clients.consumer.RangeAssignor");
/// assert_eq!(s, Some(AssignmentStrategy::Range));
/// assert!(!AssignmentStrategy::Range.is_cooperative());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssignmentStrategy {
    /// `range`: per topic, consecutive partition ranges (Java's `RangeAssignor`).
    Range,
    /// `roundrobin`: all partitions dealt in turn (Java's `RoundRobinAssignor`).
    RoundRobin,
    /// `cooperative-sticky`: keeps what members own and moves only what must move, with
    /// incremental rebalances (KIP-429; Java's `CooperativeStickyAssignor`).
    CooperativeSticky,
}

impl AssignmentStrategy {
    /// The protocol name sent in JoinGroup, the same as every Kafka client uses.
    ///
    /// ```
    /// use strata_client::consumer::AssignmentStrategy;
    /// assert_eq!(AssignmentStrategy::CooperativeSticky.name(), "cooperative-sticky");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            AssignmentStrategy::Range => "range",
            AssignmentStrategy::RoundRobin => "roundrobin",
            AssignmentStrategy::CooperativeSticky => "cooperative-sticky",
        }
    }

    /// The strategy for a protocol name (also Java's class names).
    pub fn from_name(name: &str) -> Option<AssignmentStrategy> {
        match name.trim() {
            "range" | "org.apache.kafka.clients.consumer.RangeAssignor" => Some(AssignmentStrategy::Range),
            "roundrobin" | "org.apache.kafka.clients.consumer.RoundRobinAssignor" => {
                Some(AssignmentStrategy::RoundRobin)
            }
            "cooperative-sticky" | "org.apache.kafka.clients.consumer.CooperativeStickyAssignor" => {
                Some(AssignmentStrategy::CooperativeSticky)
            }
            _ => None,
        }
    }

    /// True for strategies that support incremental (cooperative) rebalancing.
    pub fn is_cooperative(self) -> bool {
        self == AssignmentStrategy::CooperativeSticky
    }
}

/// Consumer settings; build with [`ConsumerConfig::new`] and [`ConsumerConfig::set`].
///
/// ```
/// use strata_client::consumer::ConsumerConfig;
/// let mut c = ConsumerConfig::new("127.0.0.1:9092");
/// c.set("group.id", "orders").unwrap();
/// c.set("auto.offset.reset", "earliest").unwrap();
/// c.set("request.timeout.ms", "5000").unwrap(); // a ClientConfig key
/// assert!(c.set("no.such.key", "1").is_err());
/// assert_eq!(c.max_poll_records, 500);
/// ```
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    /// The shared connection settings.
    pub client: ClientConfig,
    /// `group.id`; required for `subscribe` and for commits.
    pub group_id: Option<String>,
    /// `group.instance.id`: a static member (KIP-345) keeps its assignment across
    /// restarts within the session timeout and never sends LeaveGroup.
    pub group_instance_id: Option<String>,
    /// `session.timeout.ms` (45000).
    pub session_timeout: Duration,
    /// `heartbeat.interval.ms` (3000).
    pub heartbeat_interval: Duration,
    /// `max.poll.interval.ms` (300000): sent as the rebalance timeout unless
    /// `rebalance.timeout.ms` is set.
    pub max_poll_interval: Duration,
    /// `rebalance.timeout.ms`: how long the coordinator waits for members to rejoin.
    pub rebalance_timeout: Option<Duration>,
    /// `auto.offset.reset` (latest).
    pub auto_offset_reset: OffsetReset,
    /// `enable.auto.commit` (true).
    pub enable_auto_commit: bool,
    /// `auto.commit.interval.ms` (5000).
    pub auto_commit_interval: Duration,
    /// `isolation.level` (read_uncommitted).
    pub isolation_level: IsolationLevel,
    /// `fetch.min.bytes` (1).
    pub fetch_min_bytes: i32,
    /// `fetch.max.wait.ms` (500).
    pub fetch_max_wait: Duration,
    /// `fetch.max.bytes` (52428800).
    pub fetch_max_bytes: i32,
    /// `max.partition.fetch.bytes` (1048576).
    pub max_partition_fetch_bytes: i32,
    /// `max.poll.records` (500).
    pub max_poll_records: usize,
    /// `partition.assignment.strategy`, in preference order ("range, cooperative-sticky").
    pub assignment_strategies: Vec<AssignmentStrategy>,
    /// `check.crcs` (true): verify each fetched batch's CRC-32C.
    pub check_crcs: bool,
    /// `client.rack`: sent in Fetch (KIP-392) and in the subscription (v3).
    pub client_rack: Option<String>,
}

impl ConsumerConfig {
    /// Java's defaults with `bootstrap` (a comma-separated host:port list).
    pub fn new(bootstrap: &str) -> ConsumerConfig {
        ConsumerConfig {
            client: ClientConfig::new(bootstrap),
            group_id: None,
            group_instance_id: None,
            session_timeout: Duration::from_millis(45_000),
            heartbeat_interval: Duration::from_millis(3_000),
            max_poll_interval: Duration::from_millis(300_000),
            rebalance_timeout: None,
            auto_offset_reset: OffsetReset::Latest,
            enable_auto_commit: true,
            auto_commit_interval: Duration::from_millis(5_000),
            isolation_level: IsolationLevel::ReadUncommitted,
            fetch_min_bytes: 1,
            fetch_max_wait: Duration::from_millis(500),
            fetch_max_bytes: 50 << 20,
            max_partition_fetch_bytes: 1 << 20,
            max_poll_records: 500,
            assignment_strategies: vec![AssignmentStrategy::Range, AssignmentStrategy::CooperativeSticky],
            check_crcs: true,
            client_rack: None,
        }
    }

    /// Sets one entry by its Kafka key, passing keys it does not know to
    /// [`ClientConfig::set`]; an error names a key neither knows or a bad value.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        match key {
            "group.id" => self.group_id = Some(value.to_string()).filter(|v| !v.is_empty()),
            "group.instance.id" => self.group_instance_id = Some(value.to_string()).filter(|v| !v.is_empty()),
            "session.timeout.ms" => self.session_timeout = millis(key, value)?,
            "heartbeat.interval.ms" => self.heartbeat_interval = millis(key, value)?,
            "max.poll.interval.ms" => self.max_poll_interval = millis(key, value)?,
            "rebalance.timeout.ms" => self.rebalance_timeout = Some(millis(key, value)?),
            "auto.offset.reset" => {
                self.auto_offset_reset = match value.trim() {
                    "latest" => OffsetReset::Latest,
                    "earliest" => OffsetReset::Earliest,
                    "none" => OffsetReset::None,
                    _ => return Err(bad(key, value, "latest, earliest or none")),
                }
            }
            "enable.auto.commit" => self.enable_auto_commit = boolean(key, value)?,
            "auto.commit.interval.ms" => self.auto_commit_interval = millis(key, value)?,
            "isolation.level" => {
                self.isolation_level = match value.trim() {
                    "read_uncommitted" => IsolationLevel::ReadUncommitted,
                    "read_committed" => IsolationLevel::ReadCommitted,
                    _ => return Err(bad(key, value, "read_uncommitted or read_committed")),
                }
            }
            "fetch.min.bytes" => self.fetch_min_bytes = number(key, value)?,
            "fetch.max.wait.ms" => self.fetch_max_wait = millis(key, value)?,
            "fetch.max.bytes" => self.fetch_max_bytes = number(key, value)?,
            "max.partition.fetch.bytes" => self.max_partition_fetch_bytes = number(key, value)?,
            "max.poll.records" => {
                self.max_poll_records = number(key, value)?;
                if self.max_poll_records == 0 {
                    return Err(bad(key, value, "at least 1"));
                }
            }
            "partition.assignment.strategy" => {
                let names = split_list(value);
                let strategies: Option<Vec<_>> =
                    names.iter().map(|n| AssignmentStrategy::from_name(n)).collect();
                match strategies {
                    Some(s) if !s.is_empty() => self.assignment_strategies = s,
                    _ => return Err(bad(key, value, "range, roundrobin or cooperative-sticky")),
                }
            }
            "check.crcs" => self.check_crcs = boolean(key, value)?,
            "client.rack" => self.client_rack = Some(value.to_string()).filter(|v| !v.is_empty()),
            _ => {
                if !self.client.set(key, value)? {
                    return Err(Error::config(format!("unknown consumer setting {key}")));
                }
            }
        }
        Ok(())
    }

    /// The rebalance timeout sent in JoinGroup: `rebalance.timeout.ms`, else
    /// `max.poll.interval.ms`, as the Java consumer sends.
    pub fn rebalance_timeout(&self) -> Duration {
        self.rebalance_timeout.unwrap_or(self.max_poll_interval)
    }

    /// True if every configured strategy is cooperative: the group then rebalances
    /// incrementally (Java's rule: the protocol is the one all assignors support).
    pub fn is_cooperative(&self) -> bool {
        self.assignment_strategies.iter().all(|s| s.is_cooperative())
    }
}

fn bad(key: &str, value: &str, expected: &str) -> Error {
    Error::config(format!("{key}={value}: expected {expected}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_javas_and_keys_fall_through_to_the_client_config() {
        let mut c = ConsumerConfig::new("h:1");
        assert_eq!(c.session_timeout, Duration::from_millis(45_000));
        assert_eq!(c.fetch_max_bytes, 52_428_800);
        assert!(c.enable_auto_commit && c.check_crcs);
        assert!(!c.is_cooperative(), "range first: eager");
        c.set("partition.assignment.strategy", "cooperative-sticky").unwrap();
        assert!(c.is_cooperative());
        c.set("client.id", "me").unwrap();
        assert_eq!(c.client.client_id, "me");
        assert_eq!(c.rebalance_timeout(), Duration::from_millis(300_000));
        c.set("rebalance.timeout.ms", "10").unwrap();
        assert_eq!(c.rebalance_timeout(), Duration::from_millis(10));
        let e = c.set("linger.ms", "5").unwrap_err().to_string();
        assert!(e.contains("linger.ms"), "{e}");
        assert!(c.set("auto.offset.reset", "smallest").is_err());
        assert!(c.set("isolation.level", "read_committed").is_ok());
        assert_eq!(c.isolation_level, IsolationLevel::ReadCommitted);
        assert!(c.set("partition.assignment.strategy", "sticky").is_err());
    }
}
