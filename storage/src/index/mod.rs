//! Sparse, memory-mapped indexes of a segment, in Kafka's on-disk format, and the
//! segment's transaction index (a small append-only file, see [`TransactionIndex`]).
//!
//! Both files are preallocated to `segment.index.bytes` while their segment is active (so
//! appends are plain stores into the mapping) and trimmed to the bytes in use when the
//! segment is rolled or closed. After a crash an untrimmed file ends in zeroes; the sanity
//! checks catch that and the segment's indexes are rebuilt from its log.

mod file;
mod offset_index;
mod time_index;
mod txn_index;

pub(crate) use offset_index::OffsetIndex;
pub(crate) use time_index::TimeIndex;
pub use txn_index::AbortedTxn;
pub(crate) use txn_index::TransactionIndex;

/// Index of the largest entry whose key is <= `target`, given keys sorted ascending, or
/// `None` when every key is larger.
fn largest_lower_bound(entries: usize, target: i64, key_at: impl Fn(usize) -> i64) -> Option<usize> {
    if entries == 0 || key_at(0) > target {
        return None;
    }
    let (mut lo, mut hi) = (0, entries - 1);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if key_at(mid) <= target {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(lo)
}

#[cfg(test)]
mod tests {
    use super::largest_lower_bound;

    #[test]
    fn lower_bound_search() {
        let keys = [10, 20, 30, 40];
        let f = |i: usize| keys[i];
        assert_eq!(largest_lower_bound(4, 5, f), None);
        assert_eq!(largest_lower_bound(4, 10, f), Some(0));
        assert_eq!(largest_lower_bound(4, 25, f), Some(1));
        assert_eq!(largest_lower_bound(4, 40, f), Some(3));
        assert_eq!(largest_lower_bound(4, 99, f), Some(3));
        assert_eq!(largest_lower_bound(0, 99, f), None);
    }
}

#[cfg(test)]
mod index_tests {
    use super::{OffsetIndex, TimeIndex};

    /// The kernel's flags of this process's mappings of `path` (`VmFlags` in smaps).
    #[cfg(target_os = "linux")]
    fn mapping_flags(path: &std::path::Path) -> Vec<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        let name = path.to_str().expect("utf-8 path");
        let mut ours = false;
        let mut flags = Vec::new();
        let is_range = |t: &str| {
            t.split_once('-').is_some_and(|(a, b)| {
                !a.is_empty() && a.chars().chain(b.chars()).all(|c| c.is_ascii_hexdigit())
            })
        };
        for line in smaps.lines() {
            if let Some(rest) = line.strip_prefix("VmFlags:") {
                if ours {
                    flags.push(rest.trim().to_string());
                }
            } else if line.split_whitespace().next().is_some_and(is_range) {
                // A mapping's first line: its address range, ..., its path.
                ours = line.ends_with(name);
            }
        }
        flags
    }

    /// Both indexes are mapped without readahead (`MADV_RANDOM`, "rr"): a fault in a new,
    /// sparse index would otherwise zero-fill a whole readahead window, which with many
    /// partitions was most of a broker's CPU.
    #[cfg(target_os = "linux")]
    #[test]
    fn indexes_are_mapped_for_random_access() {
        let dir = tempfile::tempdir().unwrap();
        let offsets = dir.path().join("00000000000000000000.index");
        let times = dir.path().join("00000000000000000000.timeindex");
        let mut o = OffsetIndex::open(&offsets, 0, 1 << 20).unwrap();
        let mut t = TimeIndex::open(&times, 0, 1 << 20).unwrap();
        o.append(10, 4096);
        t.maybe_append(1_000, 10, false);
        for path in [&offsets, &times] {
            let flags = mapping_flags(path);
            assert!(!flags.is_empty(), "{} is mapped", path.display());
            assert!(flags.iter().all(|f| f.split(' ').any(|x| x == "rr")), "{}: {flags:?}", path.display());
        }
    }

    #[test]
    fn offset_index_append_lookup_truncate_trim_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000100.index");
        let mut index = OffsetIndex::open(&path, 100, 80).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 80, "preallocated");
        assert_eq!(index.lookup(150).offset, 100);
        for i in 1..=5u32 {
            index.append(100 + i64::from(i) * 10, i * 1000);
        }
        assert_eq!(index.lookup(105).position, 0);
        assert_eq!(index.lookup(110).position, 1000);
        assert_eq!(index.lookup(139).position, 3000);
        assert_eq!(index.lookup(1_000).position, 5000);
        assert_eq!(index.lookup_by_position(2500).map(|e| e.offset), Some(120));
        assert_eq!(index.lookup_by_position(999), None);
        assert!(index.sanity_check(6000, true).is_ok());
        assert!(index.sanity_check(5000, true).is_err(), "points past the log");
        index.truncate_to(130);
        assert_eq!(index.last_entry().map(|e| e.offset), Some(120));
        index.trim().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 16);
        drop(index);
        let mut index = OffsetIndex::open(&path, 100, 80).unwrap();
        assert_eq!(index.last_entry().map(|e| (e.offset, e.position)), Some((120, 2000)));
        assert!(index.is_full(), "a trimmed index is full until resized for appends");
        index.resize(80).unwrap();
        assert!(!index.is_full());
        assert_eq!(index.last_entry().map(|e| e.offset), Some(120));
    }

    #[test]
    fn offset_index_untrimmed_zero_tail_fails_sanity_check() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.index");
        let mut index = OffsetIndex::open(&path, 0, 80).unwrap();
        index.append(5, 100);
        drop(index); // not trimmed: 9 zero entries follow
        let index = OffsetIndex::open(&path, 0, 80).unwrap();
        assert!(index.sanity_check(1_000, false).is_err());
        assert!(index.sanity_check(1_000, true).is_err());
        std::fs::write(&path, [0u8; 7]).unwrap();
        let index = OffsetIndex::open(&path, 0, 80).unwrap();
        assert!(index.sanity_check(1_000, false).is_err(), "ragged length");
    }

    #[test]
    fn time_index_keeps_growing_timestamps_and_a_final_slot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000050.timeindex");
        let mut index = TimeIndex::open(&path, 50, 48).unwrap(); // 4 slots, 3 usable
        assert_eq!(index.lookup(7).offset, 50);
        index.maybe_append(1_000, 55, false);
        index.maybe_append(900, 56, false); // not larger: ignored
        index.maybe_append(2_000, 60, false);
        index.maybe_append(3_000, 70, false);
        assert!(index.is_full());
        index.maybe_append(4_000, 80, false); // full: ignored
        assert_eq!(index.last_entry().map(|e| e.timestamp), Some(3_000));
        index.maybe_append(4_000, 80, true); // the final entry may use the kept slot
        assert_eq!(index.last_entry().map(|e| (e.timestamp, e.offset)), Some((4_000, 80)));
        assert_eq!(index.lookup(2_500).offset, 60);
        assert_eq!(index.lookup(999).timestamp, -1);
        assert!(index.sanity_check(81, true).is_ok());
        assert!(index.sanity_check(80, true).is_err());
        index.truncate_to(60);
        assert_eq!(index.last_entry().map(|e| e.offset), Some(55));
        index.trim().unwrap();
        drop(index);
        let index = TimeIndex::open(&path, 50, 48).unwrap();
        assert_eq!(index.last_entry().map(|e| e.timestamp), Some(1_000));
    }
}
