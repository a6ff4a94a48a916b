//! JoinGroup and the join phase of a rebalance: new, pending (KIP-394), existing and
//! static (KIP-345) members, the initial delayed join, and the completion of the phase
//! that starts a new generation.

use std::collections::HashMap;
use strata_protocol::messages::join_group::{JoinGroupRequest, JoinGroupResponse};
use strata_protocol::ErrorCode;

use super::classic_group::{Group, GroupState};
use super::coordinator::{respond, Completion, GroupCoordinator, StaticRejoin};
use super::member::{JoinWaiter, Member};
use super::timer::{TimerKey, TimerTask};
use super::{Action, RequestMeta, Response};

/// JoinGroup v4 introduced MEMBER_ID_REQUIRED (KIP-394).
const FIRST_VERSION_REQUIRING_MEMBER_ID: i16 = 4;
/// JoinGroup v9 introduced `skip_assignment` (KIP-814).
const FIRST_VERSION_WITH_SKIP_ASSIGNMENT: i16 = 9;

pub(super) fn join_error(code: ErrorCode, member_id: &str) -> Response {
    Response::JoinGroup(JoinGroupResponse {
        error_code: code.code(),
        member_id: member_id.to_owned(),
        protocol_name: None,
        ..JoinGroupResponse::default()
    })
}

/// The successful JoinGroup response of `member_id` for the group's current generation.
fn join_success(group: &Group, member_id: &str, with_members: bool) -> JoinGroupResponse {
    JoinGroupResponse {
        generation_id: group.generation_id,
        protocol_type: group.protocol_type.clone(),
        protocol_name: group.protocol_name.clone(),
        leader: group.leader_id.clone().unwrap_or_default(),
        member_id: member_id.to_owned(),
        members: if with_members { group.members_for_leader() } else { Vec::new() },
        ..JoinGroupResponse::default()
    }
}

impl GroupCoordinator {
    /// Handles a JoinGroup request. The response usually comes later, when the join
    /// phase of the rebalance completes.
    pub fn join_group(&mut self, meta: &RequestMeta, mut req: JoinGroupRequest, now_ms: i64) -> Vec<Action> {
        let mut out = Vec::new();
        let token = meta.token;
        if let Some(code) = self.coordinator_error(&req.group_id) {
            respond(&mut out, token, join_error(code, &req.member_id));
            return out;
        }
        if req.group_id.is_empty() {
            respond(&mut out, token, join_error(ErrorCode::InvalidGroupId, &req.member_id));
            return out;
        }
        if req.session_timeout_ms < self.config.group_min_session_timeout_ms
            || req.session_timeout_ms > self.config.group_max_session_timeout_ms
        {
            let code = ErrorCode::InvalidSessionTimeout;
            respond(&mut out, token, join_error(code, &req.member_id));
            return out;
        }
        // v0 has no rebalance timeout: Kafka uses the session timeout.
        if meta.api_version == 0 || req.rebalance_timeout_ms < 0 {
            req.rebalance_timeout_ms = req.session_timeout_ms;
        }
        if !self.groups.contains_key(&req.group_id) {
            if !req.member_id.is_empty() {
                respond(&mut out, token, join_error(ErrorCode::UnknownMemberId, &req.member_id));
                return out;
            }
            self.create_group(&req.group_id, now_ms);
        }
        let group_id = req.group_id.clone();
        self.with_group(&group_id, |c, group| c.join(group, meta, req, now_ms, &mut out));
        out
    }

    fn join(
        &mut self,
        group: &mut Group,
        meta: &RequestMeta,
        req: JoinGroupRequest,
        now_ms: i64,
        out: &mut Vec<Action>,
    ) {
        if !self.accept_joining_member(group, &req.member_id) {
            if group.members.contains(&req.member_id) {
                self.remove_member(group, &req.member_id, out);
            } else {
                group.remove(&req.member_id);
            }
            respond(out, meta.token, join_error(ErrorCode::GroupMaxSizeReached, ""));
            if group.is(GroupState::PreparingRebalance) {
                self.maybe_complete_join_phase(group, now_ms, out);
            }
        } else if req.member_id.is_empty() {
            self.join_new_member(group, meta, req, now_ms, out);
        } else {
            self.join_existing_member(group, meta, req, now_ms, out);
        }
    }

