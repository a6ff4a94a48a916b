//! Broker configuration: Kafka's `server.properties` keys, parsed once into a typed
//! struct. Unknown keys are warned about; an invalid value stops start-up with an error
//! that names the key and the value, and so does a security setting (TLS, SASL, ACLs),
//! which Strata cannot honour yet (see [`security`]).

pub mod cluster;
pub mod connections;
pub mod coordinators;
pub mod keys;
mod properties;
pub mod security;
pub mod throttle;
pub mod topic;

pub use properties::parse_properties;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

/// The broker-level key `name` (as `server.properties` spells it) if a BROKER resource can
/// change it at run time: topic defaults, replication throttles and connection limits (also
/// a listener's own, `listener.name.<listener>.max.connections`). One
/// list, so that what AlterConfigs accepts and what DescribeConfigs calls dynamic agree.
pub fn dynamic_broker_key(name: &str) -> Option<&'static topic::Key> {
    topic::KEYS
        .iter()
        .chain(throttle::RATE_KEYS)
        .chain(connections::DYNAMIC_KEYS)
        .find(|k| k.broker_key == name)
        .or_else(|| connections::listener_key(name).map(|(_, key)| key))
}

/// Why a configuration could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A key had a value of the wrong form or outside its range.
    #[error("invalid value {value:?} for configuration key {key}: {reason}")]
    InvalidValue {
        /// The key.
        key: String,
        /// The value given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The properties file could not be read.
    #[error("cannot read configuration file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A line of the properties file or an override was not `key=value`.
    #[error("malformed configuration entry {0:?}: expected key=value")]
    Malformed(String),
    /// A key asks for something Strata does not implement yet (TLS, SASL, ACLs): the
    /// broker refuses to start rather than ignore it. The value is not repeated, as it
    /// may be a password.
    #[error("configuration key {key}: {reason}")]
    Unsupported {
        /// The key (for a listener, the key that names it: `listeners`, ...).
        key: String,
        /// What was asked for and why the broker stops.
        reason: String,
    },
}

/// One listener, as in `listeners=PLAINTEXT://host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// The listener name (`PLAINTEXT`).
    pub name: String,
    /// The host to bind; empty means every interface.
    pub host: String,
    /// The port; 0 asks the OS for a free one.
    pub port: u16,
}

impl Listener {
    /// The socket address to bind.
    pub fn bind_addr(&self) -> Result<SocketAddr, ConfigError> {
        let host = if self.host.is_empty() { "0.0.0.0" } else { self.host.as_str() };
        let text = if host.contains(':') {
            format!("[{host}]:{}", self.port)
        } else {
            format!("{host}:{}", self.port)
        };
        text.parse().map_err(|_| ConfigError::InvalidValue {
            key: "listeners".into(),
            value: text.clone(),
            reason: "host must be an IP address".into(),
        })
    }
}

