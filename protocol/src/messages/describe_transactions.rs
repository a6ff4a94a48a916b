//! DescribeTransactions (API key 65): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of DescribeTransactions.
pub const API_KEY: i16 = 65;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 0);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 0;

crate::message! {
    /// DescribeTransactionsRequest, versions 0.
    pub struct DescribeTransactionsRequest {
        transactional_ids: Vec<String> [0..],
    }
    /// An element of `TransactionState.topics`.
    pub struct TopicData {
        topic: String [0..],
        partitions: Vec<i32> [0..],
    }
    /// An element of `DescribeTransactionsResponse.transaction_states`.
    pub struct TransactionState {
        error_code: i16 [0..],
        transactional_id: String [0..],
        transaction_state: String [0..],
        transaction_timeout_ms: i32 [0..],
        transaction_start_time_ms: i64 [0..],
        producer_id: i64 [0..],
        producer_epoch: i16 [0..],
        topics: Vec<TopicData> [0..],
    }
    /// DescribeTransactionsResponse, versions 0.
    pub struct DescribeTransactionsResponse {
        throttle_time_ms: i32 [0..],
        transaction_states: Vec<TransactionState> [0..],
    }
}
