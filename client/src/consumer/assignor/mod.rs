//! Partition assignors: what the group leader runs on the members' subscriptions to
//! hand out partitions. Each matches the Java client's assignor of the same name for the
//! same input, so a group mixing our consumers with Java or librdkafka members gets the
//! same assignment whoever is leader.
//!
//! Assignors are pure functions of the members (sorted as Java sorts them: static
//! members by `group.instance.id` first, then dynamic ones by member id) and of the
//! partition count per topic.

mod range;
mod round_robin;
mod sticky;

use crate::consumer::config::AssignmentStrategy;
use crate::consumer_protocol::Subscription;
use crate::types::TopicPartition;
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// A member as the leader sees it in the JoinGroup response.
///
/// ```
/// use strata_client::consumer::assignor::MemberSubscription;
/// use strata_client::consumer_protocol::Subscription;
/// let m = MemberSubscription {
///     member_id: "consumer-1-a1b2".into(),
///     group_instance_id: Some("host-1".into()),
///     subscription: Subscription { topics: vec!["orders".into()], ..Default::default() },
/// };
/// assert_eq!(m.subscription.generation_id, -1);
/// ```
#[derive(Debug, Clone)]
pub struct MemberSubscription {
    /// Its member id.
    pub member_id: String,
    /// Its `group.instance.id`, for static members.
    pub group_instance_id: Option<String>,
    /// What it subscribed to and, for cooperative protocols, what it owns.
    pub subscription: Subscription,
}

impl MemberSubscription {
    /// Java's `MemberInfo` order: static members (by instance id) before dynamic ones
    /// (by member id).
    fn java_order(&self, other: &MemberSubscription) -> Ordering {
        match (&self.group_instance_id, &other.group_instance_id) {
            (Some(a), Some(b)) => a.cmp(b).then_with(|| self.member_id.cmp(&other.member_id)),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => self.member_id.cmp(&other.member_id),
        }
    }

    fn subscribes(&self, topic: &str) -> bool {
        self.subscription.topics.iter().any(|t| t == topic)
    }
}

/// Partitions per member id; every member of the input has an entry, maybe empty.
pub type GroupAssignment = BTreeMap<String, Vec<TopicPartition>>;

/// Runs `strategy` over `members`, with `partitions_per_topic` giving each subscribed
/// topic's partition count (topics missing from it are not assigned).
///
/// ```
/// use std::collections::BTreeMap;
/// use strata_client::consumer::assignor::{assign, MemberSubscription};
/// use strata_client::consumer::AssignmentStrategy;
/// use strata_client::consumer_protocol::Subscription;
/// let member = |id: &str| MemberSubscription {
///     member_id: id.into(),
///     group_instance_id: None,
///     subscription: Subscription { topics: vec!["t".into()], ..Default::default() },
/// };
/// let topics = BTreeMap::from([("t".to_string(), 3)]);
/// let a = assign(AssignmentStrategy::Range, &topics, &[member("b"), member("a")]);
/// assert_eq!(a["a"].len(), 2);
/// assert_eq!(a["b"].len(), 1);
/// ```
pub fn assign(
    strategy: AssignmentStrategy,
    partitions_per_topic: &BTreeMap<String, i32>,
    members: &[MemberSubscription],
) -> GroupAssignment {
    let mut sorted: Vec<&MemberSubscription> = members.iter().collect();
    sorted.sort_by(|a, b| a.java_order(b));
    let mut out = match strategy {
        AssignmentStrategy::Range => range::assign(partitions_per_topic, &sorted),
        AssignmentStrategy::RoundRobin => round_robin::assign(partitions_per_topic, &sorted),
        AssignmentStrategy::CooperativeSticky => sticky::assign_cooperative(partitions_per_topic, &sorted),
    };
    for m in members {
        out.entry(m.member_id.clone()).or_default();
    }
    for partitions in out.values_mut() {
        partitions.sort();
    }
    out
}

#[cfg(test)]
mod tests;
