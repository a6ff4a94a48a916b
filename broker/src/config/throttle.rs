//! The configuration keys of replication throttles (KIP-73): the broker-wide rates
//! (dynamic broker configs) and the per-topic lists of throttled replicas, validated as
//! [`super::keys`] says. What enforces them is `replication::throttle`.

use super::keys::{Key, Kind};

/// The dynamic broker config of the leader-side rate, bytes per second.
pub const LEADER_RATE: &str = "leader.replication.throttled.rate";
/// The dynamic broker config of the follower-side rate, bytes per second.
pub const FOLLOWER_RATE: &str = "follower.replication.throttled.rate";
/// The topic config naming the replicas throttled on their leader.
pub const LEADER_REPLICAS: &str = "leader.replication.throttled.replicas";
/// The topic config naming the replicas throttled on the follower.
pub const FOLLOWER_REPLICAS: &str = "follower.replication.throttled.replicas";
/// The dynamic broker config of Kafka's intra-broker log dir move rate (moving a
/// replica between log dirs of one broker, AlterReplicaLogDirs), bytes per second.
/// Accepted and described as Kafka does, so `kafka-reassign-partitions` can set and clear
/// it with the two replication rates, but inert: with one log dir there is no move to
/// throttle (docs/compatibility.md says so).
pub const ALTER_LOG_DIRS_RATE: &str = "replica.alter.log.dirs.io.max.bytes.per.second";
/// Kafka's default rate: no limit.
pub const UNLIMITED: u64 = i64::MAX as u64;

/// The rates as dynamic broker configs (per broker or the cluster default), by their
/// broker keys: the two replication rates, which are enforced, and the log dir move
/// rate, accepted without effect ([`ALTER_LOG_DIRS_RATE`]).
pub const RATE_KEYS: &[Key] = &[
    Key {
        name: FOLLOWER_RATE,
        broker_key: FOLLOWER_RATE,
        default: "9223372036854775807",
        kind: Kind::Long(0),
    },
    Key { name: LEADER_RATE, broker_key: LEADER_RATE, default: "9223372036854775807", kind: Kind::Long(0) },
    Key {
        name: ALTER_LOG_DIRS_RATE,
        broker_key: ALTER_LOG_DIRS_RATE,
        default: "9223372036854775807",
        kind: Kind::Long(0),
    },
];
