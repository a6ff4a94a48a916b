//! AlterPartition (API key 56): a partition leader asks the controller to change the
//! partition's ISR (KIP-497, first named AlterIsr). The controller answers with the
//! partition state it committed, which the leader adopts.
//!
//! Versions 0-1 name topics, 2-3 identify them by id (KIP-841); version 3 sends the new
//! ISR with each member's broker epoch (KIP-903) so the controller can refuse a replica
//! that restarted with an empty log. Kafka 4.0 removed versions 0-1; we still decode
//! them, as for the other APIs.
//!
//! The request and the response each have a `TopicData` and a `PartitionData` in Kafka's
//! spec; the response's are [`TopicDataResponse`] and [`PartitionDataResponse`] here.

use crate::codec::Uuid;

/// API key of AlterPartition.
pub const API_KEY: i16 = 56;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 3);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 0;

crate::message! {
    /// An element of `PartitionData.new_isr_with_epochs`: one ISR member and the broker
    /// epoch the leader saw it fetch with.
    pub struct BrokerState {
        broker_id: i32 [3..],
        /// -1 if the leader does not know the epoch.
        broker_epoch: i64 [3..] = -1,
    }
    /// An element of `TopicData.partitions`.
    pub struct PartitionData {
        partition_index: i32 [0..],
        leader_epoch: i32 [0..],
        /// The proposed ISR; replaced by `new_isr_with_epochs` in v3 (KIP-903).
        new_isr: Vec<i32> [0..=2],
        /// The proposed ISR with broker epochs; added in v3 (KIP-903).
        new_isr_with_epochs: Vec<BrokerState> [3..],
        /// 1 while recovering from an unclean election, else 0; added in v1 (KIP-704).
        leader_recovery_state: i8 [1..],
        /// The partition epoch the change is based on; a stale one is refused.
        partition_epoch: i32 [0..],
    }
    /// An element of `AlterPartitionRequest.topics`.
    pub struct TopicData {
        /// Replaced by `topic_id` in v2 (KIP-841).
        topic_name: String [0..=1],
        /// Added in v2 (KIP-841).
        topic_id: Uuid [2..],
        partitions: Vec<PartitionData> [0..],
    }
    /// AlterPartitionRequest, versions 0-3.
    pub struct AlterPartitionRequest {
        broker_id: i32 [0..],
        broker_epoch: i64 [0..] = -1,
        topics: Vec<TopicData> [0..],
    }
    /// An element of `TopicDataResponse.partitions`: the state the controller holds.
    pub struct PartitionDataResponse {
        partition_index: i32 [0..],
        error_code: i16 [0..],
        leader_id: i32 [0..],
        leader_epoch: i32 [0..],
        isr: Vec<i32> [0..],
        /// Added in v1 (KIP-704).
        leader_recovery_state: i8 [1..],
        partition_epoch: i32 [0..],
    }
    /// An element of `AlterPartitionResponse.topics` (Kafka's response `TopicData`).
    pub struct TopicDataResponse {
        /// Replaced by `topic_id` in v2 (KIP-841).
        topic_name: String [0..=1],
        /// Added in v2 (KIP-841).
        topic_id: Uuid [2..],
        partitions: Vec<PartitionDataResponse> [0..],
    }
    /// AlterPartitionResponse, versions 0-3.
    pub struct AlterPartitionResponse {
        throttle_time_ms: i32 [0..],
        error_code: i16 [0..],
        topics: Vec<TopicDataResponse> [0..],
    }
}
