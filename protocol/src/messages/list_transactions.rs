//! ListTransactions (API key 66): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of ListTransactions.
pub const API_KEY: i16 = 66;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 1);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 0;

crate::message! {
    /// ListTransactionsRequest, versions 0-1.
    pub struct ListTransactionsRequest {
        state_filters: Vec<String> [0..],
        producer_id_filters: Vec<i64> [0..],
        duration_filter: i64 [1..] = -1,
    }
    /// An element of `ListTransactionsResponse.transaction_states`.
    pub struct TransactionState {
        transactional_id: String [0..],
        producer_id: i64 [0..],
        transaction_state: String [0..],
    }
    /// ListTransactionsResponse, versions 0-1.
    pub struct ListTransactionsResponse {
        throttle_time_ms: i32 [0..],
        error_code: i16 [0..],
        unknown_state_filters: Vec<String> [0..],
        transaction_states: Vec<TransactionState> [0..],
    }
}
