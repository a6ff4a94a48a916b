//! SyncGroup, Heartbeat and LeaveGroup, and the timeouts that remove members: session
//! expiry and members that never sync.

use bytes::Bytes;
use std::collections::HashMap;
use strata_protocol::messages::heartbeat::{HeartbeatRequest, HeartbeatResponse};
use strata_protocol::messages::leave_group::{
    LeaveGroupRequest, LeaveGroupResponse, MemberIdentity, MemberResponse,
};
use strata_protocol::messages::sync_group::{SyncGroupRequest, SyncGroupResponse};
use strata_protocol::ErrorCode;

use super::classic_group::{Group, GroupState};
use super::coordinator::{group_append_error, respond, Completion, GroupCoordinator};
use super::join::join_error;
use super::timer::TimerKey;
use super::{Action, RequestMeta, Response};

/// LeaveGroup v3 replaced the single member id with a batch (KIP-345).
const FIRST_BATCHED_LEAVE_VERSION: i16 = 3;

pub(super) fn sync_error(code: ErrorCode) -> Response {
    Response::SyncGroup(SyncGroupResponse { error_code: code.code(), ..SyncGroupResponse::default() })
}

fn heartbeat_response(code: ErrorCode) -> Response {
    Response::Heartbeat(HeartbeatResponse { error_code: code.code(), ..HeartbeatResponse::default() })
}

/// A protocol type or name in SyncGroup v5+ must match the group's when both are known.
fn inconsistent(requested: Option<&str>, group: Option<&str>) -> bool {
    matches!((requested, group), (Some(r), Some(g)) if r != g)
}

impl GroupCoordinator {
    /// Handles a SyncGroup request. Followers' responses wait for the leader's
    /// assignment; the leader's assignment is answered once it is written.
    pub fn sync_group(&mut self, meta: &RequestMeta, req: SyncGroupRequest, _now_ms: i64) -> Vec<Action> {
        let mut out = Vec::new();
        let token = meta.token;
        if let Some(code) = self.coordinator_error(&req.group_id) {
            respond(&mut out, token, sync_error(code));
            return out;
        }
        if req.group_id.is_empty() {
            respond(&mut out, token, sync_error(ErrorCode::InvalidGroupId));
            return out;
        }
        let group_id = req.group_id.clone();
        let found = self.with_group(&group_id, |c, group| c.sync(group, meta, req, &mut out));
        if found.is_none() {
            respond(&mut out, token, sync_error(ErrorCode::UnknownMemberId));
        }
        out
    }

