//! Topic-level configuration: the keys a topic accepts, their broker-level defaults
//! (`log.segment.bytes` for `segment.bytes`, ...), validation, and the translation to
//! the storage layer's `LogConfig`.

pub use super::keys::{validate_key, Key, Kind};
use super::{ConfigError, Parser};
use std::collections::BTreeMap;
use strata_protocol::records::{Compression, GZIP_LEVELS, LZ4_LEVELS, ZSTD_LEVELS};
use strata_storage::{LogConfig, TimestampType};

const TIMESTAMP_TYPES: &[&str] = &["CreateTime", "LogAppendTime"];
const CODECS: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];
const POLICIES: &[&str] = &["delete", "compact"];

/// Every topic config key Strata accepts.
pub const KEYS: &[Key] = &[
    Key {
        name: "cleanup.policy",
        broker_key: "log.cleanup.policy",
        default: "delete",
        kind: Kind::List(POLICIES),
    },
    Key {
        name: "compression.type",
        broker_key: "compression.type",
        default: "producer",
        kind: Kind::Enum(CODECS),
    },
    // KIP-390: the level the broker compresses at when it recompresses (Kafka's ranges;
    // gzip's -1 is the codec's default, 6). lz4 is accepted but has one level here.
    Key {
        name: "compression.gzip.level",
        broker_key: "compression.gzip.level",
        default: "-1",
        kind: Kind::IntIn(GZIP_LEVELS),
    },
    Key {
        name: "compression.lz4.level",
        broker_key: "compression.lz4.level",
        default: "9",
        kind: Kind::IntIn(LZ4_LEVELS),
    },
    Key {
        name: "compression.zstd.level",
        broker_key: "compression.zstd.level",
        default: "3",
        kind: Kind::IntIn(ZSTD_LEVELS),
    },
    Key {
        name: "delete.retention.ms",
        broker_key: "log.cleaner.delete.retention.ms",
        default: "86400000",
        kind: Kind::Long(0),
    },
    Key {
        name: "file.delete.delay.ms",
        broker_key: "log.segment.delete.delay.ms",
        default: "60000",
        kind: Kind::Long(0),
    },
    Key {
        name: "flush.messages",
        broker_key: "log.flush.interval.messages",
        default: "9223372036854775807",
        kind: Kind::Long(1),
    },
    Key {
        name: "flush.ms",
        broker_key: "log.flush.interval.ms",
        default: "9223372036854775807",
        kind: Kind::Long(0),
    },
    Key {
        name: "index.interval.bytes",
        broker_key: "log.index.interval.bytes",
        default: "4096",
        kind: Kind::Int(0),
    },
    Key {
        name: "max.compaction.lag.ms",
        broker_key: "log.cleaner.max.compaction.lag.ms",
        default: "9223372036854775807",
        kind: Kind::Long(1),
    },
    Key {
        name: "max.message.bytes",
        broker_key: "message.max.bytes",
        default: "1048588",
        kind: Kind::Int(0),
    },
    Key {
        name: "message.downconversion.enable",
        broker_key: "log.message.downconversion.enable",
        default: "true",
        kind: Kind::Bool,
    },
    Key {
        name: "message.timestamp.after.max.ms",
        broker_key: "log.message.timestamp.after.max.ms",
        default: "9223372036854775807",
        kind: Kind::Long(0),
    },
    Key {
        name: "message.timestamp.before.max.ms",
        broker_key: "log.message.timestamp.before.max.ms",
        default: "9223372036854775807",
        kind: Kind::Long(0),
    },
    Key {
        name: "message.timestamp.type",
        broker_key: "log.message.timestamp.type",
        default: "CreateTime",
        kind: Kind::Enum(TIMESTAMP_TYPES),
    },
    Key {
        name: "min.cleanable.dirty.ratio",
        broker_key: "log.cleaner.min.cleanable.ratio",
        default: "0.5",
        kind: Kind::Ratio,
    },
    Key {
        name: "min.compaction.lag.ms",
        broker_key: "log.cleaner.min.compaction.lag.ms",
        default: "0",
        kind: Kind::Long(0),
    },
    Key { name: "min.insync.replicas", broker_key: "min.insync.replicas", default: "1", kind: Kind::Int(1) },
    Key { name: "preallocate", broker_key: "log.preallocate", default: "false", kind: Kind::Bool },
    Key { name: "retention.bytes", broker_key: "log.retention.bytes", default: "-1", kind: Kind::Long(-1) },
    Key { name: "retention.ms", broker_key: "log.retention.ms", default: "604800000", kind: Kind::Long(-1) },
    Key {
        name: "segment.bytes",
        broker_key: "log.segment.bytes",
        default: "1073741824",
        kind: Kind::Int(14),
    },
    Key {
        name: "segment.index.bytes",
        broker_key: "log.index.size.max.bytes",
        default: "10485760",
        kind: Kind::Int(4),
    },
    Key { name: "segment.jitter.ms", broker_key: "log.roll.jitter.ms", default: "0", kind: Kind::Long(0) },
    Key { name: "segment.ms", broker_key: "log.roll.ms", default: "604800000", kind: Kind::Long(1) },
    Key {
        name: "unclean.leader.election.enable",
        broker_key: "unclean.leader.election.enable",
        default: "false",
        kind: Kind::Bool,
    },
];

