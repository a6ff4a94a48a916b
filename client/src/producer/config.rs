//! The producer's settings under Kafka's key names and defaults (the Java producer's
//! `ProducerConfig`), validated once into typed fields. Keys the producer does not know
//! go to the embedded [`ClientConfig`]; a key neither knows is an error naming it.

use crate::config::{boolean, millis, number, ClientConfig};
use crate::error::{Error, Result};
use std::time::Duration;
use strata_protocol::records::{
    describe_levels, level_allowed, Compression, GZIP_LEVELS, LZ4_LEVELS, ZSTD_LEVELS,
};

/// `acks`: how many replicas must have a batch before the leader answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// `acks=0`: no response at all; offsets are unknown (-1).
    None,
    /// `acks=1`: the leader wrote it.
    Leader,
    /// `acks=all` (`-1`): every in-sync replica has it; required by idempotence.
    All,
}

impl Acks {
    /// The wire value of Produce's `acks`.
    ///
    /// ```
    /// use strata_client::producer::Acks;
    /// assert_eq!(Acks::All.as_i16(), -1);
    /// ```
    pub fn as_i16(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
}

/// Everything a [`crate::producer::Producer`] is configured with.
///
/// ```
/// use strata_client::producer::ProducerConfig;
/// let mut config = ProducerConfig::new("127.0.0.1:9092");
/// config.set("linger.ms", "20").unwrap();
/// config.set("compression.type", "zstd").unwrap();
/// config.set("client.id", "orders").unwrap(); // handed to ClientConfig
/// assert!(config.set("no.such.key", "1").is_err());
/// assert_eq!(config.batch_size, 16384);
/// ```
#[derive(Debug, Clone)]
pub struct ProducerConfig {
    /// Connection and metadata settings.
    pub client: ClientConfig,
    /// `acks` (default all).
    pub acks: Acks,
    /// `linger.ms` (default 5): how long a batch waits for more records.
    pub linger: Duration,
    /// `batch.size` (default 16384): bytes of records after which a batch is sent.
    pub batch_size: usize,
    /// `buffer.memory` (default 32 MiB): bytes of records buffered before `send` blocks.
    pub buffer_memory: usize,
    /// `compression.type` (default none).
    pub compression: Compression,
    /// `compression.gzip.level` (KIP-390; 1-9, default -1: the codec's own, 6).
    pub gzip_level: i32,
    /// `compression.lz4.level` (1-17, default 9): accepted; lz4 has one level here.
    pub lz4_level: i32,
    /// `compression.zstd.level` (-131072..22, default 3).
    pub zstd_level: i32,
    /// `max.in.flight.requests.per.connection` (default 5; at most 5 with idempotence).
    pub max_in_flight: usize,
    /// `retries` (default `i32::MAX`): sends of a batch after the first, bounded anyway by
    /// `delivery.timeout.ms`.
    pub retries: u32,
    /// `delivery.timeout.ms` (default 120000): from `send` to success or failure.
    pub delivery_timeout: Duration,
    /// `enable.idempotence` (default true).
    pub enable_idempotence: bool,
    /// `transactional.id` (default none); implies idempotence.
    pub transactional_id: Option<String>,
    /// `transaction.timeout.ms` (default 60000).
    pub transaction_timeout: Duration,
    /// `max.request.size` (default 1 MiB): the largest record and Produce request.
    pub max_request_size: usize,
    /// `max.block.ms` (default 60000): how long `send` waits for metadata or buffer
    /// memory, and transactional calls for their answers.
    pub max_block: Duration,
    /// `partitioner.ignore.keys` (default false): keyed records partitioned as if unkeyed.
    pub partitioner_ignore_keys: bool,
    /// `transaction.two.phase.commit.enable` (default false): the transactions take part
    /// in an external two-phase commit (KIP-939): the broker never aborts them for their
    /// age, and a restarted producer may keep a prepared one
    /// ([`crate::producer::Producer::init_transactions_keeping_prepared`]).
    pub two_phase_commit: bool,
    /// Whether `enable.idempotence` was set explicitly: Kafka then refuses settings that
    /// contradict it instead of quietly turning idempotence off.
    pub idempotence_explicit: bool,
}

impl Default for ProducerConfig {
    fn default() -> ProducerConfig {
        ProducerConfig {
            client: ClientConfig::default(),
            acks: Acks::All,
            linger: Duration::from_millis(5),
            batch_size: 16384,
            buffer_memory: 32 << 20,
            compression: Compression::None,
            gzip_level: -1,
            lz4_level: 9,
            zstd_level: 3,
            max_in_flight: 5,
            retries: i32::MAX as u32,
            delivery_timeout: Duration::from_millis(120_000),
            enable_idempotence: true,
            transactional_id: None,
            transaction_timeout: Duration::from_millis(60_000),
            max_request_size: 1 << 20,
            max_block: Duration::from_millis(60_000),
            partitioner_ignore_keys: false,
            two_phase_commit: false,
            idempotence_explicit: false,
        }
    }
}

impl ProducerConfig {
    /// Defaults with `bootstrap` (a comma-separated host:port list).
    pub fn new(bootstrap: &str) -> ProducerConfig {
        ProducerConfig { client: ClientConfig::new(bootstrap), ..ProducerConfig::default() }
    }

