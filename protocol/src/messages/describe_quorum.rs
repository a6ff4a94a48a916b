//! DescribeQuorum (API key 55): the state of the metadata quorum (KIP-595), which
//! `kafka-metadata-quorum.sh describe --status`/`--replication` shows: the leader, its
//! epoch and high watermark, and how far each voter and observer has replicated.
//! Version 1 adds fetch and catch-up times (KIP-836); version 2 adds error messages,
//! replica directory ids and the voters' endpoints (KIP-853).
//!
//! The request and the response each have a `TopicData` and a `PartitionData` in Kafka's
//! spec; the response's are [`TopicDataResponse`] and [`PartitionDataResponse`] here.

use crate::codec::Uuid;

/// API key of DescribeQuorum.
pub const API_KEY: i16 = 55;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 2);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 0;

crate::message! {
    /// An element of `TopicData.partitions`.
    pub struct PartitionData {
        partition_index: i32 [0..],
    }
    /// An element of `DescribeQuorumRequest.topics` (the metadata topic,
    /// `__cluster_metadata`, partition 0).
    pub struct TopicData {
        topic_name: String [0..],
        partitions: Vec<PartitionData> [0..],
    }
    /// DescribeQuorumRequest, versions 0-2.
    pub struct DescribeQuorumRequest {
        topics: Vec<TopicData> [0..],
    }
    /// An element of `PartitionDataResponse.current_voters` and `.observers`: how far
    /// one replica of the metadata log has got.
    pub struct ReplicaState {
        replica_id: i32 [0..],
        /// Added in v2 (KIP-853).
        replica_directory_id: Uuid [2..],
        /// -1 if unknown.
        log_end_offset: i64 [0..],
        /// Leader wall-clock time of the replica's last fetch, -1 if unknown (and for
        /// the leader); added in v1 (KIP-836).
        last_fetch_timestamp: i64 [1..] = -1,
        /// Leader wall-clock time at which the replica was last caught up, -1 if
        /// unknown; added in v1 (KIP-836).
        last_caught_up_timestamp: i64 [1..] = -1,
    }
    /// An element of `TopicDataResponse.partitions` (Kafka's response `PartitionData`).
    pub struct PartitionDataResponse {
        partition_index: i32 [0..],
        error_code: i16 [0..],
        /// Added in v2 (KIP-853).
        error_message: Option<String> [2..] = Some(String::new()),
        /// -1 if the leader is unknown.
        leader_id: i32 [0..],
        leader_epoch: i32 [0..],
        high_watermark: i64 [0..],
        current_voters: Vec<ReplicaState> [0..],
        observers: Vec<ReplicaState> [0..],
    }
    /// An element of `DescribeQuorumResponse.topics` (Kafka's response `TopicData`).
    pub struct TopicDataResponse {
        topic_name: String [0..],
        partitions: Vec<PartitionDataResponse> [0..],
    }
    /// An element of `Node.listeners`.
    pub struct Listener {
        name: String [2..],
        host: String [2..],
        port: u16 [2..],
    }
    /// An element of `DescribeQuorumResponse.nodes`: a voter's endpoints.
    pub struct Node {
        node_id: i32 [2..],
        listeners: Vec<Listener> [2..],
    }
    /// DescribeQuorumResponse, versions 0-2.
    pub struct DescribeQuorumResponse {
        error_code: i16 [0..],
        /// Added in v2 (KIP-853).
        error_message: Option<String> [2..] = Some(String::new()),
        topics: Vec<TopicDataResponse> [0..],
        /// Added in v2 (KIP-853).
        nodes: Vec<Node> [2..],
    }
}
