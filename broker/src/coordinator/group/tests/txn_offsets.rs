//! Transactional offset commits: TxnOffsetCommit validation and writes, pending offsets
//! invisible until their marker, commit and abort, OffsetFetch `require_stable`, replay
//! of transactional batches and markers (interleaved producers), and the interplay with
//! OffsetDelete, DeleteGroups, topic deletion and expiry.

use super::replay::{reload, snapshot};
use super::*;
use strata_protocol::messages::offset_fetch::{
    OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use strata_protocol::messages::txn_offset_commit::{
    TxnOffsetCommitRequest, TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};

const DAY_MS: i64 = 24 * 60 * 60 * 1000;
const P1: i64 = 1001;
const P2: i64 = 1002;
const P3: i64 = 1003;

fn txn_req(group: &str, producer_id: i64, offsets: &[(&str, i32, i64)]) -> TxnOffsetCommitRequest {
    TxnOffsetCommitRequest {
        transactional_id: format!("tx-{producer_id}"),
        group_id: group.into(),
        producer_id,
        producer_epoch: 3,
        generation_id: -1,
        topics: offsets
            .iter()
            .map(|(topic, partition, offset)| TxnOffsetCommitRequestTopic {
                name: (*topic).into(),
                partitions: vec![TxnOffsetCommitRequestPartition {
                    partition_index: *partition,
                    committed_offset: *offset,
                    committed_leader_epoch: 4,
                    committed_metadata: Some("txn".into()),
                }],
            })
            .collect(),
        ..TxnOffsetCommitRequest::default()
    }
}

/// A v3 request from a group member.
fn member_req(
    group: &str,
    producer_id: i64,
    member: &str,
    generation: i32,
    offsets: &[(&str, i32, i64)],
) -> TxnOffsetCommitRequest {
    TxnOffsetCommitRequest {
        member_id: member.into(),
        generation_id: generation,
        ..txn_req(group, producer_id, offsets)
    }
}

impl Harness {
    /// Sends a TxnOffsetCommit; returns its token and, if answered, the partition errors.
    fn txn_commit_v(&mut self, version: i16, req: TxnOffsetCommitRequest) -> (RequestToken, Vec<i16>) {
        let meta = self.meta(version, "producer");
        let a = self.c.txn_offset_commit(&meta, req, self.now);
        self.run(a);
        (meta.token, self.txn_errors(meta.token))
    }

    fn txn_errors(&self, token: RequestToken) -> Vec<i16> {
        match self.responses.get(&token) {
            Some(Response::TxnOffsetCommit(r)) => {
                r.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect()
            }
            None => Vec::new(),
            other => panic!("{other:?}"),
        }
    }

    fn txn_commit(&mut self, group: &str, producer_id: i64, offsets: &[(&str, i32, i64)]) -> Vec<i16> {
        self.txn_commit_v(3, txn_req(group, producer_id, offsets)).1
    }

    fn pending(&self, group: &str, producer_id: i64, topic: &str, partition: i32) -> Option<i64> {
        self.c.pending_transactional_offset(group, producer_id, topic, partition).map(|o| o.committed_offset)
    }

    fn marker_for(&mut self, group: &str, producer_id: i64, commit: bool) {
        let partition = self.c.partition_for(group);
        self.marker(partition, producer_id, commit);
    }

    /// OffsetFetch of one partition at `version` (7: single group, 8: batched):
    /// (offset, partition error).
    fn fetch_at(&self, version: i16, group: &str, topic: &str, partition: i32, stable: bool) -> (i64, i16) {
        let req = if version >= 8 {
            OffsetFetchRequest {
                groups: vec![OffsetFetchRequestGroup {
                    group_id: group.into(),
                    topics: Some(vec![OffsetFetchRequestTopics {
                        name: topic.into(),
                        partition_indexes: vec![partition],
                    }]),
                    ..OffsetFetchRequestGroup::default()
                }],
                require_stable: stable,
                ..OffsetFetchRequest::default()
            }
        } else {
            OffsetFetchRequest {
                group_id: group.into(),
                topics: Some(vec![OffsetFetchRequestTopic {
                    name: topic.into(),
                    partition_indexes: vec![partition],
                }]),
                require_stable: stable,
                ..OffsetFetchRequest::default()
            }
        };
        let r = self.c.fetch_offsets(version, &req);
        if version >= 8 {
            assert_eq!(r.groups[0].error_code, 0);
            let p = &r.groups[0].topics[0].partitions[0];
            (p.committed_offset, p.error_code)
        } else {
            assert_eq!(r.error_code, 0);
            let p = &r.topics[0].partitions[0];
            (p.committed_offset, p.error_code)
        }
    }

    /// The log replays to exactly what memory holds.
    fn assert_replay_matches(&self) {
        assert_eq!(snapshot(&reload(self)), snapshot(&self.c));
    }
}

#[test]
fn commit_marker_makes_pending_offsets_visible() {
    let mut h = Harness::new(config());
    h.auto_ack = false;
    let (token, _) = h.txn_commit_v(0, txn_req("g", P1, &[("t", 0, 10), ("u", 2, 20)]));
    let (_, partition, records, producer) = h.held[0].clone();
    assert_eq!(partition, h.c.partition_for("g"));
    assert_eq!(producer, Some(TransactionalProducer { producer_id: P1, producer_epoch: 3 }));
    let Record::OffsetCommit { key, value: Some(value) } = &records[0] else { panic!("{records:?}") };
    assert_eq!((key.topic.as_str(), key.partition, value.offset), ("t", 0, 10));
    assert_eq!((value.leader_epoch, value.metadata.as_str(), value.commit_timestamp), (4, "txn", h.now));
    assert_eq!(value.expire_timestamp, -1);
    assert!(!h.answered(token), "answered once written");
    h.ack();
    assert_eq!(h.txn_errors(token), vec![0, 0]);
    assert_eq!(h.c.group_state("g"), Some(GroupState::Empty), "a simple group holds them");

    assert_eq!(h.pending("g", P1, "t", 0), Some(10));
    assert_eq!(h.fetched("g", "t", 0), -1, "pending offsets are invisible");
    assert_eq!(h.c.committed_offset("g", "u", 2), None);

    h.marker_for("g", P1, true);
    assert_eq!(h.fetched("g", "t", 0), 10);
    assert_eq!(h.fetched("g", "u", 2), 20);
    let committed = h.c.committed_offset("g", "t", 0).unwrap();
    assert_eq!((committed.leader_epoch, committed.metadata.as_str()), (Some(4), "txn"));
    assert_eq!(h.pending("g", P1, "t", 0), None);
    assert!(h.c.open_txns.is_empty());
    h.assert_replay_matches();
    h.assert_all_answered();
}

#[test]
fn abort_marker_drops_pending_offsets() {
    let mut h = Harness::new(config());
    h.commit("g", "", -1, &[("t", 0, 5)]);
    assert_eq!(h.txn_commit("g", P1, &[("t", 0, 10), ("t", 1, 11)]), vec![0, 0]);
    h.marker_for("g", P1, false);
    assert_eq!(h.fetched("g", "t", 0), 5);
    assert_eq!(h.fetched("g", "t", 1), -1);
    assert_eq!(h.pending("g", P1, "t", 0), None);
    // A later transaction of the same producer starts afresh.
    h.txn_commit("g", P1, &[("t", 1, 12)]);
    h.marker_for("g", P1, true);
    assert_eq!((h.fetched("g", "t", 0), h.fetched("g", "t", 1)), (5, 12));
    h.assert_replay_matches();
}

#[test]
fn the_latest_record_wins_when_plain_and_transactional_commits_mix() {
    let mut h = Harness::new(config());
    // Transactional record first, plain commit after: the plain one stays.
    h.txn_commit("g", P1, &[("t", 0, 10)]);
    h.commit("g", "", -1, &[("t", 0, 20)]);
    h.marker_for("g", P1, true);
    assert_eq!(h.fetched("g", "t", 0), 20);
    // Plain commit first, transactional record after: the transaction's offset wins.
    h.commit("g", "", -1, &[("t", 1, 30)]);
    h.txn_commit("g", P1, &[("t", 1, 5)]);
    h.marker_for("g", P1, true);
    assert_eq!(h.fetched("g", "t", 1), 5);
    h.assert_replay_matches();
}

#[test]
fn markers_complete_only_their_producer_in_their_partition() {
    let mut h = Harness::new(config());
    let other =
        (0..100).map(|i| format!("o{i}")).find(|g| h.c.partition_for(g) != h.c.partition_for("g")).unwrap();
    h.txn_commit("g", P1, &[("t", 0, 1)]);
    h.txn_commit("g", P2, &[("t", 0, 2), ("t", 1, 2)]);
    h.txn_commit(&other, P1, &[("t", 0, 3)]);

    h.marker_for("g", P1, true);
    assert_eq!(h.fetched("g", "t", 0), 1);
    assert_eq!(h.pending("g", P2, "t", 0), Some(2), "another producer's transaction stays open");
    assert_eq!(h.pending(&other, P1, "t", 0), Some(3), "a group of another partition waits for its marker");
    assert_eq!(h.fetched(&other, "t", 0), -1);

    // A marker of a producer without offsets here changes nothing.
    h.marker_for("g", P3, true);
    assert_eq!(h.pending("g", P2, "t", 1), Some(2));

    h.marker_for("g", P2, true);
    assert_eq!((h.fetched("g", "t", 0), h.fetched("g", "t", 1)), (2, 2));
    h.marker_for(&other, P1, false);
    assert_eq!(h.fetched(&other, "t", 0), -1);
    assert!(h.c.open_txns.is_empty());
    h.assert_replay_matches();
}

#[test]
fn require_stable_answers_unstable_for_pending_partitions() {
    let mut h = Harness::new(config());
    h.commit("g", "", -1, &[("t", 0, 5), ("t", 1, 6)]);
    h.txn_commit("g", P1, &[("t", 0, 10), ("u", 0, 1)]);
    let unstable = code(ErrorCode::UnstableOffsetCommit);
    for version in [7, 8, 9] {
        assert_eq!(h.fetch_at(version, "g", "t", 0, true), (-1, unstable), "v{version}");
        assert_eq!(h.fetch_at(version, "g", "u", 0, true), (-1, unstable), "no committed offset yet");
        assert_eq!(h.fetch_at(version, "g", "t", 1, true), (6, 0), "other partitions are stable");
        assert_eq!(h.fetch_at(version, "g", "t", 0, false), (5, 0), "without require_stable: last committed");
    }
    // Before v7 there is no require_stable.
    assert_eq!(h.fetch_at(6, "g", "t", 0, true), (5, 0));

    // Every committed partition, require_stable: the pending one is unstable.
    let all = h.c.fetch_group_offsets("g", None, true);
    let listed: Vec<(String, i32, i64, i16)> = all
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| (t.name.clone(), p.partition_index, p.committed_offset, p.error_code))
        })
        .collect();
    assert_eq!(listed, vec![("t".into(), 0, -1, unstable), ("t".into(), 1, 6, 0)]);

    h.marker_for("g", P1, true);
    assert_eq!(h.fetch_at(7, "g", "t", 0, true), (10, 0));
    assert_eq!(h.fetch_at(8, "g", "u", 0, true), (1, 0));

    // A plain commit being written is unstable too (as in Kafka's classic coordinator).
    h.auto_ack = false;
    h.commit("g", "", -1, &[("t", 1, 7)]);
    assert_eq!(h.fetch_at(8, "g", "t", 1, true), (-1, unstable));
    assert_eq!(h.fetch_at(8, "g", "t", 1, false), (6, 0));
    h.ack();
    assert_eq!(h.fetch_at(8, "g", "t", 1, true), (7, 0));
    // And so is a transactional commit being written.
    h.txn_commit("g", P2, &[("t", 1, 8)]);
    assert_eq!(h.fetch_at(8, "g", "t", 1, true), (-1, unstable));
    h.ack();
    assert_eq!(h.fetch_at(8, "g", "t", 1, true), (-1, unstable));
    h.marker_for("g", P2, false);
    assert_eq!(h.fetch_at(8, "g", "t", 1, true), (7, 0));
}

