//! DescribeQuorum's answer (KIP-595), from a voter's view of the metadata quorum. Only
//! the leader knows how far every voter has replicated, so any other voter answers
//! NOT_LEADER_OR_FOLLOWER, as Kafka's do, and the broker forwarding the request moves on
//! to the next voter.
//!
//! Offsets are Kafka's: a log end offset and the high watermark are one past the last
//! index (Raft indexes count from 0 here, as KRaft's offsets do).

use super::raft::{QuorumRole, QuorumStatus};
use strata_protocol::messages::describe_quorum::{
    DescribeQuorumRequest, DescribeQuorumResponse, PartitionDataResponse, ReplicaState, TopicDataResponse,
};
use strata_protocol::ErrorCode;

/// The metadata log's topic name, which DescribeQuorum names.
pub const METADATA_TOPIC: &str = "__cluster_metadata";

/// The answer to `request` from `status`.
pub fn describe_quorum(request: &DescribeQuorumRequest, status: &QuorumStatus) -> DescribeQuorumResponse {
    let asks_metadata_log = request.topics.len() == 1
        && request.topics[0].topic_name == METADATA_TOPIC
        && request.topics[0].partitions.len() == 1
        && request.topics[0].partitions[0].partition_index == 0;
    if !asks_metadata_log {
        return error(ErrorCode::UnknownTopicOrPartition, "only __cluster_metadata-0 has a quorum");
    }
    if status.role != QuorumRole::Leader {
        return error(ErrorCode::NotLeaderOrFollower, "this voter is not the quorum's leader");
    }
    let after = |index: Option<u64>| index.map_or(-1, |i| i as i64 + 1);
    let voters = status
        .voters
        .iter()
        .map(|v| ReplicaState {
            replica_id: v.node_id,
            log_end_offset: if v.node_id == status.node_id {
                after(status.last_log_index)
            } else {
                after(v.matched_index)
            },
            ..Default::default()
        })
        .collect();
    DescribeQuorumResponse {
        topics: vec![TopicDataResponse {
            topic_name: METADATA_TOPIC.into(),
            partitions: vec![PartitionDataResponse {
                partition_index: 0,
                error_code: 0,
                error_message: None,
                leader_id: status.node_id,
                leader_epoch: status.term as i32,
                high_watermark: after(status.committed_index).max(0),
                current_voters: voters,
                observers: Vec::new(),
            }],
        }],
        ..Default::default()
    }
}

/// A partition-level error for the metadata log, as Kafka's raft client answers one.
pub fn error(code: ErrorCode, message: &str) -> DescribeQuorumResponse {
    DescribeQuorumResponse {
        topics: vec![TopicDataResponse {
            topic_name: METADATA_TOPIC.into(),
            partitions: vec![PartitionDataResponse {
                partition_index: 0,
                error_code: code.code(),
                error_message: Some(message.to_string()),
                leader_id: -1,
                leader_epoch: -1,
                high_watermark: -1,
                ..Default::default()
            }],
        }],
        ..Default::default()
    }
}

/// True if the answer says to ask another voter.
pub fn is_not_leader(response: &DescribeQuorumResponse) -> bool {
    response.error_code == ErrorCode::NotController.code()
        || response
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .any(|p| p.error_code == ErrorCode::NotLeaderOrFollower.code())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::raft::VoterStatus;
    use strata_protocol::messages::describe_quorum::{PartitionData, TopicData};

    fn request(topic: &str, partition: i32) -> DescribeQuorumRequest {
        DescribeQuorumRequest {
            topics: vec![TopicData {
                topic_name: topic.into(),
                partitions: vec![PartitionData { partition_index: partition }],
            }],
        }
    }

    fn status(role: QuorumRole) -> QuorumStatus {
        let voter =
            |id, matched| VoterStatus { node_id: id, addr: format!("h:{id}"), matched_index: matched };
        QuorumStatus {
            node_id: 1,
            role,
            leader: Some(1),
            term: 7,
            committed_index: Some(41),
            applied_index: Some(41),
            last_log_index: Some(42),
            snapshot_index: None,
            voters: vec![voter(0, Some(40)), voter(1, Some(42)), voter(2, None)],
            millis_since_quorum_ack: Some(3),
        }
    }

    #[test]
    fn the_leader_answers_with_kafka_offsets_one_past_the_raft_indexes() {
        let r = describe_quorum(&request(METADATA_TOPIC, 0), &status(QuorumRole::Leader));
        let p = &r.topics[0].partitions[0];
        assert_eq!((p.error_code, p.leader_id, p.leader_epoch, p.high_watermark), (0, 1, 7, 42));
        let ends: Vec<(i32, i64)> =
            p.current_voters.iter().map(|v| (v.replica_id, v.log_end_offset)).collect();
        assert_eq!(ends, vec![(0, 41), (1, 43), (2, -1)], "an unknown voter's end is -1");
        assert!(!is_not_leader(&r));
    }

    #[test]
    fn a_follower_sends_the_asker_to_the_leader() {
        let r = describe_quorum(&request(METADATA_TOPIC, 0), &status(QuorumRole::Follower));
        assert_eq!(r.topics[0].partitions[0].error_code, ErrorCode::NotLeaderOrFollower.code());
        assert!(is_not_leader(&r));
    }

    #[test]
    fn another_topic_or_partition_is_unknown() {
        for req in [request("t", 0), request(METADATA_TOPIC, 1), DescribeQuorumRequest { topics: vec![] }] {
            let r = describe_quorum(&req, &status(QuorumRole::Leader));
            assert_eq!(r.topics[0].partitions[0].error_code, ErrorCode::UnknownTopicOrPartition.code());
            assert!(!is_not_leader(&r), "not worth asking another voter");
        }
    }
}
