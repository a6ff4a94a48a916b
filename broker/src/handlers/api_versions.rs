//! ApiVersions (18): the list of APIs and versions a listener serves, built from its
//! dispatch table ([`super::SERVED`] on client listeners, [`super::controller::SERVED`]
//! on the controller listener).

use super::Served;
use strata_protocol::messages::api_versions::{ApiVersion, ApiVersionsRequest, ApiVersionsResponse};
use strata_protocol::ErrorCode;

fn api_list(table: &[Served]) -> Vec<ApiVersion> {
    table
        .iter()
        .map(|s| ApiVersion { api_key: s.api as i16, min_version: s.min, max_version: s.max })
        .collect()
}

/// Answers an ApiVersions request with `table`.
pub fn handle(table: &[Served], _version: i16, _request: ApiVersionsRequest) -> ApiVersionsResponse {
    ApiVersionsResponse { error_code: 0, api_keys: api_list(table), ..Default::default() }
}

/// The v0-encodable answer to an ApiVersions version we do not serve.
pub fn unsupported(table: &[Served], _version: i16) -> ApiVersionsResponse {
    ApiVersionsResponse {
        error_code: ErrorCode::UnsupportedVersion.code(),
        api_keys: api_list(table),
        ..Default::default()
    }
}
