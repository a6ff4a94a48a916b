//! AlterPartitionReassignments (API key 45): an administrator starts or cancels moves of
//! partitions to other replicas (`kafka-reassign-partitions.sh`, KIP-455). Version 1
//! lets the caller forbid reassignments that change a partition's replication factor
//! (KIP-860).

/// API key of AlterPartitionReassignments.
pub const API_KEY: i16 = 45;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 1);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 0;

crate::message! {
    /// An element of `ReassignableTopic.partitions`.
    pub struct ReassignablePartition {
        partition_index: i32 [0..],
        /// The target replicas, or null to cancel the partition's pending reassignment.
        replicas: Option<Vec<i32>> [0..],
    }
    /// An element of `AlterPartitionReassignmentsRequest.topics`.
    pub struct ReassignableTopic {
        name: String [0..],
        partitions: Vec<ReassignablePartition> [0..],
    }
    /// AlterPartitionReassignmentsRequest, versions 0-1.
    pub struct AlterPartitionReassignmentsRequest {
        timeout_ms: i32 [0..] = 60000,
        /// False refuses any reassignment that changes a replication factor; added in v1
        /// (KIP-860). Earlier versions always allow it.
        allow_replication_factor_change: bool [1..] = true,
        topics: Vec<ReassignableTopic> [0..],
    }
    /// An element of `ReassignableTopicResponse.partitions`.
    pub struct ReassignablePartitionResponse {
        partition_index: i32 [0..],
        error_code: i16 [0..],
        error_message: Option<String> [0..] = Some(String::new()),
    }
    /// An element of `AlterPartitionReassignmentsResponse.responses`.
    pub struct ReassignableTopicResponse {
        name: String [0..],
        partitions: Vec<ReassignablePartitionResponse> [0..],
    }
    /// AlterPartitionReassignmentsResponse, versions 0-1.
    pub struct AlterPartitionReassignmentsResponse {
        throttle_time_ms: i32 [0..],
        /// Echoes the request's option; added in v1 (KIP-860).
        allow_replication_factor_change: bool [1..] = true,
        error_code: i16 [0..],
        error_message: Option<String> [0..] = Some(String::new()),
        responses: Vec<ReassignableTopicResponse> [0..],
    }
}
