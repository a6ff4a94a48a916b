//! AlterConfigs (API key 33): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of AlterConfigs.
pub const API_KEY: i16 = 33;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 2);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 2;

crate::message! {
    /// An element of `AlterConfigsResource.configs`.
    pub struct AlterableConfig {
        name: String [0..],
        value: Option<String> [0..] = Some(String::new()),
    }
    /// An element of `AlterConfigsRequest.resources`.
    pub struct AlterConfigsResource {
        resource_type: i8 [0..],
        resource_name: String [0..],
        configs: Vec<AlterableConfig> [0..],
    }
    /// AlterConfigsRequest, versions 0-2.
    pub struct AlterConfigsRequest {
        resources: Vec<AlterConfigsResource> [0..],
        validate_only: bool [0..],
    }
    /// An element of `AlterConfigsResponse.responses`.
    pub struct AlterConfigsResourceResponse {
        error_code: i16 [0..],
        error_message: Option<String> [0..] = Some(String::new()),
        resource_type: i8 [0..],
        resource_name: String [0..],
    }
    /// AlterConfigsResponse, versions 0-2.
    pub struct AlterConfigsResponse {
        throttle_time_ms: i32 [0..],
        responses: Vec<AlterConfigsResourceResponse> [0..],
    }
}
