//! `range` (Java's `RangeAssignor`, without rack awareness): per topic, the subscribed
//! members in order each take a consecutive range; the first `partitions % members`
//! take one more.

use super::{GroupAssignment, MemberSubscription};
use crate::types::TopicPartition;
use std::collections::BTreeMap;

pub(super) fn assign(
    partitions_per_topic: &BTreeMap<String, i32>,
    members: &[&MemberSubscription],
) -> GroupAssignment {
    let mut out = GroupAssignment::new();
    for (topic, &count) in partitions_per_topic {
        let subscribed: Vec<&&MemberSubscription> = members.iter().filter(|m| m.subscribes(topic)).collect();
        if subscribed.is_empty() || count <= 0 {
            continue;
        }
        let n = subscribed.len() as i32;
        let (per_member, extra) = (count / n, count % n);
        for (i, m) in subscribed.iter().enumerate() {
            let i = i as i32;
            let start = per_member * i + i.min(extra);
            let len = per_member + i32::from(i < extra);
            let partitions = out.entry(m.member_id.clone()).or_default();
            partitions.extend((start..start + len).map(|p| TopicPartition::new(topic.as_str(), p)));
        }
    }
    out
}
