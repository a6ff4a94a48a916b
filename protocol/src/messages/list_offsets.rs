//! ListOffsets (API key 2): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of ListOffsets.
pub const API_KEY: i16 = 2;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 10);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 6;

crate::message! {
    /// An element of `ListOffsetsTopic.partitions`.
    pub struct ListOffsetsPartition {
        partition_index: i32 [0..],
        current_leader_epoch: i32 [4..] = -1,
        timestamp: i64 [0..],
        max_num_offsets: i32 [0..=0] = 1,
    }
    /// An element of `ListOffsetsRequest.topics`.
    pub struct ListOffsetsTopic {
        name: String [0..],
        partitions: Vec<ListOffsetsPartition> [0..],
    }
    /// ListOffsetsRequest, versions 0-10.
    pub struct ListOffsetsRequest {
        replica_id: i32 [0..],
        isolation_level: i8 [2..],
        topics: Vec<ListOffsetsTopic> [0..],
        timeout_ms: i32 [10..],
    }
    /// An element of `ListOffsetsTopicResponse.partitions`.
    pub struct ListOffsetsPartitionResponse {
        partition_index: i32 [0..],
        error_code: i16 [0..],
        old_style_offsets: Vec<i64> [0..=0],
        timestamp: i64 [1..] = -1,
        offset: i64 [1..] = -1,
        leader_epoch: i32 [4..] = -1,
    }
    /// An element of `ListOffsetsResponse.topics`.
    pub struct ListOffsetsTopicResponse {
        name: String [0..],
        partitions: Vec<ListOffsetsPartitionResponse> [0..],
    }
    /// ListOffsetsResponse, versions 0-10.
    pub struct ListOffsetsResponse {
        throttle_time_ms: i32 [2..],
        topics: Vec<ListOffsetsTopicResponse> [0..],
    }
}
