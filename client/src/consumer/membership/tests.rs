//! The membership without sockets: joins, syncs, heartbeat errors, eager and
//! cooperative rebalances, static members and coordinator moves, driven by hand-made
//! responses and explicit times.

use super::*;
use crate::consumer::assignor;
use strata_protocol::messages::join_group::JoinGroupResponseMember;

fn config(strategies: Vec<AssignmentStrategy>, instance: Option<&str>) -> MembershipConfig {
    MembershipConfig {
        group_id: "g".into(),
        group_instance_id: instance.map(str::to_string),
        session_timeout: Duration::from_secs(45),
        rebalance_timeout: Duration::from_secs(300),
        heartbeat_interval: Duration::from_secs(3),
        strategies,
        rack: None,
        retry_backoff: Duration::from_millis(100),
        max_poll_interval: Duration::from_secs(300),
    }
}

fn eager() -> Membership {
    Membership::new(config(vec![AssignmentStrategy::Range], None), vec!["t".into()])
}

fn cooperative() -> Membership {
    Membership::new(config(vec![AssignmentStrategy::CooperativeSticky], None), vec!["t".into()])
}

fn tps(ps: &[i32]) -> Vec<TopicPartition> {
    ps.iter().map(|p| TopicPartition::new("t", *p)).collect()
}

fn join_response(
    member: &str,
    leader: &str,
    generation: i32,
    protocol: &str,
    members: &[(&str, &Subscription)],
) -> JoinGroupResponse {
    JoinGroupResponse {
        generation_id: generation,
        protocol_name: Some(protocol.into()),
        leader: leader.into(),
        member_id: member.into(),
        members: members
            .iter()
            .map(|(id, s)| JoinGroupResponseMember {
                member_id: id.to_string(),
                group_instance_id: None,
                metadata: s.encode(VERSION),
            })
            .collect(),
        ..Default::default()
    }
}

fn sync_response(partitions: &[i32]) -> SyncGroupResponse {
    let a = Assignment {
        assigned_partitions: vec![TopicPartitions { topic: "t".into(), partitions: partitions.to_vec() }],
        user_data: None,
    };
    SyncGroupResponse { assignment: a.encode(0), ..Default::default() }
}

fn error_code<T: Default>(code: ErrorCode, set: impl FnOnce(&mut T, i16)) -> T {
    let mut r = T::default();
    set(&mut r, code.code());
    r
}

fn expect_join(m: &mut Membership, now: Instant) -> JoinGroupRequest {
    match m.next_action(now) {
        Action::Join(r) => r,
        other => panic!("expected a join, got {other:?}"),
    }
}

/// Finds the coordinator and joins as a follower with `partitions`.
fn joined_follower(m: &mut Membership, now: Instant, generation: i32, partitions: &[i32]) {
    if matches!(m.next_action(now), Action::FindCoordinator) {
        m.on_coordinator(now, Ok(()));
    }
    let protocol = m.config.strategies[0].name();
    let _ = expect_join(m, now);
    m.on_join(now, Ok(join_response("me", "other", generation, protocol, &[])));
    assert!(
        matches!(m.next_action(now), Action::Sync(ref r) if r.assignments.is_empty() && r.generation_id == generation)
    );
    m.on_sync(now, Ok(sync_response(partitions)));
    assert!(m.is_stable());
}