/// Topic keys with no broker-level default (`broker_key` is empty): Kafka's throttled
/// replica lists, which the replication throttles read (`replication::throttle`).
pub const TOPIC_ONLY_KEYS: &[Key] = &[
    Key {
        name: "follower.replication.throttled.replicas",
        broker_key: "",
        default: "",
        kind: Kind::ReplicaList,
    },
    Key {
        name: "leader.replication.throttled.replicas",
        broker_key: "",
        default: "",
        kind: Kind::ReplicaList,
    },
];

/// Looks up a topic config key.
pub fn key(name: &str) -> Option<&'static Key> {
    KEYS.iter().chain(TOPIC_ONLY_KEYS).find(|k| k.name == name)
}

/// Checks `value` against the kind of `name`; the error says what is wrong.
pub fn validate(name: &str, value: &str) -> Result<(), String> {
    let k = key(name).ok_or_else(|| format!("unknown topic config {name}"))?;
    validate_key(k, value)
}

/// Where a topic config's effective value comes from (DescribeConfigs `config_source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Set on the topic (DYNAMIC_TOPIC_CONFIG = 1).
    Topic = 1,
    /// Set dynamically on this broker (DYNAMIC_BROKER_CONFIG = 2).
    DynamicBroker = 2,
    /// Set dynamically as the cluster-wide default (DYNAMIC_DEFAULT_BROKER_CONFIG = 3).
    DynamicDefaultBroker = 3,
    /// Set in server.properties (STATIC_BROKER_CONFIG = 4).
    StaticBroker = 4,
    /// Kafka's default (DEFAULT_CONFIG = 5).
    Default = 5,
}

/// Broker-level defaults of topic configs, after `server.properties` and overrides.
#[derive(Debug, Clone)]
pub struct TopicDefaults {
    set: BTreeMap<&'static str, String>,
    /// Dynamic cluster-wide defaults (a BROKER resource named `""`), by topic key.
    dynamic_default: BTreeMap<&'static str, String>,
    /// Dynamic values for this broker (a BROKER resource named by its node id).
    dynamic_broker: BTreeMap<&'static str, String>,
    /// `producer.id.expiration.ms`: a broker-wide setting the logs apply.
    producer_id_expiration_ms: i64,
}

impl TopicDefaults {
    /// Reads the broker keys (`log.segment.bytes`, `log.retention.hours`, ...).
    pub(super) fn from_broker(
        p: &mut Parser<'_>,
        message_max_bytes: i32,
    ) -> Result<TopicDefaults, ConfigError> {
        let mut set = BTreeMap::new();
        for k in KEYS {
            if k.broker_key == "message.max.bytes" {
                if p.raw.contains_key("message.max.bytes") {
                    set.insert(k.name, message_max_bytes.to_string());
                }
                continue;
            }
            if let Some(v) = p.opt_string(k.broker_key) {
                validate(k.name, &v).map_err(|reason| ConfigError::InvalidValue {
                    key: k.broker_key.into(),
                    value: v.clone(),
                    reason,
                })?;
                set.insert(k.name, v);
            }
        }
        // Kafka's precedence: log.retention.ms > .minutes > .hours; log.roll.ms > .hours.
        // All are read (and described) whichever is set; the hours' default is 7 days.
        let minutes = p.opt_i64("log.retention.minutes")?;
        let hours = p.opt_i64_shown("log.retention.hours", 168)?;
        let roll_hours = p.opt_i64_shown("log.roll.hours", 168)?;
        if !set.contains_key("retention.ms") {
            if let Some(m) = minutes {
                set.insert("retention.ms", (m * 60_000).to_string());
            } else if let Some(h) = hours {
                set.insert("retention.ms", (h * 3_600_000).to_string());
            }
        }
        if !set.contains_key("segment.ms") {
            if let Some(h) = roll_hours {
                set.insert("segment.ms", (h * 3_600_000).to_string());
            }
        }
        let producer_id_expiration_ms = p.int_in("producer.id.expiration.ms", 86_400_000, 1, i64::MAX)?;
        Ok(TopicDefaults {
            set,
            dynamic_default: BTreeMap::new(),
            dynamic_broker: BTreeMap::new(),
            producer_id_expiration_ms,
        })
    }

    /// The broker-level value of a topic key, if server.properties set one.
    pub fn get(&self, name: &str) -> Option<String> {
        self.set.get(name).cloned()
    }

