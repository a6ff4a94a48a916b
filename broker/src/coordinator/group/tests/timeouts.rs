//! Session timeouts, rebalance (join) timeouts, sync timeouts and LeaveGroup.

use super::*;

#[test]
fn session_timeout_removes_a_silent_member_and_rebalances() {
    let mut h = Harness::new(config());
    let (ids, gen) = h.stable_group("g", 3);
    for step in [5_000, 4_999] {
        h.advance(step);
        assert_eq!(h.heartbeat("g", &ids[0], gen), 0);
        assert_eq!(h.heartbeat("g", &ids[1], gen), 0);
    }
    assert_eq!(h.c.group_state("g"), Some(GroupState::Stable));
    h.advance(1);
    assert_eq!(h.c.group_state("g"), Some(GroupState::PreparingRebalance));
    assert_eq!(h.heartbeat("g", &ids[2], gen), code(ErrorCode::UnknownMemberId));
    assert_eq!(h.heartbeat("g", &ids[0], gen), code(ErrorCode::RebalanceInProgress));
    let t0 = h.join("g", &ids[0]);
    let t1 = h.join("g", &ids[1]);
    let r = h.join_response(t0).unwrap();
    assert_eq!((r.generation_id, r.members.len()), (gen + 1, 2));
    assert!(h.answered(t1));
}

#[test]
fn pending_member_expires_after_its_session_timeout() {
    let mut h = Harness::new(config());
    let id = h.new_member_id("g");
    h.advance(i64::from(SESSION_MS));
    let t = h.join("g", &id);
    assert_eq!(h.error_of(t), code(ErrorCode::UnknownMemberId));
}

#[test]
fn members_that_do_not_rejoin_are_removed_at_the_rebalance_timeout() {
    let mut h = Harness::new(config());
    let (ids, gen) = h.stable_group("g", 3);
    let t0 = h.join("g", &ids[0]);
    let t1 = h.join("g", &ids[1]);
    // ids[2] keeps heartbeating (told to rejoin) but never does.
    for _ in 0..5 {
        h.advance(5_000);
        assert_eq!(h.heartbeat("g", &ids[2], gen), code(ErrorCode::RebalanceInProgress));
        assert_eq!(h.heartbeat("g", &ids[0], gen), code(ErrorCode::RebalanceInProgress));
    }
    assert!(!h.answered(t0));
    h.advance(i64::from(REBALANCE_MS) - 25_000);
    let r = h.join_response(t0).expect("completed at the rebalance timeout");
    assert_eq!((r.generation_id, r.members.len()), (gen + 1, 2));
    assert!(h.answered(t1));
    assert_eq!(h.heartbeat("g", &ids[2], gen), code(ErrorCode::UnknownMemberId));
}

#[test]
fn leader_that_does_not_rejoin_is_replaced() {
    let mut h = Harness::new(config());
    let (ids, gen) = h.stable_group("g", 2);
    let t1 = h.join_with("g", &ids[1], None, protocols(&[("range", &["t", "u"])]), 5);
    // The leader stays alive but does not rejoin.
    for _ in 0..5 {
        h.advance(5_000);
        assert_eq!(h.heartbeat("g", &ids[0], gen), code(ErrorCode::RebalanceInProgress));
    }
    assert!(!h.answered(t1));
    h.advance(5_000);
    let r = h.join_response(t1).unwrap();
    assert_eq!((r.leader.as_str(), r.members.len()), (ids[1].as_str(), 1));
}

#[test]
fn members_that_do_not_sync_are_removed() {
    let mut h = Harness::new(config());
    let a = h.new_member_id("g");
    let b = h.new_member_id("g");
    let ta = h.join("g", &a);
    h.join("g", &b);
    h.advance(0);
    let gen = h.join_response(ta).unwrap().generation_id;
    let s = h.sync("g", &a, gen, &[(&a, b"x")]);
    assert_eq!(h.sync_response(s).unwrap().error_code, 0);
    // b keeps its session alive but never syncs.
    for _ in 0..5 {
        h.advance(5_000);
        assert_eq!(h.heartbeat("g", &b, gen), 0);
        assert_eq!(h.heartbeat("g", &a, gen), 0);
    }
    h.advance(5_000);
    assert_eq!(h.c.group_state("g"), Some(GroupState::PreparingRebalance));
    assert_eq!(h.heartbeat("g", &b, gen), code(ErrorCode::UnknownMemberId));
    let t = h.join("g", &a);
    assert_eq!(h.join_response(t).unwrap().members.len(), 1);
}

