//! AllocateProducerIds (API key 67): a broker asks the controller for a block of
//! producer ids to hand out in InitProducerId answers (KIP-730), so ids are unique
//! across the cluster without a round trip per producer.

/// API key of AllocateProducerIds.
pub const API_KEY: i16 = 67;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 0);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 0;

crate::message! {
    /// AllocateProducerIdsRequest, version 0.
    pub struct AllocateProducerIdsRequest {
        broker_id: i32 [0..],
        broker_epoch: i64 [0..] = -1,
    }
    /// AllocateProducerIdsResponse, version 0: the block is
    /// `producer_id_start .. producer_id_start + producer_id_len`.
    pub struct AllocateProducerIdsResponse {
        throttle_time_ms: i32 [0..],
        error_code: i16 [0..],
        producer_id_start: i64 [0..],
        producer_id_len: i32 [0..],
    }
}