    /// Sets one entry by its Kafka key; keys not the producer's go to [`ClientConfig::set`].
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        match key {
            "acks" => {
                self.acks = match value.trim() {
                    "0" => Acks::None,
                    "1" => Acks::Leader,
                    "all" | "-1" => Acks::All,
                    _ => return Err(Error::config(format!("acks={value} is not 0, 1, all or -1"))),
                }
            }
            "linger.ms" => self.linger = millis(key, value)?,
            "batch.size" => self.batch_size = number(key, value)?,
            "buffer.memory" => self.buffer_memory = number(key, value)?,
            "compression.type" => self.compression = compression(value)?,
            "compression.gzip.level" => self.gzip_level = level(key, value, GZIP_LEVELS)?,
            "compression.lz4.level" => self.lz4_level = level(key, value, LZ4_LEVELS)?,
            "compression.zstd.level" => self.zstd_level = level(key, value, ZSTD_LEVELS)?,
            "max.in.flight.requests.per.connection" => {
                self.max_in_flight = number(key, value)?;
                if self.max_in_flight == 0 {
                    return Err(Error::config(format!("{key}={value} must be at least 1")));
                }
            }
            "retries" => self.retries = number(key, value)?,
            "delivery.timeout.ms" => self.delivery_timeout = millis(key, value)?,
            "enable.idempotence" => {
                self.enable_idempotence = boolean(key, value)?;
                self.idempotence_explicit = true;
            }
            "transactional.id" => self.transactional_id = Some(value.to_string()).filter(|v| !v.is_empty()),
            "transaction.timeout.ms" => self.transaction_timeout = millis(key, value)?,
            "max.request.size" => self.max_request_size = number(key, value)?,
            "max.block.ms" => self.max_block = millis(key, value)?,
            "partitioner.ignore.keys" => self.partitioner_ignore_keys = boolean(key, value)?,
            "transaction.two.phase.commit.enable" => self.two_phase_commit = boolean(key, value)?,
            _ => {
                if !self.client.set(key, value)? {
                    return Err(Error::config(format!("unknown producer setting {key}")));
                }
            }
        }
        Ok(())
    }

    /// The settings after Kafka's cross-checks: a transactional id needs idempotence;
    /// idempotence needs `acks=all`, `retries > 0` and at most 5 in flight, and is
    /// turned off quietly when it was only the default.
    pub fn validated(&self) -> Result<ProducerConfig> {
        let mut c = self.clone();
        let conflict = c.acks != Acks::All || c.retries == 0 || c.max_in_flight > 5;
        if c.transactional_id.is_some() {
            if c.idempotence_explicit && !c.enable_idempotence {
                return Err(Error::config("transactional.id requires enable.idempotence=true"));
            }
            if conflict {
                return Err(Error::config(
                    "transactional.id requires acks=all, retries > 0 and max.in.flight.requests.per.connection <= 5",
                ));
            }
            c.enable_idempotence = true;
        } else if c.two_phase_commit {
            return Err(Error::config("transaction.two.phase.commit.enable requires a transactional.id"));
        } else if c.enable_idempotence && conflict {
            if c.idempotence_explicit {
                return Err(Error::config(
                    "enable.idempotence=true requires acks=all, retries > 0 and max.in.flight.requests.per.connection <= 5",
                ));
            }
            c.enable_idempotence = false;
        }
        if c.batch_size == 0 {
            c.batch_size = 1;
        }
        Ok(c)
    }
}

