//! Assignors against the Java client's expected assignments (vectors from
//! `RangeAssignorTest`, `RoundRobinAssignorTest` and `AbstractStickyAssignorTest`), and
//! properties: every partition exactly once, to a subscriber, balanced.

use super::*;
use crate::consumer_protocol::TopicPartitions;
use proptest::prelude::*;

fn member(id: &str, topics: &[&str]) -> MemberSubscription {
    MemberSubscription {
        member_id: id.into(),
        group_instance_id: None,
        subscription: Subscription {
            topics: topics.iter().map(|t| t.to_string()).collect(),
            ..Default::default()
        },
    }
}

fn owning(mut m: MemberSubscription, owned: &[(&str, i32)], generation: i32) -> MemberSubscription {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (t, p) in owned {
        by_topic.entry(t).or_default().push(*p);
    }
    m.subscription.owned_partitions =
        by_topic.into_iter().map(|(t, ps)| TopicPartitions { topic: t.into(), partitions: ps }).collect();
    m.subscription.generation_id = generation;
    m
}

fn tps(list: &[(&str, i32)]) -> Vec<TopicPartition> {
    let mut v: Vec<TopicPartition> = list.iter().map(|(t, p)| TopicPartition::new(*t, *p)).collect();
    v.sort();
    v
}

fn topics(list: &[(&str, i32)]) -> BTreeMap<String, i32> {
    list.iter().map(|(t, n)| (t.to_string(), *n)).collect()
}

#[test]
fn range_matches_java() {
    // RangeAssignorTest.testTwoConsumersTwoTopicsSixPartitions
    let t = topics(&[("t1", 3), ("t2", 3)]);
    let a =
        assign(AssignmentStrategy::Range, &t, &[member("c1", &["t1", "t2"]), member("c2", &["t1", "t2"])]);
    assert_eq!(a["c1"], tps(&[("t1", 0), ("t1", 1), ("t2", 0), ("t2", 1)]));
    assert_eq!(a["c2"], tps(&[("t1", 2), ("t2", 2)]));
    // testMultipleConsumersMixedTopics
    let t = topics(&[("t1", 3), ("t2", 2)]);
    let a = assign(
        AssignmentStrategy::Range,
        &t,
        &[member("c1", &["t1"]), member("c2", &["t1", "t2"]), member("c3", &["t1"])],
    );
    assert_eq!(a["c1"], tps(&[("t1", 0)]));
    assert_eq!(a["c2"], tps(&[("t1", 1), ("t2", 0), ("t2", 1)]));
    assert_eq!(a["c3"], tps(&[("t1", 2)]));
    // testOneConsumerNonexistentTopic: an entry, empty.
    let a = assign(AssignmentStrategy::Range, &BTreeMap::new(), &[member("c", &["gone"])]);
    assert!(a["c"].is_empty());
}

#[test]
fn static_members_sort_before_dynamic_ones_by_instance_id() {
    // RangeAssignorTest.testStaticMemberRangeAssignmentPersistent: instance ids decide.
    let t = topics(&[("t", 3)]);
    let mut a1 = member("zzz", &["t"]);
    a1.group_instance_id = Some("a".into());
    let mut b1 = member("aaa", &["t"]);
    b1.group_instance_id = Some("b".into());
    let a = assign(AssignmentStrategy::Range, &t, &[b1, a1, member("dyn", &["t"])]);
    assert_eq!(a["zzz"], tps(&[("t", 0)]));
    assert_eq!(a["aaa"], tps(&[("t", 1)]));
    assert_eq!(a["dyn"], tps(&[("t", 2)]));
}

#[test]
fn round_robin_matches_java() {
    // RoundRobinAssignorTest.testTwoConsumersTwoTopicsSixPartitions
    let t = topics(&[("t1", 3), ("t2", 3)]);
    let a = assign(
        AssignmentStrategy::RoundRobin,
        &t,
        &[member("c1", &["t1", "t2"]), member("c2", &["t1", "t2"])],
    );
    assert_eq!(a["c1"], tps(&[("t1", 0), ("t1", 2), ("t2", 1)]));
    assert_eq!(a["c2"], tps(&[("t1", 1), ("t2", 0), ("t2", 2)]));
    // testMultipleConsumersMixedTopics
    let t = topics(&[("t1", 3), ("t2", 2)]);
    let a = assign(
        AssignmentStrategy::RoundRobin,
        &t,
        &[member("c1", &["t1"]), member("c2", &["t1", "t2"]), member("c3", &["t1"])],
    );
    assert_eq!(a["c1"], tps(&[("t1", 0)]));
    assert_eq!(a["c2"], tps(&[("t1", 1), ("t2", 0), ("t2", 1)]));
    assert_eq!(a["c3"], tps(&[("t1", 2)]));
}

