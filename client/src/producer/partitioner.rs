//! Which partition a record goes to, as Kafka's Java client decides it: an explicit
//! partition wins; a key is hashed with Kafka's murmur2 (`toPositive(murmur2(key)) %
//! partitions`, the same partition as the Java client and librdkafka's
//! `murmur2_random`); records without a key stick to one partition until a new batch
//! would be opened there, then move to another (KIP-480), so they fill batches instead
//! of spraying tiny ones.

/// Kafka's murmur2 hash (`org.apache.kafka.common.utils.Utils.murmur2`, seed
/// `0x9747b28c`), as a signed 32-bit value like Java's.
///
/// ```
/// use strata_client::producer::partitioner::murmur2;
/// assert_eq!(murmur2(b"foobar"), -790332482);
/// ```
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of a keyed record among `partitions` (> 0): Java's
/// `Utils.toPositive(Utils.murmur2(key)) % numPartitions`.
///
/// ```
/// use strata_client::producer::partitioner::partition_for_key;
/// assert_eq!(partition_for_key(b"foobar", 50), 16);
/// ```
pub fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % partitions.max(1)
}

/// The next sticky partition for unkeyed records: a random one of `available`
/// (partitions with a leader; all of `0..partitions` when none has), other than `prev`
/// when there is a choice, as the Java client's `StickyPartitionCache` picks.
pub(crate) fn next_sticky(prev: Option<i32>, available: &[i32], partitions: i32) -> i32 {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    if available.is_empty() {
        let n = partitions.max(1);
        if n == 1 {
            return 0;
        }
        loop {
            let p = rng.gen_range(0..n);
            if Some(p) != prev {
                return p;
            }
        }
    }
    if available.len() == 1 {
        return available[0];
    }
    loop {
        let p = available[rng.gen_range(0..available.len())];
        if Some(p) != prev {
            return p;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Apache Kafka's `UtilsTest.testMurmur2` vectors.
    #[test]
    fn murmur2_matches_the_java_client() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58_897_971),
            (b"abc", 479_470_107),
        ];
        for (key, hash) in cases {
            assert_eq!(murmur2(key), hash, "{}", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn keyed_partition_is_the_positive_hash_modulo_the_count() {
        // toPositive(-790332482) = 1357151166; 1357151166 % 50 = 16.
        assert_eq!(partition_for_key(b"foobar", 50), 16);
        for key in [&b"a"[..], b"bb", b"ccc", b"dddd", b""] {
            let p = partition_for_key(key, 7);
            assert!((0..7).contains(&p));
        }
    }

    #[test]
    fn the_sticky_partition_moves_to_another_available_one() {
        for _ in 0..50 {
            let p = next_sticky(Some(1), &[1, 3], 4);
            assert_eq!(p, 3);
            let q = next_sticky(Some(2), &[], 3);
            assert!(q == 0 || q == 1);
        }
        assert_eq!(next_sticky(Some(0), &[0], 1), 0);
    }
}
