//! Replica placement for new partitions, as Kafka's `AdminUtils` assigns them: without
//! racks, first replicas (the preferred leaders) go round-robin over the brokers and the
//! followers are shifted so that no two partitions share the same replica list more than
//! needed; with `broker.rack` set, the same walk over a broker list that alternates racks,
//! each replica skipping brokers whose rack already has one while a rack has none, so a
//! partition of replication factor R spans min(R, racks) racks and losing a rack loses at
//! most what it held. Brokers without a rack count as one rack of their own (Kafka's
//! KRaft placer does the same; its ZooKeeper-era tool refused such a mix).

use std::collections::{BTreeMap, HashSet};

/// A broker that may take replicas, with its `broker.rack`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate<'a> {
    /// `node.id`.
    pub id: i32,
    /// `broker.rack`, if set.
    pub rack: Option<&'a str>,
}

/// Replica lists for partitions `first_partition..first_partition + count`, over
/// `brokers` (sorted, distinct), `replication_factor` each. `start` and `shift` are the
/// random start index and replica shift Kafka draws (tests pass fixed ones).
#[cfg(test)]
pub fn assign(
    brokers: &[i32],
    count: i32,
    replication_factor: usize,
    first_partition: i32,
    start: usize,
    shift: usize,
) -> Vec<Vec<i32>> {
    // One rack: the rack-aware walk never skips a broker, so it is the rack-unaware one.
    let candidates: Vec<Candidate> = brokers.iter().map(|&id| Candidate { id, rack: None }).collect();
    assign_rack_aware(&candidates, count, replication_factor, first_partition, start, shift)
}

/// Replica lists as [`assign`] makes them, over `brokers` with their racks: the brokers
/// alternate racks (racks in name order, brokers of a rack in id order, one of each rack
/// in turn), and each follower is the next broker of the shifted walk whose rack has no
/// replica of the partition yet (while some rack has none) and that is not a replica yet.
pub fn assign_rack_aware(
    brokers: &[Candidate<'_>],
    count: i32,
    replication_factor: usize,
    first_partition: i32,
    start: usize,
    shift: usize,
) -> Vec<Vec<i32>> {
    let n = brokers.len();
    assert!(n > 0 && replication_factor > 0 && replication_factor <= n, "placement needs enough brokers");
    let arranged = rack_alternated(brokers);
    let racks = arranged.iter().map(|b| b.rack).collect::<HashSet<_>>().len();
    let mut shift = shift;
    let mut out = Vec::with_capacity(count.max(0) as usize);
    for i in 0..count.max(0) {
        let partition = (first_partition + i) as usize;
        if partition > 0 && partition.is_multiple_of(n) {
            shift += 1;
        }
        let first = (partition + start) % n;
        let leader = arranged[first];
        let mut replicas = vec![leader.id];
        let mut with_replicas: HashSet<Option<&str>> = [leader.rack].into_iter().collect();
        let mut k = 0;
        while replicas.len() < replication_factor {
            let step = if n > 1 { 1 + (shift * racks + k) % (n - 1) } else { 0 };
            let b = arranged[(first + step) % n];
            k += 1;
            let rack_ok = !with_replicas.contains(&b.rack) || with_replicas.len() == racks;
            if rack_ok && !replicas.contains(&b.id) {
                replicas.push(b.id);
                with_replicas.insert(b.rack);
            }
        }
        out.push(replicas);
    }
    out
}

/// `brokers` ordered so that racks alternate: the first broker of each rack (racks in name
/// order, a rack's brokers in id order), then the second of each, and so on.
fn rack_alternated<'a>(brokers: &[Candidate<'a>]) -> Vec<Candidate<'a>> {
    let mut by_rack: BTreeMap<Option<&str>, Vec<Candidate<'a>>> = BTreeMap::new();
    for b in brokers {
        by_rack.entry(b.rack).or_default().push(*b);
    }
    for list in by_rack.values_mut() {
        list.sort_by_key(|b| b.id);
        list.reverse(); // popped from the end, lowest id first
    }
    let mut out = Vec::with_capacity(brokers.len());
    while out.len() < brokers.len() {
        for list in by_rack.values_mut() {
            if let Some(b) = list.pop() {
                out.push(b);
            }
        }
    }
    out
}