#[test]
fn cooperative_sticky_matches_java_for_fresh_and_owned_inputs() {
    let s = AssignmentStrategy::CooperativeSticky;
    // AbstractStickyAssignorTest.testTwoConsumersTwoTopicsSixPartitions
    let t = topics(&[("t1", 3), ("t2", 3)]);
    let a = assign(s, &t, &[member("c1", &["t1", "t2"]), member("c2", &["t1", "t2"])]);
    assert_eq!(a["c1"], tps(&[("t1", 0), ("t1", 2), ("t2", 1)]));
    assert_eq!(a["c2"], tps(&[("t1", 1), ("t2", 0), ("t2", 2)]));
    // testConsumerOwningMinQuotaExpectedMaxQuota
    let t = topics(&[("t1", 2), ("t2", 3)]);
    let both = ["t1", "t2"];
    let a = assign(
        s,
        &t,
        &[
            owning(member("c1", &both), &[("t1", 0), ("t2", 1)], 1),
            owning(member("c2", &both), &[("t1", 1), ("t2", 2)], 1),
        ],
    );
    assert_eq!(a["c1"], tps(&[("t1", 0), ("t2", 0), ("t2", 1)]));
    assert_eq!(a["c2"], tps(&[("t1", 1), ("t2", 2)]));
    // testAllConsumersAreUnderMinQuota
    let a = assign(
        s,
        &t,
        &[
            owning(member("c1", &both), &[("t1", 0)], 1),
            owning(member("c2", &both), &[("t1", 1)], 1),
            member("c3", &both),
        ],
    );
    assert_eq!(a["c1"], tps(&[("t1", 0), ("t2", 1)]));
    assert_eq!(a["c2"], tps(&[("t1", 1), ("t2", 2)]));
    assert_eq!(a["c3"], tps(&[("t2", 0)]));
    // testMultipleConsumersMixedTopicSubscriptions (general path)
    let t = topics(&[("t1", 3), ("t2", 2)]);
    let a = assign(s, &t, &[member("c1", &["t1"]), member("c2", &["t1", "t2"]), member("c3", &["t1"])]);
    assert_eq!(a["c1"], tps(&[("t1", 0), ("t1", 2)]));
    assert_eq!(a["c2"], tps(&[("t2", 0), ("t2", 1)]));
    assert_eq!(a["c3"], tps(&[("t1", 1)]));
}

#[test]
fn cooperative_sticky_holds_back_a_partition_its_owner_must_revoke_first() {
    // c1 owned everything; c2 joins. Half must move, but this round c2 gets nothing:
    // c1 revokes the moving half and the follow-up rebalance hands it to c2.
    let t = topics(&[("t", 4)]);
    let c1 = owning(member("c1", &["t"]), &[("t", 0), ("t", 1), ("t", 2), ("t", 3)], 5);
    let first = assign(AssignmentStrategy::CooperativeSticky, &t, &[c1, member("c2", &["t"])]);
    assert_eq!(first["c1"], tps(&[("t", 0), ("t", 1)]));
    assert!(first["c2"].is_empty());
    let c1 = owning(member("c1", &["t"]), &[("t", 0), ("t", 1)], 6);
    let second = assign(AssignmentStrategy::CooperativeSticky, &t, &[c1, member("c2", &["t"])]);
    assert_eq!(second["c1"], tps(&[("t", 0), ("t", 1)]));
    assert_eq!(second["c2"], tps(&[("t", 2), ("t", 3)]));
}

