//! ListOffsets (2): earliest, latest, max-timestamp, or the first offset at or after a
//! timestamp, per partition, from the partition's leader.
//!
//! Versions 8-10 add nothing to decode but what a client may ask: earliest-local (-4, KIP-405)
//! is the log start offset and latest-tiered (-5, KIP-1005) is no offset, since nothing is
//! tiered; v10's `timeout_ms` (KIP-1075) bounds remote-storage lookups, which there are none of.
//!
//! Version 0 (still what older sarama-based tools such as Burrow send) answers with the
//! same one offset in `old_style_offsets` (none if `max_num_offsets` is 0 or nothing is
//! found); Kafka's v0 could list several segment base offsets before a timestamp, which
//! no client we know relies on.

use crate::errors::storage_error_code;
use crate::node::Node;
use strata_protocol::messages::list_offsets::{
    ListOffsetsPartitionResponse, ListOffsetsRequest, ListOffsetsResponse, ListOffsetsTopicResponse,
};

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
/// The highest offset copied to tiered storage (v9, KIP-1005): none without tiered storage.
const LATEST_TIERED: i64 = -5;

/// Handles ListOffsets.
pub fn handle(node: &Node, version: i16, request: ListOffsetsRequest) -> ListOffsetsResponse {
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .into_iter()
                .map(|lp| {
                    let mut r = ListOffsetsPartitionResponse {
                        partition_index: lp.partition_index,
                        timestamp: -1,
                        offset: -1,
                        leader_epoch: -1,
                        ..Default::default()
                    };
                    let p = match node.leader_partition(&t.name, lp.partition_index) {
                        Ok(p) => p,
                        Err(code) => {
                            r.error_code = code.code();
                            return r;
                        }
                    };
                    let epoch = match p.check_leader_epoch(lp.current_leader_epoch) {
                        Ok(epoch) => epoch,
                        Err(code) => {
                            r.error_code = code.code();
                            return r;
                        }
                    };
                    match lp.timestamp {
                        LATEST if request.isolation_level == 1 => r.offset = p.last_stable_offset(),
                        LATEST => r.offset = p.high_watermark(),
                        EARLIEST | EARLIEST_LOCAL => r.offset = p.log.log_start_offset(),
                        // Nothing is tiered: no offset, as Kafka answers with remote storage off.
                        LATEST_TIERED => {}
                        MAX_TIMESTAMP => match p.log.max_timestamp() {
                            Ok(Some(found)) => {
                                r.timestamp = found.timestamp;
                                r.offset = found.offset;
                                r.leader_epoch = epoch;
                            }
                            Ok(None) => {}
                            Err(e) => r.error_code = storage_error_code(&e).code(),
                        },
                        ts => match p.log.offset_for_timestamp(ts) {
                            Ok(Some(found)) if found.offset < p.high_watermark() => {
                                r.offset = found.offset;
                                r.timestamp = found.timestamp;
                                r.leader_epoch = epoch;
                            }
                            Ok(_) => {}
                            Err(e) => r.error_code = storage_error_code(&e).code(),
                        },
                    }
                    if matches!(lp.timestamp, LATEST | EARLIEST | EARLIEST_LOCAL) {
                        r.leader_epoch = epoch;
                    }
                    if version == 0 && r.offset >= 0 && lp.max_num_offsets > 0 {
                        r.old_style_offsets = vec![r.offset];
                    }
                    r
                })
                .collect();
            ListOffsetsTopicResponse { name: t.name, partitions }
        })
        .collect();
    ListOffsetsResponse { topics, ..Default::default() }
}
