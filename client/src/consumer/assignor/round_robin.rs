//! `roundrobin` (Java's `RoundRobinAssignor`): every partition of every subscribed
//! topic, sorted by topic then index, dealt to the members in a circle, skipping a
//! member that does not subscribe to the partition's topic.

use super::{GroupAssignment, MemberSubscription};
use crate::types::TopicPartition;
use std::collections::BTreeMap;

pub(super) fn assign(
    partitions_per_topic: &BTreeMap<String, i32>,
    members: &[&MemberSubscription],
) -> GroupAssignment {
    let mut out = GroupAssignment::new();
    if members.is_empty() {
        return out;
    }
    let mut next = 0usize;
    for (topic, &count) in partitions_per_topic {
        if !members.iter().any(|m| m.subscribes(topic)) {
            continue;
        }
        for p in 0..count.max(0) {
            while !members[next % members.len()].subscribes(topic) {
                next += 1;
            }
            let m = members[next % members.len()];
            next += 1;
            out.entry(m.member_id.clone()).or_default().push(TopicPartition::new(topic.as_str(), p));
        }
    }
    out
}
