//! LeaveGroup (API key 13): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of LeaveGroup.
pub const API_KEY: i16 = 13;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 5);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 4;

crate::message! {
    /// An element of `LeaveGroupRequest.members`.
    pub struct MemberIdentity {
        member_id: String [3..],
        group_instance_id: Option<String> [3..],
        reason: Option<String> [5..],
    }
    /// LeaveGroupRequest, versions 0-5.
    pub struct LeaveGroupRequest {
        group_id: String [0..],
        member_id: String [0..=2],
        members: Vec<MemberIdentity> [3..],
    }
    /// An element of `LeaveGroupResponse.members`.
    pub struct MemberResponse {
        member_id: String [3..],
        group_instance_id: Option<String> [3..] = Some(String::new()),
        error_code: i16 [3..],
    }
    /// LeaveGroupResponse, versions 0-5.
    pub struct LeaveGroupResponse {
        throttle_time_ms: i32 [1..],
        error_code: i16 [0..],
        members: Vec<MemberResponse> [3..],
    }
}
