//! OffsetCommit (API key 8): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of OffsetCommit.
pub const API_KEY: i16 = 8;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 9);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 8;

crate::message! {
    /// An element of `OffsetCommitRequestTopic.partitions`.
    pub struct OffsetCommitRequestPartition {
        partition_index: i32 [0..],
        committed_offset: i64 [0..],
        committed_leader_epoch: i32 [6..] = -1,
        commit_timestamp: i64 [1..=1] = -1,
        committed_metadata: Option<String> [0..] = Some(String::new()),
    }
    /// An element of `OffsetCommitRequest.topics`.
    pub struct OffsetCommitRequestTopic {
        name: String [0..],
        partitions: Vec<OffsetCommitRequestPartition> [0..],
    }
    /// OffsetCommitRequest, versions 0-9.
    pub struct OffsetCommitRequest {
        group_id: String [0..],
        generation_id_or_member_epoch: i32 [1..] = -1,
        member_id: String [1..],
        group_instance_id: Option<String> [7..],
        retention_time_ms: i64 [2..=4] = -1,
        topics: Vec<OffsetCommitRequestTopic> [0..],
    }
    /// An element of `OffsetCommitResponseTopic.partitions`.
    pub struct OffsetCommitResponsePartition {
        partition_index: i32 [0..],
        error_code: i16 [0..],
    }
    /// An element of `OffsetCommitResponse.topics`.
    pub struct OffsetCommitResponseTopic {
        name: String [0..],
        partitions: Vec<OffsetCommitResponsePartition> [0..],
    }
    /// OffsetCommitResponse, versions 0-9.
    pub struct OffsetCommitResponse {
        throttle_time_ms: i32 [3..],
        topics: Vec<OffsetCommitResponseTopic> [0..],
    }
}
