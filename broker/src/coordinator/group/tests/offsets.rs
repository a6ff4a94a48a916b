//! Offsets (commit rules, fetch, expiry, OffsetDelete) and group administration
//! (DeleteGroups, ListGroups, DescribeGroups, coordinator errors).

use super::*;
use strata_protocol::messages::delete_groups::DeleteGroupsRequest;
use strata_protocol::messages::describe_groups::DescribeGroupsRequest;
use strata_protocol::messages::list_groups::ListGroupsRequest;
use strata_protocol::messages::offset_commit::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use strata_protocol::messages::offset_delete::{
    OffsetDeleteRequest, OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use strata_protocol::messages::offset_fetch::{OffsetFetchRequest, OffsetFetchRequestTopic};

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

fn commit_req(
    group: &str,
    member: &str,
    generation: i32,
    offsets: &[(&str, i32, i64)],
) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: group.into(),
        generation_id_or_member_epoch: generation,
        member_id: member.into(),
        topics: offsets
            .iter()
            .map(|(topic, partition, offset)| OffsetCommitRequestTopic {
                name: (*topic).into(),
                partitions: vec![OffsetCommitRequestPartition {
                    partition_index: *partition,
                    committed_offset: *offset,
                    committed_metadata: Some("meta".into()),
                    ..OffsetCommitRequestPartition::default()
                }],
            })
            .collect(),
        ..OffsetCommitRequest::default()
    }
}

impl Harness {
    fn commit_v(&mut self, version: i16, req: OffsetCommitRequest) -> Vec<i16> {
        let meta = self.meta(version, "client");
        let a = self.c.commit_offsets(&meta, req, self.now);
        self.run(a);
        match self.responses.get(&meta.token) {
            Some(Response::OffsetCommit(r)) => {
                r.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect()
            }
            None => Vec::new(),
            other => panic!("{other:?}"),
        }
    }

    pub(super) fn commit(
        &mut self,
        group: &str,
        member: &str,
        generation: i32,
        offsets: &[(&str, i32, i64)],
    ) -> Vec<i16> {
        self.commit_v(8, commit_req(group, member, generation, offsets))
    }

    pub(super) fn fetched(&self, group: &str, topic: &str, partition: i32) -> i64 {
        let r = self.c.fetch_group_offsets(group, Some(&[(topic.to_owned(), vec![partition])]), false);
        assert_eq!(r.error_code, 0);
        r.topics[0].partitions[0].committed_offset
    }

    pub(super) fn delete_offsets(&mut self, group: &str, topics: &[(&str, i32)]) -> Option<Response> {
        let meta = self.meta(0, "admin");
        let req = OffsetDeleteRequest {
            group_id: group.into(),
            topics: topics
                .iter()
                .map(|(t, p)| OffsetDeleteRequestTopic {
                    name: (*t).into(),
                    partitions: vec![OffsetDeleteRequestPartition { partition_index: *p }],
                })
                .collect(),
        };
        let a = self.c.delete_offsets(&meta, &req, self.now);
        self.run(a);
        self.responses.get(&meta.token).cloned()
    }

    pub(super) fn delete_groups(&mut self, groups: &[&str]) -> RequestToken {
        let meta = self.meta(2, "admin");
        let req = DeleteGroupsRequest { groups_names: groups.iter().map(|g| (*g).to_owned()).collect() };
        let a = self.c.delete_groups(&meta, &req, self.now);
        self.run(a);
        meta.token
    }
}

#[test]
fn simple_commits_create_a_simple_group() {
    let mut h = Harness::new(config());
    assert_eq!(h.commit("s", "", -1, &[("t", 0, 42), ("u", 3, 7)]), vec![0, 0]);
    assert_eq!(h.c.group_state("s"), Some(GroupState::Empty));
    assert_eq!(h.fetched("s", "t", 0), 42);
    assert_eq!(h.fetched("s", "t", 1), -1);
    let all = h.c.fetch_group_offsets("s", None, false);
    let listed: Vec<(String, i32, i64)> = all
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.name.clone(), p.partition_index, p.committed_offset)))
        .collect();
    assert_eq!(listed, vec![("t".into(), 0, 42), ("u".into(), 3, 7)]);
    assert_eq!(h.c.committed_offset("s", "t", 0).unwrap().metadata, "meta");
    let list = h.c.list_groups(&ListGroupsRequest::default());
    assert_eq!((list.groups[0].group_id.as_str(), list.groups[0].protocol_type.as_str()), ("s", ""));
}

