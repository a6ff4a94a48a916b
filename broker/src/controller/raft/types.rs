//! The openraft type configuration of the metadata quorum, and short names for the
//! openraft types the rest of `controller::raft` uses. Nothing outside this folder sees
//! them: the broker talks to [`super::MetadataQuorum`].

use crate::metadata::{ApplyOutcome, MetadataBatch};
use std::io::Cursor;

openraft::declare_raft_types!(
    /// The metadata log: each entry's application data is one [`MetadataBatch`] (applied
    /// atomically), its response the batch's [`ApplyOutcome`]; nodes are `node.id`s with
    /// the `host:port` of their controller listener; snapshots are small JSON documents
    /// held in memory.
    pub(crate) TypeConfig:
        D = MetadataBatch,
        R = ApplyOutcome,
        NodeId = u64,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A running Raft node of the metadata quorum.
pub(crate) type Raft = openraft::Raft<TypeConfig>;
/// A metadata log entry.
pub(crate) type Entry = openraft::Entry<TypeConfig>;
/// The position of an entry: (leader id, index).
pub(crate) type LogId = openraft::LogId<u64>;
/// A persisted vote (term, voted-for, committed).
pub(crate) type Vote = openraft::Vote<u64>;
/// A voter's address record.
pub(crate) type Node = openraft::BasicNode;
/// The membership and the log id it was written at.
pub(crate) type StoredMembership = openraft::StoredMembership<u64, Node>;
/// What a snapshot covers.
pub(crate) type SnapshotMeta = openraft::SnapshotMeta<u64, Node>;
/// A snapshot as openraft moves it around.
pub(crate) type Snapshot = openraft::storage::Snapshot<TypeConfig>;
/// A storage failure as openraft expects it.
pub(crate) type StorageError = openraft::StorageError<u64>;
