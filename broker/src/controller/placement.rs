//! Replica placement for new partitions: Kafka's rack-unaware assignment, which spreads
//! first replicas (the preferred leaders) round-robin over the brokers and shifts the
//! followers so that no two partitions share the same replica list more than needed.

/// Replica lists for partitions `first_partition..first_partition + count`, over
/// `brokers` (sorted, distinct), `replication_factor` each. `start` and `shift` are the
/// random start index and replica shift Kafka draws (tests pass fixed ones).
pub fn assign(
    brokers: &[i32],
    count: i32,
    replication_factor: usize,
    first_partition: i32,
    start: usize,
    shift: usize,
) -> Vec<Vec<i32>> {
    let n = brokers.len();
    assert!(n > 0 && replication_factor > 0 && replication_factor <= n, "placement needs enough brokers");
    let mut shift = shift;
    let mut out = Vec::with_capacity(count.max(0) as usize);
    for i in 0..count.max(0) {
        let partition = (first_partition + i) as usize;
        if partition > 0 && partition.is_multiple_of(n) {
            shift += 1;
        }
        let first = (partition + start) % n;
        let mut replicas = vec![brokers[first]];
        for j in 0..replication_factor - 1 {
            let step = if n > 1 { 1 + (shift + j) % (n - 1) } else { 0 };
            replicas.push(brokers[(first + step) % n]);
        }
        out.push(replicas);
    }
    out
}

/// [`assign`] with Kafka's random start index and shift.
pub fn assign_random(
    brokers: &[i32],
    count: i32,
    replication_factor: usize,
    first_partition: i32,
) -> Vec<Vec<i32>> {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    let n = brokers.len().max(1);
    assign(brokers, count, replication_factor, first_partition, rng.gen_range(0..n), rng.gen_range(0..n))
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

    #[test]
    fn a_single_broker_gets_every_partition() {
        assert_eq!(assign(&[7], 3, 1, 0, 0, 0), vec![vec![7], vec![7], vec![7]]);
    }
}