    /// Kafka's `acceptJoiningMember` (group.max.size): while preparing a rebalance the
    /// members already rejoined count, otherwise the members of the group.
    fn accept_joining_member(&self, group: &Group, member_id: &str) -> bool {
        let max = self.config.group_max_size;
        match group.state {
            GroupState::Empty | GroupState::Dead => true,
            GroupState::PreparingRebalance => {
                group.members.get(member_id).is_some_and(|m| m.awaiting_join.is_some())
                    || group.num_awaiting_join() < max
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                group.members.contains(member_id) || group.members.len() < max
            }
        }
    }

    fn join_new_member(
        &mut self,
        group: &mut Group,
        meta: &RequestMeta,
        req: JoinGroupRequest,
        now_ms: i64,
        out: &mut Vec<Action>,
    ) {
        if !group.supports_protocols(&req.protocol_type, &req.protocols) {
            respond(out, meta.token, join_error(ErrorCode::InconsistentGroupProtocol, ""));
            return;
        }
        let prefix = req.group_instance_id.as_deref().unwrap_or(&meta.client_id);
        let new_id = self.generate_member_id(prefix);
        if let Some(instance) = req.group_instance_id.clone() {
            match group.static_members.get(&instance).cloned() {
                Some(old_id) => {
                    self.rejoin_static_member(group, meta, req, &instance, &old_id, &new_id, now_ms, out)
                }
                None => self.add_member(group, meta, req, new_id, now_ms, out),
            }
        } else if meta.api_version >= FIRST_VERSION_REQUIRING_MEMBER_ID {
            // KIP-394: hand out the id; the member must come back with it. The pending
            // member expires after a session timeout if it does not.
            group.pending_join_members.insert(new_id.clone());
            let deadline = now_ms.saturating_add(i64::from(req.session_timeout_ms));
            self.schedule_heartbeat(&group.group_id, &new_id, deadline);
            respond(out, meta.token, join_error(ErrorCode::MemberIdRequired, &new_id));
        } else {
            self.add_member(group, meta, req, new_id, now_ms, out);
        }
    }

    fn join_existing_member(
        &mut self,
        group: &mut Group,
        meta: &RequestMeta,
        req: JoinGroupRequest,
        now_ms: i64,
        out: &mut Vec<Action>,
    ) {
        let member_id = req.member_id.clone();
        if group.is(GroupState::Dead) {
            respond(out, meta.token, join_error(ErrorCode::CoordinatorNotAvailable, &member_id));
            return;
        }
        if !group.supports_protocols(&req.protocol_type, &req.protocols) {
            let code = ErrorCode::InconsistentGroupProtocol;
            respond(out, meta.token, join_error(code, &member_id));
            return;
        }
        if group.pending_join_members.contains(&member_id) {
            if req.group_instance_id.is_some() {
                // Pending ids are only handed to dynamic members; Kafka treats this as an
                // illegal state, Strata as an unknown member.
                respond(out, meta.token, join_error(ErrorCode::UnknownMemberId, &member_id));
            } else {
                self.cancel_heartbeat(&group.group_id, &member_id);
                self.add_member(group, meta, req, member_id, now_ms, out);
            }
            return;
        }
        if let Err(code) = group.validate_member(&member_id, req.group_instance_id.as_deref()) {
            respond(out, meta.token, join_error(code, &member_id));
            return;
        }
        let unchanged = group.members.get(&member_id).is_some_and(|m| m.matches(&req.protocols));
        match group.state {
            GroupState::PreparingRebalance => {
                self.update_member(group, meta, &req, now_ms, out);
            }
            GroupState::CompletingRebalance if unchanged => {
                // A retry of a join whose response was lost: same generation again.
                let leader = group.is_leader(&member_id);
                let response = join_success(group, &member_id, leader);
                respond(out, meta.token, Response::JoinGroup(response));
            }
            GroupState::Stable if unchanged && !group.is_leader(&member_id) => {
                let response = join_success(group, &member_id, false);
                respond(out, meta.token, Response::JoinGroup(response));
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                // Changed metadata, or the leader asking for a rebalance (e.g. because
                // topic metadata changed).
                self.update_member(group, meta, &req, now_ms, out);
            }
            GroupState::Empty | GroupState::Dead => {
                respond(out, meta.token, join_error(ErrorCode::UnknownMemberId, &member_id));
            }
        }
    }

