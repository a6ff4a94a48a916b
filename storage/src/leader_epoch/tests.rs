//! Kafka's leader epoch rules (`LeaderEpochFileCacheTest` cases, rewritten) and the
//! checkpoint file byte for byte.

use super::checkpoint::{self, UnusableCheckpoint, LEADER_EPOCH_CHECKPOINT_FILE};
use super::*;

fn cache(entries: &[(i32, i64)]) -> LeaderEpochCache {
    let entries = entries.iter().map(|&(epoch, start_offset)| EpochEntry { epoch, start_offset }).collect();
    LeaderEpochCache::from_entries(entries).expect("valid entries")
}

fn pairs(cache: &LeaderEpochCache) -> Vec<(i32, i64)> {
    cache.entries().iter().map(|e| (e.epoch, e.start_offset)).collect()
}

#[test]
fn assign_records_only_new_epochs() {
    let mut c = LeaderEpochCache::new();
    assert!(c.is_new_epoch(0));
    assert!(!c.is_new_epoch(-1), "no epoch is never recorded");
    assert!(c.assign(2, 10));
    assert!(!c.assign(2, 10), "same epoch, same offset");
    assert!(!c.assign(2, 15), "same epoch later in the log");
    assert!(!c.assign(2, 5), "same epoch is a no-op whatever the offset");
    assert!(!c.is_new_epoch(2) && !c.is_new_epoch(1) && c.is_new_epoch(3));
    assert!(c.assign(3, 20));
    assert_eq!(pairs(&c), vec![(2, 10), (3, 20)]);
    assert_eq!(
        (c.latest_epoch(), c.earliest_entry()),
        (Some(3), Some(EpochEntry { epoch: 2, start_offset: 10 }))
    );
}

#[test]
fn assign_removes_entries_at_or_after_the_new_start() {
    // An epoch taken at the log end with nothing written is replaced by the next one.
    let mut c = cache(&[(0, 0), (2, 10), (3, 20)]);
    assert!(c.assign(5, 20));
    assert_eq!(pairs(&c), vec![(0, 0), (2, 10), (5, 20)]);
    // A new epoch starting below existing ones drops all of them.
    assert!(c.assign(6, 10));
    assert_eq!(pairs(&c), vec![(0, 0), (6, 10)]);
    assert!(c.assign(7, 0));
    assert_eq!(pairs(&c), vec![(7, 0)]);
}

#[test]
#[should_panic(expected = "after newer epoch")]
fn epochs_never_go_back() {
    let mut c = cache(&[(4, 0)]);
    c.assign(3, 10);
}

#[test]
fn end_offset_for_every_case() {
    let c = cache(&[(0, 0), (2, 10), (5, 30)]);
    let leo = 42;
    assert_eq!(c.end_offset_for(5, leo), Some((5, 42)), "latest: the log end");
    assert_eq!(c.end_offset_for(2, leo), Some((2, 30)), "known epoch: next epoch's start");
    assert_eq!(c.end_offset_for(0, leo), Some((0, 10)));
    assert_eq!(c.end_offset_for(1, leo), Some((0, 10)), "unknown epoch: the one before it");
    assert_eq!(c.end_offset_for(3, leo), Some((2, 30)));
    assert_eq!(c.end_offset_for(4, leo), Some((2, 30)));
    assert_eq!(c.end_offset_for(6, leo), None, "newer than the latest");
    assert_eq!(c.end_offset_for(UNDEFINED_EPOCH, leo), None);

    // Older than every entry (retention took the older epochs): Kafka answers with the
    // requested epoch and the earliest start.
    let c = cache(&[(3, 100), (4, 150)]);
    assert_eq!(c.end_offset_for(1, 200), Some((1, 100)));
    assert_eq!(c.end_offset_for(4, 200), Some((4, 200)));
    assert_eq!(LeaderEpochCache::new().end_offset_for(0, 7), None, "no entries");
}

