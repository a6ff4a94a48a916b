//! The Raft transport between voters: each Raft RPC travels as one StrataRaft request
//! (Strata's own API key, only on the controller listener) over a pipelined connection
//! per voter.

use super::raft::{RaftTransport, RpcKind, TransportError};
use crate::net::{NetError, PeerClient};
use bytes::Bytes;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use strata_protocol::messages::strata_raft::StrataRaftRequest;
use strata_protocol::{RequestBody, ResponseBody};

/// Connections to the other voters, one per voter.
#[derive(Debug)]
pub struct PeerRaftTransport {
    node_id: i32,
    clients: Mutex<HashMap<u64, Arc<PeerClient>>>,
}

impl PeerRaftTransport {
    /// A transport for voter `node_id`.
    pub fn new(node_id: i32) -> PeerRaftTransport {
        PeerRaftTransport { node_id, clients: Mutex::new(HashMap::new()) }
    }

    fn client(&self, target: u64, addr: &str) -> Arc<PeerClient> {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        let entry = clients.entry(target).or_insert_with(|| {
            Arc::new(PeerClient::new(addr.to_string(), format!("strata-controller-{}", self.node_id)))
        });
        if entry.addr() != addr {
            *entry =
                Arc::new(PeerClient::new(addr.to_string(), format!("strata-controller-{}", self.node_id)));
        }
        entry.clone()
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
        let client = self.client(target, addr);
        let addr = addr.to_string();
        Box::pin(async move {
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
