//! What one client or many may hold of the broker: connections (overall, per address)
//! and the request bytes kept in memory while requests are received and handled.

use super::keys::{parse_host_counts, Key, Kind};
use super::{ConfigError, Listener, Parser};
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::time::Duration;

/// Strata's default of `queued.max.request.bytes` (Kafka's is -1, unbounded): with it the
/// broker's memory for requests is bounded whatever clients send.
pub const DEFAULT_QUEUED_MAX_REQUEST_BYTES: i64 = 256 * 1024 * 1024;

/// `max.connections`, `max.connections.per.ip`, `max.connections.per.ip.overrides` and
/// `max.connection.creation.rate` as dynamic broker configs (per broker or the cluster default, over server.properties),
/// as Kafka's `DynamicConnectionQuota` makes them: a change applies to the connections
/// accepted next; connections already open stay.
pub const DYNAMIC_KEYS: &[Key] = &[
    MAX_CONNECTIONS_KEY,
    Key { name: PER_IP, broker_key: PER_IP, default: "2147483647", kind: Kind::Int(0) },
    Key { name: PER_IP_OVERRIDES, broker_key: PER_IP_OVERRIDES, default: "", kind: Kind::HostCounts },
    CREATION_RATE_KEY,
];

const MAX_CONNECTIONS_KEY: Key =
    Key { name: MAX_CONNECTIONS, broker_key: MAX_CONNECTIONS, default: "2147483647", kind: Kind::Int(0) };
const CREATION_RATE_KEY: Key =
    Key { name: CREATION_RATE, broker_key: CREATION_RATE, default: "2147483647", kind: Kind::Int(0) };

/// The keys a listener may set for itself (`listener.name.<listener>.<key>`, the name in
/// lower case), dynamically too, as Kafka's `DynamicListenerConfig` lets it: its own
/// `max.connections` and `max.connection.creation.rate`, which hold that listener on top of
/// the broker-wide values and apply to the inter-broker listener as well.
pub const LISTENER_KEYS: &[Key] = &[MAX_CONNECTIONS_KEY, CREATION_RATE_KEY];

/// The listener (lower case) and the key of `listener.name.<listener>.<key>` when `<key>`
/// is one of [`LISTENER_KEYS`].
pub fn listener_key(name: &str) -> Option<(&str, &'static Key)> {
    let rest = name.strip_prefix(LISTENER_PREFIX)?;
    let (listener, key) = rest.split_once('.')?;
    let valid = !listener.is_empty()
        && listener.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    let key = LISTENER_KEYS.iter().find(|k| k.name == key)?;
    valid.then_some((listener, key))
}

const LISTENER_PREFIX: &str = "listener.name.";
const MAX_CONNECTIONS: &str = "max.connections";
const PER_IP: &str = "max.connections.per.ip";
const PER_IP_OVERRIDES: &str = "max.connections.per.ip.overrides";
const CREATION_RATE: &str = "max.connection.creation.rate";

