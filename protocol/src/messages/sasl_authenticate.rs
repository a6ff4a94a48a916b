//! SaslAuthenticate (API key 36): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of SaslAuthenticate.
pub const API_KEY: i16 = 36;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 2);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 2;

crate::message! {
    /// SaslAuthenticateRequest, versions 0-2.
    pub struct SaslAuthenticateRequest {
        auth_bytes: Bytes [0..],
    }
    /// SaslAuthenticateResponse, versions 0-2.
    pub struct SaslAuthenticateResponse {
        error_code: i16 [0..],
        error_message: Option<String> [0..] = Some(String::new()),
        auth_bytes: Bytes [0..],
        session_lifetime_ms: i64 [1..] = 0,
    }
}