#[test]
fn a_member_finds_the_coordinator_joins_with_a_member_id_leads_and_syncs() {
    let now = Instant::now();
    let mut m = eager();
    assert!(matches!(m.next_action(now), Action::FindCoordinator));
    m.on_coordinator(now, Ok(()));
    let first = expect_join(&mut m, now);
    assert_eq!(first.member_id, "");
    assert_eq!(first.protocols[0].name, "range");
    let (_, sub) = Subscription::decode(&first.protocols[0].metadata).expect("subscription");
    assert_eq!(sub.topics, vec!["t".to_string()]);
    // KIP-394: the coordinator hands out the id and asks to join again with it.
    m.on_join(
        now,
        Ok(JoinGroupResponse {
            error_code: ErrorCode::MemberIdRequired.code(),
            member_id: "m-1".into(),
            ..Default::default()
        }),
    );
    let second = expect_join(&mut m, now);
    assert_eq!(second.member_id, "m-1");
    let other = Subscription { topics: vec!["t".into()], ..Default::default() };
    m.on_join(now, Ok(join_response("m-1", "m-1", 1, "range", &[("m-1", &sub), ("m-2", &other)])));
    let Action::Assign { strategy, members } = m.next_action(now) else { panic!("the leader assigns") };
    assert_eq!((strategy, members.len()), (AssignmentStrategy::Range, 2));
    let topics = BTreeMap::from([("t".to_string(), 4)]);
    m.on_assignment(&assignor::assign(strategy, &topics, &members));
    let Action::Sync(sync) = m.next_action(now) else { panic!("sync") };
    assert_eq!((sync.generation_id, sync.member_id.as_str(), sync.assignments.len()), (1, "m-1", 2));
    let mine = sync.assignments.iter().find(|a| a.member_id == "m-1").expect("mine");
    let (_, a) = Assignment::decode(&mine.assignment).expect("assignment");
    assert_eq!(a.assigned_partitions[0].partitions, vec![0, 1]);
    m.on_sync(now, Ok(sync_response(&[0, 1])));
    assert_eq!(m.take_events(), vec![Event::Assigned(tps(&[0, 1]))]);
    assert!(m.awaiting_callbacks(), "until poll runs them");
    m.callbacks_done();
    assert!(!m.awaiting_callbacks());
    assert_eq!(m.group_metadata().generation_id, 1);
    // Heartbeats on the interval.
    assert!(matches!(m.next_action(now), Action::WaitUntil(t) if t == now + Duration::from_secs(3)));
    let later = now + Duration::from_secs(3);
    assert!(
        matches!(m.next_action(later), Action::Heartbeat(ref h) if h.generation_id == 1 && h.member_id == "m-1")
    );
    assert_eq!(m.next_action(later), Action::Idle, "one heartbeat at a time");
    m.on_heartbeat(later, Ok(HeartbeatResponse::default()));
    assert!(matches!(m.next_action(later), Action::WaitUntil(_)));
}

impl PartialEq for Action {
    fn eq(&self, other: &Action) -> bool {
        matches!((self, other), (Action::Idle, Action::Idle))
    }
}

#[test]
fn an_eager_member_revokes_everything_before_it_rejoins() {
    let now = Instant::now();
    let mut m = eager();
    joined_follower(&mut m, now, 1, &[0, 1]);
    m.take_events();
    m.callbacks_done();
    m.on_heartbeat(
        now,
        Ok(error_code(ErrorCode::RebalanceInProgress, |r: &mut HeartbeatResponse, c| r.error_code = c)),
    );
    assert_eq!(m.next_action(now), Action::Idle, "revocation first");
    assert_eq!(m.take_events(), vec![Event::Revoked(tps(&[0, 1]))]);
    m.callbacks_done();
    let join = expect_join(&mut m, now);
    assert_eq!(join.member_id, "me", "same member, next generation");
    let (_, sub) = Subscription::decode(&join.protocols[0].metadata).expect("sub");
    assert!(sub.owned_partitions.is_empty() && sub.generation_id == 1);
    m.on_join(now, Ok(join_response("me", "x", 2, "range", &[])));
    let _ = m.next_action(now);
    m.on_sync(now, Ok(sync_response(&[1, 2])));
    assert_eq!(m.take_events(), vec![Event::Assigned(tps(&[1, 2]))], "eager: all of it is new");
}

