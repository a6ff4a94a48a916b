//! StrataRaft (API key 1000): one Raft RPC between the controllers of a Strata cluster.
//!
//! **Strata's own API, not Kafka's.** It travels only between Strata nodes on the
//! controller listener and is never advertised to clients in ApiVersions. Its key is far
//! above every key Kafka assigns (they are below 100), so a Kafka client or broker that
//! reaches the controller listener by mistake gets an unknown-API answer, never a
//! misread message.
//!
//! The codec does not look inside the payload: the broker serialises openraft's request
//! (or response) for the RPC named by `kind` into it, so the Raft messages can change
//! with the openraft version without a protocol change. Version 0 is flexible: compact
//! bytes, so a payload costs a one- to five-byte length.

use bytes::Bytes;

/// API key of StrataRaft: Strata's own, never used by Kafka.
pub const API_KEY: i16 = 1000;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 0);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 0;

/// Which Raft RPC a [`StrataRaftRequest`] carries, as its `kind` byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i8)]
pub enum RaftRpcKind {
    /// Log replication and heartbeats from the leader (openraft's `AppendEntriesRequest`).
    AppendEntries = 0,
    /// A candidate asking for votes (openraft's `VoteRequest`).
    Vote = 1,
    /// A snapshot chunk sent to a follower too far behind the log
    /// (openraft's `InstallSnapshotRequest`).
    InstallSnapshot = 2,
}

impl RaftRpcKind {
    /// The kind a `kind` byte names, or `None` for a byte no Strata version sends (the
    /// receiver answers with an error instead of guessing).
    pub fn from_i8(kind: i8) -> Option<RaftRpcKind> {
        match kind {
            0 => Some(RaftRpcKind::AppendEntries),
            1 => Some(RaftRpcKind::Vote),
            2 => Some(RaftRpcKind::InstallSnapshot),
            _ => None,
        }
    }
}

impl From<RaftRpcKind> for i8 {
    fn from(kind: RaftRpcKind) -> i8 {
        kind as i8
    }
}

crate::message! {
    /// StrataRaftRequest, version 0.
    pub struct StrataRaftRequest {
        /// Which RPC `payload` holds: a [`RaftRpcKind`] (0 AppendEntries, 1 Vote,
        /// 2 InstallSnapshot).
        kind: i8 [0..],
        /// The serialised openraft request; opaque to the codec.
        payload: Bytes [0..],
    }
    /// StrataRaftResponse, version 0.
    pub struct StrataRaftResponse {
        /// A Kafka error code; 0 when `payload` holds the RPC's answer.
        error_code: i16 [0..],
        /// The serialised openraft response to the request's RPC (empty on error).
        payload: Bytes [0..],
    }
}
