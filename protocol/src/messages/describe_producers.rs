//! DescribeProducers (API key 61): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of DescribeProducers.
pub const API_KEY: i16 = 61;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 0);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 0;

crate::message! {
    /// An element of `DescribeProducersRequest.topics`.
    pub struct TopicRequest {
        name: String [0..],
        partition_indexes: Vec<i32> [0..],
    }
    /// DescribeProducersRequest, versions 0.
    pub struct DescribeProducersRequest {
        topics: Vec<TopicRequest> [0..],
    }
    /// An element of `PartitionResponse.active_producers`.
    pub struct ProducerState {
        producer_id: i64 [0..],
        producer_epoch: i32 [0..],
        last_sequence: i32 [0..] = -1,
        last_timestamp: i64 [0..] = -1,
        coordinator_epoch: i32 [0..],
        current_txn_start_offset: i64 [0..] = -1,
    }
    /// An element of `TopicResponse.partitions`.
    pub struct PartitionResponse {
        partition_index: i32 [0..],
        error_code: i16 [0..],
        error_message: Option<String> [0..],
        active_producers: Vec<ProducerState> [0..],
    }
    /// An element of `DescribeProducersResponse.topics`.
    pub struct TopicResponse {
        name: String [0..],
        partitions: Vec<PartitionResponse> [0..],
    }
    /// DescribeProducersResponse, versions 0.
    pub struct DescribeProducersResponse {
        throttle_time_ms: i32 [0..],
        topics: Vec<TopicResponse> [0..],
    }
}
