//! StrataMetadataFetch (API key 1001): a broker-only node pulls the committed cluster
//! metadata log from a controller.
//!
//! **Strata's own API, not Kafka's.** It travels only between Strata nodes on the
//! controller listener and is never advertised to clients in ApiVersions; its key is far
//! above every key Kafka assigns (they are below 100).
//!
//! The fetcher says the last log index it has applied; the controller answers with the
//! committed entries after it, or, when it no longer has them (the log was compacted
//! into a snapshot), with a full snapshot to start over from. A controller with nothing
//! new may hold the request up to `max_wait_ms`. Snapshot and records are opaque here:
//! the broker encodes them.

use bytes::Bytes;

/// API key of StrataMetadataFetch: Strata's own, never used by Kafka.
pub const API_KEY: i16 = 1001;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 0);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 0;

crate::message! {
    /// StrataMetadataFetchRequest, version 0.
    pub struct StrataMetadataFetchRequest {
        /// The fetching node's id.
        node_id: i32 [0..],
        /// The index of the last entry the fetcher has applied, -1 if none: the answer
        /// starts after it.
        from_index: i64 [0..] = -1,
        /// How long the controller may wait for new entries before answering.
        max_wait_ms: i32 [0..],
    }
    /// StrataMetadataFetchResponse, version 0.
    pub struct StrataMetadataFetchResponse {
        /// A Kafka error code (NOT_CONTROLLER and the like); 0 on success.
        error_code: i16 [0..],
        /// The controller leader as this controller knows it, -1 if unknown, so the
        /// fetcher can go there next.
        leader_id: i32 [0..] = -1,
        /// The index of the last entry this answer brings the fetcher to (its snapshot
        /// and records applied), -1 if none.
        applied_index: i64 [0..] = -1,
        /// A full snapshot, when the fetcher is too far behind the log; null otherwise.
        snapshot: Option<Bytes> [0..],
        /// The committed entries after `from_index` (or after the snapshot); null when
        /// there are none.
        records: Option<Bytes> [0..],
    }
}
