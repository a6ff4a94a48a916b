//! FindCoordinator (API key 10): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of FindCoordinator.
pub const API_KEY: i16 = 10;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 6);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 3;

crate::message! {
    /// FindCoordinatorRequest, versions 0-6.
    pub struct FindCoordinatorRequest {
        key: String [0..=3],
        key_type: i8 [1..] = 0,
        coordinator_keys: Vec<String> [4..],
    }
    /// An element of `FindCoordinatorResponse.coordinators`.
    pub struct Coordinator {
        key: String [4..],
        node_id: i32 [4..],
        host: String [4..],
        port: i32 [4..],
        error_code: i16 [4..],
        error_message: Option<String> [4..] = Some(String::new()),
    }
    /// FindCoordinatorResponse, versions 0-6.
    pub struct FindCoordinatorResponse {
        throttle_time_ms: i32 [1..],
        error_code: i16 [0..=3],
        error_message: Option<String> [1..=3] = Some(String::new()),
        node_id: i32 [0..=3],
        host: String [0..=3],
        port: i32 [0..=3],
        coordinators: Vec<Coordinator> [4..],
    }
}
