//! TxnOffsetCommit (API key 28): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of TxnOffsetCommit.
pub const API_KEY: i16 = 28;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 4);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 3;

crate::message! {
    /// An element of `TxnOffsetCommitRequestTopic.partitions`.
    pub struct TxnOffsetCommitRequestPartition {
        partition_index: i32 [0..],
        committed_offset: i64 [0..],
        committed_leader_epoch: i32 [2..] = -1,
        committed_metadata: Option<String> [0..] = Some(String::new()),
    }
    /// An element of `TxnOffsetCommitRequest.topics`.
    pub struct TxnOffsetCommitRequestTopic {
        name: String [0..],
        partitions: Vec<TxnOffsetCommitRequestPartition> [0..],
    }
    /// TxnOffsetCommitRequest, versions 0-4.
    pub struct TxnOffsetCommitRequest {
        transactional_id: String [0..],
        group_id: String [0..],
        producer_id: i64 [0..],
        producer_epoch: i16 [0..],
        generation_id: i32 [3..] = -1,
        member_id: String [3..],
        group_instance_id: Option<String> [3..],
        topics: Vec<TxnOffsetCommitRequestTopic> [0..],
    }
    /// An element of `TxnOffsetCommitResponseTopic.partitions`.
    pub struct TxnOffsetCommitResponsePartition {
        partition_index: i32 [0..],
        error_code: i16 [0..],
    }
    /// An element of `TxnOffsetCommitResponse.topics`.
    pub struct TxnOffsetCommitResponseTopic {
        name: String [0..],
        partitions: Vec<TxnOffsetCommitResponsePartition> [0..],
    }
    /// TxnOffsetCommitResponse, versions 0-4.
    pub struct TxnOffsetCommitResponse {
        throttle_time_ms: i32 [0..],
        topics: Vec<TxnOffsetCommitResponseTopic> [0..],
    }
}
