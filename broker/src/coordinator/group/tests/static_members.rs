//! KIP-345 static membership: restarts without rebalance, fencing, persistence of the
//! new member id and its rollback.

use super::*;

/// A Stable group of static members "i0".."i{n-1}"; returns their member ids.
fn static_group(h: &mut Harness, n: usize) -> (Vec<String>, i32) {
    let tokens: Vec<RequestToken> =
        (0..n).map(|i| h.join_with("g", "", Some(&format!("i{i}")), consumer_protocols(), 5)).collect();
    h.advance(0);
    let ids: Vec<String> = tokens.iter().map(|t| h.join_response(*t).unwrap().member_id).collect();
    let gen = h.join_response(tokens[0]).unwrap().generation_id;
    let assignments: Vec<(String, Vec<u8>)> =
        ids.iter().enumerate().map(|(i, id)| (id.clone(), vec![i as u8])).collect();
    let refs: Vec<(&str, &[u8])> = assignments.iter().map(|(m, a)| (m.as_str(), a.as_slice())).collect();
    h.sync("g", &ids[0], gen, &refs);
    for id in &ids[1..] {
        h.sync("g", id, gen, &[]);
    }
    assert_eq!(h.c.group_state("g"), Some(GroupState::Stable));
    (ids, gen)
}

#[test]
fn restart_within_session_timeout_does_not_rebalance() {
    let mut h = Harness::new(config());
    let (ids, gen) = static_group(&mut h, 3);
    let log_len = h.log.len();
    h.auto_ack = false;
    // i1 restarts: a fresh JoinGroup without member id, same protocols.
    h.advance(3_000);
    let t = h.join_with("g", "", Some("i1"), consumer_protocols(), 5);
    assert!(!h.answered(t), "answered once the new member id is written");
    h.ack();
    let r = h.join_response(t).unwrap();
    assert_eq!(r.error_code, 0);
    assert_eq!(r.generation_id, gen, "no new generation");
    assert_eq!(r.member_id, "i1-uuid4");
    assert_eq!(r.leader, ids[0]);
    assert!(r.members.is_empty());
    assert_eq!(h.c.group_state("g"), Some(GroupState::Stable));
    let Some((_, Record::GroupMetadata { value: Some(v), .. })) = h.log.get(log_len) else {
        panic!("new member id written")
    };
    assert!(v.members.iter().any(|m| m.member_id == "i1-uuid4" && m.assignment[..] == [1]));

    // Nobody else is disturbed; the new id gets the old assignment; the old id is fenced.
    h.auto_ack = true;
    assert_eq!(h.heartbeat_static("g", &ids[0], Some("i0"), gen), 0);
    let s = h.sync("g", "i1-uuid4", gen, &[]);
    assert_eq!(h.sync_response(s).unwrap().assignment[..], [1]);
    assert_eq!(h.heartbeat_static("g", &ids[1], Some("i1"), gen), code(ErrorCode::FencedInstanceId));
    assert_eq!(h.heartbeat_static("g", "i1-uuid4", Some("i1"), gen), 0);
    assert_eq!(h.heartbeat_static("g", &ids[2], Some("i2"), gen), 0);
    // The old member's session timer no longer matters.
    h.advance(i64::from(SESSION_MS) - 1);
    for (id, inst) in [(&ids[0], "i0"), (&"i1-uuid4".to_string(), "i1"), (&ids[2], "i2")] {
        assert_eq!(h.heartbeat_static("g", id, Some(inst), gen), 0);
    }
    assert_eq!(h.c.group_state("g"), Some(GroupState::Stable));
    h.assert_all_answered();
}

#[test]
fn restarted_leader_is_told_it_is_not_the_leader_before_v9() {
    let mut h = Harness::new(config());
    let (ids, gen) = static_group(&mut h, 2);
    let t = h.join_with("g", "", Some("i0"), consumer_protocols(), 5);
    let r = h.join_response(t).unwrap();
    assert_eq!((r.generation_id, r.leader.as_str()), (gen, ids[0].as_str()));
    assert_ne!(r.member_id, ids[0]);
    assert!(r.members.is_empty());
    assert!(!r.skip_assignment);
}

#[test]
fn restarted_leader_skips_assignment_from_v9() {
    let mut h = Harness::new(config());
    let (_, gen) = static_group(&mut h, 2);
    let t = h.join_with("g", "", Some("i0"), consumer_protocols(), 9);
    let r = h.join_response(t).unwrap();
    assert_eq!(r.generation_id, gen);
    assert_eq!(r.leader, r.member_id, "it is the leader under its new id");
    assert!(r.skip_assignment);
    assert_eq!(r.members.len(), 2);
}

