//! ApiVersions (18): the list of APIs and versions this broker serves, built from the
//! dispatch table.

use super::SERVED;
use strata_protocol::messages::api_versions::{ApiVersion, ApiVersionsRequest, ApiVersionsResponse};
use strata_protocol::ErrorCode;

fn api_list() -> Vec<ApiVersion> {
    SERVED
        .iter()
        .map(|s| ApiVersion { api_key: s.api as i16, min_version: s.min, max_version: s.max })
        .collect()
}

/// Answers an ApiVersions request.
pub fn handle(_version: i16, _request: ApiVersionsRequest) -> ApiVersionsResponse {
    ApiVersionsResponse { error_code: 0, api_keys: api_list(), ..Default::default() }
}

/// The v0-encodable answer to an ApiVersions version we do not serve.
pub fn unsupported(_version: i16) -> ApiVersionsResponse {
    ApiVersionsResponse {
        error_code: ErrorCode::UnsupportedVersion.code(),
        api_keys: api_list(),
        ..Default::default()
    }
}