/// The broker's typed configuration. Field names carry Kafka's key in their doc comment.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// `node.id` (or `broker.id`).
    pub node_id: i32,
    /// `listeners`.
    pub listeners: Vec<Listener>,
    /// `advertised.listeners`; defaults to `listeners`.
    pub advertised_listeners: Vec<Listener>,
    /// `log.dirs` (or `log.dir`); Strata uses the first directory.
    pub log_dirs: Vec<PathBuf>,
    /// `num.partitions`: partitions of an auto-created topic or of CreateTopics with -1.
    pub num_partitions: i32,
    /// `default.replication.factor`.
    pub default_replication_factor: i16,
    /// `auto.create.topics.enable`.
    pub auto_create_topics_enable: bool,
    /// `delete.topic.enable`.
    pub delete_topic_enable: bool,
    /// `message.max.bytes`: the broker default of the topic config `max.message.bytes`.
    pub message_max_bytes: i32,
    /// `socket.request.max.bytes`: the largest request frame accepted.
    pub socket_request_max_bytes: i32,
    /// `log.retention.check.interval.ms`.
    pub log_retention_check_interval_ms: i64,
    /// `log.flush.scheduler.interval.ms`.
    pub log_flush_scheduler_interval_ms: i64,
    /// `cluster.id`, or a fixed id derived from the data directory.
    pub cluster_id: Option<String>,
    /// `broker.rack`.
    pub rack: Option<String>,
    /// `queued.max.requests`: requests read ahead per connection.
    pub queued_max_requests: usize,
    /// `max.incremental.fetch.session.cache.slots` (1000): fetch sessions kept (KIP-227).
    pub fetch_session_slots: usize,
    /// Connection counts and request memory (`max.connections`, `queued.max.request.bytes`, ...).
    pub connections: connections::ConnectionLimitsConfig,
    /// Broker-level defaults of topic configs (`log.segment.bytes`, ...), by topic key.
    pub topic_defaults: topic::TopicDefaults,
    /// `transaction.two.phase.commit.enable` (false): transactional producers may ask for
    /// two-phase commit (KIP-939).
    pub transaction_two_phase_commit_enable: bool,
    /// Roles, controller quorum, inter-broker listener, replication tunables.
    pub cluster: cluster::ClusterConfig,
    /// `metrics.listener` (`http://127.0.0.1:9644`): where `GET /metrics` is served;
    /// `None` when set empty (off).
    pub metrics_listener: Option<SocketAddr>,
    /// `log.format` (`text` or `json`) and `log.level` (a tracing filter), read by the
    /// binary before anything is logged; `RUST_LOG` wins over `log.level`.
    pub log: LogSettings,
    /// The group and transaction coordinators, the log cleaner, producer-id expiry.
    pub coordinators: coordinators::CoordinatorsConfig,
    /// The raw key/value pairs given, for DescribeConfigs of the broker.
    pub raw: BTreeMap<String, String>,
    /// Every key the broker reads, with its default, in the order read: what
    /// DescribeConfigs of a BROKER resource describes.
    pub known: Vec<KnownKey>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig::from_map(BTreeMap::new()).expect("defaults are valid")
    }
}

/// Keys Kafka knows that Strata accepts without acting on them (no warning).
const ACCEPTED_KEYS: &[&str] = &[
    "controller.quorum.bootstrap.servers",
    "num.network.threads",
    "num.io.threads",
    "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes",
    "num.recovery.threads.per.data.dir",
    "zookeeper.connect",
    "zookeeper.connection.timeout.ms",
    "broker.id.generation.enable",
];