    /// Records a known member's new join and moves the rebalance along.
    fn update_member(
        &mut self,
        group: &mut Group,
        meta: &RequestMeta,
        req: &JoinGroupRequest,
        now_ms: i64,
        out: &mut Vec<Action>,
    ) {
        let Some(member) = group.members.get_mut(&req.member_id) else {
            return;
        };
        let waiter = JoinWaiter { token: meta.token, api_version: meta.api_version };
        if let Some(old) = member.awaiting_join.replace(waiter) {
            respond(out, old.token, join_error(ErrorCode::RebalanceInProgress, &req.member_id));
        }
        member.protocols = req.protocols.clone();
        member.rebalance_timeout_ms = req.rebalance_timeout_ms;
        member.session_timeout_ms = req.session_timeout_ms;
        self.maybe_prepare_rebalance_or_complete_join(group, now_ms, out);
    }

    fn add_member(
        &mut self,
        group: &mut Group,
        meta: &RequestMeta,
        req: JoinGroupRequest,
        member_id: String,
        now_ms: i64,
        out: &mut Vec<Action>,
    ) {
        if group.is(GroupState::PreparingRebalance) && group.previous_state == GroupState::Empty {
            // Extends the initial delayed join.
            group.new_member_added = true;
        }
        group.add(Member {
            member_id: member_id.clone(),
            group_instance_id: req.group_instance_id,
            client_id: meta.client_id.clone(),
            client_host: meta.client_host.clone(),
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            session_timeout_ms: req.session_timeout_ms,
            protocol_type: req.protocol_type,
            protocols: req.protocols,
            assignment: Default::default(),
            awaiting_join: Some(JoinWaiter { token: meta.token, api_version: meta.api_version }),
            awaiting_sync: None,
            is_new: true,
        });
        // A new member cannot heartbeat while its JoinGroup is parked; bound how long a
        // client that gave up can stay in the rebalance.
        let deadline = now_ms.saturating_add(i64::from(self.config.new_member_join_timeout_ms));
        self.schedule_heartbeat(&group.group_id, &member_id, deadline);
        self.maybe_prepare_rebalance_or_complete_join(group, now_ms, out);
    }

    /// KIP-345: a known `group.instance.id` joined with an unknown member id (a
    /// restarted static member). It takes over the old member id's place; in a Stable
    /// group whose protocol would not change, without a rebalance.
    #[allow(clippy::too_many_arguments)]
    fn rejoin_static_member(
        &mut self,
        group: &mut Group,
        meta: &RequestMeta,
        req: JoinGroupRequest,
        instance: &str,
        old_id: &str,
        new_id: &str,
        now_ms: i64,
        out: &mut Vec<Action>,
    ) {
        let leader_before = group.leader_id.clone();
        let (old_join, old_sync) = group.replace_static_member(instance, old_id, new_id);
        if let Some(waiter) = old_join {
            respond(out, waiter.token, join_error(ErrorCode::FencedInstanceId, old_id));
        }
        if let Some(token) = old_sync {
            respond(out, token, super::membership::sync_error(ErrorCode::FencedInstanceId));
        }
        self.cancel_heartbeat(&group.group_id, old_id);
        let Some(member) = group.members.get_mut(new_id) else {
            return;
        };
        let deadline = now_ms.saturating_add(i64::from(member.session_timeout_ms));
        let old_protocols = std::mem::replace(&mut member.protocols, req.protocols);
        let old_rebalance_timeout_ms =
            std::mem::replace(&mut member.rebalance_timeout_ms, req.rebalance_timeout_ms);
        let old_session_timeout_ms =
            std::mem::replace(&mut member.session_timeout_ms, req.session_timeout_ms);
        member.awaiting_join = Some(JoinWaiter { token: meta.token, api_version: meta.api_version });
        self.schedule_heartbeat(&group.group_id, new_id, deadline);
        match group.state {
            GroupState::Stable if group.select_protocol() == group.protocol_name => {
                // Persist the new member id; the join is answered once it is written.
                let record = group.metadata_record(&HashMap::new());
                let completion = Completion::StaticRejoin(StaticRejoin {
                    group_id: group.group_id.clone(),
                    incarnation: group.incarnation,
                    generation: group.generation_id,
                    instance_id: instance.to_owned(),
                    old_member_id: old_id.to_owned(),
                    new_member_id: new_id.to_owned(),
                    old_protocols,
                    old_rebalance_timeout_ms,
                    old_session_timeout_ms,
                    leader_before,
                });
                self.append(out, group.partition, vec![record], completion);
            }
            GroupState::Stable => self.maybe_prepare_rebalance_or_complete_join(group, now_ms, out),
            // The leader may already be assigning to the old member id: start over.
            GroupState::CompletingRebalance => self.prepare_rebalance(group, now_ms, out),
            _ => self.maybe_complete_join_phase(group, now_ms, out),
        }
    }

