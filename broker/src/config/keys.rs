//! The description of a configuration key (its name, broker-level key, default and value
//! kind, as DescribeConfigs reports them) and the validation of a value against its kind.
//! Topic, connection and throttle keys are all described this way; this module depends on
//! none of them.

use std::collections::HashMap;
use std::net::{IpAddr, ToSocketAddrs};
use strata_protocol::records::{describe_levels, level_allowed};

/// The value kind of a config key, as DescribeConfigs v3+ reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `true` / `false`.
    Bool,
    /// A 32-bit integer with a minimum.
    Int(i64),
    /// A 64-bit integer with a minimum.
    Long(i64),
    /// A fraction in [0, 1].
    Ratio,
    /// One of a fixed set of words.
    Enum(&'static [&'static str]),
    /// A comma-separated list of words from a fixed set.
    List(&'static [&'static str]),
    /// A 32-bit integer in one of these inclusive ranges (a codec's levels).
    IntIn(&'static [(i32, i32)]),
    /// `*` or `partition:broker` pairs (the throttled replicas of a topic).
    ReplicaList,
    /// `host:count` pairs (`max.connections.per.ip.overrides`).
    HostCounts,
}

impl Kind {
    /// A free-form string (no fixed set of words): DescribeConfigs' STRING.
    pub const STRING: Kind = Kind::Enum(&[]);

    /// Kafka's ConfigType code (DescribeConfigs v3+).
    pub fn type_code(self) -> i8 {
        match self {
            Kind::Bool => 1,
            Kind::Enum(_) | Kind::HostCounts => 2,
            Kind::Int(_) | Kind::IntIn(_) => 3,
            Kind::Long(_) => 5,
            Kind::Ratio => 6,
            Kind::List(_) | Kind::ReplicaList => 7,
        }
    }
}

/// One topic config key.
#[derive(Debug)]
pub struct Key {
    /// The topic-level name.
    pub name: &'static str,
    /// The broker-level key that sets its default.
    pub broker_key: &'static str,
    /// Kafka's default.
    pub default: &'static str,
    /// The value kind.
    pub kind: Kind,
}

/// Checks `value` against the kind of key `k`, which may be a broker-only key.
pub fn validate_key(k: &Key, value: &str) -> Result<(), String> {
    let name = k.name;
    let int = |min: i64, max: i64| -> Result<(), String> {
        let v: i64 = value.trim().parse().map_err(|_| format!("{name} must be an integer"))?;
        if v < min || v > max {
            return Err(format!("{name} must be between {min} and {max}, got {v}"));
        }
        Ok(())
    };
    match k.kind {
        Kind::Bool => match value.to_ascii_lowercase().as_str() {
            "true" | "false" => Ok(()),
            _ => Err(format!("{name} must be true or false")),
        },
        Kind::Int(min) => int(min, i64::from(i32::MAX)),
        Kind::IntIn(ranges) => {
            let v: i64 = value.trim().parse().map_err(|_| format!("{name} must be an integer"))?;
            if level_allowed(ranges, v) {
                return Ok(());
            }
            Err(format!("{name} must be in {}, got {v}", describe_levels(ranges)))
        }
        Kind::Long(min) => int(min, i64::MAX),
        Kind::Ratio => match value.trim().parse::<f64>() {
            Ok(v) if (0.0..=1.0).contains(&v) => Ok(()),
            _ => Err(format!("{name} must be a number between 0 and 1")),
        },
        Kind::Enum(words) => {
            if words.iter().any(|w| w.eq_ignore_ascii_case(value.trim())) {
                Ok(())
            } else {
                Err(format!("{name} must be one of {}", words.join(", ")))
            }
        }
        Kind::ReplicaList => validate_replicas(value),
        Kind::HostCounts => parse_host_counts(value).map(|_| ()),
        Kind::List(words) => {
            let items: Vec<&str> = value.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
            if items.is_empty() || items.iter().any(|i| !words.contains(i)) {
                Err(format!("{name} must be a list of {}", words.join(", ")))
            } else {
                Ok(())
            }
        }
    }
}

/// Checks a throttled-replicas value: empty, `*`, or `partition:broker` pairs.
pub fn validate_replicas(value: &str) -> Result<(), String> {
    let value = value.trim();
    if value.is_empty() || value == "*" {
        return Ok(());
    }
    for item in value.split(',') {
        let ok = item
            .trim()
            .split_once(':')
            .is_some_and(|(p, b)| p.trim().parse::<u32>().is_ok() && b.trim().parse::<u32>().is_ok());
        if !ok {
            return Err(format!(
                "must be * or a list of partition:broker pairs such as 0:101,1:102, got {item:?}"
            ));
        }
    }
    Ok(())
}

/// `host:count,ip:count` into addresses and counts (every address a host name has).
pub fn parse_host_counts(text: &str) -> Result<HashMap<IpAddr, usize>, String> {
    let mut out = HashMap::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (host, count) = entry.rsplit_once(':').ok_or_else(|| format!("{entry:?} is not host:count"))?;
        let count: usize =
            count.trim().parse().map_err(|_| format!("{entry:?}: the count is not a number"))?;
        let host = host.trim().trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = host.parse::<IpAddr>() {
            out.insert(ip, count);
            continue;
        }
        let addrs = (host, 0).to_socket_addrs().map_err(|e| format!("cannot resolve {host:?}: {e}"))?;
        for a in addrs {
            out.insert(a.ip(), count);
        }
    }
    Ok(out)
}
