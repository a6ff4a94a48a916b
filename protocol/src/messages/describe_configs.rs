//! DescribeConfigs (API key 32): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of DescribeConfigs.
pub const API_KEY: i16 = 32;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 4);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 4;

crate::message! {
    /// An element of `DescribeConfigsRequest.resources`.
    pub struct DescribeConfigsResource {
        resource_type: i8 [0..],
        resource_name: String [0..],
        configuration_keys: Option<Vec<String>> [0..] = Some(Vec::new()),
    }
    /// DescribeConfigsRequest, versions 0-4.
    pub struct DescribeConfigsRequest {
        resources: Vec<DescribeConfigsResource> [0..],
        include_synonyms: bool [1..] = false,
        include_documentation: bool [3..] = false,
    }
    /// An element of `DescribeConfigsResourceResult.synonyms`.
    pub struct DescribeConfigsSynonym {
        name: String [1..],
        value: Option<String> [1..] = Some(String::new()),
        source: i8 [1..],
    }
    /// An element of `DescribeConfigsResult.configs`.
    pub struct DescribeConfigsResourceResult {
        name: String [0..],
        value: Option<String> [0..] = Some(String::new()),
        read_only: bool [0..],
        is_default: bool [0..=0],
        config_source: i8 [1..] = -1,
        is_sensitive: bool [0..],
        synonyms: Vec<DescribeConfigsSynonym> [1..],
        config_type: i8 [3..] = 0,
        documentation: Option<String> [3..] = Some(String::new()),
    }
    /// An element of `DescribeConfigsResponse.results`.
    pub struct DescribeConfigsResult {
        error_code: i16 [0..],
        error_message: Option<String> [0..] = Some(String::new()),
        resource_type: i8 [0..],
        resource_name: String [0..],
        configs: Vec<DescribeConfigsResourceResult> [0..],
    }
    /// DescribeConfigsResponse, versions 0-4.
    pub struct DescribeConfigsResponse {
        throttle_time_ms: i32 [0..],
        results: Vec<DescribeConfigsResult> [0..],
    }
}
