//! SyncGroup (API key 14): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of SyncGroup.
pub const API_KEY: i16 = 14;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 5);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 4;

crate::message! {
    /// An element of `SyncGroupRequest.assignments`.
    pub struct SyncGroupRequestAssignment {
        member_id: String [0..],
        assignment: Bytes [0..],
    }
    /// SyncGroupRequest, versions 0-5.
    pub struct SyncGroupRequest {
        group_id: String [0..],
        generation_id: i32 [0..],
        member_id: String [0..],
        group_instance_id: Option<String> [3..],
        protocol_type: Option<String> [5..],
        protocol_name: Option<String> [5..],
        assignments: Vec<SyncGroupRequestAssignment> [0..],
    }
    /// SyncGroupResponse, versions 0-5.
    pub struct SyncGroupResponse {
        throttle_time_ms: i32 [1..],
        error_code: i16 [0..],
        protocol_type: Option<String> [5..],
        protocol_name: Option<String> [5..],
        assignment: Bytes [0..],
    }
}
