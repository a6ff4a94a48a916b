//! AddPartitionsToTxn (API key 24): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of AddPartitionsToTxn.
pub const API_KEY: i16 = 24;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 5);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 3;

crate::message! {
    /// An element of `AddPartitionsToTxnTransaction.topics`.
    pub struct AddPartitionsToTxnTopic {
        name: String [0..],
        partitions: Vec<i32> [0..],
    }
    /// An element of `AddPartitionsToTxnRequest.transactions`.
    pub struct AddPartitionsToTxnTransaction {
        transactional_id: String [4..],
        producer_id: i64 [4..],
        producer_epoch: i16 [4..],
        verify_only: bool [4..] = false,
        topics: Vec<AddPartitionsToTxnTopic> [4..],
    }
    /// AddPartitionsToTxnRequest, versions 0-5.
    pub struct AddPartitionsToTxnRequest {
        transactions: Vec<AddPartitionsToTxnTransaction> [4..],
        v3_and_below_transactional_id: String [0..=3],
        v3_and_below_producer_id: i64 [0..=3],
        v3_and_below_producer_epoch: i16 [0..=3],
        v3_and_below_topics: Vec<AddPartitionsToTxnTopic> [0..=3],
    }
    /// An element of `AddPartitionsToTxnTopicResult.results_by_partition`.
    pub struct AddPartitionsToTxnPartitionResult {
        partition_index: i32 [0..],
        partition_error_code: i16 [0..],
    }
    /// An element of `AddPartitionsToTxnResult.topic_results`.
    pub struct AddPartitionsToTxnTopicResult {
        name: String [0..],
        results_by_partition: Vec<AddPartitionsToTxnPartitionResult> [0..],
    }
    /// An element of `AddPartitionsToTxnResponse.results_by_transaction`.
    pub struct AddPartitionsToTxnResult {
        transactional_id: String [4..],
        topic_results: Vec<AddPartitionsToTxnTopicResult> [4..],
    }
    /// AddPartitionsToTxnResponse, versions 0-5.
    pub struct AddPartitionsToTxnResponse {
        throttle_time_ms: i32 [0..],
        error_code: i16 [4..],
        results_by_transaction: Vec<AddPartitionsToTxnResult> [4..],
        results_by_topic_v3_and_below: Vec<AddPartitionsToTxnTopicResult> [0..=3],
    }
}
