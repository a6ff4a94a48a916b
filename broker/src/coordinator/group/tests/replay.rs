//! Loading: replaying the written log rebuilds the same groups and offsets, and loaded
//! groups behave (sessions restart, members can carry on without rejoining).

use super::*;
use std::collections::BTreeMap;

/// What must survive a coordinator failover, in comparable form.
#[derive(Debug, PartialEq)]
pub(super) struct GroupSnapshot {
    state: GroupState,
    generation: i32,
    protocol_type: Option<String>,
    protocol: Option<String>,
    leader: Option<String>,
    /// Only meaningful (and only persisted exactly) for Empty groups with a protocol
    /// type; a simple group's offsets expire by commit time.
    empty_since: Option<i64>,
    members: Vec<MemberSnapshot>,
    static_members: BTreeMap<String, String>,
    offsets: Vec<(String, i32, OffsetAndMetadata)>,
    /// Pending transactional offsets: (producer id, topic, partition, offset).
    txn_offsets: Vec<(i64, String, i32, OffsetAndMetadata)>,
    subscribed_topics: Option<std::collections::BTreeSet<String>>,
}

/// (member id, instance id, client id, client host, rebalance timeout, session timeout,
/// metadata of the selected protocol, assignment)
type MemberSnapshot = (String, Option<String>, String, String, i32, i32, Option<Bytes>, Bytes);

pub(super) fn snapshot(c: &GroupCoordinator) -> BTreeMap<String, GroupSnapshot> {
    c.groups
        .values()
        .map(|g| {
            let protocol = g.protocol_name.clone().unwrap_or_default();
            let snap = GroupSnapshot {
                state: g.state,
                generation: g.generation_id,
                protocol_type: g.protocol_type.clone(),
                protocol: g.protocol_name.clone(),
                leader: g.leader_id.clone(),
                empty_since: g
                    .state_timestamp_ms
                    .filter(|_| g.is(GroupState::Empty) && g.protocol_type.is_some()),
                members: g
                    .members
                    .iter()
                    .map(|m| {
                        (
                            m.member_id.clone(),
                            m.group_instance_id.clone(),
                            m.client_id.clone(),
                            m.client_host.clone(),
                            m.rebalance_timeout_ms,
                            m.session_timeout_ms,
                            m.metadata(&protocol).cloned(),
                            m.assignment.clone(),
                        )
                    })
                    .collect(),
                static_members: g.static_members.clone().into_iter().collect(),
                offsets: g
                    .offsets
                    .iter()
                    .flat_map(|(t, ps)| ps.iter().map(move |(p, o)| (t.clone(), *p, o.offset.clone())))
                    .collect(),
                txn_offsets: g
                    .txn_offsets
                    .iter()
                    .flat_map(|(pid, os)| {
                        os.iter().map(move |((t, p), o)| (*pid, t.clone(), *p, o.offset.clone()))
                    })
                    .collect(),
                subscribed_topics: g.subscribed_topics.clone(),
            };
            (g.group_id.clone(), snap)
        })
        .collect()
}

/// A second coordinator that loads `log` (through the byte encoding) at `now_ms`.
pub(super) fn reload(h: &Harness) -> GroupCoordinator {
    let config = h.c.config().clone();
    let mut c = GroupCoordinator::new(config.clone());
    for p in 0..config.offsets_topic_num_partitions {
        assert!(c.begin_load(p, h.now).is_empty());
    }
    for batch in &h.batches {
        match batch {
            Batch::Data { partition, producer: None, records } => {
                for r in records {
                    c.replay(*partition, r.key_bytes(), r.value_bytes()).unwrap();
                }
            }
            Batch::Data { partition, producer: Some(p), records } => {
                for r in records {
                    c.replay_transactional(*partition, p.producer_id, r.key_bytes(), r.value_bytes())
                        .unwrap();
                }
            }
            Batch::Marker { partition, producer_id, commit } => {
                c.replay_marker(*partition, *producer_id, *commit)
            }
        }
    }
    for p in 0..config.offsets_topic_num_partitions {
        assert!(c.complete_load(p, h.now).is_empty());
    }
    c
}

