//! InitProducerId (API key 22): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of InitProducerId.
pub const API_KEY: i16 = 22;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 6);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 2;

crate::message! {
    /// InitProducerIdRequest, versions 0-6. v6 (KIP-939) adds the two-phase-commit
    /// flags: `enable_2pc` (no timeout abort for this producer's transactions) and
    /// `keep_prepared_txn` (an ongoing transaction survives the epoch bump, so a restarted
    /// producer can complete what it prepared before the crash).
    pub struct InitProducerIdRequest {
        transactional_id: Option<String> [0..] = Some(String::new()),
        transaction_timeout_ms: i32 [0..],
        producer_id: i64 [3..] = -1,
        producer_epoch: i16 [3..] = -1,
        enable_2pc: bool [6..] = false,
        keep_prepared_txn: bool [6..] = false,
    }
    /// InitProducerIdResponse, versions 0-6. v6 names the transaction kept by
    /// `keep_prepared_txn` (its producer id and epoch; -1 when none was ongoing).
    pub struct InitProducerIdResponse {
        throttle_time_ms: i32 [0..],
        error_code: i16 [0..],
        producer_id: i64 [0..] = -1,
        producer_epoch: i16 [0..],
        ongoing_txn_producer_id: i64 [6..] = -1,
        ongoing_txn_producer_epoch: i16 [6..] = -1,
    }
}
