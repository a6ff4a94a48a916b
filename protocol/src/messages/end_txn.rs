//! EndTxn (API key 26): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of EndTxn.
pub const API_KEY: i16 = 26;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 5);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 3;

crate::message! {
    /// EndTxnRequest, versions 0-5.
    pub struct EndTxnRequest {
        transactional_id: String [0..],
        producer_id: i64 [0..],
        producer_epoch: i16 [0..],
        committed: bool [0..],
    }
    /// EndTxnResponse, versions 0-5.
    pub struct EndTxnResponse {
        throttle_time_ms: i32 [0..],
        error_code: i16 [0..],
        producer_id: i64 [5..] = -1,
        producer_epoch: i16 [5..] = -1,
    }
}