/// Connection and request-memory limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionLimitsConfig {
    /// `max.connections` (unbounded by default, as in Kafka): past it, client listeners
    /// stop accepting until a connection closes.
    pub max_connections: usize,
    /// `listener.name.<listener>.max.connections`, by listener name in lower case (as
    /// Kafka's keys spell it): past it, that listener stops accepting until one of its
    /// connections closes. It applies on top of `max.connections`, and also to the
    /// inter-broker listener, which `max.connections` leaves alone. Only listeners that
    /// set it are here.
    pub per_listener: BTreeMap<String, usize>,
    /// `listener.name.<listener>.max.connection.creation.rate`, by listener name in lower
    /// case: connections that listener accepts per second, on top of the broker-wide rate
    /// (and on the inter-broker listener too, which the broker-wide rate exempts).
    pub per_listener_rate: BTreeMap<String, usize>,
    /// `max.connections.per.ip`: a connection from an address that has this many is
    /// closed at once.
    pub max_connections_per_ip: usize,
    /// `max.connections.per.ip.overrides` (`host:count,ip:count`), host names resolved
    /// when the configuration is read.
    pub per_ip_overrides: HashMap<IpAddr, usize>,
    /// `max.connection.creation.rate` (KIP-612; unbounded by default): client connections
    /// accepted per second, broker-wide; past it a new connection waits before it is
    /// served. The listeners `max.connections` leaves alone are exempt too.
    pub max_connection_creation_rate: usize,
    /// `connections.max.idle.ms` (10 minutes): a connection with nothing received for
    /// this long is closed.
    pub connections_max_idle: Duration,
    /// `queued.max.request.bytes`: bytes of requests being received or handled at once,
    /// broker-wide; `None` when set to -1 (unbounded, Kafka's default).
    pub queued_max_request_bytes: Option<usize>,
    /// `socket.request.receive.timeout.ms` (Strata's own, 60 s): a request whose length
    /// was read but whose bytes did not all arrive within this long closes its
    /// connection, so half-sent requests cannot hold memory forever.
    pub request_receive_timeout: Duration,
}

impl Default for ConnectionLimitsConfig {
    fn default() -> Self {
        ConnectionLimitsConfig {
            max_connections: i32::MAX as usize,
            per_listener: BTreeMap::new(),
            per_listener_rate: BTreeMap::new(),
            max_connections_per_ip: i32::MAX as usize,
            per_ip_overrides: HashMap::new(),
            max_connection_creation_rate: i32::MAX as usize,
            connections_max_idle: Duration::from_millis(600_000),
            queued_max_request_bytes: Some(DEFAULT_QUEUED_MAX_REQUEST_BYTES as usize),
            request_receive_timeout: Duration::from_millis(60_000),
        }
    }
}

impl ConnectionLimitsConfig {
    /// Reads the keys above; the per-listener keys of `listeners`, named in lower case as
    /// Kafka names them (`listener.name.plaintext.max.connections`).
    pub(super) fn parse(
        p: &mut Parser<'_>,
        listeners: &[Listener],
    ) -> Result<ConnectionLimitsConfig, ConfigError> {
        let max = i64::from(i32::MAX);
        let max_connections = p.int_in(MAX_CONNECTIONS, max, 0, max)? as usize;
        let (mut per_listener, mut per_listener_rate) = (BTreeMap::new(), BTreeMap::new());
        for l in listeners {
            let name = l.name.to_ascii_lowercase();
            for (suffix, map) in
                [(MAX_CONNECTIONS, &mut per_listener), (CREATION_RATE, &mut per_listener_rate)]
            {
                let key = format!("{LISTENER_PREFIX}{name}.{suffix}");
                if let Some(limit) = p.opt_i64(&key)? {
                    if !(0..=max).contains(&limit) {
                        return Err(p.invalid(&key, &format!("must be between 0 and {max}")));
                    }
                    map.insert(name.clone(), limit as usize);
                }
            }
        }
        let max_connections_per_ip = p.int_in(PER_IP, max, 0, max)? as usize;
        let overrides = p.opt_string(PER_IP_OVERRIDES).unwrap_or_default();
        let per_ip_overrides = parse_host_counts(&overrides).map_err(|reason| ConfigError::InvalidValue {
            key: PER_IP_OVERRIDES.into(),
            value: overrides.clone(),
            reason,
        })?;
        let max_connection_creation_rate = p.int_in(CREATION_RATE, max, 0, max)? as usize;
        let idle = p.int_in("connections.max.idle.ms", 600_000, 1, i64::MAX)?;
        let queued = p.int_in("queued.max.request.bytes", DEFAULT_QUEUED_MAX_REQUEST_BYTES, -1, i64::MAX)?;
        if queued == 0 {
            return Err(ConfigError::InvalidValue {
                key: "queued.max.request.bytes".into(),
                value: "0".into(),
                reason: "must be -1 (unbounded) or positive".into(),
            });
        }
        let receive = p.int_in("socket.request.receive.timeout.ms", 60_000, 1, i64::MAX)?;
        Ok(ConnectionLimitsConfig {
            max_connections,
            per_listener,
            per_listener_rate,
            max_connections_per_ip,
            per_ip_overrides,
            max_connection_creation_rate,
            connections_max_idle: Duration::from_millis(idle as u64),
            queued_max_request_bytes: (queued > 0).then_some(queued as usize),
            request_receive_timeout: Duration::from_millis(receive as u64),
        })
    }

