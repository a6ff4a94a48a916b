//! Tests of the group coordinator under deterministic time, through a small harness
//! that plays the shell: it executes actions, acknowledges appends (or holds them), keeps
//! the written log, and checks that every request token is answered exactly once.

mod join;
mod offsets;
mod random_ops;
mod record_format;
mod replay;
mod static_members;
mod timeouts;
mod txn_offsets;

use bytes::Bytes;
use std::collections::{HashMap, HashSet, VecDeque};
use strata_protocol::messages::heartbeat::HeartbeatRequest;
use strata_protocol::messages::join_group::{JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse};
use strata_protocol::messages::leave_group::{LeaveGroupRequest, MemberIdentity};
use strata_protocol::messages::sync_group::{
    SyncGroupRequest, SyncGroupRequestAssignment, SyncGroupResponse,
};
use strata_protocol::ErrorCode;

use super::classic_group::OffsetAndMetadata;
use super::consumer_protocol::encode_subscription;
use super::*;

pub(super) const SESSION_MS: i32 = 10_000;
pub(super) const REBALANCE_MS: i32 = 30_000;

/// A config with no initial rebalance delay and 4 partitions (tests that need the delay
/// or more partitions set them).
pub(super) fn config() -> GroupConfig {
    GroupConfig {
        offsets_topic_num_partitions: 4,
        group_initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    }
}

pub(super) fn protocols(names: &[(&str, &[&str])]) -> Vec<JoinGroupRequestProtocol> {
    names
        .iter()
        .map(|(name, topics)| JoinGroupRequestProtocol {
            name: (*name).to_owned(),
            metadata: encode_subscription(topics),
        })
        .collect()
}

/// The default consumer protocols: range then roundrobin, subscribed to topic "t".
pub(super) fn consumer_protocols() -> Vec<JoinGroupRequestProtocol> {
    protocols(&[("range", &["t"]), ("roundrobin", &["t"])])
}

pub(super) fn code(c: ErrorCode) -> i16 {
    c.code()
}

/// A batch of the written log, as the shell would have written it.
#[derive(Debug, Clone)]
pub(super) enum Batch {
    /// Records, transactional when `producer` is set.
    Data { partition: i32, producer: Option<TransactionalProducer>, records: Vec<Record> },
    /// A COMMIT/ABORT control batch.
    Marker { partition: i32, producer_id: i64, commit: bool },
}

pub(super) struct Harness {
    pub c: GroupCoordinator,
    pub now: i64,
    next_token: u64,
    issued: HashSet<RequestToken>,
    pub responses: HashMap<RequestToken, Response>,
    /// Records acknowledged so far, in log order.
    pub log: Vec<(i32, Record)>,
    /// Batches acknowledged so far (markers included), in log order.
    pub batches: Vec<Batch>,
    /// When false, appends wait in `held` until `ack`/`fail`.
    pub auto_ack: bool,
    /// Appends issued and not yet acknowledged: id, partition, records, producer.
    pub held: VecDeque<(AppendId, i32, Vec<Record>, Option<TransactionalProducer>)>,
}

impl Harness {
    pub fn new(config: GroupConfig) -> Harness {
        let mut n = 0u64;
        let uuids = Box::new(move || {
            n += 1;
            format!("uuid{n}")
        });
        let partitions = config.offsets_topic_num_partitions;
        let mut h = Harness {
            c: GroupCoordinator::with_uuid_source(config, uuids),
            now: 1_000_000,
            next_token: 0,
            issued: HashSet::new(),
            responses: HashMap::new(),
            log: Vec::new(),
            batches: Vec::new(),
            auto_ack: true,
            held: VecDeque::new(),
        };
        for p in 0..partitions {
            let a = h.c.begin_load(p, h.now);
            h.run(a);
            let a = h.c.complete_load(p, h.now);
            h.run(a);
        }
        h
    }

    pub fn token(&mut self) -> RequestToken {
        self.next_token += 1;
        let t = RequestToken(self.next_token);
        self.issued.insert(t);
        t
    }