impl BrokerConfig {
    /// Builds the configuration from `key=value` pairs (file entries then overrides).
    pub fn from_map(raw: BTreeMap<String, String>) -> Result<BrokerConfig, ConfigError> {
        security::check_keys(&raw)?;
        let mut p = Parser::new(&raw);
        // node.id, else broker.id, else 0; described as the id in use while unset.
        let broker_id = p.opt_i64("broker.id")?;
        let node_id = p.opt_i64_shown("node.id", broker_id.unwrap_or(0))?.or(broker_id).unwrap_or(0);
        let node_id = i32::try_from(node_id).map_err(|_| p.invalid("node.id", "out of range"))?;
        let listeners = parse_listeners("listeners", &p.string("listeners", "PLAINTEXT://127.0.0.1:9092"))?;
        let cluster = cluster::ClusterConfig::parse(&mut p, node_id, &listeners)?;
        let advertised_listeners = match p.opt_string("advertised.listeners") {
            Some(v) => parse_listeners("advertised.listeners", &v)?,
            None => listeners.iter().filter(|l| !cluster.is_controller_listener(&l.name)).cloned().collect(),
        };
        security::check_listeners(&mut p, &listeners, &advertised_listeners, &cluster)?;
        // log.dirs, else log.dir; both read so that both are described.
        let dir = p.string("log.dir", "./data");
        let dirs = p.opt_string("log.dirs").unwrap_or(dir);
        let log_dirs: Vec<PathBuf> =
            dirs.split(',').map(str::trim).filter(|s| !s.is_empty()).map(PathBuf::from).collect();
        if log_dirs.is_empty() {
            return Err(p.invalid("log.dirs", "at least one directory is required"));
        }
        let num_partitions = p.int_in("num.partitions", 1, 1, 1_000_000)? as i32;
        let default_replication_factor =
            p.int_in("default.replication.factor", 1, 1, i64::from(i16::MAX))? as i16;
        let auto_create_topics_enable = p.bool("auto.create.topics.enable", true)?;
        let delete_topic_enable = p.bool("delete.topic.enable", true)?;
        let message_max_bytes = p.int_in("message.max.bytes", 1_048_588, 0, i64::from(i32::MAX))? as i32;
        let socket_request_max_bytes =
            p.int_in("socket.request.max.bytes", 104_857_600, 1, i64::from(i32::MAX))? as i32;
        let log_retention_check_interval_ms =
            p.int_in("log.retention.check.interval.ms", 300_000, 1, i64::MAX)?;
        let log_flush_scheduler_interval_ms =
            p.int_in("log.flush.scheduler.interval.ms", i64::MAX, 1, i64::MAX)?;
        let queued_max_requests = p.int_in("queued.max.requests", 500, 1, 100_000)? as usize;
        let connections = connections::ConnectionLimitsConfig::parse(&mut p, &listeners)?;
        let fetch_session_slots =
            p.int_in("max.incremental.fetch.session.cache.slots", 1000, 0, i64::from(i32::MAX))? as usize;
        let cluster_id = p.opt_string("cluster.id");
        let rack = p.opt_string("broker.rack");
        let transaction_two_phase_commit_enable = p.bool("transaction.two.phase.commit.enable", false)?;
        let topic_defaults = topic::TopicDefaults::from_broker(&mut p, message_max_bytes)?;
        let coordinators =
            coordinators::CoordinatorsConfig::parse(&mut p, transaction_two_phase_commit_enable)?;
        let metrics_listener =
            parse_metrics_listener(&p.string("metrics.listener", DEFAULT_METRICS_LISTENER))?;
        let log = LogSettings::parse(&mut p)?;
        for key in raw.keys() {
            if !p.used(key) && !ACCEPTED_KEYS.contains(&key.as_str()) {
                tracing::warn!(key = %key, "unknown configuration key ignored");
            }
        }
        let known = p.known;
        Ok(BrokerConfig {
            node_id,
            listeners,
            advertised_listeners,
            log_dirs,
            num_partitions,
            default_replication_factor,
            auto_create_topics_enable,
            delete_topic_enable,
            message_max_bytes,
            socket_request_max_bytes,
            log_retention_check_interval_ms,
            log_flush_scheduler_interval_ms,
            cluster_id,
            rack,
            queued_max_requests,
            connections,
            fetch_session_slots,
            topic_defaults,
            transaction_two_phase_commit_enable,
            cluster,
            metrics_listener,
            log,
            coordinators,
            raw,
            known,
        })
    }

    /// Reads `path` (if any) and applies `overrides` (`key=value`) on top.
    pub fn load(path: Option<&std::path::Path>, overrides: &[String]) -> Result<Self, ConfigError> {
        BrokerConfig::from_map(BrokerConfig::load_raw(path, overrides)?)
    }

    /// The key/value pairs of `path` (if any) with `overrides` on top, unvalidated: the
    /// binary reads the log settings from them before validation logs anything.
    pub fn load_raw(
        path: Option<&std::path::Path>,
        overrides: &[String],
    ) -> Result<BTreeMap<String, String>, ConfigError> {
        let mut raw = BTreeMap::new();
        if let Some(path) = path {
            let text = std::fs::read_to_string(path)
                .map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
            raw.extend(parse_properties(&text)?);
        }
        for o in overrides {
            let (k, v) = o.split_once('=').ok_or_else(|| ConfigError::Malformed(o.clone()))?;
            raw.insert(k.trim().to_string(), v.trim().to_string());
        }
        Ok(raw)
    }