#[test]
fn txn_offset_commit_validation() {
    let mut h = Harness::new(config());
    let invalid = code(ErrorCode::InvalidGroupId);
    assert_eq!(h.txn_commit("", P1, &[("t", 0, 1)]), vec![invalid]);
    let illegal = code(ErrorCode::IllegalGeneration);
    let (_, errors) = h.txn_commit_v(3, member_req("nobody", P1, "m", 1, &[("t", 0, 1)]));
    assert_eq!(errors, vec![illegal], "an unknown group with a generation");
    assert_eq!(h.c.group_state("nobody"), None);

    let (ids, gen) = h.stable_group("g", 2);
    let unknown = code(ErrorCode::UnknownMemberId);
    assert_eq!(h.txn_commit_v(3, member_req("g", P1, "ghost", gen, &[("t", 0, 1)])).1, vec![unknown]);
    assert_eq!(h.txn_commit_v(3, member_req("g", P1, &ids[0], gen + 1, &[("t", 0, 1)])).1, vec![illegal]);
    assert_eq!(h.txn_commit_v(3, member_req("g", P1, &ids[0], gen, &[("t", 0, 1)])).1, vec![0]);
    // Before v3 (no member, no generation) a live group takes transactional commits.
    assert_eq!(h.txn_commit_v(0, txn_req("g", P2, &[("t", 1, 1)])).1, vec![0]);
    // During a rebalance too: the transaction is not the group's business.
    let rejoin = h.join("g", &ids[0]);
    h.join("g", &ids[1]);
    h.advance(0);
    assert!(h.answered(rejoin));
    assert_eq!(h.c.group_state("g"), Some(GroupState::CompletingRebalance));
    assert_eq!(h.txn_commit_v(3, member_req("g", P1, &ids[1], gen + 1, &[("t", 2, 1)])).1, vec![0]);

    // Oversized metadata: that partition only.
    let mut req = txn_req("g", P3, &[("t", 0, 1), ("t", 1, 1)]);
    req.topics[1].partitions[0].committed_metadata = Some("x".repeat(4097));
    let too_large = code(ErrorCode::OffsetMetadataTooLarge);
    assert_eq!(h.txn_commit_v(2, req).1, vec![0, too_large]);
    assert_eq!(h.pending("g", P3, "t", 0), Some(1));
    assert_eq!(h.pending("g", P3, "t", 1), None);
    // Nothing valid: answered at once, nothing written.
    let mut req = txn_req("g", P3, &[("t", 5, 1)]);
    req.topics[0].partitions[0].committed_metadata = Some("x".repeat(4097));
    let log_len = h.log.len();
    assert_eq!(h.txn_commit_v(2, req).1, vec![too_large]);
    assert_eq!(h.log.len(), log_len);
    h.assert_all_answered();
}