    /// The effective value and its source for a topic with `overrides`.
    pub fn resolve(&self, overrides: &BTreeMap<String, String>, name: &str) -> (String, Source) {
        if let Some(v) = overrides.get(name) {
            return (v.clone(), Source::Topic);
        }
        self.broker_level(name)
    }

    /// The broker-level value of a topic key and where it comes from: set dynamically on
    /// this broker, as the cluster default, in server.properties, or Kafka's default.
    pub fn broker_level(&self, name: &str) -> (String, Source) {
        self.levels(name).swap_remove(0)
    }

    /// Every broker-level value of a topic key, highest precedence first (DescribeConfigs'
    /// synonyms); the last is Kafka's default.
    pub fn levels(&self, name: &str) -> Vec<(String, Source)> {
        let mut out = Vec::new();
        for (map, source) in [
            (&self.dynamic_broker, Source::DynamicBroker),
            (&self.dynamic_default, Source::DynamicDefaultBroker),
            (&self.set, Source::StaticBroker),
        ] {
            if let Some(v) = map.get(name) {
                out.push((v.clone(), source));
            }
        }
        out.push((key(name).map(|k| k.default).unwrap_or_default().to_string(), Source::Default));
        out
    }

    /// These defaults under the dynamic broker configs of the metadata: `cluster` (the
    /// resource named `""`) and `this_broker` (the one named by this node's id), both by
    /// broker key (`log.retention.ms`, `compression.type`, ...).
    pub fn with_dynamic(
        &self,
        cluster: Option<&BTreeMap<String, String>>,
        this_broker: Option<&BTreeMap<String, String>>,
    ) -> TopicDefaults {
        let by_topic_key = |m: Option<&BTreeMap<String, String>>| -> BTreeMap<&'static str, String> {
            let Some(m) = m else { return BTreeMap::new() };
            KEYS.iter().filter_map(|k| m.get(k.broker_key).map(|v| (k.name, v.clone()))).collect()
        };
        TopicDefaults {
            set: self.set.clone(),
            dynamic_default: by_topic_key(cluster),
            dynamic_broker: by_topic_key(this_broker),
            producer_id_expiration_ms: self.producer_id_expiration_ms,
        }
    }

    /// The storage configuration of a topic with `overrides`.
    pub fn log_config(&self, overrides: &BTreeMap<String, String>) -> LogConfig {
        let num = |name: &str| -> i64 { self.resolve(overrides, name).0.trim().parse().unwrap_or(0) };
        let policy: Vec<String> =
            self.resolve(overrides, "cleanup.policy").0.split(',').map(|s| s.trim().to_string()).collect();
        let ratio =
            self.resolve(overrides, "min.cleanable.dirty.ratio").0.trim().parse::<f64>().unwrap_or(0.5);
        let timestamp_type = if self.resolve(overrides, "message.timestamp.type").0 == "LogAppendTime" {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        };
        let compression = match self.resolve(overrides, "compression.type").0.as_str() {
            "uncompressed" => Some(Compression::None),
            "gzip" => Some(Compression::Gzip),
            "snappy" => Some(Compression::Snappy),
            "lz4" => Some(Compression::Lz4),
            "zstd" => Some(Compression::Zstd),
            _ => None,
        };
        let compression_level = match compression {
            // gzip's -1 is its default level.
            Some(Compression::Gzip) => Some(num("compression.gzip.level") as i32).filter(|&l| l != -1),
            Some(Compression::Zstd) => Some(num("compression.zstd.level") as i32),
            _ => None,
        };
        LogConfig {
            segment_bytes: num("segment.bytes").max(14) as u64,
            segment_ms: num("segment.ms"),
            retention_ms: num("retention.ms"),
            retention_bytes: num("retention.bytes"),
            index_interval_bytes: num("index.interval.bytes").clamp(0, i64::from(u32::MAX)) as u32,
            segment_index_bytes: num("segment.index.bytes").clamp(4, i64::from(u32::MAX)) as u32,
            max_message_bytes: num("max.message.bytes").clamp(0, i64::from(u32::MAX)) as u32,
            flush_interval_messages: num("flush.messages").max(1) as u64,
            flush_interval_ms: num("flush.ms"),
            file_delete_delay_ms: num("file.delete.delay.ms"),
            message_timestamp_type: timestamp_type,
            compression,
            compression_level,
            producer_id_expiration_ms: self.producer_id_expiration_ms,
            cleanup_policy_compact: policy.iter().any(|p| p == "compact"),
            cleanup_policy_delete: policy.iter().any(|p| p == "delete"),
            min_cleanable_dirty_ratio: ratio,
            min_compaction_lag_ms: num("min.compaction.lag.ms"),
            max_compaction_lag_ms: num("max.compaction.lag.ms").max(1),
            delete_retention_ms: num("delete.retention.ms"),
            ..LogConfig::default()
        }
    }
}
