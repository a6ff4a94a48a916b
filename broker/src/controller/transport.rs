//! The Raft transport between voters: each Raft RPC travels as one StrataRaft request
//! (Strata's own API key, only on the controller listener) over a pipelined connection
//! per voter.

use super::raft::{RaftTransport, RpcKind, TransportError};
use crate::net::{NetError, PeerClient};
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use strata_protocol::messages::strata_raft::StrataRaftRequest;
use strata_protocol::{RequestBody, ResponseBody};

/// Connections to the other voters, one per voter, at the addresses this node's
/// `controller.quorum.voters` gives them (the Raft membership only names voters, so
/// each node may reach the others at addresses of its own, a proxy's for instance).
#[derive(Debug)]
pub struct PeerRaftTransport {
    clients: HashMap<u64, Arc<PeerClient>>,
}

impl PeerRaftTransport {
    /// A transport for voter `node_id` to `voters` (id → "host:port").
    pub fn new(node_id: i32, voters: &BTreeMap<i32, String>) -> PeerRaftTransport {
        let clients = voters
            .iter()
            .filter(|(id, _)| **id != node_id)
            .map(|(id, addr)| {
                let client = PeerClient::new(addr.clone(), format!("strata-controller-{node_id}"));
                (*id as u64, Arc::new(client))
            })
            .collect();
        PeerRaftTransport { clients }
    }
}

impl RaftTransport for PeerRaftTransport {
    fn call(
        &self,
        target: u64,
        addr: &str,
        kind: RpcKind,
        payload: Bytes,
        timeout: Duration,
    ) -> Pin<Box<dyn Future<Output = Result<Bytes, TransportError>> + Send + '_>> {
        let client = self.clients.get(&target).cloned();
        let addr = client.as_ref().map_or_else(|| addr.to_string(), |c| c.addr().to_string());
        Box::pin(async move {
            let Some(client) = client else {
                return Err(TransportError::Unreachable {
                    target,
                    addr,
                    reason: "not a configured voter".into(),
                });
            };
            let request = RequestBody::StrataRaft(StrataRaftRequest { kind: kind as i8, payload });
            match client.call(request, 0, timeout).await {
                Ok(ResponseBody::StrataRaft(r)) if r.error_code == 0 => Ok(r.payload),
                Ok(ResponseBody::StrataRaft(r)) => {
                    Err(TransportError::Refused { target, message: format!("error code {}", r.error_code) })
                }
                Ok(other) => Err(TransportError::Refused {
                    target,
                    message: format!("unexpected {:?}", other.api_key()),
                }),
                Err(NetError::Connect { reason, .. }) => {
                    Err(TransportError::Unreachable { target, addr, reason })
                }
                Err(NetError::Timeout { .. }) => {
                    Err(TransportError::Timeout { target, timeout_ms: timeout.as_millis() as u64 })
                }
                Err(e) => Err(TransportError::Io { target, source: std::io::Error::other(e.to_string()) }),
            }
        })
    }
}
