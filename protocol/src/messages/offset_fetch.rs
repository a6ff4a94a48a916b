//! OffsetFetch (API key 9): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of OffsetFetch.
pub const API_KEY: i16 = 9;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 9);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 6;

crate::message! {
    /// An element of `OffsetFetchRequest.topics`.
    pub struct OffsetFetchRequestTopic {
        name: String [0..=7],
        partition_indexes: Vec<i32> [0..=7],
    }
    /// An element of `OffsetFetchRequestGroup.topics`.
    pub struct OffsetFetchRequestTopics {
        name: String [8..],
        partition_indexes: Vec<i32> [8..],
    }
    /// An element of `OffsetFetchRequest.groups`.
    pub struct OffsetFetchRequestGroup {
        group_id: String [8..],
        member_id: Option<String> [9..],
        member_epoch: i32 [9..] = -1,
        topics: Option<Vec<OffsetFetchRequestTopics>> [8..] = Some(Vec::new()),
    }
    /// OffsetFetchRequest, versions 0-9.
    pub struct OffsetFetchRequest {
        group_id: String [0..=7],
        topics: Option<Vec<OffsetFetchRequestTopic>> [0..=7] null [2..=7] = Some(Vec::new()),
        groups: Vec<OffsetFetchRequestGroup> [8..],
        require_stable: bool [7..] = false,
    }
    /// An element of `OffsetFetchResponseTopic.partitions`.
    pub struct OffsetFetchResponsePartition {
        partition_index: i32 [0..=7],
        committed_offset: i64 [0..=7],
        committed_leader_epoch: i32 [5..=7] = -1,
        metadata: Option<String> [0..=7] = Some(String::new()),
        error_code: i16 [0..=7],
    }
    /// An element of `OffsetFetchResponse.topics`.
    pub struct OffsetFetchResponseTopic {
        name: String [0..=7],
        partitions: Vec<OffsetFetchResponsePartition> [0..=7],
    }
    /// An element of `OffsetFetchResponseTopics.partitions`.
    pub struct OffsetFetchResponsePartitions {
        partition_index: i32 [8..],
        committed_offset: i64 [8..],
        committed_leader_epoch: i32 [8..] = -1,
        metadata: Option<String> [8..] = Some(String::new()),
        error_code: i16 [8..],
    }
    /// An element of `OffsetFetchResponseGroup.topics`.
    pub struct OffsetFetchResponseTopics {
        name: String [8..],
        partitions: Vec<OffsetFetchResponsePartitions> [8..],
    }
    /// An element of `OffsetFetchResponse.groups`.
    pub struct OffsetFetchResponseGroup {
        group_id: String [8..],
        topics: Vec<OffsetFetchResponseTopics> [8..],
        error_code: i16 [8..] = 0,
    }
    /// OffsetFetchResponse, versions 0-9.
    pub struct OffsetFetchResponse {
        throttle_time_ms: i32 [3..],
        topics: Vec<OffsetFetchResponseTopic> [0..=7],
        error_code: i16 [2..=7] = 0,
        groups: Vec<OffsetFetchResponseGroup> [8..],
    }
}
