//! Leader discovery in Produce and Fetch answers (KIP-951): a partition refused with
//! NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names the leader the metadata knows
//! (`CurrentLeader`), and the answer carries that leader's endpoint on the request's
//! listener (`NodeEndpoints`: Produce v10+, Fetch v16+), so a client can move to the new
//! leader at once instead of first asking for metadata.

use crate::metadata::MetadataImage;
use std::collections::BTreeSet;
use strata_protocol::ErrorCode;

/// Whether an answer with this error names the current leader (as Kafka's KafkaApis).
pub fn names_leader(error_code: i16) -> bool {
    error_code == ErrorCode::NotLeaderOrFollower.code() || error_code == ErrorCode::FencedLeaderEpoch.code()
}

/// The leader and leader epoch the metadata names for a partition; (-1, -1) if unknown.
pub fn current_leader(image: &MetadataImage, topic: &str, partition: i32) -> (i32, i32) {
    image.partition(topic, partition).map_or((-1, -1), |p| (p.leader, p.leader_epoch))
}

/// The endpoints on `listener` of the brokers in `leaders` that are live and listen
/// there, in node id order, each built by `make(node_id, host, port, rack)`.
pub fn node_endpoints<T>(
    image: &MetadataImage,
    listener: &str,
    leaders: impl IntoIterator<Item = i32>,
    make: impl Fn(i32, String, i32, Option<String>) -> T,
) -> Vec<T> {
    let ids: BTreeSet<i32> = leaders.into_iter().filter(|id| *id >= 0).collect();
    ids.into_iter()
        .filter_map(|id| {
            let b = image.broker(id).filter(|b| !b.fenced)?;
            let e = b.endpoint(listener)?;
            Some(make(id, e.host.clone(), i32::from(e.port), b.rack.clone()))
        })
        .collect()
}