    fn validate_sync(&self, group: &Group, req: &SyncGroupRequest) -> Result<(), ErrorCode> {
        if group.is(GroupState::Dead) {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        group.validate_member(&req.member_id, req.group_instance_id.as_deref())?;
        if req.generation_id != group.generation_id {
            return Err(ErrorCode::IllegalGeneration);
        }
        if inconsistent(req.protocol_type.as_deref(), group.protocol_type.as_deref())
            || inconsistent(req.protocol_name.as_deref(), group.protocol_name.as_deref())
        {
            return Err(ErrorCode::InconsistentGroupProtocol);
        }
        Ok(())
    }

    fn sync(&mut self, group: &mut Group, meta: &RequestMeta, req: SyncGroupRequest, out: &mut Vec<Action>) {
        let token = meta.token;
        if group.is(GroupState::Empty) {
            respond(out, token, sync_error(ErrorCode::UnknownMemberId));
            return;
        }
        if let Err(code) = self.validate_sync(group, &req) {
            respond(out, token, sync_error(code));
            return;
        }
        match group.state {
            GroupState::PreparingRebalance => {
                respond(out, token, sync_error(ErrorCode::RebalanceInProgress));
            }
            GroupState::CompletingRebalance => {
                if let Some(member) = group.members.get_mut(&req.member_id) {
                    if let Some(old) = member.awaiting_sync.replace(token) {
                        respond(out, old, sync_error(ErrorCode::RebalanceInProgress));
                    }
                }
                self.remove_pending_sync_member(group, &req.member_id);
                if group.is_leader(&req.member_id) {
                    let mut assignment: HashMap<String, Bytes> =
                        req.assignments.into_iter().map(|a| (a.member_id, a.assignment)).collect();
                    for member_id in group.members.ids() {
                        assignment.entry(member_id).or_default();
                    }
                    let record = group.metadata_record(&assignment);
                    let completion = Completion::SyncAssignment {
                        group_id: group.group_id.clone(),
                        incarnation: group.incarnation,
                        generation: group.generation_id,
                        assignment,
                    };
                    self.append(out, group.partition, vec![record], completion);
                }
            }
            GroupState::Stable => {
                self.remove_pending_sync_member(group, &req.member_id);
                let assignment =
                    group.members.get(&req.member_id).map(|m| m.assignment.clone()).unwrap_or_default();
                let response = SyncGroupResponse {
                    protocol_type: group.protocol_type.clone(),
                    protocol_name: group.protocol_name.clone(),
                    assignment,
                    ..SyncGroupResponse::default()
                };
                respond(out, token, Response::SyncGroup(response));
            }
            GroupState::Empty | GroupState::Dead => {
                respond(out, token, sync_error(ErrorCode::UnknownMemberId));
            }
        }
    }

    fn remove_pending_sync_member(&mut self, group: &mut Group, member_id: &str) {
        group.pending_sync_members.remove(member_id);
        if group.pending_sync_members.is_empty() {
            self.timers.cancel(&TimerKey::Sync { group: group.group_id.clone() });
        }
    }

    /// The leader's assignment is written (or not): hand it out and become Stable, or
    /// fail the parked SyncGroups and rebalance.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_assignment_written(
        &mut self,
        group_id: &str,
        incarnation: u64,
        generation: i32,
        assignment: HashMap<String, Bytes>,
        result: Result<(), ErrorCode>,
        now_ms: i64,
        out: &mut Vec<Action>,
    ) {
        self.with_group(group_id, |c, group| {
            if group.incarnation != incarnation
                || group.generation_id != generation
                || !group.is(GroupState::CompletingRebalance)
            {
                // A rebalance started meanwhile; its own SyncGroup will write.
                return;
            }
            match result {
                Ok(()) => {
                    for member in group.members.iter_mut() {
                        member.assignment = assignment.get(&member.member_id).cloned().unwrap_or_default();
                    }
                    c.propagate_assignment(group, ErrorCode::None, now_ms, out);
                    group.transition_to(GroupState::Stable, now_ms);
                    tracing::info!(group_id = %group.group_id, generation, "group is stable");
                }
                Err(e) => {
                    c.reset_and_propagate_assignment(group, group_append_error(e), now_ms, out);
                    c.maybe_prepare_rebalance_or_complete_join(group, now_ms, out);
                }
            }
        });
    }

    pub(super) fn reset_and_propagate_assignment(
        &mut self,
        group: &mut Group,
        error: ErrorCode,
        now_ms: i64,
        out: &mut Vec<Action>,
    ) {
        for member in group.members.iter_mut() {
            member.assignment = Bytes::new();
        }
        self.propagate_assignment(group, error, now_ms, out);
    }

    /// Answers every parked SyncGroup; their sessions restart now.
    fn propagate_assignment(
        &mut self,
        group: &mut Group,
        error: ErrorCode,
        now_ms: i64,
        out: &mut Vec<Action>,
    ) {
        let ok = error == ErrorCode::None;
        let (protocol_type, protocol_name) =
            if ok { (group.protocol_type.clone(), group.protocol_name.clone()) } else { (None, None) };
        let mut answered = Vec::new();
        for member in group.members.iter_mut() {
            if let Some(token) = member.awaiting_sync.take() {
                let response = SyncGroupResponse {
                    error_code: error.code(),
                    protocol_type: protocol_type.clone(),
                    protocol_name: protocol_name.clone(),
                    assignment: member.assignment.clone(),
                    ..SyncGroupResponse::default()
                };
                respond(out, token, Response::SyncGroup(response));
                answered.push((member.member_id.clone(), member.session_timeout_ms));
            }
        }
        for (member_id, session_ms) in answered {
            let deadline = now_ms.saturating_add(i64::from(session_ms));
            self.schedule_heartbeat(&group.group_id, &member_id, deadline);
        }
    }

