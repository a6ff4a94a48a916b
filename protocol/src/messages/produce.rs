//! Produce (API key 0): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of Produce.
pub const API_KEY: i16 = 0;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 11);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 9;

crate::message! {
    /// An element of `TopicProduceData.partition_data`.
    pub struct PartitionProduceData {
        index: i32 [0..],
        records: Option<Bytes> [0..] = Some(Bytes::new()),
    }
    /// An element of `ProduceRequest.topic_data`.
    pub struct TopicProduceData {
        name: String [0..],
        partition_data: Vec<PartitionProduceData> [0..],
    }
    /// ProduceRequest, versions 0-11.
    pub struct ProduceRequest {
        transactional_id: Option<String> [3..],
        acks: i16 [0..],
        timeout_ms: i32 [0..],
        topic_data: Vec<TopicProduceData> [0..],
    }
    /// An element of `PartitionProduceResponse.record_errors`.
    pub struct BatchIndexAndErrorMessage {
        batch_index: i32 [8..],
        batch_index_error_message: Option<String> [8..],
    }
    /// An element of `PartitionProduceResponse.current_leader`.
    pub struct LeaderIdAndEpoch {
        leader_id: i32 [10..] = -1,
        leader_epoch: i32 [10..] = -1,
    }
    /// An element of `TopicProduceResponse.partition_responses`.
    pub struct PartitionProduceResponse {
        index: i32 [0..],
        error_code: i16 [0..],
        base_offset: i64 [0..],
        log_append_time_ms: i64 [2..] = -1,
        log_start_offset: i64 [5..] = -1,
        record_errors: Vec<BatchIndexAndErrorMessage> [8..],
        error_message: Option<String> [8..],
        current_leader: LeaderIdAndEpoch [10..] tag 0,
    }
    /// An element of `ProduceResponse.responses`.
    pub struct TopicProduceResponse {
        name: String [0..],
        partition_responses: Vec<PartitionProduceResponse> [0..],
    }
    /// An element of `ProduceResponse.node_endpoints`.
    pub struct NodeEndpoint {
        node_id: i32 [10..],
        host: String [10..],
        port: i32 [10..],
        rack: Option<String> [10..],
    }
    /// ProduceResponse, versions 0-11.
    pub struct ProduceResponse {
        responses: Vec<TopicProduceResponse> [0..],
        throttle_time_ms: i32 [1..] = 0,
        node_endpoints: Vec<NodeEndpoint> [10..] tag 0,
    }
}
