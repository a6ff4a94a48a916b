//! JoinGroup (API key 11): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of JoinGroup.
pub const API_KEY: i16 = 11;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 9);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 6;

crate::message! {
    /// An element of `JoinGroupRequest.protocols`.
    pub struct JoinGroupRequestProtocol {
        name: String [0..],
        metadata: Bytes [0..],
    }
    /// JoinGroupRequest, versions 0-9.
    pub struct JoinGroupRequest {
        group_id: String [0..],
        session_timeout_ms: i32 [0..],
        rebalance_timeout_ms: i32 [1..] = -1,
        member_id: String [0..],
        group_instance_id: Option<String> [5..],
        protocol_type: String [0..],
        protocols: Vec<JoinGroupRequestProtocol> [0..],
        reason: Option<String> [8..],
    }
    /// An element of `JoinGroupResponse.members`.
    pub struct JoinGroupResponseMember {
        member_id: String [0..],
        group_instance_id: Option<String> [5..],
        metadata: Bytes [0..],
    }
    /// JoinGroupResponse, versions 0-9.
    pub struct JoinGroupResponse {
        throttle_time_ms: i32 [2..],
        error_code: i16 [0..],
        generation_id: i32 [0..] = -1,
        protocol_type: Option<String> [7..],
        protocol_name: Option<String> [0..] null [7..] = Some(String::new()),
        leader: String [0..],
        skip_assignment: bool [9..] = false,
        member_id: String [0..],
        members: Vec<JoinGroupResponseMember> [0..],
    }
}
