//! Raft RPCs over an abstract transport: the client side openraft drives
//! ([`NetworkFactory`]) and the server side the controller listener calls
//! ([`RaftRpcServer`]).
//!
//! The transport only moves opaque payloads, so this layer needs no sockets and the tests
//! route RPCs between in-process quorums. A request payload is the openraft request type
//! as JSON; the answer payload is `Result<response, RaftError>` as JSON.

use super::types::{Raft, TypeConfig};
use bytes::Bytes;
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Timeout, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, RPCTypes};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// Which Raft RPC a payload carries (the wire's `kind`: 0 AppendEntries, 1 Vote,
/// 2 InstallSnapshot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i8)]
pub enum RpcKind {
    /// Log replication and heartbeats, leader to follower.
    AppendEntries = 0,
    /// A candidate asking for a vote.
    Vote = 1,
    /// One chunk of a snapshot, leader to a follower that lags behind the purged log.
    InstallSnapshot = 2,
}

impl RpcKind {
    /// The kind a wire value names, if any.
    pub fn from_i8(kind: i8) -> Option<RpcKind> {
        match kind {
            0 => Some(RpcKind::AppendEntries),
            1 => Some(RpcKind::Vote),
            2 => Some(RpcKind::InstallSnapshot),
            _ => None,
        }
    }
}

/// Why a transport call failed. The variant decides how Raft retries: a voter that is
/// [`TransportError::Unreachable`] is backed off, anything else is retried at the next
/// heartbeat.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// Nothing listens at the address, or it cannot be routed to (connection refused).
    #[error("voter {target} at {addr} is unreachable: {reason}")]
    Unreachable {
        /// The voter.
        target: u64,
        /// Its controller listener.
        addr: String,
        /// Why.
        reason: String,
    },
    /// No answer within the timeout.
    #[error("no answer from voter {target} within {timeout_ms} ms")]
    Timeout {
        /// The voter.
        target: u64,
        /// The timeout given to the call.
        timeout_ms: u64,
    },
    /// The connection failed during the call.
    #[error("connection to voter {target} failed: {source}")]
    Io {
        /// The voter.
        target: u64,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
    /// The voter answered with an error frame instead of a Raft answer (it could not
    /// decode the request, or it is not a controller).
    #[error("voter {target} refused the request: {message}")]
    Refused {
        /// The voter.
        target: u64,
        /// Its error message.
        message: String,
    },
}

/// Sends one serialised Raft RPC to the voter at `addr` and returns its serialised answer.
pub trait RaftTransport: Send + Sync + 'static {
    /// Sends `payload` (an RPC of `kind`) to voter `target` at `addr` and waits at most
    /// `timeout` for the answer payload.
    fn call(
        &self,
        target: u64,
        addr: &str,
        kind: RpcKind,
        payload: Bytes,
        timeout: Duration,
    ) -> Pin<Box<dyn Future<Output = Result<Bytes, TransportError>> + Send + '_>>;
}

/// Why an incoming Raft RPC could not be served. The answer to a well-formed RPC is
/// always a payload, even when Raft refuses it (that refusal is inside the payload).
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The frame's `kind` is not a Raft RPC this version knows.
    #[error("unknown raft rpc kind {0}")]
    UnknownKind(i8),
    /// The payload is not a valid request of its kind.
    #[error("malformed {kind:?} payload: {source}")]
    Decode {
        /// The RPC.
        kind: RpcKind,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// Encoding the answer failed (a bug).
    #[error("encoding the {kind:?} answer: {source}")]
    Encode {
        /// The RPC.
        kind: RpcKind,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// Raft did not answer within the request timeout: its core is waiting on a write
    /// that cannot complete yet (a full metadata disk). The caller's Raft retries.
    #[error("raft did not answer the {kind:?} within {timeout_ms} ms (its log cannot be written)")]
    Busy {
        /// The RPC.
        kind: RpcKind,
        /// `controller.quorum.request.timeout.ms`.
        timeout_ms: u64,
    },
}

/// Serves incoming Raft RPCs for one quorum member; cheap to clone, so the controller
/// listener can keep one per connection.
#[derive(Clone)]
pub struct RaftRpcServer {
    raft: Raft,
    timeout: Duration,
}

impl std::fmt::Debug for RaftRpcServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftRpcServer").finish_non_exhaustive()
    }
}

impl RaftRpcServer {
    pub(crate) fn new(raft: Raft, timeout: Duration) -> RaftRpcServer {
        RaftRpcServer { raft, timeout }
    }

    /// Decodes a request of wire kind `kind`, hands it to Raft and encodes the answer.
    /// A bad payload is an error, never a panic; so is no answer within the timeout.
    pub async fn serve(&self, kind: i8, payload: Bytes) -> Result<Bytes, ServeError> {
        serve_rpc(&self.raft, kind, payload, self.timeout).await
    }
}