#[test]
fn restart_with_protocols_that_change_the_selection_rebalances() {
    let mut h = Harness::new(config());
    let (ids, gen) = static_group(&mut h, 2);
    let t = h.join_with("g", "", Some("i1"), protocols(&[("roundrobin", &["t"])]), 5);
    assert!(!h.answered(t));
    assert_eq!(h.c.group_state("g"), Some(GroupState::PreparingRebalance));
    let t0 = h.join_with("g", &ids[0], Some("i0"), consumer_protocols(), 5);
    let r = h.join_response(t0).unwrap();
    assert_eq!((r.generation_id, r.protocol_name.as_deref()), (gen + 1, Some("roundrobin")));
    assert!(h.answered(t));
}

#[test]
fn failed_write_of_the_new_member_id_rolls_back() {
    let mut h = Harness::new(config());
    let (ids, gen) = static_group(&mut h, 2);
    h.auto_ack = false;
    let t = h.join_with("g", "", Some("i1"), protocols(&[("range", &["t"])]), 5);
    h.fail(ErrorCode::NotLeaderOrFollower);
    let r = h.join_response(t).unwrap();
    assert_eq!((r.error_code, r.member_id.as_str()), (code(ErrorCode::NotCoordinator), ""));
    h.auto_ack = true;
    assert_eq!(h.heartbeat_static("g", &ids[1], Some("i1"), gen), 0, "old id restored");
    assert_eq!(h.heartbeat_static("g", "i1-uuid3", Some("i1"), gen), code(ErrorCode::FencedInstanceId));
    // The old protocols are back: the old id rejoining with them changes nothing.
    let again = h.join_with("g", &ids[1], Some("i1"), consumer_protocols(), 5);
    assert_eq!(h.join_response(again).unwrap().generation_id, gen);
}

#[test]
fn replaced_member_parked_sync_is_fenced() {
    let mut h = Harness::new(config());
    let t0 = h.join_with("g", "", Some("i0"), consumer_protocols(), 5);
    let t1 = h.join_with("g", "", Some("i1"), consumer_protocols(), 5);
    h.advance(0);
    let (id0, id1) = (h.join_response(t0).unwrap().member_id, h.join_response(t1).unwrap().member_id);
    let gen = h.join_response(t0).unwrap().generation_id;
    let s1 = h.sync("g", &id1, gen, &[]);
    assert!(!h.answered(s1));
    // i1 restarts while its old incarnation waits for the assignment.
    let t = h.join_with("g", "", Some("i1"), consumer_protocols(), 5);
    assert_eq!(h.error_of(s1), code(ErrorCode::FencedInstanceId));
    assert_eq!(h.c.group_state("g"), Some(GroupState::PreparingRebalance));
    let again = h.join_with("g", &id0, Some("i0"), consumer_protocols(), 5);
    assert_eq!(h.join_response(again).unwrap().generation_id, gen + 1);
    assert!(h.answered(t));
    // The fenced member id cannot come back.
    let old = h.join_with("g", &id1, Some("i1"), consumer_protocols(), 5);
    assert_eq!(h.error_of(old), code(ErrorCode::FencedInstanceId));
    h.assert_all_answered();
}

#[test]
fn static_member_that_misses_a_rebalance_is_kept_until_its_session_expires() {
    let mut h = Harness::new(config());
    let (ids, gen) = static_group(&mut h, 2);
    let t0 = h.join_with("g", &ids[0], Some("i0"), protocols(&[("range", &["t", "u"])]), 5);
    h.advance(i64::from(REBALANCE_MS) - 1);
    // i1 was silent for longer than its session: removed, which completes the join.
    let r = h.join_response(t0).expect("session expiry completes the join");
    assert_eq!(r.members.len(), 1);
    assert_eq!(r.generation_id, gen + 1);
}

#[test]
fn static_member_alive_but_not_rejoining_stays_in_the_group() {
    let mut h = Harness::new(config());
    let (ids, gen) = static_group(&mut h, 2);
    let t0 = h.join_with("g", &ids[0], Some("i0"), protocols(&[("range", &["t", "u"])]), 5);
    for _ in 0..6 {
        h.advance(5_000);
        h.heartbeat_static("g", &ids[1], Some("i1"), gen);
    }
    // The rebalance timeout passed: a dynamic member would be gone, a static one stays.
    let r = h.join_response(t0).unwrap();
    assert_eq!(r.members.len(), 2);
    assert_eq!(r.generation_id, gen + 1);
}
