//! ListGroups (API key 16): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of ListGroups.
pub const API_KEY: i16 = 16;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 5);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 3;

crate::message! {
    /// ListGroupsRequest, versions 0-5.
    pub struct ListGroupsRequest {
        states_filter: Vec<String> [4..],
        types_filter: Vec<String> [5..],
    }
    /// An element of `ListGroupsResponse.groups`.
    pub struct ListedGroup {
        group_id: String [0..],
        protocol_type: String [0..],
        group_state: String [4..],
        group_type: String [5..],
    }
    /// ListGroupsResponse, versions 0-5.
    pub struct ListGroupsResponse {
        throttle_time_ms: i32 [1..],
        error_code: i16 [0..],
        groups: Vec<ListedGroup> [0..],
    }
}