#[test]
fn epoch_for_offset() {
    let c = cache(&[(1, 5), (3, 10)]);
    assert_eq!(c.epoch_for_offset(4), None);
    assert_eq!(c.epoch_for_offset(5), Some(1));
    assert_eq!(c.epoch_for_offset(9), Some(1));
    assert_eq!(c.epoch_for_offset(10), Some(3));
    assert_eq!(c.epoch_for_offset(1_000), Some(3));
}

#[test]
fn truncate_from_end_removes_epochs_starting_at_or_after_it() {
    let mut c = cache(&[(0, 0), (2, 10), (5, 30)]);
    assert!(!c.truncate_from_end(31), "nothing starts at or after 31");
    assert!(!c.truncate_from_end(-1), "Kafka ignores negative ends");
    assert!(c.truncate_from_end(30));
    assert_eq!(pairs(&c), vec![(0, 0), (2, 10)]);
    assert!(c.truncate_from_end(5));
    assert_eq!(pairs(&c), vec![(0, 0)]);
    assert!(c.truncate_from_end(0));
    assert!(pairs(&c).is_empty());
}

#[test]
fn truncate_from_start_moves_the_covering_epoch_up() {
    let mut c = cache(&[(0, 0), (2, 10), (5, 30)]);
    assert!(!c.truncate_from_start(0), "already starts there");
    assert!(c.truncate_from_start(4));
    assert_eq!(pairs(&c), vec![(0, 4), (2, 10), (5, 30)]);
    assert!(c.truncate_from_start(10), "an entry at exactly the start is kept");
    assert_eq!(pairs(&c), vec![(2, 10), (5, 30)]);
    assert!(c.truncate_from_start(35));
    assert_eq!(pairs(&c), vec![(5, 35)]);
    assert!(!c.truncate_from_start(35));
    let mut c = cache(&[(3, 100)]);
    assert!(!c.truncate_from_start(50), "nothing below the earliest start");
    assert_eq!(pairs(&c), vec![(3, 100)]);
    assert!(c.clear() && !c.clear());
}

#[test]
fn checkpoint_format_is_kafkas_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE);
    checkpoint::write(dir.path(), &cache(&[(0, 0), (3, 120)])).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"0\n2\n0 0\n3 120\n");
    assert_eq!(pairs(&checkpoint::read(dir.path()).unwrap()), vec![(0, 0), (3, 120)]);
    checkpoint::write(dir.path(), &LeaderEpochCache::new()).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"0\n0\n");
    assert!(checkpoint::read(dir.path()).unwrap().entries().is_empty());
    assert!(!dir.path().join(format!("{LEADER_EPOCH_CHECKPOINT_FILE}.tmp")).exists());
}

#[test]
fn unusable_checkpoints_are_reported_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(checkpoint::read(dir.path()), Err(UnusableCheckpoint::Missing));
    let path = dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE);
    for bad in [
        "",
        "1\n0\n",
        "0\n",
        "0\nx\n",
        "0\n2\n0 0\n",
        "0\n1\n0 0\n3 120\n",
        "0\n1\n0\n",
        "0\n1\n0 0 0\n",
        "0\n1\nzero 0\n",
        "0\n2\n3 0\n2 10\n",
        "0\n2\n2 10\n3 10\n",
        "0\n1\n-1 0\n",
        "0\n999999999\n0 0\n",
        "0\n2\n0 0\n3 1",
    ] {
        std::fs::write(&path, bad).unwrap();
        assert!(matches!(checkpoint::read(dir.path()), Err(UnusableCheckpoint::Corrupt(_))), "{bad:?}");
    }
    // Whitespace Kafka's reader also splits on, and a Windows line end.
    std::fs::write(&path, "0\r\n2\r\n0  0\r\n3\t120\r\n").unwrap();
    assert_eq!(pairs(&checkpoint::read(dir.path()).unwrap()), vec![(0, 0), (3, 120)]);
}