    /// The data directory (the first of `log.dirs`).
    pub fn data_dir(&self) -> &std::path::Path {
        &self.log_dirs[0]
    }
}

/// Where metrics are served unless `metrics.listener` says otherwise (Redpanda's port).
pub const DEFAULT_METRICS_LISTENER: &str = "http://127.0.0.1:9644";

/// `metrics.listener`: `http://host:port` (or `host:port`); empty turns metrics off.
fn parse_metrics_listener(value: &str) -> Result<Option<SocketAddr>, ConfigError> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(None);
    }
    let invalid = |reason: &str| ConfigError::InvalidValue {
        key: "metrics.listener".into(),
        value: value.into(),
        reason: reason.into(),
    };
    let rest = value.strip_prefix("http://").unwrap_or(value);
    if rest.contains("://") {
        return Err(invalid("only http:// is served"));
    }
    let rest = rest.trim_end_matches('/');
    let (host, port) = rest.rsplit_once(':').ok_or_else(|| invalid("expected http://host:port"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let host = if host.is_empty() { "0.0.0.0" } else { host };
    let port: u16 = port.parse().map_err(|_| invalid("port must be 0-65535"))?;
    let ip: std::net::IpAddr = host.parse().map_err(|_| invalid("host must be an IP address"))?;
    Ok(Some(SocketAddr::new(ip, port)))
}

/// How the broker logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSettings {
    /// `log.format=json`: one JSON object per line, for log shippers.
    pub json: bool,
    /// `log.level`: the tracing filter when `RUST_LOG` is not set (e.g. `info,strata_broker=debug`).
    pub level: Option<String>,
}

impl LogSettings {
    /// Reads `log.format` and `log.level` from `raw` without validating anything else
    /// (the binary sets logging up before the full configuration is checked).
    pub fn from_raw(raw: &BTreeMap<String, String>) -> Result<LogSettings, ConfigError> {
        LogSettings::parse(&mut Parser::new(raw))
    }

    fn parse(p: &mut Parser<'_>) -> Result<LogSettings, ConfigError> {
        let json = match p.string("log.format", "text").to_ascii_lowercase().as_str() {
            "text" => false,
            "json" => true,
            _ => return Err(p.invalid("log.format", "must be text or json")),
        };
        let level = p.opt_string("log.level").filter(|l| !l.trim().is_empty());
        Ok(LogSettings { json, level })
    }
}

fn parse_listeners(key: &str, value: &str) -> Result<Vec<Listener>, ConfigError> {
    let invalid = |reason: &str| ConfigError::InvalidValue {
        key: key.into(),
        value: value.into(),
        reason: reason.into(),
    };
    let mut out = Vec::new();
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, rest) = item.split_once("://").ok_or_else(|| invalid("expected NAME://host:port"))?;
        let (host, port) = rest.rsplit_once(':').ok_or_else(|| invalid("expected NAME://host:port"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port: u16 = port.parse().map_err(|_| invalid("port must be 0-65535"))?;
        out.push(Listener { name: name.to_string(), host: host.to_string(), port });
    }
    if out.is_empty() {
        return Err(invalid("at least one listener is required"));
    }
    Ok(out)
}

/// A key the broker reads, as DescribeConfigs of a BROKER resource shows it while unset.
#[derive(Debug, Clone)]
pub struct KnownKey {
    /// The key, as `server.properties` spells it.
    pub name: String,
    /// Kafka's (or Strata's) default as text; `None` where the default is null.
    pub default: Option<String>,
    /// The value's type.
    pub kind: topic::Kind,
}

/// Reads typed values out of the raw map, remembering every key read with its default: the
/// keys used (an unknown key is warned about) and what DescribeConfigs describes, so that
/// the parser is the one place a key and its default are written down.
pub struct Parser<'a> {
    raw: &'a BTreeMap<String, String>,
    known: Vec<KnownKey>,
}