/// [`assign_rack_aware`] (the rack-unaware [`assign`] when no broker has a rack) with
/// Kafka's random start index and shift.
pub fn assign_random(
    brokers: &[Candidate<'_>],
    count: i32,
    replication_factor: usize,
    first_partition: i32,
) -> Vec<Vec<i32>> {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    let n = brokers.len().max(1);
    let (start, shift) = (rng.gen_range(0..n), rng.gen_range(0..n));
    assign_rack_aware(brokers, count, replication_factor, first_partition, start, shift)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn matches_kafkas_rack_unaware_example() {
        // Kafka's AdminUtils doc example: 5 brokers, 10 partitions, RF 3, start 0, shift 0.
        let got = assign(&[0, 1, 2, 3, 4], 10, 3, 0, 0, 0);
        let want: Vec<Vec<i32>> = vec![
            vec![0, 1, 2],
            vec![1, 2, 3],
            vec![2, 3, 4],
            vec![3, 4, 0],
            vec![4, 0, 1],
            vec![0, 2, 3],
            vec![1, 3, 4],
            vec![2, 4, 0],
            vec![3, 0, 1],
            vec![4, 1, 2],
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn replicas_are_distinct_and_leaders_spread_evenly() {
        for start in 0..3 {
            for shift in 0..3 {
                let got = assign(&[1, 2, 3], 30, 3, 0, start, shift);
                let mut leaders = HashMap::new();
                for r in &got {
                    let mut sorted = r.clone();
                    sorted.sort_unstable();
                    sorted.dedup();
                    assert_eq!(sorted.len(), 3, "{r:?}");
                    *leaders.entry(r[0]).or_insert(0) += 1;
                }
                assert!(leaders.values().all(|&c| c == 10), "{leaders:?}");
            }
        }
    }

    fn racked<'a>(brokers: &[(i32, &'a str)]) -> Vec<Candidate<'a>> {
        brokers.iter().map(|&(id, rack)| Candidate { id, rack: Some(rack) }).collect()
    }

    #[test]
    fn matches_kafkas_rack_aware_example() {
        // Kafka's AdminUtils doc example: brokers 0..5 on racks rack1, rack3, rack3, rack2,
        // rack2, rack1 alternate as 0 (rack1), 3 (rack2), 1 (rack3), 5 (rack1), 4 (rack2), 2
        // (rack3); with start 0 and shift 0 the first round is this, and the seventh
        // partition's followers are shifted (0, 4, 2 rather than 0, 3, 1 again).
        let brokers =
            racked(&[(0, "rack1"), (1, "rack3"), (2, "rack3"), (3, "rack2"), (4, "rack2"), (5, "rack1")]);
        let ids: Vec<i32> = rack_alternated(&brokers).iter().map(|b| b.id).collect();
        assert_eq!(ids, vec![0, 3, 1, 5, 4, 2]);
        let got = assign_rack_aware(&brokers, 7, 3, 0, 0, 0);
        let want: Vec<Vec<i32>> = vec![
            vec![0, 3, 1],
            vec![3, 1, 5],
            vec![1, 5, 4],
            vec![5, 4, 2],
            vec![4, 2, 0],
            vec![2, 0, 3],
            vec![0, 4, 2],
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn every_partition_spans_as_many_racks_as_it_can() {
        let brokers = racked(&[(1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "c"), (6, "c"), (7, "c")]);
        let rack = |id: i32| brokers.iter().find(|b| b.id == id).and_then(|b| b.rack);
        for rf in 1..=brokers.len() {
            for (start, shift) in [(0, 0), (3, 1), (6, 5)] {
                let got = assign_rack_aware(&brokers, 21, rf, 0, start, shift);
                let mut leaders = std::collections::HashMap::new();
                for r in &got {
                    let distinct: HashSet<i32> = r.iter().copied().collect();
                    assert_eq!((r.len(), distinct.len()), (rf, rf), "{r:?}");
                    let racks: HashSet<_> = r.iter().map(|&id| rack(id)).collect();
                    assert_eq!(racks.len(), rf.min(3), "rf {rf}: {r:?} spans {racks:?}");
                    *leaders.entry(r[0]).or_insert(0) += 1;
                }
                assert!(leaders.values().all(|&c| c == 3), "leaders spread evenly: {leaders:?}");
            }
        }
    }

    #[test]
    fn brokers_without_a_rack_are_a_rack_of_their_own() {
        let brokers = vec![
            Candidate { id: 1, rack: Some("a") },
            Candidate { id: 2, rack: None },
            Candidate { id: 3, rack: Some("a") },
        ];
        for r in assign_rack_aware(&brokers, 6, 2, 0, 1, 2) {
            assert!(r.contains(&2), "each pair spans the rack-less broker and rack a: {r:?}");
        }
        let unracked: Vec<Candidate> = [4, 5, 6].iter().map(|&id| Candidate { id, rack: None }).collect();
        assert_eq!(assign_random(&unracked, 3, 3, 0).len(), 3);
    }

    #[test]
    fn a_single_broker_gets_every_partition() {
        assert_eq!(assign(&[7], 3, 1, 0, 0, 0), vec![vec![7], vec![7], vec![7]]);
    }
}