#[test]
fn unknown_member_and_illegal_generation_lose_the_partitions() {
    let now = Instant::now();
    let mut m = eager();
    joined_follower(&mut m, now, 3, &[0]);
    m.take_events();
    m.callbacks_done();
    m.on_heartbeat(
        now,
        Ok(error_code(ErrorCode::IllegalGeneration, |r: &mut HeartbeatResponse, c| r.error_code = c)),
    );
    let _ = m.next_action(now);
    assert_eq!(m.take_events(), vec![Event::Lost(tps(&[0]))], "lost, not revoked: no commit possible");
    m.callbacks_done();
    let join = expect_join(&mut m, now);
    assert_eq!(join.member_id, "me", "ILLEGAL_GENERATION keeps the member id");
    assert_eq!(m.group_metadata().generation_id, NO_GENERATION);
    m.on_join(now, Ok(join_response("me", "x", 4, "range", &[])));
    let _ = m.next_action(now);
    m.on_sync(now, Ok(sync_response(&[0])));
    m.take_events();
    m.callbacks_done();
    m.on_heartbeat(
        now,
        Ok(error_code(ErrorCode::UnknownMemberId, |r: &mut HeartbeatResponse, c| r.error_code = c)),
    );
    let _ = m.next_action(now);
    assert_eq!(m.take_events(), vec![Event::Lost(tps(&[0]))]);
    m.callbacks_done();
    assert_eq!(expect_join(&mut m, now).member_id, "", "UNKNOWN_MEMBER_ID starts over");
}

#[test]
fn sync_errors_rejoin_and_a_fenced_static_member_is_fatal() {
    let now = Instant::now();
    let mut m = Membership::new(config(vec![AssignmentStrategy::Range], Some("i-1")), vec!["t".into()]);
    m.on_coordinator(now, Ok(()));
    let join = expect_join(&mut m, now);
    assert_eq!(join.group_instance_id.as_deref(), Some("i-1"));
    m.on_join(now, Ok(join_response("me", "x", 1, "range", &[])));
    let _ = m.next_action(now);
    m.on_sync(
        now,
        Ok(error_code(ErrorCode::RebalanceInProgress, |r: &mut SyncGroupResponse, c| r.error_code = c)),
    );
    let join = expect_join(&mut m, now);
    assert_eq!(join.member_id, "me");
    m.on_join(
        now,
        Ok(JoinGroupResponse { error_code: ErrorCode::FencedInstanceId.code(), ..Default::default() }),
    );
    assert_eq!(m.fatal().and_then(Error::code), Some(ErrorCode::FencedInstanceId));
    assert_eq!(m.next_action(now), Action::Idle);
    // Static members never send LeaveGroup.
    assert!(m.leave().is_none());
}

#[test]
fn a_fenced_static_member_heartbeat_is_fatal_and_a_dynamic_member_leaves() {
    let now = Instant::now();
    let mut m = Membership::new(config(vec![AssignmentStrategy::Range], Some("i-1")), vec!["t".into()]);
    joined_follower(&mut m, now, 1, &[0]);
    m.take_events();
    m.callbacks_done();
    m.on_heartbeat(
        now,
        Ok(error_code(ErrorCode::FencedInstanceId, |r: &mut HeartbeatResponse, c| r.error_code = c)),
    );
    assert_eq!(m.fatal().and_then(Error::code), Some(ErrorCode::FencedInstanceId));

    let mut d = eager();
    joined_follower(&mut d, now, 1, &[0]);
    d.take_events();
    d.callbacks_done();
    let leave = d.leave().expect("dynamic members leave");
    assert_eq!(leave.members[0].member_id, "me");
    assert_eq!(d.take_events(), vec![Event::Revoked(tps(&[0]))]);
}

#[test]
fn the_coordinator_moving_means_finding_it_again() {
    let now = Instant::now();
    let mut m = eager();
    joined_follower(&mut m, now, 1, &[0]);
    m.take_events();
    m.callbacks_done();
    let later = now + Duration::from_secs(3);
    assert!(matches!(m.next_action(later), Action::Heartbeat(_)));
    m.on_heartbeat(
        later,
        Ok(error_code(ErrorCode::NotCoordinator, |r: &mut HeartbeatResponse, c| r.error_code = c)),
    );
    let after = later + Duration::from_secs(1);
    assert!(matches!(m.next_action(after), Action::FindCoordinator));
    m.on_coordinator(after, Ok(()));
    assert!(matches!(m.next_action(after + Duration::from_secs(3)), Action::Heartbeat(_)), "still a member");
    assert!(m.is_stable());
    m.on_heartbeat(after, Err(Error::connection("h:1", "reset")));
    let retry = after + Duration::from_secs(1);
    assert!(matches!(m.next_action(retry), Action::FindCoordinator));
    // During a join, NOT_COORDINATOR: find it, then join again.
    m.on_coordinator(retry, Ok(()));
    m.request_rejoin();
    let _ = m.next_action(retry);
    m.take_events();
    m.callbacks_done();
    let _ = expect_join(&mut m, retry);
    m.on_join(
        retry,
        Ok(JoinGroupResponse { error_code: ErrorCode::NotCoordinator.code(), ..Default::default() }),
    );
    let again = retry + Duration::from_secs(1);
    assert!(matches!(m.next_action(again), Action::FindCoordinator));
    m.on_coordinator(again, Ok(()));
    let _ = expect_join(&mut m, again);
}

