//! WriteTxnMarkers (API key 27): request and response as Kafka defines them.

#[allow(unused_imports)]
use crate::codec::Uuid;
#[allow(unused_imports)]
use bytes::Bytes;

/// API key of WriteTxnMarkers.
pub const API_KEY: i16 = 27;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 2);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 1;

crate::message! {
    /// An element of `WritableTxnMarker.topics`.
    pub struct WritableTxnMarkerTopic {
        name: String [0..],
        partition_indexes: Vec<i32> [0..],
    }
    /// An element of `WriteTxnMarkersRequest.markers`.
    pub struct WritableTxnMarker {
        producer_id: i64 [0..],
        producer_epoch: i16 [0..],
        transaction_result: bool [0..],
        topics: Vec<WritableTxnMarkerTopic> [0..],
        coordinator_epoch: i32 [0..],
        /// The transaction version the marker is written under (0 and 1 the classic
        /// protocol, 2 KIP-890's); added in v2 (KIP-1228).
        transaction_version: i8 [2..],
    }
    /// WriteTxnMarkersRequest, versions 0-2.
    pub struct WriteTxnMarkersRequest {
        markers: Vec<WritableTxnMarker> [0..],
    }
    /// An element of `WritableTxnMarkerTopicResult.partitions`.
    pub struct WritableTxnMarkerPartitionResult {
        partition_index: i32 [0..],
        error_code: i16 [0..],
    }
    /// An element of `WritableTxnMarkerResult.topics`.
    pub struct WritableTxnMarkerTopicResult {
        name: String [0..],
        partitions: Vec<WritableTxnMarkerPartitionResult> [0..],
    }
    /// An element of `WriteTxnMarkersResponse.markers`.
    pub struct WritableTxnMarkerResult {
        producer_id: i64 [0..],
        topics: Vec<WritableTxnMarkerTopicResult> [0..],
    }
    /// WriteTxnMarkersResponse, versions 0-2 (v2 is v1 again, KIP-1228).
    pub struct WriteTxnMarkersResponse {
        markers: Vec<WritableTxnMarkerResult> [0..],
    }
}