#[test]
fn static_members_are_checked() {
    let mut h = Harness::new(config());
    let t = h.join_with("g", "", Some("i1"), consumer_protocols(), 5);
    h.advance(0);
    let r = h.join_response(t).unwrap();
    h.sync("g", &r.member_id, r.generation_id, &[(&r.member_id, b"a")]);
    let mut req = member_req("g", P1, "someone-else", r.generation_id, &[("t", 0, 1)]);
    req.group_instance_id = Some("i1".into());
    assert_eq!(h.txn_commit_v(3, req).1, vec![code(ErrorCode::FencedInstanceId)]);
    let mut req = member_req("g", P1, &r.member_id, r.generation_id, &[("t", 0, 1)]);
    req.group_instance_id = Some("i1".into());
    assert_eq!(h.txn_commit_v(3, req).1, vec![0]);
}

#[test]
fn coordinator_errors_and_failed_writes() {
    let mut h = Harness::new(config());
    let partition = h.c.partition_for("g");
    let a = h.c.unload(partition, h.now);
    h.run(a);
    assert_eq!(h.txn_commit("g", P1, &[("t", 0, 1)]), vec![code(ErrorCode::NotCoordinator)]);
    let a = h.c.begin_load(partition, h.now);
    h.run(a);
    assert_eq!(h.txn_commit("g", P1, &[("t", 0, 1)]), vec![code(ErrorCode::CoordinatorLoadInProgress)]);
    let a = h.c.complete_load(partition, h.now);
    h.run(a);

    h.auto_ack = false;
    for (error, answered) in [
        (ErrorCode::NotLeaderOrFollower, ErrorCode::NotCoordinator),
        (ErrorCode::RequestTimedOut, ErrorCode::CoordinatorNotAvailable),
        (ErrorCode::MessageTooLarge, ErrorCode::InvalidCommitOffsetSize),
        // The log fences a stale producer epoch; the client learns it as such.
        (ErrorCode::InvalidProducerEpoch, ErrorCode::InvalidProducerEpoch),
    ] {
        let (token, _) = h.txn_commit_v(3, txn_req("g", P1, &[("t", 0, 1)]));
        h.fail(error);
        assert_eq!(h.txn_errors(token), vec![code(answered)], "{error:?}");
        assert_eq!(h.pending("g", P1, "t", 0), None);
        assert!(!h.c.groups["g"].is_offset_unstable("t", 0));
    }
    assert!(h.c.open_txns.is_empty());
    h.assert_all_answered();
}

