//! Heartbeat (API key 12): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of Heartbeat.
pub const API_KEY: i16 = 12;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 4);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 4;

crate::message! {
    /// HeartbeatRequest, versions 0-4.
    pub struct HeartbeatRequest {
        group_id: String [0..],
        generation_id: i32 [0..],
        member_id: String [0..],
        group_instance_id: Option<String> [3..],
    }
    /// HeartbeatResponse, versions 0-4.
    pub struct HeartbeatResponse {
        throttle_time_ms: i32 [1..],
        error_code: i16 [0..],
    }
}
