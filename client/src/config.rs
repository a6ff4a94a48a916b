//! The settings every client shares, under Kafka's own key names, so a Kafka user can
//! carry a `client.properties` over unchanged. The producer and consumer configs embed
//! a [`ClientConfig`] and hand it the keys they do not know themselves.

use crate::error::{Error, Result};
use std::time::Duration;

/// Connection and metadata settings shared by producer, consumer and admin.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `bootstrap.servers`: host:port entries tried in turn until one answers.
    pub bootstrap_servers: Vec<String>,
    /// `client.id`, sent in every request header.
    pub client_id: String,
    /// `request.timeout.ms`: how long a request may wait for its response before the
    /// connection is closed and the request fails (retriably).
    pub request_timeout: Duration,
    /// `socket.connection.setup.timeout.ms`.
    pub connect_timeout: Duration,
    /// `retry.backoff.ms`: the first pause before a retry.
    pub retry_backoff: Duration,
    /// `retry.backoff.max.ms`: retries back off exponentially up to this.
    pub retry_backoff_max: Duration,
    /// `metadata.max.age.ms`: metadata older than this is refreshed before use.
    pub metadata_max_age: Duration,
    /// `receive.message.max.bytes`: the largest response frame accepted.
    pub max_response_bytes: usize,
}

impl Default for ClientConfig {
    fn default() -> ClientConfig {
        ClientConfig {
            bootstrap_servers: vec!["127.0.0.1:9092".to_string()],
            client_id: "strata-client".to_string(),
            request_timeout: Duration::from_millis(30_000),
            connect_timeout: Duration::from_millis(10_000),
            retry_backoff: Duration::from_millis(100),
            retry_backoff_max: Duration::from_millis(1_000),
            metadata_max_age: Duration::from_millis(300_000),
            max_response_bytes: 100 << 20,
        }
    }
}

impl ClientConfig {
    /// Defaults with `bootstrap` (a comma-separated host:port list).
    pub fn new(bootstrap: &str) -> ClientConfig {
        ClientConfig { bootstrap_servers: split_list(bootstrap), ..ClientConfig::default() }
    }

    /// Sets one entry by its Kafka key. Returns `Ok(false)` for a key this config does
    /// not know (the caller may know it), an error for a known key with a bad value.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool> {
        match key {
            "bootstrap.servers" => {
                let servers = split_list(value);
                if servers.is_empty() {
                    return Err(Error::config("bootstrap.servers is empty"));
                }
                self.bootstrap_servers = servers;
            }
            "client.id" => self.client_id = value.to_string(),
            "request.timeout.ms" => self.request_timeout = millis(key, value)?,
            "socket.connection.setup.timeout.ms" => self.connect_timeout = millis(key, value)?,
            "retry.backoff.ms" => self.retry_backoff = millis(key, value)?,
            "retry.backoff.max.ms" => self.retry_backoff_max = millis(key, value)?,
            "metadata.max.age.ms" => self.metadata_max_age = millis(key, value)?,
            "receive.message.max.bytes" | "fetch.max.bytes.response" => {
                self.max_response_bytes = number(key, value)?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The pause before retry number `attempt` (0-based): `retry.backoff.ms` doubling
    /// up to `retry.backoff.max.ms`, with +-20 % jitter as Kafka's clients add.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let base = self.retry_backoff.as_millis() as u64;
        let max = self.retry_backoff_max.as_millis().max(1) as u64;
        let ms = base.saturating_mul(1u64 << attempt.min(20)).min(max);
        let jitter = 0.8 + rand::random::<f64>() * 0.4;
        Duration::from_millis(((ms as f64) * jitter) as u64)
    }
}

/// Splits a comma-separated list, trimming entries and dropping empty ones.
pub fn split_list(value: &str) -> Vec<String> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

/// Parses a number setting.
pub fn number<T: std::str::FromStr>(key: &str, value: &str) -> Result<T> {
    value.trim().parse().map_err(|_| Error::config(format!("{key}={value} is not a valid number")))
}

/// Parses a millisecond setting.
pub fn millis(key: &str, value: &str) -> Result<Duration> {
    number::<u64>(key, value).map(Duration::from_millis)
}

/// Parses a boolean setting (`true` / `false`).
pub fn boolean(key: &str, value: &str) -> Result<bool> {
    match value.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(Error::config(format!("{key}={value} is not true or false"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_keys_set_the_fields_and_unknown_keys_are_left_to_the_caller() {
        let mut c = ClientConfig::new(" a:1, b:2 ,");
        assert_eq!(c.bootstrap_servers, vec!["a:1", "b:2"]);
        assert!(c.set("request.timeout.ms", "1500").unwrap());
        assert_eq!(c.request_timeout, Duration::from_millis(1500));
        assert!(!c.set("linger.ms", "5").unwrap(), "a producer key");
        assert!(c.set("retry.backoff.ms", "soon").is_err());
        assert!(c.set("bootstrap.servers", " , ").is_err());
    }

    #[test]
    fn backoff_doubles_up_to_the_maximum() {
        let c = ClientConfig::default();
        let first = c.backoff(0).as_millis();
        assert!((80..=120).contains(&first), "{first}");
        let late = c.backoff(30).as_millis();
        assert!((800..=1200).contains(&late), "{late}");
    }
}