/// Java's sticky assignment before the cooperative hold-back, and what the hold-back
/// keeps from the new owners (Java's `partitionsTransferringOwnership`).
fn sticky_and_transfers(
    t: &BTreeMap<String, i32>,
    members: &[MemberSubscription],
) -> (GroupAssignment, BTreeMap<TopicPartition, String>) {
    let mut sorted: Vec<&MemberSubscription> = members.iter().collect();
    sorted.sort_by(|a, b| a.java_order(b));
    let owners = sticky::current_owners(t, &sorted);
    let plain = sticky::assign_sticky(t, &sorted, &owners);
    let cooperative = assign(AssignmentStrategy::CooperativeSticky, t, members);
    let mut transfers = BTreeMap::new();
    for (member, partitions) in &plain {
        for tp in partitions.iter().filter(|tp| !cooperative[member].contains(tp)) {
            transfers.insert(tp.clone(), member.clone());
        }
    }
    (plain, transfers)
}

/// In Java's order (kept partitions first, then new ones), not sorted.
fn list(list: &[(&str, i32)]) -> Vec<TopicPartition> {
    list.iter().map(|(t, p)| TopicPartition::new(*t, *p)).collect()
}

#[test]
fn sticky_adding_and_removing_members_matches_java() {
    // AbstractStickyAssignorTest.testAddRemoveConsumerOneTopic
    let t = topics(&[("t", 3)]);
    let c1 = owning(member("c1", &["t"]), &[("t", 0), ("t", 1), ("t", 2)], 1);
    let (a, transfers) = sticky_and_transfers(&t, &[c1, member("c2", &["t"])]);
    assert_eq!(a["c1"], list(&[("t", 0), ("t", 1)]));
    assert_eq!(a["c2"], list(&[("t", 2)]));
    assert_eq!(transfers, BTreeMap::from([(TopicPartition::new("t", 2), "c2".to_string())]));

    // testAddRemoveTwoConsumersTwoTopics: fresh, then two members added, then the
    // first two removed.
    let t = topics(&[("t1", 3), ("t2", 4)]);
    let all = ["t1", "t2"];
    let (a, transfers) = sticky_and_transfers(&t, &[member("c1", &all), member("c2", &all)]);
    assert_eq!(a["c1"], list(&[("t1", 0), ("t1", 2), ("t2", 1), ("t2", 3)]));
    assert_eq!(a["c2"], list(&[("t1", 1), ("t2", 0), ("t2", 2)]));
    assert!(transfers.is_empty());
    let with = |id: &str, a: &GroupAssignment| {
        let owned: Vec<(String, i32)> = a[id].iter().map(|tp| (tp.topic.clone(), tp.partition)).collect();
        let refs: Vec<(&str, i32)> = owned.iter().map(|(t, p)| (t.as_str(), *p)).collect();
        owning(member(id, &all), &refs, 1)
    };
    let four = [with("c1", &a), with("c2", &a), member("c3", &all), member("c4", &all)];
    let (b, transfers) = sticky_and_transfers(&t, &four);
    assert_eq!(b["c1"], list(&[("t1", 0), ("t1", 2)]));
    assert_eq!(b["c2"], list(&[("t1", 1), ("t2", 0)]));
    assert_eq!(b["c3"], list(&[("t2", 1), ("t2", 3)]));
    assert_eq!(b["c4"], list(&[("t2", 2)]));
    let expected: BTreeMap<TopicPartition, String> =
        [(("t2", 1), "c3"), (("t2", 3), "c3"), (("t2", 2), "c4")]
            .iter()
            .map(|((t, p), m)| (TopicPartition::new(*t, *p), m.to_string()))
            .collect();
    assert_eq!(transfers, expected);
    let (c, transfers) = sticky_and_transfers(&t, &[with("c3", &b), with("c4", &b)]);
    assert_eq!(c["c3"], list(&[("t2", 1), ("t2", 3), ("t1", 0), ("t2", 0)]));
    assert_eq!(c["c4"], list(&[("t2", 2), ("t1", 1), ("t1", 2)]));
    assert!(transfers.is_empty());
}

