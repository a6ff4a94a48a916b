//! What a handler knows of the connection a request came on: its listener and peer.
//! Here, not in `connection.rs`, so that handlers need nothing of the connection loop.

use std::net::SocketAddr;
use std::sync::Arc;

/// Which API table a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenerKind {
    /// A client listener (`PLAINTEXT`, the inter-broker listener): the Kafka APIs.
    Broker,
    /// A controller listener (`controller.listener.names`): the Raft RPCs and the
    /// broker-to-controller APIs.
    Controller,
}

/// Where a request came from, for handlers that answer per listener (Metadata and
/// FindCoordinator return the endpoints of the listener the client used).
#[derive(Debug, Clone)]
pub struct RequestContext {
    /// The client's address.
    pub peer: SocketAddr,
    /// The listener's name.
    pub listener: Arc<str>,
    /// The listener's kind.
    pub kind: ListenerKind,
}
