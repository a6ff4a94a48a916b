//! Taking over and giving up `__consumer_offsets` partitions: loading the groups from
//! the log (replay) and answering everything parked when the partition is lost.

use bytes::Bytes;
use std::collections::BTreeSet;
use strata_protocol::messages::join_group::JoinGroupRequestProtocol;
use strata_protocol::ErrorCode;

use super::classic_group::{CommittedOffset, Group, GroupState, OffsetAndMetadata};
use super::coordinator::{respond, GroupCoordinator};
use super::join::join_error;
use super::member::Member;
use super::membership::sync_error;
use super::partition::PartitionState;
use super::records::{GroupMetadataValue, OffsetCommitValue, Record, RecordError};
use super::timer::{TimerKey, TimerTask};
use super::Action;

impl GroupCoordinator {
    /// This broker became leader of `partition` of `__consumer_offsets`: its groups
    /// answer COORDINATOR_LOAD_IN_PROGRESS until [`GroupCoordinator::complete_load`].
    /// Any state left from an earlier term is dropped first.
    pub fn begin_load(&mut self, partition: i32, now_ms: i64) -> Vec<Action> {
        let out = self.unload(partition, now_ms);
        self.partitions.insert(partition, PartitionState::Loading);
        out
    }

    /// Applies one record of a plain (non-transactional) batch of `partition` read from
    /// the log during loading (`value` is `None` for a tombstone). Records of types the
    /// classic coordinator does not know (KIP-848 groups) are skipped.
    pub fn replay(&mut self, partition: i32, key: Bytes, value: Option<Bytes>) -> Result<(), RecordError> {
        if let Some(record) = Record::decode(key, value)? {
            self.replay_record(partition, record);
        }
        Ok(())
    }

    /// Applies one record of a transactional batch of `producer_id` (a TxnOffsetCommit)
    /// read from `partition`: its offset commit is pending until
    /// [`GroupCoordinator::replay_marker`] replays the producer's COMMIT or ABORT.
    pub fn replay_transactional(
        &mut self,
        partition: i32,
        producer_id: i64,
        key: Bytes,
        value: Option<Bytes>,
    ) -> Result<(), RecordError> {
        if let Some(record) = Record::decode(key, value)? {
            self.replay_transactional_record(partition, producer_id, record);
        }
        Ok(())
    }

    /// Applies one decoded record of a plain batch; see [`GroupCoordinator::replay`].
    pub fn replay_record(&mut self, partition: i32, record: Record) {
        self.apply_replayed(partition, None, record);
    }

    /// Applies one decoded record of a transactional batch; see
    /// [`GroupCoordinator::replay_transactional`].
    pub fn replay_transactional_record(&mut self, partition: i32, producer_id: i64, record: Record) {
        self.apply_replayed(partition, Some(producer_id), record);
    }

    /// Applies the COMMIT (`commit`) or ABORT marker of `producer_id` read from
    /// `partition` (a control batch): the producer's pending offsets in the partition's
    /// groups become committed, unless a later plain commit of the same partition was
    /// replayed before the marker, or are dropped. A marker without pending offsets
    /// (transactions that wrote none here) changes nothing.
    pub fn replay_marker(&mut self, partition: i32, producer_id: i64, commit: bool) {
        self.apply_marker(partition, producer_id, commit);
    }

    /// Kafka's `OffsetMetadataManager.replay` and `GroupMetadataManager.replay` for the
    /// classic records. Only offset commits are transactional; group metadata in a
    /// transactional batch (which Kafka never writes) applies at once, as in Kafka.
    fn apply_replayed(&mut self, partition: i32, producer_id: Option<i64>, record: Record) {
        let expected = self.partition_for(record.group_id());
        if expected != partition {
            tracing::warn!(
                group_id = record.group_id(),
                partition,
                expected,
                "group record in an unexpected partition (offsets.topic.num.partitions changed?)"
            );
        }
        match record {
            Record::OffsetCommit { key, value: Some(value) } => {
                if !self.groups.contains_key(&key.group) {
                    // Offsets without group metadata: a simple group.
                    let mut group = Group::new(&key.group, partition, self.new_incarnation(), 0);
                    group.state_timestamp_ms = None;
                    self.groups.insert(key.group.clone(), group);
                }
                let committed = CommittedOffset {
                    offset: offset_from_record(&value),
                    log_position: self.next_log_position(),
                };
                let Some(group) = self.groups.get_mut(&key.group) else {
                    return;
                };
                match producer_id {
                    None => group.put_offset(&key.topic, key.partition, committed),
                    Some(producer_id) => {
                        let pending = group.txn_offsets.entry(producer_id).or_default();
                        pending.insert((key.topic, key.partition), committed);
                        self.open_txns.entry((group.partition, producer_id)).or_default().insert(key.group);
                    }
                }
            }
            Record::OffsetCommit { key, value: None } => {
                if let Some(group) = self.groups.get_mut(&key.group) {
                    group.remove_offset(&key.topic, key.partition);
                    group.remove_pending_txn_offsets(&key.topic, key.partition);
                }
            }
            Record::GroupMetadata { key, value: Some(value) } => {
                let (offsets, txn_offsets) =
                    self.groups.remove(&key.group).map(|g| (g.offsets, g.txn_offsets)).unwrap_or_default();
                let incarnation = self.new_incarnation();
                let mut group = group_from_record(&key.group, partition, incarnation, value);
                group.offsets = offsets;
                group.txn_offsets = txn_offsets;
                self.groups.insert(key.group, group);
            }
            Record::GroupMetadata { key, value: None } => {
                self.groups.remove(&key.group);
            }
        }
    }