fn decode<T: DeserializeOwned>(kind: RpcKind, payload: &[u8]) -> Result<T, ServeError> {
    serde_json::from_slice(payload).map_err(|source| ServeError::Decode { kind, source })
}

fn encode<T: Serialize>(kind: RpcKind, answer: &T) -> Result<Bytes, ServeError> {
    serde_json::to_vec(answer).map(Bytes::from).map_err(|source| ServeError::Encode { kind, source })
}

/// The server side of one Raft RPC (see [`RaftRpcServer::serve`]).
pub(crate) async fn serve_rpc(
    raft: &Raft,
    kind: i8,
    payload: Bytes,
    timeout: Duration,
) -> Result<Bytes, ServeError> {
    let rpc = RpcKind::from_i8(kind).ok_or(ServeError::UnknownKind(kind))?;
    let busy = |_| ServeError::Busy { kind: rpc, timeout_ms: timeout.as_millis() as u64 };
    match rpc {
        RpcKind::AppendEntries => {
            let req: AppendEntriesRequest<TypeConfig> = decode(rpc, &payload)?;
            encode(rpc, &tokio::time::timeout(timeout, raft.append_entries(req)).await.map_err(busy)?)
        }
        RpcKind::Vote => {
            let req: VoteRequest<u64> = decode(rpc, &payload)?;
            encode(rpc, &tokio::time::timeout(timeout, raft.vote(req)).await.map_err(busy)?)
        }
        RpcKind::InstallSnapshot => {
            let req: InstallSnapshotRequest<TypeConfig> = decode(rpc, &payload)?;
            encode(rpc, &tokio::time::timeout(timeout, raft.install_snapshot(req)).await.map_err(busy)?)
        }
    }
}

/// Creates a [`PeerClient`] per voter for openraft.
pub(crate) struct NetworkFactory {
    /// This node, for timeout reports.
    pub(crate) node_id: u64,
    pub(crate) transport: Arc<dyn RaftTransport>,
    /// `controller.quorum.request.timeout.ms`: the longest any one RPC may take.
    pub(crate) request_timeout: Duration,
    /// How long replication to an unreachable voter pauses before trying again.
    pub(crate) backoff: Duration,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerClient;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> PeerClient {
        PeerClient {
            node_id: self.node_id,
            target,
            addr: node.addr.clone(),
            transport: self.transport.clone(),
            request_timeout: self.request_timeout,
            backoff: self.backoff,
        }
    }
}

/// Openraft's connection to one voter, over the [`RaftTransport`].
pub(crate) struct PeerClient {
    node_id: u64,
    target: u64,
    addr: String,
    transport: Arc<dyn RaftTransport>,
    request_timeout: Duration,
    backoff: Duration,
}

type RpcResult<T, E> = Result<T, RPCError<u64, BasicNode, RaftError<u64, E>>>;

impl PeerClient {
    async fn call<Req, Resp, E>(
        &self,
        kind: RpcKind,
        action: RPCTypes,
        req: &Req,
        option: &RPCOption,
    ) -> RpcResult<Resp, E>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let payload = serde_json::to_vec(req).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        // Openraft gives each RPC its own deadline (the heartbeat interval for
        // AppendEntries); never wait longer than the configured request timeout either.
        let timeout = option.hard_ttl().min(self.request_timeout);
        let call = self.transport.call(self.target, &self.addr, kind, Bytes::from(payload), timeout);
        let timed_out =
            || RPCError::Timeout(Timeout { action, id: self.node_id, target: self.target, timeout });
        let answer = match tokio::time::timeout(timeout, call).await {
            Err(_) => return Err(timed_out()),
            Ok(Err(TransportError::Timeout { .. })) => return Err(timed_out()),
            Ok(Err(e @ TransportError::Unreachable { .. })) => {
                return Err(RPCError::Unreachable(Unreachable::new(&e)))
            }
            Ok(Err(e)) => return Err(RPCError::Network(NetworkError::new(&e))),
            Ok(Ok(answer)) => answer,
        };
        let answer: Result<Resp, RaftError<u64, E>> =
            serde_json::from_slice(&answer).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        answer.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<u64>, openraft::error::Infallible> {
        self.call(RpcKind::AppendEntries, RPCTypes::AppendEntries, &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<u64>, InstallSnapshotError> {
        self.call(RpcKind::InstallSnapshot, RPCTypes::InstallSnapshot, &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<u64>, openraft::error::Infallible> {
        self.call(RpcKind::Vote, RPCTypes::Vote, &rpc, &option).await
    }

    fn backoff(&self) -> openraft::network::Backoff {
        openraft::network::Backoff::new(std::iter::repeat(self.backoff))
    }
}
