//! Fetch (API key 1): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
use crate::records::RecordSet;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of Fetch.
pub const API_KEY: i16 = 1;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 18);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 12;

crate::message! {
    /// An element of `FetchRequest.replica_state`.
    pub struct ReplicaState {
        replica_id: i32 [15..] = -1,
        replica_epoch: i64 [15..] = -1,
    }
    /// An element of `FetchTopic.partitions`.
    pub struct FetchPartition {
        partition: i32 [0..],
        current_leader_epoch: i32 [9..] = -1,
        fetch_offset: i64 [0..],
        last_fetched_epoch: i32 [12..] = -1,
        log_start_offset: i64 [5..] = -1,
        partition_max_bytes: i32 [0..],
        replica_directory_id: Uuid [17..] tag 0,
        /// The high watermark the follower knows, -1 if none, `i64::MAX` from a fetcher
        /// that does not track it; tagged field 1, added in v18 (KIP-1166), so a leader
        /// can answer at once when its high watermark moved past the follower's.
        high_watermark: i64 [18..] tag 1 = i64::MAX,
    }
    /// An element of `FetchRequest.topics`.
    pub struct FetchTopic {
        topic: String [0..=12],
        topic_id: Uuid [13..],
        partitions: Vec<FetchPartition> [0..],
    }
    /// An element of `FetchRequest.forgotten_topics_data`.
    pub struct ForgottenTopic {
        topic: String [7..=12],
        topic_id: Uuid [13..],
        partitions: Vec<i32> [7..],
    }
    /// FetchRequest, versions 0-18.
    pub struct FetchRequest {
        cluster_id: Option<String> [12..] tag 0,
        replica_id: i32 [0..=14] = -1,
        replica_state: ReplicaState [15..] tag 1,
        max_wait_ms: i32 [0..],
        min_bytes: i32 [0..],
        max_bytes: i32 [3..] = 2147483647,
        isolation_level: i8 [4..] = 0,
        session_id: i32 [7..] = 0,
        session_epoch: i32 [7..] = -1,
        topics: Vec<FetchTopic> [0..],
        forgotten_topics_data: Vec<ForgottenTopic> [7..],
        rack_id: String [11..],
    }
    /// An element of `PartitionData.diverging_epoch`.
    pub struct EpochEndOffset {
        epoch: i32 [12..] = -1,
        end_offset: i64 [12..] = -1,
    }
    /// An element of `PartitionData.current_leader`.
    pub struct LeaderIdAndEpoch {
        leader_id: i32 [12..] = -1,
        leader_epoch: i32 [12..] = -1,
    }
    /// An element of `PartitionData.snapshot_id`.
    pub struct SnapshotId {
        end_offset: i64 [0..] = -1,
        epoch: i32 [0..] = -1,
    }
    /// An element of `PartitionData.aborted_transactions`.
    pub struct AbortedTransaction {
        producer_id: i64 [4..],
        first_offset: i64 [4..],
    }
    /// An element of `FetchableTopicResponse.partitions`.
    pub struct PartitionData {
        partition_index: i32 [0..],
        error_code: i16 [0..],
        high_watermark: i64 [0..],
        last_stable_offset: i64 [4..] = -1,
        log_start_offset: i64 [5..] = -1,
        diverging_epoch: EpochEndOffset [12..] tag 0,
        current_leader: LeaderIdAndEpoch [12..] tag 1,
        snapshot_id: SnapshotId [12..] tag 2,
        aborted_transactions: Option<Vec<AbortedTransaction>> [4..] = Some(Vec::new()),
        preferred_read_replica: i32 [11..] = -1,
        records: Option<RecordSet> [0..] = Some(RecordSet::new()),
    }
    /// An element of `FetchResponse.responses`.
    pub struct FetchableTopicResponse {
        topic: String [0..=12],
        topic_id: Uuid [13..],
        partitions: Vec<PartitionData> [0..],
    }
    /// An element of `FetchResponse.node_endpoints`.
    pub struct NodeEndpoint {
        node_id: i32 [16..],
        host: String [16..],
        port: i32 [16..],
        rack: Option<String> [16..],
    }
    /// FetchResponse, versions 0-18 (v18 is v17 again, KIP-1166).
    pub struct FetchResponse {
        throttle_time_ms: i32 [1..],
        error_code: i16 [7..],
        session_id: i32 [7..] = 0,
        responses: Vec<FetchableTopicResponse> [0..],
        node_endpoints: Vec<NodeEndpoint> [16..] tag 0,
    }
}