#[test]
fn markers_while_a_commit_is_in_flight() {
    let mut h = Harness::new(config());
    h.auto_ack = false;
    // Abort: the commit being written belongs to the aborted transaction.
    let (token, _) = h.txn_commit_v(3, txn_req("g", P1, &[("t", 0, 1)]));
    h.marker_for("g", P1, false);
    h.ack();
    assert_eq!(h.txn_errors(token), vec![0]);
    assert_eq!(h.pending("g", P1, "t", 0), None);
    assert_eq!(h.fetched("g", "t", 0), -1);
    // Commit: never made visible early; it stays pending for the producer's next marker.
    h.txn_commit_v(3, txn_req("g", P1, &[("t", 0, 2)]));
    h.marker_for("g", P1, true);
    assert_eq!(h.fetched("g", "t", 0), -1);
    h.ack();
    assert_eq!(h.pending("g", P1, "t", 0), Some(2));
    h.marker_for("g", P1, true);
    assert_eq!(h.fetched("g", "t", 0), 2);
    h.assert_all_answered();
}

#[test]
fn replay_with_interleaved_producers_and_markers() {
    let mut h = Harness::new(config());
    h.commit("g", "", -1, &[("t", 1, 100)]);
    h.txn_commit("g", P1, &[("t", 0, 1)]);
    h.txn_commit("g", P2, &[("t", 0, 2), ("t", 1, 3)]);
    h.txn_commit("h", P1, &[("t", 0, 7)]);
    h.commit("g", "", -1, &[("t", 1, 4)]);
    h.txn_commit("g", P3, &[("t", 2, 9)]);
    h.marker_for("g", P1, true);
    h.marker_for("g", P2, true);
    if h.c.partition_for("h") != h.c.partition_for("g") {
        h.marker_for("h", P1, false);
    }
    h.txn_commit("g", P2, &[("t", 3, 5)]);
    h.marker_for("g", P2, false);

    let reloaded = reload(&h);
    assert_eq!(snapshot(&reloaded), snapshot(&h.c));
    let committed = |g: &str, p: i32| reloaded.committed_offset(g, "t", p).map(|o| o.committed_offset);
    assert_eq!(committed("g", 0), Some(2), "P2's commit is newer than P1's");
    assert_eq!(committed("g", 1), Some(4), "the plain commit written after P2's record stays");
    assert_eq!(committed("g", 2), None);
    assert_eq!(committed("g", 3), None, "aborted");
    assert_eq!(
        reloaded.pending_transactional_offset("g", P3, "t", 2).map(|o| o.committed_offset),
        Some(9),
        "no marker yet: pending after the load"
    );
    assert_eq!(
        reloaded.fetch_group_offsets("g", Some(&[("t".into(), vec![2])]), true).topics[0].partitions[0]
            .error_code,
        code(ErrorCode::UnstableOffsetCommit)
    );

    // The transaction still open at load completes on the loaded coordinator.
    let mut other = Harness::new(config());
    other.c = reloaded;
    other.batches = h.batches.clone();
    other.marker_for("g", P3, true);
    assert_eq!(other.fetched("g", "t", 2), 9);
    other.assert_replay_matches();
}

