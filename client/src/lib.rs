//! Strata's Kafka client: async on tokio, speaking only the Kafka wire protocol through
//! `strata-protocol`, so it works against any Kafka-compatible broker, not only Strata.
//!
//! - [`Client`]: the shared core, a view of the cluster (brokers, topics, partition
//!   leaders) and one pipelined [`connection::Connection`] per broker; the producer,
//!   consumer and admin are built on it;
//! - [`ClientConfig`]: the settings, set by Kafka's own key names (`bootstrap.servers`,
//!   `request.timeout.ms`, ...);
//! - [`producer::Producer`]: the Kafka producer (batching, compression, retries,
//!   idempotence, transactions);
//! - [`Error`]: every failure, with Kafka's error codes mapped in one place
//!   ([`error::retriable`], [`error::refreshes_metadata`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), strata_client::Error> {
//! use strata_client::{Client, ClientConfig};
//! let client = Client::connect(ClientConfig::new("127.0.0.1:9092")).await?;
//! let cluster = client.refresh_metadata(&["orders".to_string()]).await?;
//! println!("{} brokers", cluster.brokers.len());
//! # Ok(()) }
//! ```

pub mod admin;
pub mod client;
pub mod config;
pub mod connection;
pub mod consumer;
pub mod consumer_protocol;
pub mod error;
pub mod metadata;
pub mod producer;
pub mod stream;
pub mod types;

pub use client::{Client, CoordinatorKind};
pub use config::ClientConfig;
pub use error::{Error, Result};
pub use metadata::{BrokerAddress, Cluster, LeaderHint, PartitionInfo, TopicInfo};
pub use strata_protocol::ErrorCode;
pub use types::{ConsumerGroupMetadata, Header, IsolationLevel, OffsetAndMetadata, TopicPartition};