#[test]
fn a_new_member_parked_too_long_is_expired() {
    let mut h = Harness::new(GroupConfig { new_member_join_timeout_ms: 5_000, ..config() });
    let (ids, _) = h.stable_group("g", 2);
    let newcomer = h.new_member_id("g");
    let tn = h.join("g", &newcomer);
    let t0 = h.join("g", &ids[0]);
    // ids[1] is slow to rejoin; the newcomer's parked join times out first.
    h.advance(5_000);
    let r = h.join_response(tn).unwrap();
    assert_eq!((r.error_code, r.member_id.as_str()), (code(ErrorCode::UnknownMemberId), ""));
    assert!(!h.answered(t0));
    let t1 = h.join("g", &ids[1]);
    assert_eq!(h.join_response(t1).unwrap().generation_id, 2);
    assert_eq!(h.join_response(t0).unwrap().members.len(), 2);
}

#[test]
fn batched_leave_by_member_id_and_instance_id() {
    let mut h = Harness::new(config());
    let a = h.new_member_id("g");
    let ta = h.join("g", &a);
    let ts = h.join_with("g", "", Some("inst"), consumer_protocols(), 5);
    h.advance(0);
    let gen = h.join_response(ta).unwrap().generation_id;
    let static_id = h.join_response(ts).unwrap().member_id;
    assert_eq!(static_id, "inst-uuid2");
    let sa = h.sync("g", &a, gen, &[]);
    let ss = h.sync("g", &static_id, gen, &[]);
    assert!(h.answered(sa) && h.answered(ss));

    let l = h.leave("g", &[("", Some("inst")), ("ghost", None), ("", Some("other")), (&a, Some("wrong"))]);
    let Some(Response::LeaveGroup(r)) = h.responses.get(&l).cloned() else { panic!("leave answered") };
    assert_eq!(r.error_code, 0);
    let codes: Vec<i16> = r.members.iter().map(|m| m.error_code).collect();
    assert_eq!(
        codes,
        vec![
            0,
            code(ErrorCode::UnknownMemberId),
            code(ErrorCode::UnknownMemberId),
            code(ErrorCode::UnknownMemberId)
        ]
    );
    assert_eq!(h.c.group_state("g"), Some(GroupState::PreparingRebalance));
    let l = h.leave("g", &[(&a, None)]);
    assert_eq!(h.error_of(l), 0);
    assert_eq!(h.c.group_state("g"), Some(GroupState::Empty));
    // Becoming Empty bumps the generation and is written.
    let Some((_, Record::GroupMetadata { value: Some(v), .. })) = h.log.last() else {
        panic!("group metadata written")
    };
    assert_eq!((v.generation, v.members.len(), v.protocol.as_deref()), (gen + 1, 0, None));
    assert_eq!(v.protocol_type, "consumer");
}

#[test]
fn leave_v0_reports_the_member_error_at_the_top() {
    let mut h = Harness::new(config());
    let (ids, _) = h.stable_group("g", 1);
    fn leave_v1(h: &mut Harness, member: &str) -> i16 {
        let meta = h.meta(1, "client");
        let req = LeaveGroupRequest {
            group_id: "g".into(),
            member_id: member.into(),
            ..LeaveGroupRequest::default()
        };
        let a = h.c.leave_group(&meta, &req, h.now);
        h.run(a);
        h.error_of(meta.token)
    }
    assert_eq!(leave_v1(&mut h, "ghost"), code(ErrorCode::UnknownMemberId));
    assert_eq!(leave_v1(&mut h, &ids[0]), 0);
    assert_eq!(h.c.group_state("g"), Some(GroupState::Empty));
    let l = h.leave("nope", &[("x", None)]);
    assert_eq!(h.error_of(l), code(ErrorCode::UnknownMemberId));
}

#[test]
fn leave_while_parked_answers_the_parked_join() {
    let mut h = Harness::new(config());
    let (ids, _) = h.stable_group("g", 2);
    let t0 = h.join("g", &ids[0]);
    let l = h.leave("g", &[(&ids[0], None)]);
    assert_eq!(h.error_of(l), 0);
    assert_eq!(h.error_of(t0), code(ErrorCode::UnknownMemberId));
    let t1 = h.join("g", &ids[1]);
    assert_eq!(h.join_response(t1).unwrap().members.len(), 1);
    h.assert_all_answered();
}
