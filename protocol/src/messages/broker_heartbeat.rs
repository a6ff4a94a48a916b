//! BrokerHeartbeat (API key 63): a registered broker keeps its session with the
//! controller alive (KIP-631), reports how far it has replayed the metadata log, and
//! asks to be fenced or to shut down; the controller answers with the broker's state.

use crate::codec::Uuid;

/// API key of BrokerHeartbeat.
pub const API_KEY: i16 = 63;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 1);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 0;

crate::message! {
    /// BrokerHeartbeatRequest, versions 0-1.
    pub struct BrokerHeartbeatRequest {
        broker_id: i32 [0..],
        broker_epoch: i64 [0..] = -1,
        /// The highest metadata offset the broker has applied.
        current_metadata_offset: i64 [0..],
        want_fence: bool [0..],
        want_shut_down: bool [0..],
        /// Log directories that failed; tagged field 0, added in v1 (KIP-858).
        offline_log_dirs: Vec<Uuid> [1..] tag 0,
    }
    /// BrokerHeartbeatResponse, versions 0-1.
    pub struct BrokerHeartbeatResponse {
        throttle_time_ms: i32 [0..],
        error_code: i16 [0..],
        /// True once the broker has caught up with the metadata log.
        is_caught_up: bool [0..],
        /// A broker starts fenced: it serves no partitions until unfenced.
        is_fenced: bool [0..] = true,
        should_shut_down: bool [0..],
    }
}
