//! CreatePartitions (API key 37): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of CreatePartitions.
pub const API_KEY: i16 = 37;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 3);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 2;

crate::message! {
    /// An element of `CreatePartitionsTopic.assignments`.
    pub struct CreatePartitionsAssignment {
        broker_ids: Vec<i32> [0..],
    }
    /// An element of `CreatePartitionsRequest.topics`.
    pub struct CreatePartitionsTopic {
        name: String [0..],
        count: i32 [0..],
        assignments: Option<Vec<CreatePartitionsAssignment>> [0..] = Some(Vec::new()),
    }
    /// CreatePartitionsRequest, versions 0-3.
    pub struct CreatePartitionsRequest {
        topics: Vec<CreatePartitionsTopic> [0..],
        timeout_ms: i32 [0..],
        validate_only: bool [0..],
    }
    /// An element of `CreatePartitionsResponse.results`.
    pub struct CreatePartitionsTopicResult {
        name: String [0..],
        error_code: i16 [0..],
        error_message: Option<String> [0..],
    }
    /// CreatePartitionsResponse, versions 0-3.
    pub struct CreatePartitionsResponse {
        throttle_time_ms: i32 [0..],
        results: Vec<CreatePartitionsTopicResult> [0..],
    }
}
