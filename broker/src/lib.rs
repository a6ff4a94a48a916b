//! The Strata broker: configuration, the network server, one handler per Kafka API,
//! and the partition state that sits on top of the storage crate.
//!
//! The binary (`src/bin/strata.rs`) only parses arguments and calls [`start`]; tests
//! start brokers in-process the same way.

mod background;
pub mod broker;
pub mod clock;
pub mod config;
pub mod connection;
pub mod controller;
mod coordinator_leadership;
pub mod errors;
pub mod fetch_session;
pub mod group;
pub mod group_service;
pub mod handlers;
mod internal_topics;
pub mod lifecycle;
pub mod limits;
mod log_cleaner;
pub mod markers;
pub mod metadata;
pub mod metrics;

pub mod net;
pub mod producer_ids;
pub mod replica;
pub mod replication;
pub mod server;
pub mod topics;
pub mod txn;
pub mod txn_service;

pub use broker::Broker;
pub use config::BrokerConfig;
pub use server::RunningServer;

/// Opens the data directory and starts serving `config`'s listeners.
pub async fn start(config: BrokerConfig) -> anyhow::Result<RunningServer> {
    limits::raise_open_files_limit();
    let broker = tokio::task::spawn_blocking(move || Broker::open(config)).await??;
    Ok(server::start(broker).await?)
}
