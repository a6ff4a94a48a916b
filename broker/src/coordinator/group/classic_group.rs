//! One classic group: its state, generation, members, selected protocol and committed
//! offsets (Kafka's `ClassicGroup`, plus the group's slice of the offsets store).

use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use strata_protocol::messages::describe_groups::{DescribedGroup, DescribedGroupMember};
use strata_protocol::messages::join_group::{JoinGroupRequestProtocol, JoinGroupResponseMember};
use strata_protocol::ErrorCode;

use super::consumer_protocol::{union_of_topics, CONSUMER_PROTOCOL_TYPE};
use super::member::{JoinWaiter, Member, Members};
use super::records::{GroupMetadataKey, GroupMetadataValue, MemberMetadata, Record};
use super::{AppendId, RequestToken};

/// The state of a classic group, with Kafka's names (as DescribeGroups and ListGroups
/// report them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupState {
    /// No members; the group may still hold committed offsets.
    Empty,
    /// Members are (re)joining; JoinGroup responses are parked until all have joined or
    /// the rebalance timeout passes.
    PreparingRebalance,
    /// The join phase is done; waiting for the leader's SyncGroup with the assignment.
    CompletingRebalance,
    /// Every member has its assignment for the current generation.
    Stable,
    /// The group is gone (deleted or its partition unloaded).
    Dead,
}

impl GroupState {
    /// Kafka's name of the state.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }

    fn can_follow(self, previous: GroupState) -> bool {
        use GroupState::*;
        match self {
            Empty => previous == PreparingRebalance,
            PreparingRebalance => matches!(previous, Stable | CompletingRebalance | Empty),
            CompletingRebalance => previous == PreparingRebalance,
            Stable => previous == CompletingRebalance,
            Dead => true,
        }
    }
}

/// A committed offset (Kafka's `OffsetAndMetadata`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetAndMetadata {
    /// The next offset the group will consume.
    pub committed_offset: i64,
    /// Leader epoch of the committed record (KIP-320), if the client sent one.
    pub leader_epoch: Option<i32>,
    /// Client-supplied metadata.
    pub metadata: String,
    /// When the offset was committed (coordinator clock unless the v1 request set it).
    pub commit_timestamp_ms: i64,
    /// Absolute expiry from an OffsetCommit v2-v4 `retention_time_ms`; otherwise expiry
    /// follows `offsets.retention.minutes`.
    pub expire_timestamp_ms: Option<i64>,
}

/// An offset commit with the place of its record in the log: `log_position` grows with
/// the record's offset in its `__consumer_offsets` partition (appends are numbered in
/// the order they are issued, which the shell keeps, and records in the order they are
/// replayed). Kafka keeps the record's offset for the same purpose
/// (`CommitRecordMetadataAndOffset`): when a transaction commits, its offsets replace a
/// partition's committed offset only if their records are newer. Positions are compared
/// only within one group, whose records all live in one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CommittedOffset {
    pub offset: OffsetAndMetadata,
    pub log_position: u64,
}

/// (topic, partition) of a committed offset.
pub(super) type TopicPartition = (String, i32);

#[derive(Debug, Clone)]
pub(super) struct Group {
    pub group_id: String,
    pub partition: i32,
    /// Distinguishes this group object from an earlier one with the same id (deleted and
    /// recreated), so a late append completion cannot touch the wrong group.
    pub incarnation: u64,
    pub state: GroupState,
    pub previous_state: GroupState,
    /// When the group entered `state`; offsets of an Empty group expire relative to it.
    pub state_timestamp_ms: Option<i64>,
    pub generation_id: i32,
    /// `None` for a "simple" group that only stores offsets of non-group consumers.
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader_id: Option<String>,
    pub members: Members,
    /// group.instance.id -> member id of the static members.
    pub static_members: HashMap<String, String>,
    /// KIP-394: member ids handed out with MEMBER_ID_REQUIRED, not yet rejoined.
    pub pending_join_members: BTreeSet<String>,
    /// Members that got their JoinGroup response but have not sent SyncGroup yet.
    pub pending_sync_members: BTreeSet<String>,
    /// Set when a member joins during the initial delayed join, to extend the delay.
    pub new_member_added: bool,
    /// Topics of a `consumer` group's subscription, if known.
    pub subscribed_topics: Option<BTreeSet<String>>,
    pub offsets: BTreeMap<String, BTreeMap<i32, CommittedOffset>>,
    /// Appends of offset commits (plain or transactional) not yet acknowledged, per
    /// (topic, partition). A commit is applied on acknowledgement only if its append is
    /// still listed here: deleting the offset meanwhile unlists it, as the tombstone
    /// follows it in the log.
    pub pending_commits: HashMap<TopicPartition, BTreeSet<AppendId>>,
    /// Transactional offsets written but not yet committed or aborted by a transaction
    /// marker, per producer id (Kafka's `pendingTransactionalOffsetCommits`). Invisible
    /// to OffsetFetch; they make a partition "unstable" for `require_stable` fetches.
    pub txn_offsets: BTreeMap<i64, BTreeMap<TopicPartition, CommittedOffset>>,
}

