//! ElectLeaders (API key 43): an administrator asks for leader elections
//! (`kafka-leader-election.sh`, KIP-183): the preferred replica back as leader, or, from
//! v1, an unclean election from outside the ISR (KIP-460).

/// API key of ElectLeaders.
pub const API_KEY: i16 = 43;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 2);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 2;

/// `election_type` of a preferred-replica election (the only kind before v1).
pub const ELECTION_TYPE_PREFERRED: i8 = 0;
/// `election_type` of an unclean election: any live replica may become leader.
pub const ELECTION_TYPE_UNCLEAN: i8 = 1;

crate::message! {
    /// An element of `ElectLeadersRequest.topic_partitions`.
    pub struct TopicPartitions {
        topic: String [0..],
        partitions: Vec<i32> [0..],
    }
    /// ElectLeadersRequest, versions 0-2.
    pub struct ElectLeadersRequest {
        /// [`ELECTION_TYPE_PREFERRED`] or [`ELECTION_TYPE_UNCLEAN`]; added in v1
        /// (KIP-460).
        election_type: i8 [1..],
        /// The partitions to elect leaders for; null means every partition.
        topic_partitions: Option<Vec<TopicPartitions>> [0..] = Some(Vec::new()),
        timeout_ms: i32 [0..] = 60000,
    }
    /// An element of `ReplicaElectionResult.partition_result`.
    pub struct PartitionResult {
        partition_id: i32 [0..],
        error_code: i16 [0..],
        error_message: Option<String> [0..] = Some(String::new()),
    }
    /// An element of `ElectLeadersResponse.replica_election_results`.
    pub struct ReplicaElectionResult {
        topic: String [0..],
        partition_result: Vec<PartitionResult> [0..],
    }
    /// ElectLeadersResponse, versions 0-2.
    pub struct ElectLeadersResponse {
        throttle_time_ms: i32 [0..],
        /// Added in v1.
        error_code: i16 [1..],
        replica_election_results: Vec<ReplicaElectionResult> [0..],
    }
}
