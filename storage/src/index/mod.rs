//! Sparse, memory-mapped indexes of a segment, in Kafka's on-disk format.
//!
//! Both files are preallocated to `segment.index.bytes` while their segment is active (so
//! appends are plain stores into the mapping) and trimmed to the bytes in use when the
//! segment is rolled or closed. After a crash an untrimmed file ends in zeroes; the sanity
//! checks catch that and the segment's indexes are rebuilt from its log.

mod file;
mod offset_index;
mod time_index;

pub(crate) use offset_index::OffsetIndex;
pub(crate) use time_index::TimeIndex;

/// Index of the largest entry whose key is <= `target`, given keys sorted ascending, or
/// `None` when every key is larger.
fn largest_lower_bound(
    entries: usize,
    target: i64,
    key_at: impl Fn(usize) -> i64,
) -> Option<usize> {
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