impl<'a> Parser<'a> {
    fn new(raw: &'a BTreeMap<String, String>) -> Parser<'a> {
        Parser { raw, known: Vec::new() }
    }

    fn invalid(&self, key: &str, reason: &str) -> ConfigError {
        ConfigError::InvalidValue {
            key: key.into(),
            value: self.raw.get(key).cloned().unwrap_or_default(),
            reason: reason.into(),
        }
    }

    fn used(&self, key: &str) -> bool {
        self.known.iter().any(|k| k.name == key)
    }

    /// The raw value of `key`, noting the key with the default shown while it is unset.
    fn read(&mut self, key: &str, default: Option<String>, kind: topic::Kind) -> Option<String> {
        if !self.used(key) {
            self.known.push(KnownKey { name: key.to_string(), default, kind });
        }
        self.raw.get(key).cloned()
    }

    /// The raw value of `key`, if set (a key whose default is null).
    pub fn opt_string(&mut self, key: &str) -> Option<String> {
        self.read(key, None, topic::Kind::STRING)
    }

    fn string(&mut self, key: &str, default: &str) -> String {
        self.read(key, Some(default.to_string()), topic::Kind::STRING).unwrap_or_else(|| default.to_string())
    }

    fn parse_i64(&self, key: &str, value: Option<String>) -> Result<Option<i64>, ConfigError> {
        match value {
            None => Ok(None),
            Some(v) => v.trim().parse::<i64>().map(Some).map_err(|_| self.invalid(key, "not an integer")),
        }
    }

    /// An integer value, if set (a key whose default is null).
    pub fn opt_i64(&mut self, key: &str) -> Result<Option<i64>, ConfigError> {
        let v = self.read(key, None, topic::Kind::Long(i64::MIN));
        self.parse_i64(key, v)
    }

    /// An integer value, if set, of a key whose reader applies `shown` while it is unset
    /// (`log.retention.hours`: 168, unless a finer key is set).
    pub fn opt_i64_shown(&mut self, key: &str, shown: i64) -> Result<Option<i64>, ConfigError> {
        let v = self.read(key, Some(shown.to_string()), topic::Kind::Long(i64::MIN));
        self.parse_i64(key, v)
    }

    /// An integer in `[min, max]`, or `default`; a 32-bit INT to DescribeConfigs when `max`
    /// fits one, else a LONG.
    pub fn int_in(&mut self, key: &str, default: i64, min: i64, max: i64) -> Result<i64, ConfigError> {
        let kind = if max <= i64::from(i32::MAX) { topic::Kind::Int(min) } else { topic::Kind::Long(min) };
        let v = self.read(key, Some(default.to_string()), kind);
        let v = self.parse_i64(key, v)?.unwrap_or(default);
        if v < min || v > max {
            return Err(self.invalid(key, &format!("must be between {min} and {max}")));
        }
        Ok(v)
    }

    fn bool(&mut self, key: &str, default: bool) -> Result<bool, ConfigError> {
        match self.read(key, Some(default.to_string()), topic::Kind::Bool) {
            None => Ok(default),
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(self.invalid(key, "must be true or false")),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn defaults_serve_localhost_9092_with_data_in_dot_data() {
        let c = BrokerConfig::default();
        assert_eq!(c.listeners[0].bind_addr().unwrap().to_string(), "127.0.0.1:9092");
        assert_eq!(c.data_dir(), std::path::Path::new("./data"));
        assert_eq!(c.node_id, 0);
    }

    #[test]
    fn invalid_values_name_the_key_and_value() {
        let e = BrokerConfig::from_map(map(&[("num.partitions", "zero")])).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("num.partitions") && text.contains("zero"), "{text}");
        let e = BrokerConfig::from_map(map(&[("listeners", "127.0.0.1:9092")])).unwrap_err();
        assert!(e.to_string().contains("listeners"));
        let e = BrokerConfig::from_map(map(&[("log.retention.ms", "-5")])).unwrap_err();
        assert!(e.to_string().contains("log.retention.ms"), "{e}");
    }

    #[test]
    fn metrics_listener_defaults_to_loopback_and_can_be_turned_off() {
        let c = BrokerConfig::default();
        assert_eq!(c.metrics_listener, Some("127.0.0.1:9644".parse().unwrap()));
        let c = BrokerConfig::from_map(map(&[("metrics.listener", "")])).unwrap();
        assert_eq!(c.metrics_listener, None);
        let c = BrokerConfig::from_map(map(&[("metrics.listener", "127.0.0.1:0")])).unwrap();
        assert_eq!(c.metrics_listener, Some("127.0.0.1:0".parse().unwrap()));
        let e = BrokerConfig::from_map(map(&[("metrics.listener", "https://127.0.0.1:1")])).unwrap_err();
        assert!(e.to_string().contains("metrics.listener"), "{e}");
    }

    #[test]
    fn log_format_is_text_or_json() {
        let c = BrokerConfig::from_map(map(&[("log.format", "json"), ("log.level", "debug")])).unwrap();
        assert_eq!(c.log, LogSettings { json: true, level: Some("debug".into()) });
        let e = BrokerConfig::from_map(map(&[("log.format", "xml")])).unwrap_err();
        assert!(e.to_string().contains("log.format"), "{e}");
    }

    #[test]
    fn dynamic_broker_keys_are_topic_defaults_throttles_and_connection_limits() {
        for name in [
            "log.retention.ms",
            "leader.replication.throttled.rate",
            "follower.replication.throttled.rate",
            "replica.alter.log.dirs.io.max.bytes.per.second",
            "max.connections",
            "max.connection.creation.rate",
        ] {
            assert_eq!(dynamic_broker_key(name).map(|k| k.broker_key), Some(name), "{name}");
        }
        // A listener's own limits are validated as the broker-wide ones they refine.
        let own = dynamic_broker_key("listener.name.internal.max.connections").map(|k| k.broker_key);
        assert_eq!(own, Some("max.connections"));
        // Static keys, and topic-level names that are not broker keys.
        for name in ["node.id", "log.dirs", "retention.ms", "listeners"] {
            assert!(dynamic_broker_key(name).is_none(), "{name}");
        }
    }

    #[test]
    fn coordinator_and_cleaner_keys_are_checked_at_start() {
        let c = BrokerConfig::from_map(map(&[
            ("transaction.max.timeout.ms", "60000"),
            ("offsets.retention.minutes", "2"),
            ("offsets.commit.timeout.ms", "700"),
            ("log.cleaner.enable", "false"),
        ]))
        .unwrap();
        let k = &c.coordinators;
        assert_eq!(k.txn.transaction_max_timeout_ms, 60_000);
        assert_eq!(k.group.offsets_retention_ms, 120_000);
        assert_eq!(k.offsets_commit_timeout_ms, 700);
        assert!(!k.log_cleaner_enable);
        let d = BrokerConfig::default().coordinators;
        assert_eq!(
            d.group.group_initial_rebalance_delay_ms,
            crate::coordinator::group::GroupConfig::default().group_initial_rebalance_delay_ms
        );
        assert_eq!(d.cleaner.dedupe_buffer_bytes, 16 << 20, "Strata's smaller key map");
        for (key, value) in [
            ("transaction.max.timeout.ms", "abc"),
            ("offsets.topic.num.partitions", "0"),
            ("group.initial.rebalance.delay.ms", "-1"),
            ("log.cleaner.enable", "maybe"),
            ("log.cleaner.dedupe.buffer.size", "10"),
        ] {
            let e = BrokerConfig::from_map(map(&[(key, value)])).unwrap_err().to_string();
            assert!(e.contains(key) && e.contains(value), "{key}={value}: {e}");
        }
    }

    #[test]
    fn every_key_read_is_known_once_with_its_default_and_type() {
        let c = BrokerConfig::default();
        let mut names: Vec<&str> = c.known.iter().map(|k| k.name.as_str()).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before, "a key noted twice");
        for accepted in ACCEPTED_KEYS {
            assert!(!names.contains(accepted), "{accepted} is read, so it is no longer merely accepted");
        }
        let known = |name: &str| c.known.iter().find(|k| k.name == name).unwrap_or_else(|| panic!("{name}"));
        for (name, default, type_code) in [
            ("offsets.topic.num.partitions", Some("50"), 3),
            ("offsets.retention.check.interval.ms", Some("600000"), 5),
            ("log.cleaner.enable", Some("true"), 1),
            ("log.retention.hours", Some("168"), 5),
            ("log.retention.minutes", None, 5),
            ("broker.rack", None, 2),
            ("node.id", Some("0"), 5),
            ("listeners", Some("PLAINTEXT://127.0.0.1:9092"), 2),
            ("log.dir", Some("./data"), 2),
            ("log.dirs", None, 2),
        ] {
            let k = known(name);
            assert_eq!((k.default.as_deref(), k.kind.type_code()), (default, type_code), "{name}");
        }
        let c = BrokerConfig::from_map(map(&[("broker.id", "7")])).unwrap();
        assert_eq!(c.node_id, 7);
        assert_eq!(c.known.iter().find(|k| k.name == "node.id").unwrap().default.as_deref(), Some("7"));
    }

    #[test]
    fn retention_hours_and_minutes_are_honoured() {
        let c = BrokerConfig::from_map(map(&[("log.retention.hours", "2")])).unwrap();
        assert_eq!(c.topic_defaults.get("retention.ms"), Some("7200000".into()));
        let c = BrokerConfig::from_map(map(&[("log.retention.hours", "2"), ("log.retention.minutes", "3")]))
            .unwrap();
        assert_eq!(c.topic_defaults.get("retention.ms"), Some("180000".into()));
    }
}

#[cfg(test)]
mod compression_level_tests {
    use super::tests::map;
    use super::topic::validate;
    use super::*;

