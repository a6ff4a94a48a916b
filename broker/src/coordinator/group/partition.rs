//! Which `__consumer_offsets` partition owns a group, computed exactly as Apache Kafka
//! does so that clients' FindCoordinator answers and the on-disk layout agree with Kafka
//! clusters and tools.

/// Java's `String.hashCode()`: `s[0]*31^(n-1) + ... + s[n-1]` over the UTF-16 code units
/// of the string, with 32-bit wrapping arithmetic. Characters outside the Basic
/// Multilingual Plane count as two code units (a surrogate pair), as in Java.
pub fn java_string_hash_code(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(i32::from(unit)))
}

/// Kafka's `Utils.abs`: the absolute value, except that `i32::MIN` (which has no positive
/// counterpart) maps to 0 rather than staying negative.
pub fn kafka_abs(n: i32) -> i32 {
    if n == i32::MIN {
        0
    } else {
        n.abs()
    }
}

/// The `__consumer_offsets` partition of `group_id`:
/// `Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`.
///
/// `num_partitions` must be positive (the config validation guarantees it); a
/// non-positive count is treated as 1 rather than dividing by zero.
pub fn partition_for_group(group_id: &str, num_partitions: i32) -> i32 {
    kafka_abs(java_string_hash_code(group_id)) % num_partitions.max(1)
}

/// Java's `String.length()`: the number of UTF-16 code units, which is what Kafka compares
/// against `offset.metadata.max.bytes` despite the name of the setting.
pub fn java_string_length(s: &str) -> usize {
    s.encode_utf16().count()
}

/// Whether this broker currently coordinates a `__consumer_offsets` partition, as told by
/// the shell (which follows partition leadership).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionState {
    /// This broker leads the partition and is replaying its log: requests for its groups
    /// get `COORDINATOR_LOAD_IN_PROGRESS`.
    Loading,
    /// The log has been replayed; the partition's groups are served.
    Active,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected values computed with OpenJDK 17 (`String.hashCode()` and Kafka's
    /// `Utils.abs(h) % n`).
    #[test]
    fn matches_java() {
        let cases: &[(&str, i32, i32, i32)] = &[
            ("", 0, 0, 0),
            ("my-group", -1906497762, 12, 1),
            ("console-consumer-12345", 158455506, 6, 6),
            ("test", 3556498, 48, 1),
            ("polygenelubricants", i32::MIN, 0, 0),
            ("grüppe", -1233264812, 12, 3),
            ("组\u{1F600}x", 1021737521, 21, 0),
            ("a-very-long-group-id-for-testing-purposes-0123456789", -1257101410, 10, 5),
        ];
        for &(group, hash, p50, p7) in cases {
            assert_eq!(java_string_hash_code(group), hash, "{group}");
            assert_eq!(partition_for_group(group, 50), p50, "{group}");
            assert_eq!(partition_for_group(group, 7), p7, "{group}");
        }
    }

    #[test]
    fn abs_of_min_is_zero() {
        assert_eq!(kafka_abs(i32::MIN), 0);
        assert_eq!(kafka_abs(-5), 5);
        assert_eq!(kafka_abs(i32::MAX), i32::MAX);
    }

    #[test]
    fn java_length_counts_utf16_units() {
        assert_eq!(java_string_length("abc"), 3);
        assert_eq!(java_string_length("ü"), 1);
        assert_eq!(java_string_length("\u{1F600}"), 2);
    }
}