#[test]
fn replay_of_raw_batches() {
    let mut c = GroupCoordinator::new(config());
    let partition = c.partition_for("g");
    let _ = c.begin_load(partition, 0);
    let commit = |offset: i64| Record::OffsetCommit {
        key: records::OffsetCommitKey { group: "g".into(), topic: "t".into(), partition: 0 },
        value: Some(records::OffsetCommitValue {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 5,
            expire_timestamp: -1,
        }),
    };
    let r = commit(1);
    c.replay_transactional(partition, P1, r.key_bytes(), r.value_bytes()).unwrap();
    assert_eq!(c.group_state("g"), Some(GroupState::Empty), "a simple group, as in Kafka");
    assert_eq!(c.committed_offset("g", "t", 0), None);
    c.replay_marker(partition, P2, true);
    assert_eq!(c.committed_offset("g", "t", 0), None, "another producer's marker");
    c.replay_marker(partition, P1, true);
    assert_eq!(c.committed_offset("g", "t", 0).map(|o| o.committed_offset), Some(1));
    c.replay_transactional_record(partition, P1, commit(2));
    c.replay_marker(partition, P1, false);
    assert_eq!(c.committed_offset("g", "t", 0).map(|o| o.committed_offset), Some(1));
    // A tombstone drops the committed and the pending offsets of the partition.
    c.replay_transactional_record(partition, P2, commit(3));
    c.replay_record(partition, Record::offset_tombstone("g", "t", 0));
    c.replay_marker(partition, P2, true);
    assert_eq!(c.committed_offset("g", "t", 0), None);
    assert!(c.replay_transactional(partition, P1, Bytes::from_static(&[0]), None).is_err());
    let _ = c.complete_load(partition, 0);
}

