//! OffsetDelete (API key 47): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of OffsetDelete.
pub const API_KEY: i16 = 47;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 0);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = i16::MAX;

crate::message! {
    /// An element of `OffsetDeleteRequestTopic.partitions`.
    pub struct OffsetDeleteRequestPartition {
        partition_index: i32 [0..],
    }
    /// An element of `OffsetDeleteRequest.topics`.
    pub struct OffsetDeleteRequestTopic {
        name: String [0..],
        partitions: Vec<OffsetDeleteRequestPartition> [0..],
    }
    /// OffsetDeleteRequest, versions 0.
    pub struct OffsetDeleteRequest {
        group_id: String [0..],
        topics: Vec<OffsetDeleteRequestTopic> [0..],
    }
    /// An element of `OffsetDeleteResponseTopic.partitions`.
    pub struct OffsetDeleteResponsePartition {
        partition_index: i32 [0..],
        error_code: i16 [0..],
    }
    /// An element of `OffsetDeleteResponse.topics`.
    pub struct OffsetDeleteResponseTopic {
        name: String [0..],
        partitions: Vec<OffsetDeleteResponsePartition> [0..],
    }
    /// OffsetDeleteResponse, versions 0.
    pub struct OffsetDeleteResponse {
        error_code: i16 [0..],
        throttle_time_ms: i32 [0..],
        topics: Vec<OffsetDeleteResponseTopic> [0..],
    }
}
