//! OffsetForLeaderEpoch (23): the end offset of a leader epoch on this partition's
//! leader (KIP-101, KIP-279): the start offset of the next larger epoch, or the log end
//! for the current one. Consumers (librdkafka after a leader change, KIP-320) use it to
//! detect a truncated log; followers of old versions to truncate before fetching.

use crate::node::Node;
use strata_protocol::messages::offset_for_leader_epoch::{
    EpochEndOffset, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, OffsetForLeaderTopicResult,
};

/// Handles OffsetForLeaderEpoch.
pub fn handle(node: &Node, request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse {
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|op| {
                    let mut r = EpochEndOffset {
                        partition: op.partition,
                        leader_epoch: -1,
                        end_offset: -1,
                        ..Default::default()
                    };
                    let p = match node.leader_partition(&t.topic, op.partition) {
                        Ok(p) => p,
                        Err(code) => {
                            r.error_code = code.code();
                            return r;
                        }
                    };
                    if let Err(code) = p.check_leader_epoch(op.current_leader_epoch) {
                        r.error_code = code.code();
                        return r;
                    }
                    if let Some((found, end)) = p.log.end_offset_for_epoch(op.leader_epoch) {
                        r.leader_epoch = found;
                        r.end_offset = end;
                    }
                    r
                })
                .collect();
            OffsetForLeaderTopicResult { topic: t.topic, partitions }
        })
        .collect();
    OffsetForLeaderEpochResponse { topics, ..Default::default() }
}
