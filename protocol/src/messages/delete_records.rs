//! DeleteRecords (API key 21): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of DeleteRecords.
pub const API_KEY: i16 = 21;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 2);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 2;

crate::message! {
    /// An element of `DeleteRecordsTopic.partitions`.
    pub struct DeleteRecordsPartition {
        partition_index: i32 [0..],
        offset: i64 [0..],
    }
    /// An element of `DeleteRecordsRequest.topics`.
    pub struct DeleteRecordsTopic {
        name: String [0..],
        partitions: Vec<DeleteRecordsPartition> [0..],
    }
    /// DeleteRecordsRequest, versions 0-2.
    pub struct DeleteRecordsRequest {
        topics: Vec<DeleteRecordsTopic> [0..],
        timeout_ms: i32 [0..],
    }
    /// An element of `DeleteRecordsTopicResult.partitions`.
    pub struct DeleteRecordsPartitionResult {
        partition_index: i32 [0..],
        low_watermark: i64 [0..],
        error_code: i16 [0..],
    }
    /// An element of `DeleteRecordsResponse.topics`.
    pub struct DeleteRecordsTopicResult {
        name: String [0..],
        partitions: Vec<DeleteRecordsPartitionResult> [0..],
    }
    /// DeleteRecordsResponse, versions 0-2.
    pub struct DeleteRecordsResponse {
        throttle_time_ms: i32 [0..],
        topics: Vec<DeleteRecordsTopicResult> [0..],
    }
}
