//! DeleteGroups (API key 42): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of DeleteGroups.
pub const API_KEY: i16 = 42;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 2);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 2;

crate::message! {
    /// DeleteGroupsRequest, versions 0-2.
    pub struct DeleteGroupsRequest {
        groups_names: Vec<String> [0..],
    }
    /// An element of `DeleteGroupsResponse.results`.
    pub struct DeletableGroupResult {
        group_id: String [0..],
        error_code: i16 [0..],
    }
    /// DeleteGroupsResponse, versions 0-2.
    pub struct DeleteGroupsResponse {
        throttle_time_ms: i32 [0..],
        results: Vec<DeletableGroupResult> [0..],
    }
}
