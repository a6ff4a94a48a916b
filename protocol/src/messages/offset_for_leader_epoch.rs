//! OffsetForLeaderEpoch (API key 23): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of OffsetForLeaderEpoch.
pub const API_KEY: i16 = 23;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 4);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 4;

crate::message! {
    /// An element of `OffsetForLeaderTopic.partitions`.
    pub struct OffsetForLeaderPartition {
        partition: i32 [0..],
        current_leader_epoch: i32 [2..] = -1,
        leader_epoch: i32 [0..],
    }
    /// An element of `OffsetForLeaderEpochRequest.topics`.
    pub struct OffsetForLeaderTopic {
        topic: String [0..],
        partitions: Vec<OffsetForLeaderPartition> [0..],
    }
    /// OffsetForLeaderEpochRequest, versions 0-4.
    pub struct OffsetForLeaderEpochRequest {
        replica_id: i32 [3..] = -2,
        topics: Vec<OffsetForLeaderTopic> [0..],
    }
    /// An element of `OffsetForLeaderTopicResult.partitions`.
    pub struct EpochEndOffset {
        error_code: i16 [0..],
        partition: i32 [0..],
        leader_epoch: i32 [1..] = -1,
        end_offset: i64 [0..] = -1,
    }
    /// An element of `OffsetForLeaderEpochResponse.topics`.
    pub struct OffsetForLeaderTopicResult {
        topic: String [0..],
        partitions: Vec<EpochEndOffset> [0..],
    }
    /// OffsetForLeaderEpochResponse, versions 0-4.
    pub struct OffsetForLeaderEpochResponse {
        throttle_time_ms: i32 [2..],
        topics: Vec<OffsetForLeaderTopicResult> [0..],
    }
}
