//! Group administration: DeleteGroups, ListGroups and DescribeGroups.

use std::collections::{BTreeMap, BTreeSet};
use strata_protocol::messages::delete_groups::{
    DeletableGroupResult, DeleteGroupsRequest, DeleteGroupsResponse,
};
use strata_protocol::messages::describe_groups::{
    DescribeGroupsRequest, DescribeGroupsResponse, DescribedGroup,
};
use strata_protocol::messages::list_groups::{ListGroupsRequest, ListGroupsResponse, ListedGroup};
use strata_protocol::ErrorCode;

use super::classic_group::GroupState;
use super::coordinator::{group_append_error, respond, Completion, DeleteGroupsOp, GroupCoordinator};
use super::partition::PartitionState;
use super::records::Record;
use super::{Action, RequestMeta, Response};

/// The only group type this coordinator has (ListGroups v5 `types_filter`, KIP-848).
const CLASSIC_GROUP_TYPE: &str = "classic";

impl GroupCoordinator {
    /// Handles a DeleteGroups request: Empty groups are deleted with their offsets at
    /// once (pending transactional offsets included: an open transaction does not keep
    /// an Empty group from being deleted, as in Kafka); the client is answered once the
    /// tombstones are written (one append per `__consumer_offsets` partition involved).
    pub fn delete_groups(
        &mut self,
        meta: &RequestMeta,
        req: &DeleteGroupsRequest,
        _now_ms: i64,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        let mut results = Vec::with_capacity(req.groups_names.len());
        let mut by_partition: BTreeMap<i32, (Vec<Record>, Vec<String>)> = BTreeMap::new();
        let mut deleted = BTreeSet::new();
        for group_id in &req.groups_names {
            let code = match self.delete_group_records(group_id) {
                Ok((partition, records)) => {
                    let entry = by_partition.entry(partition).or_default();
                    entry.0.extend(records);
                    entry.1.push(group_id.clone());
                    deleted.insert(group_id.clone());
                    ErrorCode::None
                }
                Err(code) => code,
            };
            results.push(DeletableGroupResult { group_id: group_id.clone(), error_code: code.code() });
        }
        self.cancel_group_timers(&deleted);
        if by_partition.is_empty() {
            let response = DeleteGroupsResponse { results, ..DeleteGroupsResponse::default() };
            respond(&mut out, meta.token, Response::DeleteGroups(response));
            return out;
        }
        let op = self.new_op_id();
        self.delete_ops
            .insert(op, DeleteGroupsOp { token: meta.token, results, remaining: by_partition.len() });
        for (partition, (records, groups)) in by_partition {
            self.append(&mut out, partition, records, Completion::DeleteGroups { op, groups });
        }
        out
    }

    /// Removes an Empty group and returns its partition and tombstones (offsets first,
    /// then the group, as Kafka writes them).
    fn delete_group_records(&mut self, group_id: &str) -> Result<(i32, Vec<Record>), ErrorCode> {
        if let Some(code) = self.coordinator_error(group_id) {
            return Err(code);
        }
        let group = match self.groups.get(group_id) {
            None => return Err(ErrorCode::GroupIdNotFound),
            Some(g) if g.is(GroupState::Dead) => return Err(ErrorCode::GroupIdNotFound),
            Some(g) if !g.is(GroupState::Empty) => return Err(ErrorCode::NonEmptyGroup),
            Some(_) => self.groups.remove(group_id),
        };
        let Some(group) = group else {
            return Err(ErrorCode::GroupIdNotFound);
        };
        let mut records: Vec<Record> = group
            .offsets
            .iter()
            .flat_map(|(topic, partitions)| {
                partitions.keys().map(|p| Record::offset_tombstone(group_id, topic, *p))
            })
            .collect();
        // Commits still in flight, and offsets of open transactions (which a commit marker
        // would otherwise make visible on load), get a tombstone too.
        let uncommitted: BTreeSet<(String, i32)> =
            group.pending_commits.keys().cloned().chain(group.pending_txn_partitions()).collect();
        for (topic, partition) in &uncommitted {
            if !group.has_committed_offset(topic, *partition) {
                records.push(Record::offset_tombstone(group_id, topic, *partition));
            }
        }
        records.push(Record::group_tombstone(group_id));
        tracing::info!(group_id, offsets = records.len() - 1, "deleting group");
        Ok((group.partition, records))
    }

    pub(super) fn on_group_tombstones_written(
        &mut self,
        op: u64,
        groups: &[String],
        result: Result<(), ErrorCode>,
        out: &mut Vec<Action>,
    ) {
        let Some(pending) = self.delete_ops.get_mut(&op) else {
            return;
        };
        if let Err(e) = result {
            let code = group_append_error(e).code();
            for r in pending.results.iter_mut().filter(|r| groups.contains(&r.group_id)) {
                r.error_code = code;
            }
        }
        pending.remaining = pending.remaining.saturating_sub(1);
        if pending.remaining == 0 {
            if let Some(done) = self.delete_ops.remove(&op) {
                let response =
                    DeleteGroupsResponse { results: done.results, ..DeleteGroupsResponse::default() };
                respond(out, done.token, Response::DeleteGroups(response));
            }
        }
    }

    /// Handles ListGroups: the groups of every partition served here, filtered by state
    /// (v4+, case-insensitive) and type (v5+). COORDINATOR_LOAD_IN_PROGRESS if some
    /// partition is still loading (its groups are missing from the list).
    pub fn list_groups(&self, req: &ListGroupsRequest) -> ListGroupsResponse {
        let states: BTreeSet<String> = req.states_filter.iter().map(|s| s.trim().to_lowercase()).collect();
        let classic_listed = req.types_filter.is_empty()
            || req.types_filter.iter().any(|t| t.trim().eq_ignore_ascii_case(CLASSIC_GROUP_TYPE));
        let loading = self.partitions.values().any(|s| *s == PartitionState::Loading);
        let mut groups: Vec<ListedGroup> = self
            .groups
            .values()
            .filter(|g| self.partitions.get(&g.partition) == Some(&PartitionState::Active))
            .filter(|_| classic_listed)
            .filter(|g| states.is_empty() || states.contains(&g.state.name().to_lowercase()))
            .map(|g| ListedGroup {
                group_id: g.group_id.clone(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                group_state: g.state.name().to_owned(),
                group_type: CLASSIC_GROUP_TYPE.to_owned(),
            })
            .collect();
        groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        let error = if loading { ErrorCode::CoordinatorLoadInProgress } else { ErrorCode::None };
        ListGroupsResponse { error_code: error.code(), groups, ..ListGroupsResponse::default() }
    }

    /// Handles DescribeGroups. A group unknown here is reported Dead without error, as
    /// Kafka does up to v5; a group of a partition not served gets the coordinator error.
    pub fn describe_groups(&self, req: &DescribeGroupsRequest) -> DescribeGroupsResponse {
        let groups = req
            .groups
            .iter()
            .map(|group_id| {
                if let Some(code) = self.coordinator_error(group_id) {
                    return DescribedGroup {
                        error_code: code.code(),
                        group_id: group_id.clone(),
                        ..DescribedGroup::default()
                    };
                }
                match self.groups.get(group_id) {
                    Some(group) => group.describe(),
                    None => DescribedGroup {
                        group_id: group_id.clone(),
                        group_state: GroupState::Dead.name().to_owned(),
                        ..DescribedGroup::default()
                    },
                }
            })
            .collect();
        DescribeGroupsResponse { groups, ..DescribeGroupsResponse::default() }
    }
}