impl ProducerConfig {
    /// The level batches are compressed at: the configured codec's, `None` for its default.
    pub fn compression_level(&self) -> Option<i32> {
        match self.compression {
            Compression::Gzip => Some(self.gzip_level).filter(|&l| l != -1),
            Compression::Zstd => Some(self.zstd_level),
            _ => None,
        }
    }
}

/// A codec level in one of Kafka's ranges for it.
fn level(key: &str, value: &str, ranges: &[(i32, i32)]) -> Result<i32> {
    let v: i32 =
        value.trim().parse().map_err(|_| Error::config(format!("{key}={value} is not an integer")))?;
    if level_allowed(ranges, i64::from(v)) {
        return Ok(v);
    }
    Err(Error::config(format!("{key}={value} is not in {}", describe_levels(ranges))))
}

fn compression(value: &str) -> Result<Compression> {
    Ok(match value.trim() {
        "none" => Compression::None,
        "gzip" => Compression::Gzip,
        "snappy" => Compression::Snappy,
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        _ => {
            return Err(Error::config(format!(
                "compression.type={value} is not none, gzip, snappy, lz4 or zstd"
            )))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_keys_and_defaults() {
        let mut c = ProducerConfig::new("h:1");
        assert_eq!(c.acks, Acks::All);
        assert_eq!(c.linger, Duration::from_millis(5));
        assert_eq!(c.buffer_memory, 32 << 20);
        assert_eq!(c.max_request_size, 1 << 20);
        assert!(c.enable_idempotence);
        c.set("acks", "1").unwrap();
        assert_eq!(c.acks, Acks::Leader);
        c.set("acks", "-1").unwrap();
        assert_eq!(c.acks, Acks::All);
        assert!(c.set("acks", "2").is_err());
        c.set("compression.type", "lz4").unwrap();
        assert_eq!(c.compression, Compression::Lz4);
        assert!(c.set("compression.type", "brotli").is_err());
        assert_eq!(c.compression_level(), None, "lz4 has one level");
        c.set("compression.type", "zstd").unwrap();
        assert_eq!(c.compression_level(), Some(3));
        c.set("compression.zstd.level", "19").unwrap();
        assert_eq!(c.compression_level(), Some(19));
        c.set("compression.type", "gzip").unwrap();
        assert_eq!(c.compression_level(), None, "gzip's -1 is its default");
        c.set("compression.gzip.level", "1").unwrap();
        assert_eq!(c.compression_level(), Some(1));
        for (k, v) in [
            ("compression.gzip.level", "0"),
            ("compression.zstd.level", "23"),
            ("compression.lz4.level", "x"),
        ] {
            assert!(c.set(k, v).is_err(), "{k}={v}");
        }
        c.set("request.timeout.ms", "100").unwrap();
        assert_eq!(c.client.request_timeout, Duration::from_millis(100));
        let e = c.set("lingr.ms", "1").unwrap_err().to_string();
        assert!(e.contains("lingr.ms"), "{e}");
    }

    #[test]
    fn idempotence_is_dropped_quietly_unless_asked_for() {
        let mut c = ProducerConfig::new("h:1");
        c.set("acks", "1").unwrap();
        assert!(!c.validated().unwrap().enable_idempotence);
        c.set("enable.idempotence", "true").unwrap();
        assert!(c.validated().is_err());
        let mut t = ProducerConfig::new("h:1");
        t.set("transactional.id", "t").unwrap();
        t.set("max.in.flight.requests.per.connection", "6").unwrap();
        assert!(t.validated().is_err());
        t.set("max.in.flight.requests.per.connection", "5").unwrap();
        assert!(t.validated().unwrap().enable_idempotence);
    }
}
