//! Broker-to-broker networking: a pipelined Kafka-protocol client ([`peer`]) that the
//! replica fetchers, the controller channel and the transaction coordinator use to reach
//! other nodes.

pub mod peer;

pub use peer::{NetError, PeerClient};
