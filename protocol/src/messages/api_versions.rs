//! ApiVersions (API key 18): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of ApiVersions.
pub const API_KEY: i16 = 18;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 4);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 3;

crate::message! {
    /// ApiVersionsRequest, versions 0-4.
    pub struct ApiVersionsRequest {
        client_software_name: String [3..],
        client_software_version: String [3..],
    }
    /// An element of `ApiVersionsResponse.api_keys`.
    pub struct ApiVersion {
        api_key: i16 [0..],
        min_version: i16 [0..],
        max_version: i16 [0..],
    }
    /// An element of `ApiVersionsResponse.supported_features`.
    pub struct SupportedFeatureKey {
        name: String [3..],
        min_version: i16 [3..],
        max_version: i16 [3..],
    }
    /// An element of `ApiVersionsResponse.finalized_features`.
    pub struct FinalizedFeatureKey {
        name: String [3..],
        max_version_level: i16 [3..],
        min_version_level: i16 [3..],
    }
    /// ApiVersionsResponse, versions 0-4.
    pub struct ApiVersionsResponse {
        error_code: i16 [0..],
        api_keys: Vec<ApiVersion> [0..],
        throttle_time_ms: i32 [1..],
        supported_features: Vec<SupportedFeatureKey> [3..] tag 0,
        finalized_features_epoch: i64 [3..] tag 1 = -1,
        finalized_features: Vec<FinalizedFeatureKey> [3..] tag 2,
        zk_migration_ready: bool [3..] tag 3 = false,
    }
}
