//! AddOffsetsToTxn (API key 25): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of AddOffsetsToTxn.
pub const API_KEY: i16 = 25;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 4);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 3;

crate::message! {
    /// AddOffsetsToTxnRequest, versions 0-4.
    pub struct AddOffsetsToTxnRequest {
        transactional_id: String [0..],
        producer_id: i64 [0..],
        producer_epoch: i16 [0..],
        group_id: String [0..],
    }
    /// AddOffsetsToTxnResponse, versions 0-4.
    pub struct AddOffsetsToTxnResponse {
        throttle_time_ms: i32 [0..],
        error_code: i16 [0..],
    }
}