impl Group {
    pub fn new(group_id: &str, partition: i32, incarnation: u64, now_ms: i64) -> Group {
        Group {
            group_id: group_id.to_owned(),
            partition,
            incarnation,
            state: GroupState::Empty,
            previous_state: GroupState::Empty,
            state_timestamp_ms: Some(now_ms),
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader_id: None,
            members: Members::default(),
            static_members: HashMap::new(),
            pending_join_members: BTreeSet::new(),
            pending_sync_members: BTreeSet::new(),
            new_member_added: false,
            subscribed_topics: None,
            offsets: BTreeMap::new(),
            pending_commits: HashMap::new(),
            txn_offsets: BTreeMap::new(),
        }
    }

    pub fn is(&self, state: GroupState) -> bool {
        self.state == state
    }

    pub fn transition_to(&mut self, state: GroupState, now_ms: i64) {
        assert!(
            state.can_follow(self.state),
            "group {} cannot go from {:?} to {:?}",
            self.group_id,
            self.state,
            state
        );
        self.previous_state = self.state;
        self.state = state;
        self.state_timestamp_ms = Some(now_ms);
    }

    pub fn can_rebalance(&self) -> bool {
        GroupState::PreparingRebalance.can_follow(self.state)
    }

    pub fn is_leader(&self, member_id: &str) -> bool {
        self.leader_id.as_deref() == Some(member_id)
    }

    pub fn uses_consumer_protocol(&self) -> bool {
        self.protocol_type.as_deref() == Some(CONSUMER_PROTOCOL_TYPE)
    }

    /// Adds a joined member. The caller has checked the protocols with
    /// [`Group::supports_protocols`].
    pub fn add(&mut self, member: Member) {
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if let Some(instance) = &member.group_instance_id {
            let previous = self.static_members.insert(instance.clone(), member.member_id.clone());
            assert!(previous.is_none(), "static member {instance} added twice");
        }
        if self.leader_id.is_none() {
            self.leader_id = Some(member.member_id.clone());
        }
        self.pending_join_members.remove(&member.member_id);
        self.members.push(member);
    }

    /// Removes a member or pending member; a removed leader is succeeded by the earliest
    /// remaining joiner.
    pub fn remove(&mut self, member_id: &str) -> Option<Member> {
        let removed = self.members.remove(member_id);
        if let Some(instance) = removed.as_ref().and_then(|m| m.group_instance_id.as_ref()) {
            self.static_members.remove(instance);
        }
        if self.is_leader(member_id) {
            self.leader_id = self.members.first_id().map(str::to_owned);
        }
        self.pending_join_members.remove(member_id);
        self.pending_sync_members.remove(member_id);
        removed
    }

    /// Gives the leadership to a member that rejoined if the leader did not; false if
    /// nobody rejoined (or there is no leader).
    pub fn maybe_elect_new_joined_leader(&mut self) -> bool {
        let Some(leader) = self.leader_id.as_deref() else {
            return false;
        };
        if self.members.get(leader).is_some_and(|m| m.awaiting_join.is_some()) {
            return true;
        }
        let joined = self.members.iter().find(|m| m.awaiting_join.is_some()).map(|m| m.member_id.clone());
        match joined {
            Some(id) => {
                self.leader_id = Some(id);
                true
            }
            None => false,
        }
    }

