//! A member of a classic group and the join-ordered collection of members.

use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};
use strata_protocol::messages::join_group::JoinGroupRequestProtocol;

use super::RequestToken;

/// A JoinGroup request parked until the rebalance's join phase completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct JoinWaiter {
    /// The shell's handle for the parked request.
    pub token: RequestToken,
    /// Version of the parked request (v9+ understands `skip_assignment`).
    pub api_version: i16,
}

/// One member of a classic group (Kafka's `ClassicGroupMember`).
#[derive(Debug, Clone)]
pub(super) struct Member {
    pub member_id: String,
    /// Set for static members (KIP-345).
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub protocol_type: String,
    /// The member's protocols in its order of preference.
    pub protocols: Vec<JoinGroupRequestProtocol>,
    pub assignment: Bytes,
    pub awaiting_join: Option<JoinWaiter>,
    pub awaiting_sync: Option<RequestToken>,
    /// True from the member's first join until that join completes: a new member's
    /// session can expire even while its JoinGroup is parked.
    pub is_new: bool,
}

impl Member {
    /// The member's metadata for `protocol`, if it supports it.
    pub fn metadata(&self, protocol: &str) -> Option<&Bytes> {
        self.protocols.iter().find(|p| p.name == protocol).map(|p| &p.metadata)
    }

    /// Whether the member lists `protocol`.
    pub fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|p| p.name == protocol)
    }

    /// True if the member sent exactly these protocols (names, metadata and order).
    pub fn matches(&self, protocols: &[JoinGroupRequestProtocol]) -> bool {
        self.protocols == protocols
    }

    /// The member's most preferred protocol among `candidates`.
    pub fn vote<'a>(&'a self, candidates: &[&str]) -> Option<&'a str> {
        self.protocols.iter().map(|p| p.name.as_str()).find(|name| candidates.contains(name))
    }

    /// Members parked in a rebalance are alive by definition; a new member is not, as it
    /// may have given up on its parked JoinGroup.
    pub fn has_satisfied_heartbeat(&self) -> bool {
        !self.is_new && (self.awaiting_join.is_some() || self.awaiting_sync.is_some())
    }

    pub fn is_static(&self) -> bool {
        self.group_instance_id.is_some()
    }
}

/// Members in the order they first joined: "the first member" (the next leader when the
/// leader leaves) is therefore deterministic, unlike Kafka's hash map order.
#[derive(Debug, Clone, Default)]
pub(super) struct Members {
    by_seq: BTreeMap<u64, Member>,
    seq_of: HashMap<String, u64>,
    next_seq: u64,
}

impl Members {
    pub fn len(&self) -> usize {
        self.by_seq.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_seq.is_empty()
    }

    pub fn contains(&self, member_id: &str) -> bool {
        self.seq_of.contains_key(member_id)
    }

    pub fn get(&self, member_id: &str) -> Option<&Member> {
        self.seq_of.get(member_id).and_then(|s| self.by_seq.get(s))
    }

    pub fn get_mut(&mut self, member_id: &str) -> Option<&mut Member> {
        let seq = *self.seq_of.get(member_id)?;
        self.by_seq.get_mut(&seq)
    }

    /// Adds a member at the end of the join order. The caller guarantees the id is new.
    pub fn push(&mut self, member: Member) {
        assert!(!self.contains(&member.member_id), "member ids are unique within a group");
        let seq = self.next_seq;
        self.next_seq += 1;
        self.seq_of.insert(member.member_id.clone(), seq);
        self.by_seq.insert(seq, member);
    }

    /// Puts `member` in the place of `old_id` in the join order.
    pub fn replace(&mut self, old_id: &str, member: Member) -> Option<Member> {
        let seq = self.seq_of.remove(old_id)?;
        let old = self.by_seq.remove(&seq);
        self.seq_of.insert(member.member_id.clone(), seq);
        self.by_seq.insert(seq, member);
        old
    }

    pub fn remove(&mut self, member_id: &str) -> Option<Member> {
        let seq = self.seq_of.remove(member_id)?;
        self.by_seq.remove(&seq)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Member> {
        self.by_seq.values()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Member> {
        self.by_seq.values_mut()
    }

    pub fn ids(&self) -> Vec<String> {
        self.iter().map(|m| m.member_id.clone()).collect()
    }

    pub fn first_id(&self) -> Option<&str> {
        self.iter().next().map(|m| m.member_id.as_str())
    }
}
