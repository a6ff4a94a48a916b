//! IncrementalAlterConfigs (API key 44): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of IncrementalAlterConfigs.
pub const API_KEY: i16 = 44;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 1);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 1;

crate::message! {
    /// An element of `AlterConfigsResource.configs`.
    pub struct AlterableConfig {
        name: String [0..],
        config_operation: i8 [0..],
        value: Option<String> [0..] = Some(String::new()),
    }
    /// An element of `IncrementalAlterConfigsRequest.resources`.
    pub struct AlterConfigsResource {
        resource_type: i8 [0..],
        resource_name: String [0..],
        configs: Vec<AlterableConfig> [0..],
    }
    /// IncrementalAlterConfigsRequest, versions 0-1.
    pub struct IncrementalAlterConfigsRequest {
        resources: Vec<AlterConfigsResource> [0..],
        validate_only: bool [0..],
    }
    /// An element of `IncrementalAlterConfigsResponse.responses`.
    pub struct AlterConfigsResourceResponse {
        error_code: i16 [0..],
        error_message: Option<String> [0..] = Some(String::new()),
        resource_type: i8 [0..],
        resource_name: String [0..],
    }
    /// IncrementalAlterConfigsResponse, versions 0-1.
    pub struct IncrementalAlterConfigsResponse {
        throttle_time_ms: i32 [0..],
        responses: Vec<AlterConfigsResourceResponse> [0..],
    }
}
