//! ListPartitionReassignments (API key 46): an administrator lists the partition moves
//! in progress (`kafka-reassign-partitions.sh --list`/`--verify`, KIP-455).

/// API key of ListPartitionReassignments.
pub const API_KEY: i16 = 46;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 0);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 0;

crate::message! {
    /// An element of `ListPartitionReassignmentsRequest.topics`.
    pub struct ListPartitionReassignmentsTopics {
        name: String [0..],
        partition_indexes: Vec<i32> [0..],
    }
    /// ListPartitionReassignmentsRequest, version 0.
    pub struct ListPartitionReassignmentsRequest {
        timeout_ms: i32 [0..] = 60000,
        /// The partitions to list, or null for every reassignment in progress.
        topics: Option<Vec<ListPartitionReassignmentsTopics>> [0..],
    }
    /// An element of `OngoingTopicReassignment.partitions`.
    pub struct OngoingPartitionReassignment {
        partition_index: i32 [0..],
        /// The current replica set, including those being added and removed.
        replicas: Vec<i32> [0..],
        adding_replicas: Vec<i32> [0..],
        removing_replicas: Vec<i32> [0..],
    }
    /// An element of `ListPartitionReassignmentsResponse.topics`.
    pub struct OngoingTopicReassignment {
        name: String [0..],
        partitions: Vec<OngoingPartitionReassignment> [0..],
    }
    /// ListPartitionReassignmentsResponse, version 0.
    pub struct ListPartitionReassignmentsResponse {
        throttle_time_ms: i32 [0..],
        error_code: i16 [0..],
        error_message: Option<String> [0..] = Some(String::new()),
        topics: Vec<OngoingTopicReassignment> [0..],
    }
}
