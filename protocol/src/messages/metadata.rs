//! Metadata (API key 3): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of Metadata.
pub const API_KEY: i16 = 3;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 12);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 9;

crate::message! {
    /// An element of `MetadataRequest.topics`.
    pub struct MetadataRequestTopic {
        topic_id: Uuid [10..],
        name: Option<String> [0..] null [10..] = Some(String::new()),
    }
    /// MetadataRequest, versions 0-12.
    pub struct MetadataRequest {
        topics: Option<Vec<MetadataRequestTopic>> [0..] null [1..] = Some(Vec::new()),
        allow_auto_topic_creation: bool [4..] = true,
        include_cluster_authorized_operations: bool [8..=10],
        include_topic_authorized_operations: bool [8..],
    }
    /// An element of `MetadataResponse.brokers`.
    pub struct MetadataResponseBroker {
        node_id: i32 [0..],
        host: String [0..],
        port: i32 [0..],
        rack: Option<String> [1..],
    }
    /// An element of `MetadataResponseTopic.partitions`.
    pub struct MetadataResponsePartition {
        error_code: i16 [0..],
        partition_index: i32 [0..],
        leader_id: i32 [0..],
        leader_epoch: i32 [7..] = -1,
        replica_nodes: Vec<i32> [0..],
        isr_nodes: Vec<i32> [0..],
        offline_replicas: Vec<i32> [5..],
    }
    /// An element of `MetadataResponse.topics`.
    pub struct MetadataResponseTopic {
        error_code: i16 [0..],
        name: Option<String> [0..] null [12..] = Some(String::new()),
        topic_id: Uuid [10..],
        is_internal: bool [1..] = false,
        partitions: Vec<MetadataResponsePartition> [0..],
        topic_authorized_operations: i32 [8..] = -2147483648,
    }
    /// MetadataResponse, versions 0-12.
    pub struct MetadataResponse {
        throttle_time_ms: i32 [3..],
        brokers: Vec<MetadataResponseBroker> [0..],
        cluster_id: Option<String> [2..],
        controller_id: i32 [1..] = -1,
        topics: Vec<MetadataResponseTopic> [0..],
        cluster_authorized_operations: i32 [8..=10] = -2147483648,
    }
}