    pub fn meta(&mut self, api_version: i16, client_id: &str) -> RequestMeta {
        RequestMeta {
            token: self.token(),
            api_version,
            client_id: client_id.to_owned(),
            client_host: "/127.0.0.1".to_owned(),
        }
    }

    /// Executes actions like the shell: records responses, writes appends.
    pub fn run(&mut self, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Respond { token, response } => {
                    assert!(self.issued.contains(&token), "response to unknown token {token:?}");
                    let previous = self.responses.insert(token, response);
                    assert!(previous.is_none(), "token {token:?} answered twice");
                }
                Action::Append { id, partition, producer, records } => {
                    for r in &records {
                        assert_eq!(self.c.partition_for(r.group_id()), partition);
                    }
                    self.held.push_back((id, partition, records, producer));
                    if self.auto_ack {
                        self.ack();
                    }
                }
            }
        }
    }

    /// Acknowledges the oldest held append.
    pub fn ack(&mut self) {
        let (id, partition, records, producer) = self.held.pop_front().expect("an append is held");
        self.log.extend(records.iter().cloned().map(|r| (partition, r)));
        self.batches.push(Batch::Data { partition, producer, records });
        let a = self.c.append_complete(id, Ok(()), self.now);
        self.run(a);
    }

    /// Fails the oldest held append with `error`.
    pub fn fail(&mut self, error: ErrorCode) {
        let (id, _, _, _) = self.held.pop_front().expect("an append is held");
        let a = self.c.append_complete(id, Err(error), self.now);
        self.run(a);
    }

    /// Writes the COMMIT (`commit`) or ABORT marker of `producer_id` to `partition` and
    /// tells the coordinator, as the shell does for WriteTxnMarkers.
    pub fn marker(&mut self, partition: i32, producer_id: i64, commit: bool) {
        self.batches.push(Batch::Marker { partition, producer_id, commit });
        let a = self.c.complete_transaction(partition, producer_id, commit, self.now);
        self.run(a);
    }

    /// Moves the clock and fires due timers, as the shell's timer loop would.
    pub fn advance(&mut self, ms: i64) {
        self.now += ms;
        while self.c.next_deadline().is_some_and(|d| d <= self.now) {
            let a = self.c.tick(self.now);
            self.run(a);
        }
    }

    pub fn answered(&self, t: RequestToken) -> bool {
        self.responses.contains_key(&t)
    }

    pub fn join_response(&self, t: RequestToken) -> Option<JoinGroupResponse> {
        match self.responses.get(&t) {
            Some(Response::JoinGroup(r)) => Some(r.clone()),
            None => None,
            Some(other) => panic!("not a join response: {other:?}"),
        }
    }

    pub fn sync_response(&self, t: RequestToken) -> Option<SyncGroupResponse> {
        match self.responses.get(&t) {
            Some(Response::SyncGroup(r)) => Some(r.clone()),
            None => None,
            Some(other) => panic!("not a sync response: {other:?}"),
        }
    }

    pub fn error_of(&self, t: RequestToken) -> i16 {
        match self.responses.get(&t).expect("answered") {
            Response::JoinGroup(r) => r.error_code,
            Response::SyncGroup(r) => r.error_code,
            Response::Heartbeat(r) => r.error_code,
            Response::LeaveGroup(r) => r.error_code,
            Response::OffsetDelete(r) => r.error_code,
            other => panic!("no top-level error in {other:?}"),
        }
    }

    /// Sends a JoinGroup at `version`.
    pub fn join_with(
        &mut self,
        group: &str,
        member_id: &str,
        instance: Option<&str>,
        protocols: Vec<JoinGroupRequestProtocol>,
        version: i16,
    ) -> RequestToken {
        let meta = self.meta(version, "client");
        let req = JoinGroupRequest {
            group_id: group.to_owned(),
            session_timeout_ms: SESSION_MS,
            rebalance_timeout_ms: REBALANCE_MS,
            member_id: member_id.to_owned(),
            group_instance_id: instance.map(str::to_owned),
            protocol_type: "consumer".to_owned(),
            protocols,
            reason: None,
        };
        let a = self.c.join_group(&meta, req, self.now);
        self.run(a);
        meta.token
    }

    pub fn join(&mut self, group: &str, member_id: &str) -> RequestToken {
        self.join_with(group, member_id, None, consumer_protocols(), 5)
    }

    /// KIP-394 first step: returns the member id handed out.
    pub fn new_member_id(&mut self, group: &str) -> String {
        let t = self.join(group, "");
        let r = self.join_response(t).expect("answered at once");
        assert_eq!(r.error_code, code(ErrorCode::MemberIdRequired));
        r.member_id
    }

    pub fn sync(
        &mut self,
        group: &str,
        member_id: &str,
        generation: i32,
        assignments: &[(&str, &[u8])],
    ) -> RequestToken {
        let meta = self.meta(3, "client");
        let req = SyncGroupRequest {
            group_id: group.to_owned(),
            generation_id: generation,
            member_id: member_id.to_owned(),
            assignments: assignments
                .iter()
                .map(|(m, a)| SyncGroupRequestAssignment {
                    member_id: (*m).to_owned(),
                    assignment: Bytes::copy_from_slice(a),
                })
                .collect(),
            ..SyncGroupRequest::default()
        };
        let a = self.c.sync_group(&meta, req, self.now);
        self.run(a);
        meta.token
    }

    pub fn heartbeat(&mut self, group: &str, member_id: &str, generation: i32) -> i16 {
        self.heartbeat_static(group, member_id, None, generation)
    }

    pub fn heartbeat_static(
        &mut self,
        group: &str,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
    ) -> i16 {
        let meta = self.meta(3, "client");
        let req = HeartbeatRequest {
            group_id: group.to_owned(),
            generation_id: generation,
            member_id: member_id.to_owned(),
            group_instance_id: instance.map(str::to_owned),
        };
        let a = self.c.heartbeat(&meta, &req, self.now);
        self.run(a);
        self.error_of(meta.token)
    }

    pub fn leave(&mut self, group: &str, members: &[(&str, Option<&str>)]) -> RequestToken {
        let meta = self.meta(3, "client");
        let req = LeaveGroupRequest {
            group_id: group.to_owned(),
            members: members
                .iter()
                .map(|(m, i)| MemberIdentity {
                    member_id: (*m).to_owned(),
                    group_instance_id: i.map(str::to_owned),
                    reason: None,
                })
                .collect(),
            ..LeaveGroupRequest::default()
        };
        let a = self.c.leave_group(&meta, &req, self.now);
        self.run(a);
        meta.token
    }

    /// Forms a Stable group of `n` members (KIP-394 joins, then syncs with assignments
    /// "a<i>"); returns the member ids in join order and the generation.
    pub fn stable_group(&mut self, group: &str, n: usize) -> (Vec<String>, i32) {
        let ids: Vec<String> = (0..n).map(|_| self.new_member_id(group)).collect();
        let tokens: Vec<RequestToken> = ids.iter().map(|id| self.join(group, id)).collect();
        self.advance(0);
        let leader_resp = self.join_response(tokens[0]).expect("join completed");
        assert_eq!(leader_resp.error_code, 0);
        let generation = leader_resp.generation_id;
        let assignments: Vec<(String, Vec<u8>)> =
            ids.iter().enumerate().map(|(i, id)| (id.clone(), format!("a{i}").into_bytes())).collect();
        let refs: Vec<(&str, &[u8])> = assignments.iter().map(|(m, a)| (m.as_str(), a.as_slice())).collect();
        let mut sync_tokens = vec![self.sync(group, &ids[0], generation, &refs)];
        for id in &ids[1..] {
            sync_tokens.push(self.sync(group, id, generation, &[]));
        }
        for t in sync_tokens {
            assert_eq!(self.sync_response(t).expect("synced").error_code, 0);
        }
        assert_eq!(self.c.group_state(group), Some(GroupState::Stable));
        (ids, generation)
    }

    /// Every issued token has been answered.
    pub fn assert_all_answered(&self) {
        let missing: Vec<_> = self.issued.iter().filter(|t| !self.responses.contains_key(t)).collect();
        assert!(missing.is_empty(), "unanswered requests: {missing:?}");
    }
}
