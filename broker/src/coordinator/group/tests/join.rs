//! Joining: KIP-394 member ids, protocol checks and selection, leader choice, SyncGroup,
//! heartbeats during rebalances, the initial delayed join and group.max.size.

use super::*;

#[test]
fn kip394_two_step_join_then_sync() {
    let mut h = Harness::new(config());
    let t = h.join("g", "");
    let r = h.join_response(t).unwrap();
    assert_eq!(r.error_code, code(ErrorCode::MemberIdRequired));
    assert_eq!(r.member_id, "client-uuid1");
    assert_eq!(h.c.group_state("g"), Some(GroupState::Empty));

    let t = h.join("g", "client-uuid1");
    assert!(!h.answered(t), "parked until the (zero) initial delay fires");
    h.advance(0);
    let r = h.join_response(t).unwrap();
    assert_eq!(r.error_code, 0);
    assert_eq!(r.generation_id, 1);
    assert_eq!(r.leader, "client-uuid1");
    assert_eq!(r.protocol_name.as_deref(), Some("range"));
    assert_eq!(r.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(r.members.len(), 1);
    assert_eq!(r.members[0].metadata, encode_subscription(&["t"]));
    assert_eq!(h.c.group_state("g"), Some(GroupState::CompletingRebalance));

    let s = h.sync("g", "client-uuid1", 1, &[("client-uuid1", b"mine")]);
    let r = h.sync_response(s).unwrap();
    assert_eq!(r.error_code, 0);
    assert_eq!(&r.assignment[..], b"mine");
    assert_eq!(h.c.group_state("g"), Some(GroupState::Stable));
    // The assignment was written before it was handed out.
    assert!(
        matches!(h.log.last(), Some((_, Record::GroupMetadata { value: Some(v), .. })) if v.generation == 1)
    );
    h.assert_all_answered();
}

#[test]
fn old_clients_join_without_member_id_round_trip() {
    let mut h = Harness::new(config());
    let t = h.join_with("g", "", None, consumer_protocols(), 3);
    h.advance(0);
    let r = h.join_response(t).unwrap();
    assert_eq!(r.error_code, 0);
    assert_eq!(r.member_id, "client-uuid1");
    assert_eq!(r.leader, r.member_id);
}

#[test]
fn join_errors() {
    let mut h = Harness::new(config());
    let t = h.join("g", "nobody");
    assert_eq!(h.error_of(t), code(ErrorCode::UnknownMemberId));
    assert_eq!(h.c.group_state("g"), None, "a known member id does not create a group");

    let t = h.join("", "");
    assert_eq!(h.error_of(t), code(ErrorCode::InvalidGroupId));

    let meta = h.meta(5, "client");
    let req = JoinGroupRequest {
        group_id: "g".into(),
        session_timeout_ms: 10,
        protocol_type: "consumer".into(),
        protocols: consumer_protocols(),
        ..JoinGroupRequest::default()
    };
    let a = h.c.join_group(&meta, req, h.now);
    h.run(a);
    assert_eq!(h.error_of(meta.token), code(ErrorCode::InvalidSessionTimeout));

    // An empty protocol list cannot start a group.
    let t = h.join_with("g", "", None, vec![], 5);
    assert_eq!(h.error_of(t), code(ErrorCode::InconsistentGroupProtocol));
    h.assert_all_answered();
}

#[test]
fn inconsistent_protocol_type_and_protocols() {
    let mut h = Harness::new(config());
    let (ids, _) = h.stable_group("g", 1);

    let meta = h.meta(5, "connect-worker");
    let req = JoinGroupRequest {
        group_id: "g".into(),
        session_timeout_ms: SESSION_MS,
        rebalance_timeout_ms: REBALANCE_MS,
        protocol_type: "connect".into(),
        protocols: consumer_protocols(),
        ..JoinGroupRequest::default()
    };
    let a = h.c.join_group(&meta, req, h.now);
    h.run(a);
    assert_eq!(h.error_of(meta.token), code(ErrorCode::InconsistentGroupProtocol));

    let t = h.join_with("g", "", None, protocols(&[("sticky", &["t"])]), 5);
    assert_eq!(h.error_of(t), code(ErrorCode::InconsistentGroupProtocol));
    let t = h.join_with("g", &ids[0], None, protocols(&[("sticky", &["t"])]), 5);
    assert_eq!(h.error_of(t), code(ErrorCode::InconsistentGroupProtocol));
    assert_eq!(h.c.group_state("g"), Some(GroupState::Stable));
}

#[test]
fn protocol_chosen_by_votes_among_common_protocols() {
    let mut h = Harness::new(config());
    let a = h.new_member_id("g");
    let b = h.new_member_id("g");
    let c = h.new_member_id("g");
    let ta =
        h.join_with("g", &a, None, protocols(&[("sticky", &["t"]), ("range", &["t"]), ("rr", &["t"])]), 5);
    let tb = h.join_with("g", &b, None, protocols(&[("rr", &["t"]), ("range", &["t"])]), 5);
    let tc = h.join_with("g", &c, None, protocols(&[("rr", &["t"]), ("range", &["t"])]), 5);
    h.advance(0);
    for t in [ta, tb, tc] {
        // sticky is not supported by all; rr gets two votes, range one.
        assert_eq!(h.join_response(t).unwrap().protocol_name.as_deref(), Some("rr"));
    }
}

#[test]
fn protocol_vote_tie_follows_leader_preference() {
    let mut h = Harness::new(config());
    let a = h.new_member_id("g");
    let b = h.new_member_id("g");
    let ta = h.join_with("g", &a, None, protocols(&[("range", &["t"]), ("rr", &["t"])]), 5);
    let tb = h.join_with("g", &b, None, protocols(&[("rr", &["t"]), ("range", &["t"])]), 5);
    h.advance(0);
    let r = h.join_response(ta).unwrap();
    assert_eq!(r.leader, a);
    assert_eq!(r.protocol_name.as_deref(), Some("range"));
    assert_eq!(h.join_response(tb).unwrap().protocol_name.as_deref(), Some("range"));
    assert!(h.join_response(tb).unwrap().members.is_empty(), "only the leader gets members");
}

#[test]
fn followers_wait_for_the_leader_sync() {
    let mut h = Harness::new(config());
    let a = h.new_member_id("g");
    let b = h.new_member_id("g");
    let ta = h.join("g", &a);
    let tb = h.join("g", &b);
    h.advance(0);
    let gen = h.join_response(ta).unwrap().generation_id;
    assert_eq!(h.join_response(tb).unwrap().generation_id, gen);

    let sb = h.sync("g", &b, gen, &[]);
    assert!(!h.answered(sb));
    assert_eq!(h.heartbeat("g", &b, gen), 0, "heartbeats are fine while completing");
    h.auto_ack = false;
    let sa = h.sync("g", &a, gen, &[(&a, b"x"), (&b, b"y")]);
    assert!(!h.answered(sa) && !h.answered(sb), "answered only once written");
    h.ack();
    assert_eq!(&h.sync_response(sa).unwrap().assignment[..], b"x");
    assert_eq!(&h.sync_response(sb).unwrap().assignment[..], b"y");
    assert_eq!(h.sync_response(sb).unwrap().protocol_name.as_deref(), Some("range"));

    // A late sync in Stable returns the stored assignment.
    let again = h.sync("g", &b, gen, &[]);
    assert_eq!(&h.sync_response(again).unwrap().assignment[..], b"y");
    let wrong = h.sync("g", &b, gen + 1, &[]);
    assert_eq!(h.error_of(wrong), code(ErrorCode::IllegalGeneration));
    let unknown = h.sync("g", "x", gen, &[]);
    assert_eq!(h.error_of(unknown), code(ErrorCode::UnknownMemberId));
    let no_group = h.sync("nope", "x", gen, &[]);
    assert_eq!(h.error_of(no_group), code(ErrorCode::UnknownMemberId));
    h.assert_all_answered();
}

#[test]
fn failed_assignment_write_fails_the_syncs_and_rebalances() {
    let mut h = Harness::new(config());
    let a = h.new_member_id("g");
    let ta = h.join("g", &a);
    h.advance(0);
    let gen = h.join_response(ta).unwrap().generation_id;
    h.auto_ack = false;
    let s = h.sync("g", &a, gen, &[(&a, b"x")]);
    h.fail(ErrorCode::NotLeaderOrFollower);
    assert_eq!(h.error_of(s), code(ErrorCode::NotCoordinator));
    assert_eq!(h.c.group_state("g"), Some(GroupState::PreparingRebalance));
}

#[test]
fn heartbeat_errors_follow_the_group_state() {
    let mut h = Harness::new(config());
    let (ids, gen) = h.stable_group("g", 2);
    assert_eq!(h.heartbeat("g", &ids[1], gen), 0);
    assert_eq!(h.heartbeat("g", "stranger", gen), code(ErrorCode::UnknownMemberId));
    assert_eq!(h.heartbeat("g", &ids[1], gen - 1), code(ErrorCode::IllegalGeneration));
    assert_eq!(h.heartbeat("nope", &ids[1], gen), code(ErrorCode::UnknownMemberId));
    // The leader rejoining forces a rebalance.
    let t = h.join("g", &ids[0]);
    assert!(!h.answered(t));
    assert_eq!(h.c.group_state("g"), Some(GroupState::PreparingRebalance));
    assert_eq!(h.heartbeat("g", &ids[1], gen), code(ErrorCode::RebalanceInProgress));
    let t1 = h.join("g", &ids[1]);
    let r = h.join_response(t1).unwrap();
    assert_eq!(r.generation_id, gen + 1);
    assert_eq!(h.join_response(t).unwrap().leader, ids[0], "the leader stays leader");
}

#[test]
fn follower_rejoin_with_same_metadata_gets_current_generation() {
    let mut h = Harness::new(config());
    let (ids, gen) = h.stable_group("g", 2);
    let t = h.join("g", &ids[1]);
    let r = h.join_response(t).unwrap();
    assert_eq!((r.error_code, r.generation_id), (0, gen));
    assert_eq!(h.c.group_state("g"), Some(GroupState::Stable));
    // Changed metadata triggers a rebalance.
    let t = h.join_with("g", &ids[1], None, protocols(&[("range", &["t", "u"])]), 5);
    assert!(!h.answered(t));
    assert_eq!(h.c.group_state("g"), Some(GroupState::PreparingRebalance));
}

#[test]
fn fifty_members_rebalance_when_one_more_joins() {
    let mut h = Harness::new(config());
    let (ids, gen) = h.stable_group("g", 50);
    let newcomer = h.new_member_id("g");
    let tn = h.join("g", &newcomer);
    assert_eq!(h.c.group_state("g"), Some(GroupState::PreparingRebalance));
    let tokens: Vec<RequestToken> = ids.iter().map(|id| h.join("g", id)).collect();
    for t in tokens.iter().chain([&tn]) {
        let r = h.join_response(*t).expect("all 51 answered once the last rejoined");
        assert_eq!((r.error_code, r.generation_id), (0, gen + 1));
        assert_eq!(r.leader, ids[0]);
    }
    assert_eq!(h.join_response(tokens[0]).unwrap().members.len(), 51);
    h.assert_all_answered();
}

#[test]
fn leader_leaving_passes_leadership_to_the_earliest_joiner() {
    let mut h = Harness::new(config());
    let (ids, _) = h.stable_group("g", 3);
    let l = h.leave("g", &[(&ids[0], None)]);
    assert_eq!(h.error_of(l), 0);
    let t1 = h.join("g", &ids[1]);
    let t2 = h.join("g", &ids[2]);
    assert_eq!(h.join_response(t1).unwrap().leader, ids[1]);
    assert_eq!(h.join_response(t2).unwrap().leader, ids[1]);
}

#[test]
fn initial_delay_is_extended_by_each_new_member() {
    let mut h = Harness::new(GroupConfig { group_initial_rebalance_delay_ms: 3_000, ..config() });
    let a = h.new_member_id("g");
    let ta = h.join("g", &a);
    h.advance(1_000);
    let b = h.new_member_id("g");
    let tb = h.join("g", &b);
    h.advance(1_999);
    assert!(!h.answered(ta), "first delay runs to 3000");
    h.advance(1);
    assert!(!h.answered(ta), "b joined during the delay: extended");
    h.advance(2_999);
    assert!(!h.answered(ta));
    h.advance(1);
    assert_eq!(h.join_response(ta).unwrap().members.len(), 2);
    assert!(h.answered(tb));
}

#[test]
fn initial_delay_is_capped_by_the_rebalance_timeout() {
    let mut h = Harness::new(GroupConfig { group_initial_rebalance_delay_ms: 3_000, ..config() });
    let start = h.now;
    let first = h.new_member_id("g");
    let t = h.join("g", &first);
    let mut joined = 1;
    // A new member every second keeps extending the delay, but not past 30 s.
    while !h.answered(t) {
        h.advance(1_000);
        if !h.answered(t) {
            let id = h.new_member_id("g");
            h.join("g", &id);
            joined += 1;
        }
    }
    assert_eq!(h.now - start, i64::from(REBALANCE_MS));
    assert_eq!(h.join_response(t).unwrap().members.len(), joined);
}

#[test]
fn group_max_size() {
    let mut h = Harness::new(GroupConfig { group_max_size: 2, ..config() });
    let (ids, _) = h.stable_group("g", 2);
    let t = h.join("g", "");
    let r = h.join_response(t).unwrap();
    assert_eq!((r.error_code, r.member_id.as_str()), (code(ErrorCode::GroupMaxSizeReached), ""));
    // During a rebalance the members already rejoined count: a newcomer takes the
    // place of a member that is slow to rejoin, which is then refused and removed.
    let t0 = h.join("g", &ids[0]);
    let tn = h.join_with("g", "", None, consumer_protocols(), 3);
    assert!(!h.answered(tn));
    let t1 = h.join("g", &ids[1]);
    assert_eq!(h.error_of(t1), code(ErrorCode::GroupMaxSizeReached));
    let r = h.join_response(t0).expect("join completes without the removed member");
    assert_eq!(r.members.len(), 2);
    assert!(h.answered(tn));
    h.assert_all_answered();
}

#[test]
fn superseded_join_is_answered() {
    let mut h = Harness::new(config());
    let (ids, _) = h.stable_group("g", 2);
    let first = h.join("g", &ids[0]);
    let second = h.join("g", &ids[0]);
    assert_eq!(h.error_of(first), code(ErrorCode::RebalanceInProgress));
    assert!(!h.answered(second));
    h.join("g", &ids[1]);
    assert_eq!(h.error_of(second), 0);
}
