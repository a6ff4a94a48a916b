//! SaslHandshake (API key 17): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of SaslHandshake.
pub const API_KEY: i16 = 17;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 1);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = i16::MAX;

crate::message! {
    /// SaslHandshakeRequest, versions 0-1.
    pub struct SaslHandshakeRequest {
        mechanism: String [0..],
    }
    /// SaslHandshakeResponse, versions 0-1.
    pub struct SaslHandshakeResponse {
        error_code: i16 [0..],
        mechanisms: Vec<String> [0..],
    }
}