#[test]
fn replay_rebuilds_identical_state() {
    let mut h = Harness::new(config());
    let (ids, gen) = h.stable_group("dyn", 3);
    h.commit_offsets_for_test("dyn", &ids[1], gen, &[("t", 0, 10), ("t", 1, 11)]);
    // A static group where one member restarted without a rebalance.
    let tokens: Vec<RequestToken> =
        ["a", "b"].iter().map(|i| h.join_with("static", "", Some(i), consumer_protocols(), 5)).collect();
    h.advance(0);
    let sids: Vec<String> = tokens.iter().map(|t| h.join_response(*t).unwrap().member_id).collect();
    let sgen = h.join_response(tokens[0]).unwrap().generation_id;
    h.sync("static", &sids[0], sgen, &[(&sids[0], b"x"), (&sids[1], b"y")]);
    h.sync("static", &sids[1], sgen, &[]);
    let restarted = h.join_with("static", "", Some("b"), consumer_protocols(), 5);
    assert_eq!(h.join_response(restarted).unwrap().generation_id, sgen);
    // A group that became Empty, a simple group, a deleted group, a deleted offset.
    let (eids, _) = h.stable_group("emptied", 1);
    h.advance(1_234);
    h.leave("emptied", &[(&eids[0], None)]);
    h.commit_offsets_for_test("simple", "", -1, &[("u", 0, 1), ("u", 1, 2)]);
    h.commit_offsets_for_test("doomed", "", -1, &[("u", 0, 1)]);
    let meta = h.meta(2, "admin");
    let req =
        strata_protocol::messages::delete_groups::DeleteGroupsRequest { groups_names: vec!["doomed".into()] };
    let a = h.c.delete_groups(&meta, &req, h.now);
    h.run(a);
    let meta = h.meta(0, "admin");
    let req = strata_protocol::messages::offset_delete::OffsetDeleteRequest {
        group_id: "simple".into(),
        topics: vec![strata_protocol::messages::offset_delete::OffsetDeleteRequestTopic {
            name: "u".into(),
            partitions: vec![strata_protocol::messages::offset_delete::OffsetDeleteRequestPartition {
                partition_index: 1,
            }],
        }],
    };
    let a = h.c.delete_offsets(&meta, &req, h.now);
    h.run(a);

    let before = snapshot(&h.c);
    assert_eq!(before.len(), 4);
    let reloaded = reload(&h);
    assert_eq!(snapshot(&reloaded), before);
}

#[test]
fn loaded_members_carry_on_and_sessions_restart_at_load() {
    let mut h = Harness::new(config());
    let (ids, gen) = h.stable_group("g", 2);
    h.advance(9_000);
    let mut other = Harness::new(config());
    other.now = h.now;
    other.c = reload(&h);
    other.log = h.log.clone();
    other.batches = h.batches.clone();
    // Issue tokens from the new harness; heartbeats of the loaded generation work.
    assert_eq!(other.heartbeat("g", &ids[0], gen), 0);
    let s = other.sync("g", &ids[1], gen, &[]);
    assert_eq!(&other.sync_response(s).unwrap().assignment[..], b"a1");
    // ids[1] goes silent: a full session after the load, it is gone.
    other.advance(5_000);
    assert_eq!(other.heartbeat("g", &ids[0], gen), 0);
    other.advance(5_000);
    assert_eq!(other.c.group_state("g"), Some(GroupState::PreparingRebalance));
    assert_eq!(other.heartbeat("g", &ids[1], gen), code(ErrorCode::UnknownMemberId));
}

#[test]
fn replay_applies_tombstones_and_skips_foreign_records() {
    let mut c = GroupCoordinator::new(config());
    let _ = c.begin_load(1, 0);
    let commit = Record::OffsetCommit {
        key: records::OffsetCommitKey { group: "g".into(), topic: "t".into(), partition: 0 },
        value: Some(records::OffsetCommitValue {
            offset: 3,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 5,
            expire_timestamp: -1,
        }),
    };
    c.replay_record(1, commit.clone());
    assert_eq!(c.committed_offset("g", "t", 0).map(|o| o.committed_offset), Some(3));
    c.replay(1, Bytes::from_static(&[0, 3, 0, 1, b'g']), Some(Bytes::from_static(&[0, 0]))).unwrap();
    c.replay_record(1, Record::offset_tombstone("g", "t", 0));
    assert_eq!(c.committed_offset("g", "t", 0), None);
    c.replay_record(1, commit);
    c.replay_record(1, Record::group_tombstone("g"));
    assert_eq!(c.group_state("g"), None);
    c.replay_record(1, Record::group_tombstone("never-existed"));
    assert!(c.replay(1, Bytes::from_static(&[0]), None).is_err());
}

impl Harness {
    fn commit_offsets_for_test(
        &mut self,
        group: &str,
        member: &str,
        generation: i32,
        offsets: &[(&str, i32, i64)],
    ) {
        use strata_protocol::messages::offset_commit::*;
        let meta = self.meta(8, "client");
        let req = OffsetCommitRequest {
            group_id: group.into(),
            generation_id_or_member_epoch: generation,
            member_id: member.into(),
            topics: offsets
                .iter()
                .map(|(t, p, o)| OffsetCommitRequestTopic {
                    name: (*t).into(),
                    partitions: vec![OffsetCommitRequestPartition {
                        partition_index: *p,
                        committed_offset: *o,
                        committed_leader_epoch: 3,
                        ..OffsetCommitRequestPartition::default()
                    }],
                })
                .collect(),
            ..OffsetCommitRequest::default()
        };
        let a = self.c.commit_offsets(&meta, req, self.now);
        self.run(a);
        assert!(matches!(&self.responses[&meta.token], Response::OffsetCommit(r)
            if r.topics.iter().all(|t| t.partitions.iter().all(|p| p.error_code == 0))));
    }
}
