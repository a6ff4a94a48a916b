//! DeleteTopics (API key 20): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of DeleteTopics.
pub const API_KEY: i16 = 20;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 6);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 4;

crate::message! {
    /// An element of `DeleteTopicsRequest.topics`.
    pub struct DeleteTopicState {
        name: Option<String> [6..],
        topic_id: Uuid [6..],
    }
    /// DeleteTopicsRequest, versions 0-6.
    pub struct DeleteTopicsRequest {
        topics: Vec<DeleteTopicState> [6..],
        topic_names: Vec<String> [0..=5],
        timeout_ms: i32 [0..],
    }
    /// An element of `DeleteTopicsResponse.responses`.
    pub struct DeletableTopicResult {
        name: Option<String> [0..] null [6..] = Some(String::new()),
        topic_id: Uuid [6..],
        error_code: i16 [0..],
        error_message: Option<String> [5..],
    }
    /// DeleteTopicsResponse, versions 0-6.
    pub struct DeleteTopicsResponse {
        throttle_time_ms: i32 [1..],
        responses: Vec<DeletableTopicResult> [0..],
    }
}