    /// Handles a Heartbeat: keeps the member's session alive and tells it whether a
    /// rebalance is in progress.
    pub fn heartbeat(&mut self, meta: &RequestMeta, req: &HeartbeatRequest, now_ms: i64) -> Vec<Action> {
        let mut out = Vec::new();
        let code = self.heartbeat_code(req, now_ms);
        respond(&mut out, meta.token, heartbeat_response(code));
        out
    }

    fn heartbeat_code(&mut self, req: &HeartbeatRequest, now_ms: i64) -> ErrorCode {
        if let Some(code) = self.coordinator_error(&req.group_id) {
            return code;
        }
        if req.group_id.is_empty() {
            return ErrorCode::InvalidGroupId;
        }
        let Some(group) = self.groups.get(&req.group_id) else {
            return ErrorCode::UnknownMemberId;
        };
        if group.is(GroupState::Dead) {
            return ErrorCode::CoordinatorNotAvailable;
        }
        if let Err(code) = group.validate_member(&req.member_id, req.group_instance_id.as_deref()) {
            return code;
        }
        if req.generation_id != group.generation_id {
            return ErrorCode::IllegalGeneration;
        }
        let session_ms = group.members.get(&req.member_id).map_or(0, |m| m.session_timeout_ms);
        let code = match group.state {
            GroupState::Empty | GroupState::Dead => return ErrorCode::UnknownMemberId,
            GroupState::PreparingRebalance => ErrorCode::RebalanceInProgress,
            GroupState::CompletingRebalance | GroupState::Stable => ErrorCode::None,
        };
        let deadline = now_ms.saturating_add(i64::from(session_ms));
        self.schedule_heartbeat(&req.group_id, &req.member_id, deadline);
        code
    }

    /// Handles a LeaveGroup request: one member (v0-2) or a batch by member id or
    /// `group.instance.id` (v3+).
    pub fn leave_group(&mut self, meta: &RequestMeta, req: &LeaveGroupRequest, now_ms: i64) -> Vec<Action> {
        let mut out = Vec::new();
        let identities: Vec<MemberIdentity> = if meta.api_version >= FIRST_BATCHED_LEAVE_VERSION {
            req.members.clone()
        } else {
            vec![MemberIdentity { member_id: req.member_id.clone(), group_instance_id: None, reason: None }]
        };
        let result = match self.coordinator_error(&req.group_id) {
            Some(code) => Err(code),
            None => self
                .with_group(&req.group_id, |c, group| c.leave(group, &identities, now_ms, &mut out))
                .unwrap_or(Err(ErrorCode::UnknownMemberId)),
        };
        let (top, members) = match result {
            Ok(members) => (ErrorCode::None, members),
            Err(code) => (code, Vec::new()),
        };
        let response = if meta.api_version >= FIRST_BATCHED_LEAVE_VERSION {
            LeaveGroupResponse { error_code: top.code(), members, ..LeaveGroupResponse::default() }
        } else {
            // v0-2 carry one error: the top-level one, else the member's.
            let member_error = members.iter().map(|m| m.error_code).find(|c| *c != 0);
            let code = if top != ErrorCode::None { top.code() } else { member_error.unwrap_or(0) };
            LeaveGroupResponse { error_code: code, ..LeaveGroupResponse::default() }
        };
        respond(&mut out, meta.token, Response::LeaveGroup(response));
        out
    }