#[test]
fn offset_delete_and_topic_deletion_drop_pending_offsets() {
    let mut h = Harness::new(config());
    h.txn_commit("g", P1, &[("t", 0, 1), ("t", 1, 1), ("gone", 0, 1)]);
    let log_len = h.log.len();
    let Some(Response::OffsetDelete(r)) = h.delete_offsets("g", &[("t", 0)]) else { panic!() };
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
    assert_eq!(h.log[log_len..], [(h.c.partition_for("g"), Record::offset_tombstone("g", "t", 0))]);
    assert_eq!(h.pending("g", P1, "t", 0), None);
    assert_eq!(h.pending("g", P1, "t", 1), Some(1));

    let a = h.c.delete_offsets_of_topics(&["gone".to_string()], h.now);
    h.run(a);
    assert_eq!(h.log.last().map(|(_, r)| r), Some(&Record::offset_tombstone("g", "gone", 0)));
    assert_eq!(h.pending("g", P1, "gone", 0), None);

    h.marker_for("g", P1, true);
    assert_eq!(h.fetched("g", "t", 0), -1, "deleted before the commit");
    assert_eq!(h.fetched("g", "gone", 0), -1);
    assert_eq!(h.fetched("g", "t", 1), 1);
    h.assert_replay_matches();
}