#[test]
fn a_cooperative_member_keeps_its_partitions_revokes_only_what_moves_and_rejoins() {
    let now = Instant::now();
    let mut m = cooperative();
    joined_follower(&mut m, now, 1, &[0, 1, 2, 3]);
    assert_eq!(m.take_events(), vec![Event::Assigned(tps(&[0, 1, 2, 3]))]);
    m.callbacks_done();
    m.on_heartbeat(
        now,
        Ok(error_code(ErrorCode::RebalanceInProgress, |r: &mut HeartbeatResponse, c| r.error_code = c)),
    );
    let join = expect_join(&mut m, now);
    assert!(m.take_events().is_empty(), "nothing revoked before the join");
    let (_, sub) = Subscription::decode(&join.protocols[0].metadata).expect("sub");
    assert_eq!(sub.owned_partitions[0].partitions, vec![0, 1, 2, 3]);
    assert_eq!(sub.generation_id, 1);
    m.on_join(now, Ok(join_response("me", "x", 2, "cooperative-sticky", &[])));
    let _ = m.next_action(now);
    m.on_sync(now, Ok(sync_response(&[0, 1])));
    assert_eq!(m.take_events(), vec![Event::Revoked(tps(&[2, 3])), Event::Assigned(Vec::new())]);
    m.callbacks_done();
    // The second rebalance of KIP-429, owning only what stays.
    let join = expect_join(&mut m, now);
    let (_, sub) = Subscription::decode(&join.protocols[0].metadata).expect("sub");
    assert_eq!(sub.owned_partitions[0].partitions, vec![0, 1]);
    m.on_join(now, Ok(join_response("me", "x", 3, "cooperative-sticky", &[])));
    let _ = m.next_action(now);
    m.on_sync(now, Ok(sync_response(&[0, 1])));
    assert_eq!(m.take_events(), vec![Event::Assigned(Vec::new())]);
    m.callbacks_done();
    assert!(m.is_stable());
}

#[test]
fn a_coordinator_still_loading_is_retried_after_the_backoff() {
    let now = Instant::now();
    let mut m = eager();
    m.on_coordinator(now, Ok(()));
    let _ = expect_join(&mut m, now);
    m.on_join(
        now,
        Ok(JoinGroupResponse {
            error_code: ErrorCode::CoordinatorLoadInProgress.code(),
            ..Default::default()
        }),
    );
    assert!(matches!(m.next_action(now), Action::WaitUntil(_)));
    let _ = expect_join(&mut m, now + Duration::from_millis(100));
    m.on_join(
        now,
        Ok(JoinGroupResponse {
            error_code: ErrorCode::GroupAuthorizationFailed.code(),
            ..Default::default()
        }),
    );
    assert_eq!(m.fatal().and_then(Error::code), Some(ErrorCode::GroupAuthorizationFailed));
}

#[test]
fn heartbeats_go_on_while_the_assignment_callback_waits_for_poll() {
    let now = Instant::now();
    let mut m = eager();
    joined_follower(&mut m, now, 1, &[0]);
    assert!(m.awaiting_callbacks(), "Assigned not yet run");
    let later = now + Duration::from_secs(3);
    assert!(matches!(m.next_action(later), Action::Heartbeat(_)));
    // A rebalance meanwhile waits for the callbacks before revoking and joining.
    m.on_heartbeat(
        later,
        Ok(error_code(ErrorCode::RebalanceInProgress, |r: &mut HeartbeatResponse, c| r.error_code = c)),
    );
    assert_eq!(m.next_action(later), Action::Idle);
    assert_eq!(m.take_events(), vec![Event::Assigned(tps(&[0]))]);
    m.callbacks_done();
    assert_eq!(m.next_action(later), Action::Idle, "now the revocation");
    assert_eq!(m.take_events(), vec![Event::Revoked(tps(&[0]))]);
    m.callbacks_done();
    let _ = expect_join(&mut m, later);
}