#[test]
fn group_commit_rules() {
    let mut h = Harness::new(config());
    let (ids, gen) = h.stable_group("g", 2);
    assert_eq!(h.commit("g", &ids[1], gen, &[("t", 0, 1)]), vec![0]);
    let illegal = code(ErrorCode::IllegalGeneration);
    assert_eq!(h.commit("g", &ids[1], gen + 1, &[("t", 0, 2)]), vec![illegal]);
    let unknown = code(ErrorCode::UnknownMemberId);
    assert_eq!(h.commit("g", "ghost", gen, &[("t", 0, 2)]), vec![unknown]);
    assert_eq!(h.commit("g", "", -1, &[("t", 0, 2)]), vec![unknown], "simple commit to a live group");
    assert_eq!(h.fetched("g", "t", 0), 1);
    // After the join phase, before the assignment: REBALANCE_IN_PROGRESS.
    let t0 = h.join("g", &ids[0]);
    let rebalancing = h.commit("g", &ids[1], gen, &[("t", 0, 3)]);
    assert_eq!(rebalancing, vec![0], "commits of the last generation are fine while preparing");
    h.join("g", &ids[1]);
    let new_gen = h.join_response(t0).unwrap().generation_id;
    let in_progress = code(ErrorCode::RebalanceInProgress);
    assert_eq!(h.commit("g", &ids[1], new_gen, &[("t", 0, 4)]), vec![in_progress]);
    assert_eq!(h.fetched("g", "t", 0), 3);
    // Unknown groups: ILLEGAL_GENERATION before v9, GROUP_ID_NOT_FOUND from v9.
    assert_eq!(h.commit_v(8, commit_req("none", "m", 1, &[("t", 0, 1)])), vec![illegal]);
    let not_found = code(ErrorCode::GroupIdNotFound);
    assert_eq!(h.commit_v(9, commit_req("none", "m", 1, &[("t", 0, 1)])), vec![not_found]);
    assert_eq!(h.c.group_state("none"), None);
}

#[test]
fn oversized_metadata_is_refused_per_partition() {
    let mut h = Harness::new(config());
    let mut req = commit_req("s", "", -1, &[("t", 0, 1), ("t", 1, 1)]);
    req.topics[1].partitions[0].committed_metadata = Some("x".repeat(4097));
    req.topics[0].partitions[0].committed_metadata = Some("x".repeat(4096));
    assert_eq!(h.commit_v(8, req), vec![0, code(ErrorCode::OffsetMetadataTooLarge)]);
    assert_eq!(h.fetched("s", "t", 1), -1);
}

#[test]
fn commits_are_visible_once_written_and_failures_are_reported() {
    let mut h = Harness::new(config());
    h.auto_ack = false;
    assert!(h.commit("s", "", -1, &[("t", 0, 5)]).is_empty(), "not answered yet");
    assert_eq!(h.fetched("s", "t", 0), -1);
    h.ack();
    assert_eq!(h.fetched("s", "t", 0), 5);
    let meta = h.meta(8, "client");
    let a = h.c.commit_offsets(&meta, commit_req("s", "", -1, &[("t", 0, 6)]), h.now);
    h.run(a);
    h.fail(ErrorCode::NotEnoughReplicas);
    let Some(Response::OffsetCommit(r)) = h.responses.get(&meta.token) else { panic!("answered") };
    assert_eq!(r.topics[0].partitions[0].error_code, code(ErrorCode::CoordinatorNotAvailable));
    assert_eq!(h.fetched("s", "t", 0), 5);
}

#[test]
fn a_commit_in_flight_does_not_resurrect_a_deleted_offset() {
    let mut h = Harness::new(config());
    h.commit("s", "", -1, &[("t", 0, 5)]);
    h.auto_ack = false;
    h.commit("s", "", -1, &[("t", 0, 6)]);
    assert!(h.delete_offsets("s", &[("t", 0)]).is_none(), "answered once written");
    h.ack();
    h.ack();
    assert_eq!(h.fetched("s", "t", 0), -1);
}

