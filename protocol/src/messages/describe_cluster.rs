//! DescribeCluster (API key 60): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of DescribeCluster.
pub const API_KEY: i16 = 60;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 1);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 0;

crate::message! {
    /// DescribeClusterRequest, versions 0-1.
    pub struct DescribeClusterRequest {
        include_cluster_authorized_operations: bool [0..],
        endpoint_type: i8 [1..] = 1,
    }
    /// An element of `DescribeClusterResponse.brokers`.
    pub struct DescribeClusterBroker {
        broker_id: i32 [0..],
        host: String [0..],
        port: i32 [0..],
        rack: Option<String> [0..],
    }
    /// DescribeClusterResponse, versions 0-1.
    pub struct DescribeClusterResponse {
        throttle_time_ms: i32 [0..],
        error_code: i16 [0..],
        error_message: Option<String> [0..],
        endpoint_type: i8 [1..] = 1,
        cluster_id: String [0..],
        controller_id: i32 [0..] = -1,
        brokers: Vec<DescribeClusterBroker> [0..],
        cluster_authorized_operations: i32 [0..] = -2147483648,
    }
}
