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
mod coordinator;
mod errors;
mod fetch_session;
mod handlers;
mod lifecycle;
mod limits;
mod log_cleaner;
mod metadata;
mod metrics;
mod net;
mod node;
mod producer_ids;
mod replica;
mod replication;
mod server;
#[cfg(test)]
mod sim;
mod topics;

pub use broker::Broker;
pub use config::BrokerConfig;
pub use server::RunningServer;

/// Opens the data directory and starts serving `config`'s listeners.
pub async fn start(config: BrokerConfig) -> anyhow::Result<RunningServer> {
    limits::raise_open_files_limit();
    let node = tokio::task::spawn_blocking(move || node::Node::open(config)).await??;
    Ok(server::start(node).await?)
}