    /// KIP-345: moves a static member to `new_id`, keeping its place, protocols and
    /// assignment. Returns the old member's parked requests, to be answered with
    /// FENCED_INSTANCE_ID.
    pub fn replace_static_member(
        &mut self,
        instance: &str,
        old_id: &str,
        new_id: &str,
    ) -> (Option<JoinWaiter>, Option<RequestToken>) {
        let Some(old) = self.members.get(old_id).cloned() else {
            return (None, None);
        };
        let new = Member {
            member_id: new_id.to_owned(),
            awaiting_join: None,
            awaiting_sync: None,
            is_new: false,
            ..old.clone()
        };
        self.members.replace(old_id, new);
        if self.is_leader(old_id) {
            self.leader_id = Some(new_id.to_owned());
        }
        self.static_members.insert(instance.to_owned(), new_id.to_owned());
        if self.pending_sync_members.remove(old_id) {
            self.pending_sync_members.insert(new_id.to_owned());
        }
        (old.awaiting_join, old.awaiting_sync)
    }

    /// Kafka's `supportsProtocols`: an Empty group takes any non-empty protocol type and
    /// list; otherwise the type must match and one protocol must be supported by all.
    pub fn supports_protocols(&self, protocol_type: &str, protocols: &[JoinGroupRequestProtocol]) -> bool {
        if self.is(GroupState::Empty) {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols.iter().any(|p| self.members.iter().all(|m| m.supports(&p.name)))
    }

    /// The protocols every member supports, in the leader's order of preference.
    fn candidate_protocols(&self) -> Vec<&str> {
        let leader = self
            .leader_id
            .as_deref()
            .and_then(|l| self.members.get(l))
            .or_else(|| self.members.iter().next());
        let Some(leader) = leader else {
            return Vec::new();
        };
        let mut out: Vec<&str> = Vec::new();
        for p in &leader.protocols {
            if !out.contains(&p.name.as_str()) && self.members.iter().all(|m| m.supports(&p.name)) {
                out.push(&p.name);
            }
        }
        out
    }

    /// Kafka's protocol selection: each member votes for its most preferred protocol
    /// that all members support; the most votes wins. Kafka breaks ties by hash-map
    /// order; Strata breaks them by the leader's preference, deterministically.
    pub fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes: Vec<usize> = vec![0; candidates.len()];
        for member in self.members.iter() {
            if let Some(choice) = member.vote(&candidates) {
                if let Some(i) = candidates.iter().position(|c| *c == choice) {
                    votes[i] += 1;
                }
            }
        }
        let best = votes.iter().copied().max()?;
        let winner = votes.iter().position(|v| *v == best)?;
        Some(candidates[winner].to_owned())
    }

    pub fn num_awaiting_join(&self) -> usize {
        self.members.iter().filter(|m| m.awaiting_join.is_some()).count()
    }

    pub fn has_all_members_joined(&self) -> bool {
        self.num_awaiting_join() == self.members.len() && self.pending_join_members.is_empty()
    }

    /// The group's rebalance timeout: the largest of its members'.
    pub fn rebalance_timeout_ms(&self) -> i32 {
        self.members.iter().map(|m| m.rebalance_timeout_ms).max().unwrap_or(0).max(0)
    }

    /// Kafka's `validateMember`: a static instance must map to exactly this member id.
    pub fn validate_member(&self, member_id: &str, group_instance_id: Option<&str>) -> Result<(), ErrorCode> {
        if let Some(instance) = group_instance_id {
            match self.static_members.get(instance) {
                None => return Err(ErrorCode::UnknownMemberId),
                Some(existing) if existing != member_id => return Err(ErrorCode::FencedInstanceId),
                Some(_) => {}
            }
        }
        if !self.members.contains(member_id) {
            return Err(ErrorCode::UnknownMemberId);
        }
        Ok(())
    }

