//! `cooperative-sticky` (Java's `CooperativeStickyAssignor`): members keep what they own
//! as far as balance allows, the rest is dealt round-robin, and a partition moving from
//! one member to another is left out of the new owner's assignment this round, so the
//! old owner revokes it first and a second rebalance hands it over (KIP-429).
//!
//! When every member subscribes to the same topics this follows Java's "constrained"
//! algorithm: quotas of `floor(P/C)` and `ceil(P/C)`, owned partitions kept up to the
//! quota (at most `P % C` members keep the larger one), then the unassigned partitions
//! in topic/partition order filled round-robin into members under the lower quota, then
//! into members at it. With differing subscriptions it keeps owned partitions and gives
//! each other partition to the least loaded eligible member, then moves partitions from
//! members with two or more above an eligible peer: balanced and sticky, matching Java
//! for fresh assignments (partitions with the fewest eligible members placed first), but
//! not step-for-step Java's general algorithm when reassigning. Where more members own the larger quota than
//! may keep it, Java's choice follows its HashMap's iteration order; here it follows
//! the member order, so such inputs can differ from Java (both are balanced and valid).

use super::{GroupAssignment, MemberSubscription};
use crate::types::TopicPartition;
use std::collections::{BTreeMap, BTreeSet, HashMap};

pub(super) fn assign_cooperative(
    partitions_per_topic: &BTreeMap<String, i32>,
    members: &[&MemberSubscription],
) -> GroupAssignment {
    let owners = current_owners(partitions_per_topic, members);
    let mut out = assign_sticky(partitions_per_topic, members, &owners);
    // A partition another member still owns is revoked there first.
    for (member, partitions) in out.iter_mut() {
        partitions.retain(|tp| owners.get(tp).map_or(true, |owner| owner == member));
    }
    out
}

/// Who owns each existing partition: the claim with the highest generation wins, ties
/// go to the first member in order (a partition is never owned twice).
pub(super) fn current_owners(
    partitions_per_topic: &BTreeMap<String, i32>,
    members: &[&MemberSubscription],
) -> HashMap<TopicPartition, String> {
    let mut best: HashMap<TopicPartition, (i32, String)> = HashMap::new();
    for m in members {
        let generation = m.subscription.generation_id;
        for owned in &m.subscription.owned_partitions {
            let count = partitions_per_topic.get(&owned.topic).copied().unwrap_or(0);
            if !m.subscribes(&owned.topic) {
                continue;
            }
            for &p in owned.partitions.iter().filter(|&&p| p >= 0 && p < count) {
                let tp = TopicPartition::new(owned.topic.as_str(), p);
                match best.get(&tp) {
                    Some((g, _)) if *g >= generation => {}
                    _ => {
                        best.insert(tp, (generation, m.member_id.clone()));
                    }
                }
            }
        }
    }
    best.into_iter().map(|(tp, (_, member))| (tp, member)).collect()
}

fn owned_by(owners: &HashMap<TopicPartition, String>, member: &str) -> Vec<TopicPartition> {
    let mut owned: Vec<TopicPartition> =
        owners.iter().filter(|(_, m)| *m == member).map(|(tp, _)| tp.clone()).collect();
    owned.sort();
    owned
}

fn all_partitions(
    partitions_per_topic: &BTreeMap<String, i32>,
    members: &[&MemberSubscription],
) -> Vec<TopicPartition> {
    partitions_per_topic
        .iter()
        .filter(|(t, _)| members.iter().any(|m| m.subscribes(t)))
        .flat_map(|(t, &n)| (0..n.max(0)).map(move |p| TopicPartition::new(t.as_str(), p)))
        .collect()
}

pub(super) fn assign_sticky(
    partitions_per_topic: &BTreeMap<String, i32>,
    members: &[&MemberSubscription],
    owners: &HashMap<TopicPartition, String>,
) -> GroupAssignment {
    let same_subscriptions = members.windows(2).all(|w| {
        let a: BTreeSet<&String> = w[0].subscription.topics.iter().collect();
        let b: BTreeSet<&String> = w[1].subscription.topics.iter().collect();
        a == b
    });
    if same_subscriptions {
        constrained(partitions_per_topic, members, owners)
    } else {
        general(partitions_per_topic, members, owners)
    }
}

