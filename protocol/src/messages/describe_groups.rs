//! DescribeGroups (API key 15): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of DescribeGroups.
pub const API_KEY: i16 = 15;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 5);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 5;

crate::message! {
    /// DescribeGroupsRequest, versions 0-5.
    pub struct DescribeGroupsRequest {
        groups: Vec<String> [0..],
        include_authorized_operations: bool [3..],
    }
    /// An element of `DescribedGroup.members`.
    pub struct DescribedGroupMember {
        member_id: String [0..],
        group_instance_id: Option<String> [4..],
        client_id: String [0..],
        client_host: String [0..],
        member_metadata: Bytes [0..],
        member_assignment: Bytes [0..],
    }
    /// An element of `DescribeGroupsResponse.groups`.
    pub struct DescribedGroup {
        error_code: i16 [0..],
        group_id: String [0..],
        group_state: String [0..],
        protocol_type: String [0..],
        protocol_data: String [0..],
        members: Vec<DescribedGroupMember> [0..],
        authorized_operations: i32 [3..] = -2147483648,
    }
    /// DescribeGroupsResponse, versions 0-5.
    pub struct DescribeGroupsResponse {
        throttle_time_ms: i32 [1..],
        groups: Vec<DescribedGroup> [0..],
    }
}