    /// Answers a static member's rejoin once its new member id is written, or undoes the
    /// replacement if the write failed. A rebalance that started meanwhile answers the
    /// member instead.
    pub(super) fn on_static_rejoin_written(
        &mut self,
        rejoin: StaticRejoin,
        result: Result<(), ErrorCode>,
        now_ms: i64,
        out: &mut Vec<Action>,
    ) {
        let group_id = rejoin.group_id.clone();
        self.with_group(&group_id, |c, group| {
            if group.incarnation != rejoin.incarnation
                || group.generation_id != rejoin.generation
                || !group.is(GroupState::Stable)
            {
                return;
            }
            let Some(member) = group.members.get_mut(&rejoin.new_member_id) else {
                return;
            };
            let Some(waiter) = member.awaiting_join.take() else {
                return;
            };
            match result {
                Ok(()) => {
                    let new_id = &rejoin.new_member_id;
                    let response = if waiter.api_version >= FIRST_VERSION_WITH_SKIP_ASSIGNMENT {
                        let leader = group.is_leader(new_id);
                        JoinGroupResponse { skip_assignment: leader, ..join_success(group, new_id, leader) }
                    } else {
                        // Older clients are told the previous leader id, so a restarted
                        // leader does not compute a new assignment.
                        JoinGroupResponse {
                            leader: rejoin.leader_before.clone().unwrap_or_default(),
                            ..join_success(group, new_id, false)
                        }
                    };
                    respond(out, waiter.token, Response::JoinGroup(response));
                }
                Err(e) => {
                    member.protocols = rejoin.old_protocols;
                    member.rebalance_timeout_ms = rejoin.old_rebalance_timeout_ms;
                    member.session_timeout_ms = rejoin.old_session_timeout_ms;
                    let session_ms = member.session_timeout_ms;
                    let (old, new) = (&rejoin.old_member_id, &rejoin.new_member_id);
                    group.replace_static_member(&rejoin.instance_id, new, old);
                    c.cancel_heartbeat(&group.group_id, new);
                    let deadline = now_ms.saturating_add(i64::from(session_ms));
                    c.schedule_heartbeat(&group.group_id, old, deadline);
                    let code = super::coordinator::group_append_error(e);
                    let response = JoinGroupResponse {
                        error_code: code.code(),
                        leader: rejoin.leader_before.clone().unwrap_or_default(),
                        ..join_success(group, "", false)
                    };
                    respond(out, waiter.token, Response::JoinGroup(response));
                }
            }
        });
    }

    pub(super) fn maybe_prepare_rebalance_or_complete_join(
        &mut self,
        group: &mut Group,
        now_ms: i64,
        out: &mut Vec<Action>,
    ) {
        if group.can_rebalance() {
            self.prepare_rebalance(group, now_ms, out);
        } else {
            self.maybe_complete_join_phase(group, now_ms, out);
        }
    }

    /// Starts a rebalance: parked SyncGroups are told to rejoin, and the join phase ends
    /// when every member has rejoined or the rebalance timeout passes; an Empty group
    /// first waits `group.initial.rebalance.delay.ms` for more members.
    pub(super) fn prepare_rebalance(&mut self, group: &mut Group, now_ms: i64, out: &mut Vec<Action>) {
        if group.is(GroupState::CompletingRebalance) {
            self.reset_and_propagate_assignment(group, ErrorCode::RebalanceInProgress, now_ms, out);
        }
        group.pending_sync_members.clear();
        self.timers.cancel(&TimerKey::Sync { group: group.group_id.clone() });
        let initial = group.is(GroupState::Empty);
        if initial {
            let delay_ms = self.config.group_initial_rebalance_delay_ms.max(0);
            let remaining_ms = group.rebalance_timeout_ms().saturating_sub(delay_ms).max(0);
            group.new_member_added = false;
            self.timers.schedule(
                TimerKey::Join { group: group.group_id.clone() },
                now_ms.saturating_add(i64::from(delay_ms)),
                TimerTask::InitialJoin { delay_ms, remaining_ms },
            );
        }
        group.transition_to(GroupState::PreparingRebalance, now_ms);
        self.rebalances += 1;
        tracing::info!(
            group_id = %group.group_id,
            generation = group.generation_id,
            members = group.members.len(),
            "preparing to rebalance group"
        );
        if !initial {
            if group.has_all_members_joined() {
                self.complete_join(group, now_ms, out);
            } else {
                self.schedule_join_timeout(group, now_ms);
            }
        }
    }