    fn leave(
        &mut self,
        group: &mut Group,
        identities: &[MemberIdentity],
        now_ms: i64,
        out: &mut Vec<Action>,
    ) -> Result<Vec<MemberResponse>, ErrorCode> {
        if group.is(GroupState::Dead) {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        let mut responses = Vec::with_capacity(identities.len());
        let mut any_left = false;
        for identity in identities {
            let instance = identity.group_instance_id.as_deref();
            let outcome = if identity.member_id.is_empty() {
                // Administrative removal of a static member by instance id.
                match instance.and_then(|i| group.static_members.get(i)).cloned() {
                    Some(member_id) => {
                        self.remove_member(group, &member_id, out);
                        Ok(())
                    }
                    None => Err(ErrorCode::UnknownMemberId),
                }
            } else if group.pending_join_members.contains(&identity.member_id) {
                self.remove_member(group, &identity.member_id, out);
                Ok(())
            } else {
                group
                    .validate_member(&identity.member_id, instance)
                    .map(|()| self.remove_member(group, &identity.member_id, out))
            };
            any_left |= outcome.is_ok();
            responses.push(MemberResponse {
                member_id: identity.member_id.clone(),
                group_instance_id: identity.group_instance_id.clone(),
                error_code: outcome.err().unwrap_or(ErrorCode::None).code(),
            });
        }
        if any_left {
            match group.state {
                GroupState::Stable | GroupState::CompletingRebalance => {
                    self.maybe_prepare_rebalance_or_complete_join(group, now_ms, out)
                }
                GroupState::PreparingRebalance => self.maybe_complete_join_phase(group, now_ms, out),
                GroupState::Empty | GroupState::Dead => {}
            }
        }
        Ok(responses)
    }

    /// Removes a member or pending member, answering its parked requests with
    /// UNKNOWN_MEMBER_ID (so a live client rejoins) and stopping its session timer.
    pub(super) fn remove_member(&mut self, group: &mut Group, member_id: &str, out: &mut Vec<Action>) {
        self.cancel_heartbeat(&group.group_id, member_id);
        if let Some(member) = group.remove(member_id) {
            if let Some(waiter) = member.awaiting_join {
                respond(out, waiter.token, join_error(ErrorCode::UnknownMemberId, ""));
            }
            if let Some(token) = member.awaiting_sync {
                respond(out, token, sync_error(ErrorCode::UnknownMemberId));
            }
        }
    }

    /// A session timer fired: the member (or pending member) is gone unless it is parked
    /// in a rebalance, which counts as being alive.
    pub(super) fn expire_heartbeat(
        &mut self,
        group_id: &str,
        member_id: &str,
        now_ms: i64,
        out: &mut Vec<Action>,
    ) {
        self.with_group(group_id, |c, group| {
            if group.pending_join_members.contains(member_id) {
                c.remove_member(group, member_id, out);
                if group.is(GroupState::PreparingRebalance) && group.has_all_members_joined() {
                    c.complete_join(group, now_ms, out);
                }
                return;
            }
            let Some(member) = group.members.get(member_id) else {
                return;
            };
            if member.has_satisfied_heartbeat() {
                return;
            }
            tracing::info!(group_id, member_id, "member session expired");
            c.remove_member(group, member_id, out);
            match group.state {
                GroupState::Stable | GroupState::CompletingRebalance => {
                    c.maybe_prepare_rebalance_or_complete_join(group, now_ms, out)
                }
                GroupState::PreparingRebalance if group.has_all_members_joined() => {
                    c.complete_join(group, now_ms, out)
                }
                _ => {}
            }
        });
    }

    /// The sync phase of `generation` timed out: members that never sent SyncGroup are
    /// removed and the group rebalances.
    pub(super) fn expire_pending_sync(
        &mut self,
        group_id: &str,
        generation: i32,
        now_ms: i64,
        out: &mut Vec<Action>,
    ) {
        self.with_group(group_id, |c, group| {
            let syncing = matches!(group.state, GroupState::CompletingRebalance | GroupState::Stable);
            if group.generation_id != generation || !syncing || group.pending_sync_members.is_empty() {
                return;
            }
            let missing: Vec<String> = group.pending_sync_members.iter().cloned().collect();
            tracing::info!(group_id, removed = ?missing, "members did not sync in time");
            for member_id in &missing {
                c.remove_member(group, member_id, out);
            }
            c.prepare_rebalance(group, now_ms, out);
        });
    }
}