#[test]
fn a_commit_in_flight_when_its_offset_is_deleted_does_not_become_pending() {
    let mut h = Harness::new(config());
    h.auto_ack = false;
    let (token, _) = h.txn_commit_v(3, txn_req("g", P1, &[("t", 0, 1)]));
    h.delete_offsets("g", &[("t", 0)]);
    while !h.held.is_empty() {
        h.ack();
    }
    assert_eq!(h.txn_errors(token), vec![0]);
    assert_eq!(h.pending("g", P1, "t", 0), None);
    h.marker_for("g", P1, true);
    assert_eq!(h.fetched("g", "t", 0), -1);
    h.assert_replay_matches();
}

#[test]
fn delete_groups_deletes_an_empty_group_with_an_open_transaction() {
    let mut h = Harness::new(config());
    h.commit("g", "", -1, &[("t", 0, 5)]);
    h.txn_commit("g", P1, &[("t", 0, 6), ("t", 1, 7)]);
    let log_len = h.log.len();
    let t = h.delete_groups(&["g"]);
    let Some(Response::DeleteGroups(r)) = h.responses.get(&t) else { panic!() };
    assert_eq!(r.results[0].error_code, 0);
    let written: Vec<&Record> = h.log[log_len..].iter().map(|(_, r)| r).collect();
    assert_eq!(
        written,
        vec![
            &Record::offset_tombstone("g", "t", 0),
            &Record::offset_tombstone("g", "t", 1),
            &Record::group_tombstone("g"),
        ]
    );
    assert_eq!(h.c.group_state("g"), None);
    h.marker_for("g", P1, true);
    assert_eq!(h.c.group_state("g"), None, "the marker does not bring the group back");
    h.assert_replay_matches();
}

#[test]
fn expiry_waits_for_open_transactions() {
    let mut h = Harness::new(GroupConfig { offsets_retention_check_interval_ms: 60_000, ..config() });
    h.commit("s", "", -1, &[("t", 0, 5), ("t", 1, 6)]);
    h.txn_commit("s", P1, &[("t", 0, 7)]);
    h.txn_commit("only-txn", P1, &[("t", 0, 1)]);
    h.advance(8 * DAY_MS);
    assert_eq!(h.fetched("s", "t", 1), -1, "expired");
    assert_eq!(h.c.committed_offset("s", "t", 0).map(|o| o.committed_offset), Some(5), "pending: kept");
    assert_eq!(h.c.group_state("s"), Some(GroupState::Empty));
    assert_eq!(h.c.group_state("only-txn"), Some(GroupState::Empty), "an open transaction keeps the group");

    h.marker_for("s", P1, false);
    h.marker_for("only-txn", P1, false);
    h.advance(8 * DAY_MS);
    assert_eq!(h.c.group_state("s"), None);
    assert_eq!(h.c.group_state("only-txn"), None);
    h.assert_replay_matches();
}

#[test]
fn unloading_forgets_open_transactions() {
    let mut h = Harness::new(config());
    h.txn_commit("g", P1, &[("t", 0, 1)]);
    let partition = h.c.partition_for("g");
    assert!(h.c.open_txns.contains_key(&(partition, P1)));
    let a = h.c.unload(partition, h.now);
    h.run(a);
    assert!(h.c.open_txns.is_empty());
    assert!(h.c.complete_transaction(partition, P1, true, h.now).is_empty());
    assert_eq!(h.c.group_state("g"), None);
}