    fn schedule_join_timeout(&mut self, group: &Group, now_ms: i64) {
        self.timers.schedule(
            TimerKey::Join { group: group.group_id.clone() },
            now_ms.saturating_add(i64::from(group.rebalance_timeout_ms())),
            TimerTask::CompleteJoin,
        );
    }

    /// Completes the join phase early once every member has rejoined (not during the
    /// initial delayed join, which always waits out its delay).
    pub(super) fn maybe_complete_join_phase(
        &mut self,
        group: &mut Group,
        now_ms: i64,
        out: &mut Vec<Action>,
    ) {
        if group.is(GroupState::PreparingRebalance)
            && group.previous_state != GroupState::Empty
            && group.has_all_members_joined()
        {
            self.complete_join(group, now_ms, out);
        }
    }

    pub(super) fn on_join_timer(
        &mut self,
        group_id: &str,
        task: TimerTask,
        now_ms: i64,
        out: &mut Vec<Action>,
    ) {
        self.with_group(group_id, |c, group| {
            if !group.is(GroupState::PreparingRebalance) {
                return;
            }
            match task {
                TimerTask::InitialJoin { delay_ms, remaining_ms }
                    if group.new_member_added && remaining_ms != 0 =>
                {
                    // Kafka's InitialDelayedJoin: each new member buys another delay,
                    // up to the rebalance timeout in total.
                    group.new_member_added = false;
                    let next_delay_ms = c.config.group_initial_rebalance_delay_ms.min(remaining_ms);
                    let next_remaining_ms = remaining_ms.saturating_sub(delay_ms).max(0);
                    c.timers.schedule(
                        TimerKey::Join { group: group_id.to_owned() },
                        now_ms.saturating_add(i64::from(next_delay_ms)),
                        TimerTask::InitialJoin { delay_ms: next_delay_ms, remaining_ms: next_remaining_ms },
                    );
                }
                _ => c.complete_join(group, now_ms, out),
            }
        });
    }

    /// Ends the join phase: dynamic members that did not rejoin are removed, and the
    /// next generation starts (CompletingRebalance, or Empty if nobody is left).
    pub(super) fn complete_join(&mut self, group: &mut Group, now_ms: i64, out: &mut Vec<Action>) {
        self.timers.cancel(&TimerKey::Join { group: group.group_id.clone() });
        let missing: Vec<String> = group
            .members
            .iter()
            .filter(|m| m.awaiting_join.is_none() && !m.is_static())
            .map(|m| m.member_id.clone())
            .collect();
        for member_id in &missing {
            self.remove_member(group, member_id, out);
        }
        if !missing.is_empty() {
            tracing::info!(group_id = %group.group_id, removed = ?missing, "members did not rejoin in time");
        }
        if !group.maybe_elect_new_joined_leader() && !group.members.is_empty() {
            // Only static members that did not rejoin are left: wait for them (or their
            // session timeouts) for another rebalance timeout.
            self.schedule_join_timeout(group, now_ms);
            return;
        }
        group.init_next_generation(now_ms);
        tracing::info!(
            group_id = %group.group_id,
            generation = group.generation_id,
            members = group.members.len(),
            protocol = ?group.protocol_name,
            "group joined"
        );
        if group.is(GroupState::Empty) {
            let record = group.metadata_record(&HashMap::new());
            self.append(out, group.partition, vec![record], Completion::Background);
            return;
        }
        for member in group.members.iter() {
            if let Some(waiter) = member.awaiting_join {
                let leader = group.is_leader(&member.member_id);
                let response = join_success(group, &member.member_id, leader);
                respond(out, waiter.token, Response::JoinGroup(response));
            }
        }
        let mut heartbeats = Vec::new();
        for member in group.members.iter_mut() {
            member.awaiting_join = None;
            member.is_new = false;
            heartbeats.push((member.member_id.clone(), member.session_timeout_ms));
        }
        for (member_id, session_ms) in heartbeats {
            let deadline = now_ms.saturating_add(i64::from(session_ms));
            self.schedule_heartbeat(&group.group_id, &member_id, deadline);
            group.pending_sync_members.insert(member_id);
        }
        self.timers.schedule(
            TimerKey::Sync { group: group.group_id.clone() },
            now_ms.saturating_add(i64::from(group.rebalance_timeout_ms())),
            TimerTask::ExpireSync { generation: group.generation_id },
        );
    }
}