    /// The log of `partition` is replayed: serve its groups. Loaded members get a full
    /// session to heartbeat; a group over `group.max.size` rebalances.
    pub fn complete_load(&mut self, partition: i32, now_ms: i64) -> Vec<Action> {
        let mut out = Vec::new();
        self.partitions.insert(partition, PartitionState::Active);
        let ids: Vec<String> =
            self.groups.values().filter(|g| g.partition == partition).map(|g| g.group_id.clone()).collect();
        for group_id in ids {
            self.with_group(&group_id, |c, group| {
                for member in group.members.iter() {
                    let deadline = now_ms.saturating_add(i64::from(member.session_timeout_ms));
                    c.timers.schedule(
                        TimerKey::Heartbeat {
                            group: group.group_id.clone(),
                            member: member.member_id.clone(),
                        },
                        deadline,
                        TimerTask::ExpireHeartbeat,
                    );
                }
                if group.members.len() > c.config.group_max_size {
                    c.prepare_rebalance(group, now_ms, &mut out);
                }
            });
        }
        self.timers.schedule(
            TimerKey::OffsetExpiry { partition },
            now_ms.saturating_add(self.config.offsets_retention_check_interval_ms),
            TimerTask::ExpireOffsets,
        );
        tracing::info!(partition, "group coordinator partition loaded");
        out
    }

    /// This broker is no longer leader of `partition`: its groups are dropped and every
    /// parked JoinGroup and SyncGroup is answered NOT_COORDINATOR. Appends still in
    /// flight are answered when the shell completes them.
    pub fn unload(&mut self, partition: i32, _now_ms: i64) -> Vec<Action> {
        let mut out = Vec::new();
        self.partitions.remove(&partition);
        let ids: BTreeSet<String> =
            self.groups.values().filter(|g| g.partition == partition).map(|g| g.group_id.clone()).collect();
        for group_id in &ids {
            let Some(mut group) = self.groups.remove(group_id) else {
                continue;
            };
            tracing::info!(group_id = %group_id, generation = group.generation_id, "unloading group");
            for member in group.members.iter_mut() {
                if let Some(waiter) = member.awaiting_join.take() {
                    let response = join_error(ErrorCode::NotCoordinator, &member.member_id);
                    respond(&mut out, waiter.token, response);
                }
                if let Some(token) = member.awaiting_sync.take() {
                    respond(&mut out, token, sync_error(ErrorCode::NotCoordinator));
                }
            }
        }
        self.cancel_group_timers(&ids);
        self.timers.cancel(&TimerKey::OffsetExpiry { partition });
        self.open_txns.retain(|(p, _), _| *p != partition);
        out
    }
}

fn offset_from_record(value: &OffsetCommitValue) -> OffsetAndMetadata {
    OffsetAndMetadata {
        committed_offset: value.offset,
        leader_epoch: (value.leader_epoch >= 0).then_some(value.leader_epoch),
        metadata: value.metadata.clone(),
        commit_timestamp_ms: value.commit_timestamp,
        expire_timestamp_ms: (value.expire_timestamp >= 0).then_some(value.expire_timestamp),
    }
}

/// Rebuilds a group from its metadata record: Stable with its members, or Empty.
fn group_from_record(group_id: &str, partition: i32, incarnation: u64, value: GroupMetadataValue) -> Group {
    let mut group = Group::new(group_id, partition, incarnation, 0);
    group.generation_id = value.generation;
    group.protocol_name = value.protocol.clone();
    group.state_timestamp_ms = (value.current_state_timestamp >= 0).then_some(value.current_state_timestamp);
    let protocol = value.protocol.clone().unwrap_or_default();
    for m in value.members {
        if group.members.contains(&m.member_id) {
            tracing::warn!(group_id, member_id = %m.member_id, "duplicate member in group metadata record");
            continue;
        }
        let instance_taken =
            m.group_instance_id.as_ref().is_some_and(|i| group.static_members.contains_key(i));
        let group_instance_id = if instance_taken { None } else { m.group_instance_id };
        group.add(Member {
            member_id: m.member_id,
            group_instance_id,
            client_id: m.client_id,
            client_host: m.client_host,
            rebalance_timeout_ms: if m.rebalance_timeout == -1 {
                m.session_timeout
            } else {
                m.rebalance_timeout
            },
            session_timeout_ms: m.session_timeout,
            protocol_type: value.protocol_type.clone(),
            protocols: vec![JoinGroupRequestProtocol { name: protocol.clone(), metadata: m.subscription }],
            assignment: m.assignment,
            awaiting_join: None,
            awaiting_sync: None,
            is_new: false,
        });
    }
    if !group.members.is_empty() {
        group.state = GroupState::Stable;
        group.previous_state = GroupState::Stable;
    }
    // `add` made the first member leader; the record says who it is.
    group.leader_id = value.leader.filter(|l| group.members.contains(l));
    if group.leader_id.is_none() {
        group.leader_id = group.members.first_id().map(str::to_owned);
    }
    // `add` took the members' protocol type; "" in the record means none.
    group.protocol_type = (!value.protocol_type.is_empty()).then_some(value.protocol_type);
    group.subscribed_topics = group.compute_subscribed_topics();
    group
}