#[test]
fn a_member_that_stops_polling_leaves_and_joins_again_on_the_next_poll() {
    let now = Instant::now();
    let mut m = eager();
    m.on_poll(now);
    joined_follower(&mut m, now, 1, &[0, 1]);
    m.take_events();
    m.callbacks_done();
    // The heartbeat wait is cut short by the poll deadline.
    let expiry = now + Duration::from_secs(300);
    let mut t = now;
    loop {
        match m.next_action(t) {
            Action::Heartbeat(_) => m.on_heartbeat(t, Ok(HeartbeatResponse::default())),
            Action::WaitUntil(at) => {
                assert!(at <= expiry);
                t = at;
            }
            Action::Leave(leave) => {
                assert_eq!(leave.members[0].member_id, "me");
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(t, expiry);
    assert_eq!(m.next_action(t), Action::Idle, "nothing until the application polls");
    m.on_poll(t);
    let _ = m.next_action(t);
    assert_eq!(m.take_events(), vec![Event::Lost(tps(&[0, 1]))]);
    m.callbacks_done();
    assert_eq!(expect_join(&mut m, t).member_id, "", "a new member");
}

#[test]
fn a_leader_whose_topics_grew_rebalances_again() {
    let now = Instant::now();
    let mut m = eager();
    joined_follower(&mut m, now, 1, &[0]);
    m.take_events();
    m.callbacks_done();
    m.set_assignment_snapshot(BTreeMap::from([("t".to_string(), 1)]));
    m.on_metadata(&BTreeMap::from([("t".to_string(), 1)]));
    assert!(m.is_stable(), "same counts");
    m.on_metadata(&BTreeMap::from([("t".to_string(), 3)]));
    assert!(!m.is_stable());
    let _ = m.next_action(now);
    assert_eq!(m.take_events(), vec![Event::Revoked(tps(&[0]))]);
}

#[test]
fn a_static_leader_told_to_skip_the_assignment_syncs_without_one() {
    let now = Instant::now();
    let mut m = Membership::new(config(vec![AssignmentStrategy::Range], Some("i-1")), vec!["t".into()]);
    m.on_coordinator(now, Ok(()));
    let _ = expect_join(&mut m, now);
    let mut r = join_response("me", "me", 7, "range", &[]);
    r.skip_assignment = true;
    m.on_join(now, Ok(r));
    assert!(
        matches!(m.next_action(now), Action::Sync(ref s) if s.assignments.is_empty() && s.generation_id == 7)
    );
    m.on_sync(now, Ok(sync_response(&[0, 1])));
    assert_eq!(m.take_events(), vec![Event::Assigned(tps(&[0, 1]))]);
}

#[test]
fn a_subscription_changed_during_a_join_rejoins_once_it_completes() {
    let now = Instant::now();
    let mut m = eager();
    m.on_coordinator(now, Ok(()));
    let _ = expect_join(&mut m, now);
    m.subscribe(vec!["t".into(), "u".into()]);
    m.on_join(now, Ok(join_response("me", "x", 1, "range", &[])));
    let _ = m.next_action(now);
    m.on_sync(now, Ok(sync_response(&[0])));
    assert!(!m.is_stable(), "joined with the old topics");
    assert_eq!(m.take_events(), vec![Event::Assigned(tps(&[0]))]);
    m.callbacks_done();
    let _ = m.next_action(now);
    assert_eq!(m.take_events(), vec![Event::Revoked(tps(&[0]))]);
    m.callbacks_done();
    let join = expect_join(&mut m, now);
    let (_, sub) = Subscription::decode(&join.protocols[0].metadata).expect("sub");
    assert_eq!(sub.topics, vec!["t".to_string(), "u".to_string()]);
}