    /// Kafka's `ClassicGroup.validateOffsetCommit`. Transactional commits (TxnOffsetCommit)
    /// are not tied to the group's state: before v3 they carry no member id or
    /// generation, and a transaction may commit while the group rebalances.
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        transactional: bool,
    ) -> Result<(), ErrorCode> {
        if self.is(GroupState::Dead) {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        if generation_id < 0 && self.is(GroupState::Empty) {
            // A consumer without group management, or the admin client.
            return Ok(());
        }
        if generation_id >= 0 || !member_id.is_empty() || group_instance_id.is_some() {
            self.validate_member(member_id, group_instance_id)?;
            if generation_id != self.generation_id {
                return Err(ErrorCode::IllegalGeneration);
            }
        } else if !transactional && !self.is(GroupState::Empty) {
            return Err(ErrorCode::UnknownMemberId);
        }
        if !transactional && self.is(GroupState::CompletingRebalance) {
            return Err(ErrorCode::RebalanceInProgress);
        }
        Ok(())
    }

    /// Kafka's `computeSubscribedTopics`: known only for `consumer` groups whose members'
    /// subscriptions all parse.
    pub fn compute_subscribed_topics(&self) -> Option<BTreeSet<String>> {
        if !self.uses_consumer_protocol() {
            return None;
        }
        if self.members.is_empty() {
            return Some(BTreeSet::new());
        }
        let protocol = self.protocol_name.as_deref()?;
        let subscriptions: Option<Vec<&Bytes>> = self.members.iter().map(|m| m.metadata(protocol)).collect();
        union_of_topics(subscriptions?)
    }

    pub fn is_subscribed_to_topic(&self, topic: &str) -> bool {
        match &self.subscribed_topics {
            Some(topics) => topics.contains(topic),
            None => self.uses_consumer_protocol(),
        }
    }

    /// Starts the next generation: selects the protocol and moves to CompletingRebalance,
    /// or to Empty when no member is left.
    pub fn init_next_generation(&mut self, now_ms: i64) {
        self.generation_id = self.generation_id.wrapping_add(1);
        if self.members.is_empty() {
            self.protocol_name = None;
            self.subscribed_topics = self.compute_subscribed_topics();
            self.transition_to(GroupState::Empty, now_ms);
        } else {
            self.protocol_name = self.select_protocol();
            self.subscribed_topics = self.compute_subscribed_topics();
            self.transition_to(GroupState::CompletingRebalance, now_ms);
        }
        self.pending_sync_members.clear();
    }

    /// What the leader's JoinGroup response lists: every member with its metadata for
    /// the selected protocol.
    pub fn members_for_leader(&self) -> Vec<JoinGroupResponseMember> {
        let protocol = self.protocol_name.as_deref().unwrap_or("");
        self.members
            .iter()
            .map(|m| JoinGroupResponseMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                metadata: m.metadata(protocol).cloned().unwrap_or_default(),
            })
            .collect()
    }

    /// The group metadata record for the current members, with `assignment` (or each
    /// member's current assignment where it has no entry).
    pub fn metadata_record(&self, assignment: &HashMap<String, Bytes>) -> Record {
        let protocol = self.protocol_name.as_deref().unwrap_or("");
        let members = self
            .members
            .iter()
            .map(|m| MemberMetadata {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                rebalance_timeout: m.rebalance_timeout_ms,
                session_timeout: m.session_timeout_ms,
                subscription: m.metadata(protocol).cloned().unwrap_or_default(),
                assignment: assignment.get(&m.member_id).cloned().unwrap_or_else(|| m.assignment.clone()),
            })
            .collect();
        Record::GroupMetadata {
            key: GroupMetadataKey { group: self.group_id.clone() },
            value: Some(GroupMetadataValue {
                protocol_type: self.protocol_type.clone().unwrap_or_default(),
                generation: self.generation_id,
                protocol: self.protocol_name.clone(),
                leader: self.leader_id.clone(),
                current_state_timestamp: self.state_timestamp_ms.unwrap_or(-1),
                members,
            }),
        }
    }

    /// Kafka's DescribeGroups entry: member metadata only when Stable.
    pub fn describe(&self) -> DescribedGroup {
        let stable_protocol = match self.state {
            GroupState::Stable => self.protocol_name.clone(),
            _ => None,
        };
        DescribedGroup {
            error_code: ErrorCode::None.code(),
            group_id: self.group_id.clone(),
            group_state: self.state.name().to_owned(),
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            protocol_data: stable_protocol.clone().unwrap_or_default(),
            members: self
                .members
                .iter()
                .map(|m| DescribedGroupMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    member_metadata: stable_protocol
                        .as_deref()
                        .and_then(|p| m.metadata(p).cloned())
                        .unwrap_or_default(),
                    member_assignment: m.assignment.clone(),
                })
                .collect(),
            ..DescribedGroup::default()
        }
    }

    pub fn has_committed_offset(&self, topic: &str, partition: i32) -> bool {
        self.offsets.get(topic).is_some_and(|p| p.contains_key(&partition))
    }

    pub fn committed(&self, topic: &str, partition: i32) -> Option<&CommittedOffset> {
        self.offsets.get(topic)?.get(&partition)
    }

    pub fn remove_offset(&mut self, topic: &str, partition: i32) -> Option<CommittedOffset> {
        let partitions = self.offsets.get_mut(topic)?;
        let removed = partitions.remove(&partition);
        if partitions.is_empty() {
            self.offsets.remove(topic);
        }
        removed
    }

    pub fn put_offset(&mut self, topic: &str, partition: i32, offset: CommittedOffset) {
        self.offsets.entry(topic.to_owned()).or_default().insert(partition, offset);
    }

    /// Makes `offset` the committed offset unless the current one was written later
    /// (Kafka keeps the most recent record when plain and transactional commits mix).
    /// Returns whether it was applied.
    pub fn put_offset_if_newer(&mut self, topic: &str, partition: i32, offset: CommittedOffset) -> bool {
        if self.committed(topic, partition).is_some_and(|c| c.log_position > offset.log_position) {
            return false;
        }
        self.put_offset(topic, partition, offset);
        true
    }

    /// Whether some producer's open transaction holds an offset of `topic`-`partition`.
    fn has_pending_txn_offset(&self, key: &TopicPartition) -> bool {
        // Few producers hold offsets of one group at a time.
        self.txn_offsets.values().any(|offsets| offsets.contains_key(key))
    }

    /// Whether an offset commit of `topic`-`partition` is being written or waits for its
    /// transaction: OffsetFetch with `require_stable` answers UNSTABLE_OFFSET_COMMIT.
    pub fn is_offset_unstable(&self, topic: &str, partition: i32) -> bool {
        if self.pending_commits.is_empty() && self.txn_offsets.is_empty() {
            return false;
        }
        let key = (topic.to_owned(), partition);
        self.pending_commits.contains_key(&key) || self.has_pending_txn_offset(&key)
    }

    /// Drops the pending transactional offsets of `topic`-`partition` of every producer
    /// (what replaying an offset tombstone does in Kafka); returns whether there were any.
    pub fn remove_pending_txn_offsets(&mut self, topic: &str, partition: i32) -> bool {
        let key = (topic.to_owned(), partition);
        let mut removed = false;
        self.txn_offsets.retain(|_, offsets| {
            removed |= offsets.remove(&key).is_some();
            !offsets.is_empty()
        });
        removed
    }

    /// The partitions with a pending transactional offset, of any producer.
    pub fn pending_txn_partitions(&self) -> BTreeSet<TopicPartition> {
        self.txn_offsets.values().flat_map(|offsets| offsets.keys().cloned()).collect()
    }

    /// The timestamp an offset's retention counts from, or `None` if the group's offsets
    /// do not expire now (Kafka's `offsetExpirationCondition`, 2.1+ semantics).
    pub fn expiry_base_ms(&self, offset: &OffsetAndMetadata) -> Option<i64> {
        match &self.protocol_type {
            // A simple group: retention counts from each commit.
            None => Some(offset.commit_timestamp_ms),
            Some(_) if self.is(GroupState::Empty) => {
                Some(self.state_timestamp_ms.unwrap_or(offset.commit_timestamp_ms))
            }
            Some(_)
                if self.uses_consumer_protocol()
                    && self.subscribed_topics.is_some()
                    && self.is(GroupState::Stable) =>
            {
                Some(offset.commit_timestamp_ms)
            }
            Some(_) => None,
        }
    }
}
