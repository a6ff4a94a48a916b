//! DescribeLogDirs (API key 35): request and response as Kafka defines them. Kafka 4.4
//! serves v1-5 (v0 was removed by KIP-896); the codec also decodes v0, which is the same
//! as v1 on the wire.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of DescribeLogDirs.
pub const API_KEY: i16 = 35;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 5);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 2;

crate::message! {
    /// An element of `DescribeLogDirsRequest.topics`: the partitions of one topic to
    /// describe.
    pub struct DescribableLogDirTopic {
        topic: String [0..],
        partitions: Vec<i32> [0..],
    }
    /// DescribeLogDirsRequest, versions 0-5. Null `topics` asks for every partition.
    pub struct DescribeLogDirsRequest {
        topics: Option<Vec<DescribableLogDirTopic>> [0..] = Some(Vec::new()),
    }
    /// An element of `DescribeLogDirsTopic.partitions`: one replica's log in a dir.
    pub struct DescribeLogDirsPartition {
        partition_index: i32 [0..],
        partition_size: i64 [0..],
        offset_lag: i64 [0..],
        is_future_key: bool [0..],
    }
    /// An element of `DescribeLogDirsResult.topics`.
    pub struct DescribeLogDirsTopic {
        name: String [0..],
        partitions: Vec<DescribeLogDirsPartition> [0..],
    }
    /// An element of `DescribeLogDirsResponse.results`: one log directory.
    pub struct DescribeLogDirsResult {
        error_code: i16 [0..],
        log_dir: String [0..],
        topics: Vec<DescribeLogDirsTopic> [0..],
        /// Size of the dir's volume; added in v4 (KIP-827).
        total_bytes: i64 [4..] = -1,
        /// Usable space left on the dir's volume; added in v4 (KIP-827).
        usable_bytes: i64 [4..] = -1,
        /// Whether the dir is cordoned (takes no new replicas); added in v5 (KIP-1066).
        is_cordoned: bool [5..],
    }
    /// DescribeLogDirsResponse, versions 0-5.
    pub struct DescribeLogDirsResponse {
        throttle_time_ms: i32 [0..],
        /// Top-level error code; added in v3 (KIP-784).
        error_code: i16 [3..],
        results: Vec<DescribeLogDirsResult> [0..],
    }
}
