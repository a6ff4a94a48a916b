//! CreateTopics (API key 19): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of CreateTopics.
pub const API_KEY: i16 = 19;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 7);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 5;

crate::message! {
    /// An element of `CreatableTopic.assignments`.
    pub struct CreatableReplicaAssignment {
        partition_index: i32 [0..],
        broker_ids: Vec<i32> [0..],
    }
    /// An element of `CreatableTopic.configs`.
    pub struct CreatableTopicConfig {
        name: String [0..],
        value: Option<String> [0..] = Some(String::new()),
    }
    /// An element of `CreateTopicsRequest.topics`.
    pub struct CreatableTopic {
        name: String [0..],
        num_partitions: i32 [0..],
        replication_factor: i16 [0..],
        assignments: Vec<CreatableReplicaAssignment> [0..],
        configs: Vec<CreatableTopicConfig> [0..],
    }
    /// CreateTopicsRequest, versions 0-7.
    pub struct CreateTopicsRequest {
        topics: Vec<CreatableTopic> [0..],
        timeout_ms: i32 [0..] = 60000,
        validate_only: bool [1..] = false,
    }
    /// An element of `CreatableTopicResult.configs`.
    pub struct CreatableTopicConfigs {
        name: String [5..],
        value: Option<String> [5..] = Some(String::new()),
        read_only: bool [5..],
        config_source: i8 [5..] = -1,
        is_sensitive: bool [5..],
    }
    /// An element of `CreateTopicsResponse.topics`.
    pub struct CreatableTopicResult {
        name: String [0..],
        topic_id: Uuid [7..],
        error_code: i16 [0..],
        error_message: Option<String> [1..] = Some(String::new()),
        topic_config_error_code: i16 [5..] tag 0,
        num_partitions: i32 [5..] = -1,
        replication_factor: i16 [5..] = -1,
        configs: Option<Vec<CreatableTopicConfigs>> [5..] = Some(Vec::new()),
    }
    /// CreateTopicsResponse, versions 0-7.
    pub struct CreateTopicsResponse {
        throttle_time_ms: i32 [2..],
        topics: Vec<CreatableTopicResult> [0..],
    }
}
