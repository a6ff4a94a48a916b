//! UnregisterBroker (API key 64): an administrator removes a decommissioned broker's
//! registration from the cluster metadata (KIP-631, `kafka-cluster.sh unregister`).

/// API key of UnregisterBroker.
pub const API_KEY: i16 = 64;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 0);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 0;

crate::message! {
    /// UnregisterBrokerRequest, version 0.
    pub struct UnregisterBrokerRequest {
        broker_id: i32 [0..],
    }
    /// UnregisterBrokerResponse, version 0.
    pub struct UnregisterBrokerResponse {
        throttle_time_ms: i32 [0..],
        error_code: i16 [0..],
        error_message: Option<String> [0..] = Some(String::new()),
    }
}