fn check(
    strategy: AssignmentStrategy,
    t: &BTreeMap<String, i32>,
    members: &[MemberSubscription],
    balanced: bool,
) {
    let a = assign(strategy, t, members);
    let mut seen = BTreeSet::new();
    for (id, partitions) in &a {
        let m = members.iter().find(|m| &m.member_id == id).expect("a member");
        for tp in partitions {
            assert!(m.subscribes(&tp.topic), "{tp} to a non-subscriber");
            assert!(seen.insert(tp.clone()), "{tp} twice");
        }
    }
    let total: usize = members
        .iter()
        .flat_map(|m| m.subscription.topics.iter())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(|topic| t.get(topic).copied().unwrap_or(0) as usize)
        .sum();
    assert_eq!(seen.len(), total, "every partition once");
    if balanced {
        let sizes: Vec<usize> = a.values().map(Vec::len).collect();
        let (min, max) = (sizes.iter().min().copied().unwrap_or(0), sizes.iter().max().copied().unwrap_or(0));
        assert!(max - min <= 1, "{strategy:?} unbalanced: {sizes:?}");
    }
}

use std::collections::BTreeSet;

proptest! {
    #[test]
    fn every_partition_is_assigned_exactly_once_and_balanced(
        counts in proptest::collection::vec(0i32..7, 1..4),
        members in 1usize..6,
        owned_seed in proptest::collection::vec(any::<u8>(), 0..20),
    ) {
        let t: BTreeMap<String, i32> = counts.iter().enumerate().map(|(i, n)| (format!("t{i}"), *n)).collect();
        let names: Vec<&str> = t.keys().map(String::as_str).collect();
        let group: Vec<MemberSubscription> = (0..members).map(|i| member(&format!("m{i}"), &names)).collect();
        // Round robin is balanced for equal subscriptions; range only per topic.
        check(AssignmentStrategy::RoundRobin, &t, &group, true);
        check(AssignmentStrategy::Range, &t, &group, counts.len() == 1);
        // Sticky with random (disjoint) prior ownership; the cooperative hold-back is
        // taken out by merging what stays with the owners.
        let all: Vec<(String, i32)> = t.iter().flat_map(|(n, c)| (0..*c).map(move |p| (n.clone(), p))).collect();
        let mut owned: Vec<Vec<(&str, i32)>> = vec![Vec::new(); members];
        for (i, seed) in owned_seed.iter().enumerate() {
            if let Some((topic, p)) = all.get(i) {
                if (*seed as usize) % (members + 1) < members {
                    owned[(*seed as usize) % (members + 1)].push((topic.as_str(), *p));
                }
            }
        }
        let sticky: Vec<MemberSubscription> =
            group.iter().zip(&owned).map(|(m, o)| owning(m.clone(), o, 1)).collect();
        let a = assign(AssignmentStrategy::CooperativeSticky, &t, &sticky);
        let mut seen = BTreeSet::new();
        for (id, partitions) in &a {
            let i = sticky.iter().position(|m| &m.member_id == id).expect("member");
            for tp in partitions {
                prop_assert!(seen.insert(tp.clone()));
                // Never handed to a new owner while another member still owns it.
                let owner = owned.iter().position(|o| o.iter().any(|(t, p)| *t == tp.topic && *p == tp.partition));
                prop_assert!(owner.map_or(true, |o| o == i));
            }
        }
        // Without prior ownership nothing is held back: all assigned and balanced.
        check(AssignmentStrategy::CooperativeSticky, &t, &group, true);
    }

    #[test]
    fn sticky_with_differing_subscriptions_assigns_each_partition_once(
        counts in proptest::collection::vec(1i32..6, 2..4),
        subs in proptest::collection::vec(1u8..8, 1..5),
    ) {
        let t: BTreeMap<String, i32> = counts.iter().enumerate().map(|(i, n)| (format!("t{i}"), *n)).collect();
        let names: Vec<String> = t.keys().cloned().collect();
        let group: Vec<MemberSubscription> = subs.iter().enumerate().map(|(i, mask)| {
            let mine: Vec<&str> = names.iter().enumerate().filter(|(j, _)| mask & (1 << j) != 0 || *j == 0).map(|(_, n)| n.as_str()).collect();
            member(&format!("m{i}"), &mine)
        }).collect();
        check(AssignmentStrategy::CooperativeSticky, &t, &group, false);
        check(AssignmentStrategy::RoundRobin, &t, &group, false);
        check(AssignmentStrategy::Range, &t, &group, false);
    }
}