    #[test]
    fn kip_390_levels_take_kafkas_ranges() {
        for (key, good, bad) in [
            ("compression.gzip.level", &["-1", "1", "9"][..], &["0", "10", "-2", "x"][..]),
            ("compression.lz4.level", &["1", "9", "17"][..], &["0", "18"][..]),
            ("compression.zstd.level", &["-131072", "0", "3", "22"][..], &["23", "-131073"][..]),
        ] {
            for v in good {
                assert!(validate(key, v).is_ok(), "{key}={v}");
            }
            for v in bad {
                let e = validate(key, v).unwrap_err();
                assert!(e.contains(key), "{key}={v}: {e}");
            }
        }
        let e = BrokerConfig::from_map(map(&[("compression.zstd.level", "40")])).unwrap_err();
        assert!(e.to_string().contains("compression.zstd.level"), "{e}");
    }

    #[test]
    fn the_level_of_the_topics_codec_reaches_the_log() {
        let c =
            BrokerConfig::from_map(map(&[("compression.zstd.level", "19"), ("compression.gzip.level", "1")]))
                .unwrap();
        let defaults = &c.topic_defaults;
        let log = |pairs: &[(&str, &str)]| defaults.log_config(&map(pairs));
        assert_eq!(log(&[("compression.type", "zstd")]).compression_level, Some(19));
        assert_eq!(
            log(&[("compression.type", "zstd"), ("compression.zstd.level", "-5")]).compression_level,
            Some(-5)
        );
        assert_eq!(log(&[("compression.type", "gzip")]).compression_level, Some(1));
        assert_eq!(
            log(&[("compression.type", "gzip"), ("compression.gzip.level", "-1")]).compression_level,
            None
        );
        assert_eq!(log(&[("compression.type", "lz4")]).compression_level, None);
        assert_eq!(log(&[]).compression_level, None, "producer keeps the producer's batches");
    }
}