#[test]
fn offsets_of_an_empty_group_expire_relative_to_when_it_became_empty() {
    let mut h = Harness::new(GroupConfig {
        offsets_retention_ms: 60_000,
        offsets_retention_check_interval_ms: 1_000,
        ..config()
    });
    let (ids, gen) = h.stable_group("g", 1);
    h.commit("g", &ids[0], gen, &[("t", 0, 10)]);
    for _ in 0..2 {
        h.advance(5_000);
        assert_eq!(h.heartbeat("g", &ids[0], gen), 0);
    }
    let l = h.leave("g", &[(&ids[0], None)]);
    assert_eq!(h.error_of(l), 0);
    assert_eq!(h.c.group_state("g"), Some(GroupState::Empty));
    // 60 s after the commit, but only 50 s after the group became Empty: kept.
    h.advance(50_000);
    assert_eq!(h.fetched("g", "t", 0), 10, "retention counts from becoming Empty");
    h.advance(9_999);
    assert_eq!(h.fetched("g", "t", 0), 10);
    // The next check after the retention deletes the offsets, then the group.
    h.advance(1_001);
    assert_eq!(h.c.group_state("g"), None);
    let tombstones: Vec<&Record> = h.log.iter().map(|(_, r)| r).rev().take(2).collect();
    assert_eq!(tombstones[0], &Record::group_tombstone("g"));
    assert_eq!(tombstones[1], &Record::offset_tombstone("g", "t", 0));
}

#[test]
fn simple_group_offsets_expire_relative_to_their_commit() {
    let mut h = Harness::new(GroupConfig {
        offsets_retention_ms: 60_000,
        offsets_retention_check_interval_ms: 1_000,
        ..config()
    });
    h.commit("s", "", -1, &[("t", 0, 1)]);
    h.advance(30_000);
    h.commit("s", "", -1, &[("t", 1, 1)]);
    h.advance(30_000);
    assert_eq!(h.fetched("s", "t", 0), -1, "expired");
    assert_eq!(h.fetched("s", "t", 1), 1, "committed later");
    h.advance(30_000);
    assert_eq!(h.c.group_state("s"), None);
}

#[test]
fn stable_consumer_group_keeps_subscribed_offsets() {
    let mut h = Harness::new(GroupConfig {
        offsets_retention_ms: 60_000,
        offsets_retention_check_interval_ms: 1_000,
        ..config()
    });
    let (ids, gen) = h.stable_group("g", 1);
    h.commit("g", &ids[0], gen, &[("t", 0, 1), ("old", 0, 1)]);
    for _ in 0..20 {
        h.advance(5_000);
        assert_eq!(h.heartbeat("g", &ids[0], gen), 0);
    }
    assert_eq!(h.fetched("g", "t", 0), 1, "subscribed: kept");
    assert_eq!(h.fetched("g", "old", 0), -1, "not subscribed: expired");
    assert_eq!(h.c.group_state("g"), Some(GroupState::Stable));
}

#[test]
fn offset_delete_rules() {
    let mut h = Harness::new(config());
    let (ids, gen) = h.stable_group("g", 1);
    h.commit("g", &ids[0], gen, &[("t", 0, 1), ("other", 0, 1)]);
    let Response::OffsetDelete(r) = h.delete_offsets("g", &[("t", 0), ("other", 0), ("never", 0)]).unwrap()
    else {
        panic!()
    };
    let codes: Vec<i16> = r.topics.iter().map(|t| t.partitions[0].error_code).collect();
    assert_eq!(codes, vec![code(ErrorCode::GroupSubscribedToTopic), 0, 0]);
    assert_eq!(h.fetched("g", "t", 0), 1);
    assert_eq!(h.fetched("g", "other", 0), -1);
    assert_eq!(h.log.last().map(|(_, r)| r), Some(&Record::offset_tombstone("g", "other", 0)));
    let missing = h.delete_offsets("nope", &[("t", 0)]).unwrap();
    assert!(matches!(missing, Response::OffsetDelete(r) if r.error_code == code(ErrorCode::GroupIdNotFound)));

    // A non-consumer group with members cannot lose offsets.
    let meta = h.meta(3, "connect");
    let req = JoinGroupRequest {
        group_id: "c".into(),
        session_timeout_ms: SESSION_MS,
        rebalance_timeout_ms: REBALANCE_MS,
        protocol_type: "connect".into(),
        protocols: protocols(&[("default", &[])]),
        ..JoinGroupRequest::default()
    };
    let a = h.c.join_group(&meta, req, h.now);
    h.run(a);
    let r = h.delete_offsets("c", &[("t", 0)]).unwrap();
    assert!(matches!(r, Response::OffsetDelete(r) if r.error_code == code(ErrorCode::NonEmptyGroup)));
}