    /// The most connections `ip` may have open.
    pub fn limit_for(&self, ip: IpAddr) -> usize {
        self.per_ip_overrides.get(&ip).copied().unwrap_or(self.max_connections_per_ip)
    }

    /// These limits with the dynamic values of [`DYNAMIC_KEYS`] applied: this broker's
    /// own (`mine`) over the cluster default (`cluster`) over server.properties. The
    /// values were validated by the controller; one that does not parse (written by
    /// another version) leaves the lower level's value.
    pub fn with_dynamic(
        &self,
        cluster: Option<&BTreeMap<String, String>>,
        mine: Option<&BTreeMap<String, String>>,
    ) -> ConnectionLimitsConfig {
        let value = |key: &str| mine.and_then(|m| m.get(key)).or_else(|| cluster.and_then(|c| c.get(key)));
        let count = |key: &str| {
            value(key).and_then(|v| v.trim().parse::<i32>().ok()).filter(|v| *v >= 0).map(|v| v as usize)
        };
        let mut out = self.clone();
        if let Some(n) = count(MAX_CONNECTIONS) {
            out.max_connections = n;
        }
        if let Some(n) = count(PER_IP) {
            out.max_connections_per_ip = n;
        }
        if let Some(n) = count(CREATION_RATE) {
            out.max_connection_creation_rate = n;
        }
        if let Some(overrides) = value(PER_IP_OVERRIDES).and_then(|v| parse_host_counts(v).ok()) {
            out.per_ip_overrides = overrides;
        }
        // Per-listener keys: the cluster default's first, then this broker's over them.
        for level in [cluster, mine].into_iter().flatten() {
            for (name, v) in level {
                let Some((listener, key)) = listener_key(name) else { continue };
                let Some(n) = v.trim().parse::<i32>().ok().filter(|v| *v >= 0) else { continue };
                let map = if key.name == MAX_CONNECTIONS {
                    &mut out.per_listener
                } else {
                    &mut out.per_listener_rate
                };
                map.insert(listener.to_string(), n as usize);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BrokerConfig;
    use std::collections::BTreeMap;

    fn parse(pairs: &[(&str, &str)]) -> Result<ConnectionLimitsConfig, ConfigError> {
        let raw: BTreeMap<String, String> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        BrokerConfig::from_map(raw).map(|c| c.connections)
    }

    #[test]
    fn defaults_bound_request_memory_and_nothing_else() {
        let c = parse(&[]).unwrap();
        assert_eq!(c, ConnectionLimitsConfig::default());
        assert_eq!(c.queued_max_request_bytes, Some(256 << 20));
        assert_eq!(c.limit_for("127.0.0.1".parse().unwrap()), i32::MAX as usize);
    }

    #[test]
    fn overrides_name_addresses_and_host_names() {
        let c = parse(&[
            ("max.connections.per.ip", "5"),
            ("max.connections.per.ip.overrides", "127.0.0.2:7, localhost:9,[::2]:1"),
            ("queued.max.request.bytes", "-1"),
        ])
        .unwrap();
        assert_eq!(c.limit_for("127.0.0.2".parse().unwrap()), 7);
        assert_eq!(c.limit_for("127.0.0.1".parse().unwrap()), 9, "localhost resolves to 127.0.0.1");
        assert_eq!(c.limit_for("::2".parse().unwrap()), 1);
        assert_eq!(c.limit_for("10.0.0.1".parse().unwrap()), 5);
        assert_eq!(c.queued_max_request_bytes, None);
    }

    #[test]
    fn dynamic_values_apply_the_brokers_own_over_the_cluster_default_over_the_file() {
        let file = parse(&[("max.connections", "50"), ("max.connections.per.ip", "5")]).unwrap();
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let cluster = map(&[("max.connections", "40"), ("max.connections.per.ip.overrides", "127.0.0.2:1")]);
        let mine = map(&[("max.connections", "30"), ("max.connections.per.ip", "not a number")]);
        let c = file.with_dynamic(Some(&cluster), Some(&mine));
        assert_eq!(c.max_connections, 30);
        assert_eq!(c.limit_for("127.0.0.2".parse().unwrap()), 1);
        assert_eq!(c.limit_for("127.0.0.1".parse().unwrap()), 5, "an unparsable value keeps the file's");
        assert_eq!(file.with_dynamic(Some(&cluster), None).max_connections, 40);
        assert_eq!(file.with_dynamic(None, None), file);
    }

    #[test]
    fn per_listener_limits_are_read_for_the_configured_listeners() {
        let c = parse(&[
            ("listeners", "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093"),
            ("listener.name.plaintext.max.connections", "7"),
            ("listener.name.other.max.connections", "1"),
        ])
        .unwrap();
        assert_eq!(c.per_listener, [("plaintext".to_string(), 7)].into_iter().collect());
        let e = parse(&[("listener.name.plaintext.max.connections", "-1")]).unwrap_err().to_string();
        assert!(e.contains("listener.name.plaintext.max.connections"), "{e}");
    }

    #[test]
    fn listener_keys_name_a_listener_and_one_of_its_own_limits() {
        let (l, k) = listener_key("listener.name.plaintext.max.connections").unwrap();
        assert_eq!((l, k.name), ("plaintext", MAX_CONNECTIONS));
        let (l, k) = listener_key("listener.name.internal_2.max.connection.creation.rate").unwrap();
        assert_eq!((l, k.name), ("internal_2", CREATION_RATE));
        for bad in [
            "listener.name.plaintext.max.connections.per.ip",
            "listener.name..max.connections",
            "listener.name.PLAINTEXT.max.connections",
            "listener.name.plaintext.sasl.enabled.mechanisms",
            "max.connections",
        ] {
            assert!(listener_key(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn listener_limits_come_from_the_file_and_change_at_run_time() {
        let file = parse(&[
            ("listeners", "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093"),
            ("listener.name.plaintext.max.connections", "7"),
            ("listener.name.internal.max.connection.creation.rate", "3"),
        ])
        .unwrap();
        assert_eq!(file.per_listener_rate, [("internal".to_string(), 3)].into_iter().collect());
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let cluster = map(&[
            ("listener.name.plaintext.max.connections", "5"),
            ("listener.name.internal.max.connections", "4"),
        ]);
        let mine = map(&[
            ("listener.name.plaintext.max.connections", "2"),
            ("listener.name.internal.max.connection.creation.rate", "oops"),
        ]);
        let c = file.with_dynamic(Some(&cluster), Some(&mine));
        assert_eq!(c.per_listener.get("plaintext"), Some(&2), "the broker's own over the default");
        assert_eq!(c.per_listener.get("internal"), Some(&4), "the cluster default over nothing");
        assert_eq!(c.per_listener_rate.get("internal"), Some(&3), "an unparsable value keeps the file's");
    }

    #[test]
    fn bad_values_name_their_key() {
        for (k, v) in [
            ("max.connections.per.ip.overrides", "127.0.0.1"),
            ("max.connections.per.ip.overrides", "127.0.0.1:many"),
            ("queued.max.request.bytes", "0"),
            ("max.connections", "-1"),
            ("connections.max.idle.ms", "0"),
        ] {
            let e = parse(&[(k, v)]).unwrap_err().to_string();
            assert!(e.contains(k), "{e}");
        }
    }
}
