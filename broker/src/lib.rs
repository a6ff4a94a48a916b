//! The Strata broker: configuration, the network server, one handler per Kafka API,
//! and the partition state that sits on top of the storage crate.
//!
//! The binary (`src/bin/strata.rs`) only parses arguments and calls [`start`]; tests
//! start brokers in-process the same way.

mod background;
mod broker;
mod clock;
pub mod config;
mod connection;
mod controller;
mod coordinator_leadership;
mod errors;
mod fetch_session;
mod group;
mod group_service;
mod handlers;
mod internal_topics;
mod lifecycle;
mod limits;
mod log_cleaner;
mod markers;
mod metadata;
mod metrics;
mod net;
mod producer_ids;
mod replica;
mod replication;
mod server;
#[cfg(test)]
mod sim;
mod topics;
mod txn;
mod txn_service;

pub use broker::Broker;
pub use config::BrokerConfig;
pub use server::RunningServer;

/// Opens the data directory and starts serving `config`'s listeners.
pub async fn start(config: BrokerConfig) -> anyhow::Result<RunningServer> {
    limits::raise_open_files_limit();
    let broker = tokio::task::spawn_blocking(move || Broker::open(config)).await??;
    Ok(server::start(broker).await?)
}