#[test]
fn delete_groups_rules() {
    let mut h = Harness::new(GroupConfig { offsets_topic_num_partitions: 50, ..config() });
    // "my-group" is in partition 12, "test" in 48.
    h.commit("my-group", "", -1, &[("t", 0, 1), ("t", 1, 1)]);
    h.commit("test", "", -1, &[("t", 0, 1)]);
    h.stable_group("live", 1);
    h.auto_ack = false;
    let t = h.delete_groups(&["my-group", "live", "ghost", "test"]);
    assert_eq!(h.held.len(), 2, "one append per partition");
    assert_eq!(h.held[0].1, 12);
    assert_eq!(
        h.held[0].2,
        vec![
            Record::offset_tombstone("my-group", "t", 0),
            Record::offset_tombstone("my-group", "t", 1),
            Record::group_tombstone("my-group"),
        ]
    );
    assert_eq!(h.c.group_state("my-group"), None);
    h.ack();
    assert!(!h.answered(t));
    h.fail(ErrorCode::NotLeaderOrFollower);
    let Some(Response::DeleteGroups(r)) = h.responses.get(&t) else { panic!("answered after both appends") };
    let codes: Vec<(String, i16)> = r.results.iter().map(|r| (r.group_id.clone(), r.error_code)).collect();
    assert_eq!(
        codes,
        vec![
            ("my-group".into(), 0),
            ("live".into(), code(ErrorCode::NonEmptyGroup)),
            ("ghost".into(), code(ErrorCode::GroupIdNotFound)),
            ("test".into(), code(ErrorCode::NotCoordinator)),
        ]
    );
}

#[test]
fn list_and_describe_groups() {
    let mut h = Harness::new(config());
    let (ids, _) = h.stable_group("g", 2);
    h.commit("s", "", -1, &[("t", 0, 1)]);
    let all = h.c.list_groups(&ListGroupsRequest::default());
    let states: Vec<(&str, &str)> =
        all.groups.iter().map(|g| (g.group_id.as_str(), g.group_state.as_str())).collect();
    assert_eq!(states, vec![("g", "Stable"), ("s", "Empty")]);
    let stable = h.c.list_groups(&ListGroupsRequest {
        states_filter: vec![" stable ".into()],
        ..ListGroupsRequest::default()
    });
    assert_eq!(stable.groups.len(), 1);
    let consumer_type = h.c.list_groups(&ListGroupsRequest {
        types_filter: vec!["consumer".into()],
        ..ListGroupsRequest::default()
    });
    assert!(consumer_type.groups.is_empty(), "all groups here are classic");

    let d = h.c.describe_groups(&DescribeGroupsRequest {
        groups: vec!["g".into(), "ghost".into()],
        include_authorized_operations: false,
    });
    let g = &d.groups[0];
    assert_eq!(
        (g.group_state.as_str(), g.protocol_type.as_str(), g.protocol_data.as_str()),
        ("Stable", "consumer", "range")
    );
    assert_eq!(g.members.len(), 2);
    assert_eq!(g.members[0].member_id, ids[0]);
    assert_eq!(g.members[0].client_host, "/127.0.0.1");
    assert_eq!(&g.members[1].member_assignment[..], b"a1");
    assert_eq!(g.members[1].member_metadata, encode_subscription(&["t"]));
    assert_eq!((d.groups[1].group_state.as_str(), d.groups[1].error_code), ("Dead", 0));
}

#[test]
fn coordinator_errors() {
    let mut h = Harness::new(config());
    let p = h.c.partition_for("g");
    let a = h.c.begin_load(p, h.now);
    h.run(a);
    let t = h.join("g", "");
    assert_eq!(h.error_of(t), code(ErrorCode::CoordinatorLoadInProgress));
    assert_eq!(
        h.c.list_groups(&ListGroupsRequest::default()).error_code,
        code(ErrorCode::CoordinatorLoadInProgress)
    );
    let a = h.c.unload(p, h.now);
    h.run(a);
    assert_eq!(h.heartbeat("g", "m", 1), code(ErrorCode::NotCoordinator));
    assert_eq!(h.commit("g", "", -1, &[("t", 0, 1)]), vec![code(ErrorCode::NotCoordinator)]);
    let fetch = h.c.fetch_offsets(
        1,
        &OffsetFetchRequest {
            group_id: "g".into(),
            topics: Some(vec![OffsetFetchRequestTopic { name: "t".into(), partition_indexes: vec![0, 1] }]),
            ..OffsetFetchRequest::default()
        },
    );
    let errors: Vec<i16> = fetch.topics[0].partitions.iter().map(|p| p.error_code).collect();
    assert_eq!(errors, vec![code(ErrorCode::NotCoordinator); 2], "v0-1 report errors per partition");
    let t = h.delete_groups(&["g"]);
    assert!(
        matches!(&h.responses[&t], Response::DeleteGroups(r) if r.results[0].error_code == code(ErrorCode::NotCoordinator))
    );
}