fn constrained(
    partitions_per_topic: &BTreeMap<String, i32>,
    members: &[&MemberSubscription],
    owners: &HashMap<TopicPartition, String>,
) -> GroupAssignment {
    let mut out = GroupAssignment::new();
    if members.is_empty() {
        return out;
    }
    let all = all_partitions(partitions_per_topic, members);
    let (total, count) = (all.len(), members.len());
    let (min_quota, max_quota) = (total / count, total.div_ceil(count));
    let expected_over_min = total % count;
    let mut over_min = 0usize;
    let mut under_min: Vec<String> = Vec::new();
    let mut exactly_min: Vec<String> = Vec::new();
    let mut assigned: BTreeSet<TopicPartition> = BTreeSet::new();
    for m in members {
        let owned = owned_by(owners, &m.member_id);
        let keep = if owned.len() < min_quota {
            under_min.push(m.member_id.clone());
            owned.len()
        } else if owned.len() >= max_quota && over_min < expected_over_min {
            over_min += 1;
            if over_min == expected_over_min {
                exactly_min.clear();
            }
            max_quota
        } else {
            if over_min < expected_over_min {
                exactly_min.push(m.member_id.clone());
            }
            min_quota
        };
        let kept: Vec<TopicPartition> = owned.into_iter().take(keep).collect();
        assigned.extend(kept.iter().cloned());
        out.insert(m.member_id.clone(), kept);
    }
    let unassigned: Vec<TopicPartition> = all.into_iter().filter(|tp| !assigned.contains(tp)).collect();
    under_min.sort();
    exactly_min.sort();
    let mut cursor = 0usize;
    for tp in unassigned {
        let member = if cursor < under_min.len() {
            cursor += 1;
            under_min[cursor - 1].clone()
        } else if !under_min.is_empty() {
            cursor = 1;
            under_min[0].clone()
        } else if !exactly_min.is_empty() {
            exactly_min.remove(0)
        } else {
            // Unreachable when the quotas add up; keep the partition assigned anyway.
            members[0].member_id.clone()
        };
        let partitions = out.entry(member.clone()).or_default();
        partitions.push(tp);
        let len = partitions.len();
        if len == min_quota {
            if let Some(i) = under_min.iter().position(|m| *m == member) {
                under_min.remove(i);
                if i < cursor {
                    cursor -= 1;
                }
                exactly_min.push(member);
            }
        } else if len == max_quota && max_quota > min_quota {
            over_min += 1;
            if over_min == expected_over_min {
                exactly_min.clear();
            }
        }
    }
    out
}

fn general(
    partitions_per_topic: &BTreeMap<String, i32>,
    members: &[&MemberSubscription],
    owners: &HashMap<TopicPartition, String>,
) -> GroupAssignment {
    let mut out: GroupAssignment = members.iter().map(|m| (m.member_id.clone(), Vec::new())).collect();
    let by_id: HashMap<&str, &MemberSubscription> =
        members.iter().map(|m| (m.member_id.as_str(), *m)).collect();
    let mut unassigned = Vec::new();
    for tp in all_partitions(partitions_per_topic, members) {
        match owners.get(&tp) {
            Some(owner) if by_id.contains_key(owner.as_str()) => {
                out.entry(owner.clone()).or_default().push(tp)
            }
            _ => unassigned.push(tp),
        }
    }
    let order: Vec<&str> = members.iter().map(|m| m.member_id.as_str()).collect();
    // Partitions with the fewest possible owners first, as Java sorts them, so they are
    // not crowded out.
    let eligible = |tp: &TopicPartition| members.iter().filter(|m| m.subscribes(&tp.topic)).count();
    unassigned.sort_by_key(|tp| (eligible(tp), tp.clone()));
    for tp in unassigned {
        let target = order
            .iter()
            .filter(|id| by_id[**id].subscribes(&tp.topic))
            .min_by_key(|id| out[**id].len())
            .map(|id| id.to_string());
        if let Some(id) = target {
            out.entry(id).or_default().push(tp);
        }
    }
    // Move from the most loaded member to an eligible one with two fewer, until none.
    let mut moves = 0usize;
    let limit = out.values().map(Vec::len).sum::<usize>() * members.len() + 1;
    'outer: while moves < limit {
        for from in &order {
            for i in (0..out[*from].len()).rev() {
                let tp = out[*from][i].clone();
                let from_len = out[*from].len();
                let to = order
                    .iter()
                    .filter(|id| **id != *from && by_id[**id].subscribes(&tp.topic))
                    .filter(|id| out[**id].len() + 1 < from_len)
                    .min_by_key(|id| out[**id].len());
                if let Some(to) = to {
                    let to = to.to_string();
                    if let Some(v) = out.get_mut(*from) {
                        v.remove(i);
                    }
                    out.entry(to).or_default().push(tp);
                    moves += 1;
                    continue 'outer;
                }
            }
        }
        break;
    }
    out
}
