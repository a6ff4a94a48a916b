//! InitProducerId (API key 22): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of InitProducerId.
pub const API_KEY: i16 = 22;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 5);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 2;

crate::message! {
    /// InitProducerIdRequest, versions 0-5.
    pub struct InitProducerIdRequest {
        transactional_id: Option<String> [0..] = Some(String::new()),
        transaction_timeout_ms: i32 [0..],
        producer_id: i64 [3..] = -1,
        producer_epoch: i16 [3..] = -1,
    }
    /// InitProducerIdResponse, versions 0-5.
    pub struct InitProducerIdResponse {
        throttle_time_ms: i32 [0..],
        error_code: i16 [0..],
        producer_id: i64 [0..] = -1,
        producer_epoch: i16 [0..],
    }
}