#[test]
fn a_partition_led_but_not_yet_loaded_answers_load_in_progress() {
    // FindCoordinator already names this broker (the metadata shows it leading the
    // partition) but the shell has not begun loading it: the client must retry here.
    let mut h = Harness::new(config());
    let p = h.c.partition_for("g");
    let a = h.c.unload(p, h.now);
    h.run(a);
    h.c.set_awaiting_load([p].into_iter().collect());
    let t = h.join("g", "");
    assert_eq!(h.error_of(t), code(ErrorCode::CoordinatorLoadInProgress));
    assert_eq!(h.commit("g", "", -1, &[("t", 0, 1)]), vec![code(ErrorCode::CoordinatorLoadInProgress)]);
    h.c.set_awaiting_load(Default::default());
    assert_eq!(h.heartbeat("g", "m", 1), code(ErrorCode::NotCoordinator), "led elsewhere: look again");
    let a = h.c.begin_load(p, h.now);
    h.run(a);
    let a = h.c.complete_load(p, h.now);
    h.run(a);
    let t = h.join("g", "");
    assert_eq!(h.error_of(t), code(ErrorCode::MemberIdRequired), "served once loaded");
}

#[test]
fn unload_answers_parked_requests() {
    let mut h = Harness::new(config());
    let (ids, gen) = h.stable_group("g", 2);
    let t0 = h.join("g", &ids[0]);
    let t1 = h.join("g", &ids[1]);
    let s1 = h.sync("g", &ids[1], gen + 1, &[]);
    assert!(h.answered(t0) && h.answered(t1) && !h.answered(s1));
    let a = h.c.unload(h.c.partition_for("g"), h.now);
    h.run(a);
    assert_eq!(h.error_of(s1), code(ErrorCode::NotCoordinator));
    assert_eq!(h.c.group_state("g"), None);
    h.advance(DAY_MS);
    h.assert_all_answered();
}

#[test]
fn legacy_offset_fetch_all_topics() {
    let mut h = Harness::new(config());
    h.commit("s", "", -1, &[("t", 0, 9)]);
    let r = h.c.fetch_offsets(
        7,
        &OffsetFetchRequest { group_id: "s".into(), topics: None, ..OffsetFetchRequest::default() },
    );
    assert_eq!((r.error_code, r.topics[0].partitions[0].committed_offset), (0, 9));
    let v8 = h.c.fetch_offsets(
        8,
        &OffsetFetchRequest {
            groups: vec![strata_protocol::messages::offset_fetch::OffsetFetchRequestGroup {
                group_id: "s".into(),
                topics: None,
                ..Default::default()
            }],
            ..OffsetFetchRequest::default()
        },
    );
    assert_eq!(v8.groups[0].topics[0].partitions[0].committed_offset, 9);
}

#[test]
fn deleting_a_topic_deletes_its_offsets() {
    let mut h = Harness::new(config());
    h.commit("a", "", -1, &[("gone", 0, 1), ("kept", 0, 1)]);
    h.commit("b", "", -1, &[("gone", 3, 1)]);
    let log_len = h.log.len();
    let a = h.c.delete_offsets_of_topics(&["gone".to_string()], h.now);
    h.run(a);
    assert_eq!(h.fetched("a", "gone", 0), -1);
    assert_eq!(h.fetched("b", "gone", 3), -1);
    assert_eq!(h.fetched("a", "kept", 0), 1);
    let mut written: Vec<&Record> = h.log[log_len..].iter().map(|(_, r)| r).collect();
    written.sort_by_key(|r| r.group_id().to_owned());
    assert_eq!(
        written,
        vec![&Record::offset_tombstone("a", "gone", 0), &Record::offset_tombstone("b", "gone", 3)]
    );
}
