//! The leader epoch cache in the log (KIP-101, KIP-279): leader and follower appends
//! record new epochs, a new leader's epoch is taken at the log end, OffsetForLeaderEpoch
//! answers, and `leader-epoch-checkpoint` stays exactly Kafka's file and consistent with
//! the log through truncation, retention, DeleteRecords, compaction, clean and unclean
//! restarts, torn tails, and a missing or corrupt checkpoint (rebuilt from the batch
//! headers).

mod common;

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use common::*;
use strata_protocol::records::{NewRecord, RecordBatchBuilder};
use strata_storage::{Cleaner, CleanerConfig, Log, LogConfig, StorageError};

const TOPIC: &str = "epochs";

fn open(root: &Path, clean: bool) -> Log {
    Log::open(root, TOPIC, 0, small_config(), clean, 0).expect("open")
}

fn part_dir(root: &Path) -> PathBuf {
    root.join(format!("{TOPIC}-0"))
}

fn checkpoint(root: &Path) -> String {
    std::fs::read_to_string(part_dir(root).join("leader-epoch-checkpoint")).expect("read checkpoint")
}

/// Appends `n` records as leader in `epoch`; returns the first offset.
fn append(log: &Log, epoch: i32, n: usize) -> i64 {
    log.append(batch("r", n, 1_000), epoch, 1_000).expect("append").first_offset
}

/// A replicated batch: `n` records at `base`, stamped with `epoch`.
fn replicated(base: i64, epoch: i32, n: usize) -> Bytes {
    let mut b = RecordBatchBuilder::new(base).partition_leader_epoch(epoch);
    for i in 0..n {
        b.append(&NewRecord::new(1_000, None, Some(Bytes::from(format!("v{i}"))))).unwrap();
    }
    b.build().unwrap()
}

/// Epochs 0, 0, 2, 5 in batches of 3: entries (0, 0), (2, 6), (5, 9), log end 12.
fn leader_log(root: &Path) -> Log {
    let log = open(root, true);
    for epoch in [0, 0, 2, 5] {
        append(&log, epoch, 3);
    }
    assert_eq!(log.log_end_offset(), 12);
    log
}

#[test]
fn leader_appends_record_new_epochs_and_answer_offset_for_leader_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let log = leader_log(dir.path());
    assert_eq!(log.leader_epoch_entries(), vec![(0, 0), (2, 6), (5, 9)]);
    assert_eq!(checkpoint(dir.path()), "0\n3\n0 0\n2 6\n5 9\n");
    assert_eq!(log.latest_epoch(), Some(5));
    let answers: Vec<_> = [0, 1, 2, 3, 5, 6].iter().map(|&e| log.end_offset_for_epoch(e)).collect();
    assert_eq!(answers, vec![Some((0, 6)), Some((0, 6)), Some((2, 9)), Some((2, 9)), Some((5, 12)), None]);
    assert_eq!(log.end_offset_for_epoch(-1), None);
    assert_eq!(
        (log.epoch_for_offset(5), log.epoch_for_offset(6), log.epoch_for_offset(11)),
        (Some(0), Some(2), Some(5))
    );
    // Every batch carries its epoch.
    let read = log.read(0, 1 << 20, i64::MAX, true).unwrap();
    let stamped: Vec<i32> = batches_of(&read).iter().map(|b| b.partition_leader_epoch()).collect();
    assert_eq!(stamped, vec![0, 0, 2, 5]);

    // A replaced leader's append is refused and writes nothing.
    let stale = log.append(batch("old", 1, 1_000), 4, 1_000);
    assert!(matches!(stale, Err(StorageError::StaleLeaderEpoch { epoch: 4, latest_epoch: 5 })), "{stale:?}");
    assert_eq!(log.log_end_offset(), 12);
    // A log without epochs answers nothing.
    let other = Log::open(dir.path(), "empty", 0, small_config(), true, 0).unwrap();
    assert_eq!((other.latest_epoch(), other.end_offset_for_epoch(0)), (None, None));
}

#[test]
fn a_new_leader_takes_its_epoch_at_the_log_end() {
    let dir = tempfile::tempdir().unwrap();
    let log = leader_log(dir.path());
    log.assign_epoch_start_offset(7, 12).unwrap();
    assert_eq!(log.latest_epoch(), Some(7));
    assert_eq!(log.end_offset_for_epoch(5), Some((5, 12)), "epoch 5 ended where the new leader's log did");
    assert_eq!(checkpoint(dir.path()), "0\n4\n0 0\n2 6\n5 9\n7 12\n");
    log.assign_epoch_start_offset(7, 12).unwrap();
    append(&log, 7, 2);
    assert_eq!(log.leader_epoch_entries(), vec![(0, 0), (2, 6), (5, 9), (7, 12)], "epoch 7 already started");

    let stale = log.assign_epoch_start_offset(6, 14);
    assert!(matches!(stale, Err(StorageError::StaleLeaderEpoch { epoch: 6, latest_epoch: 7 })));
    assert!(matches!(log.assign_epoch_start_offset(8, 15), Err(StorageError::OffsetOutOfRange { .. })));
    assert!(matches!(log.assign_epoch_start_offset(-1, 14), Err(StorageError::StaleLeaderEpoch { .. })));

    // Epoch 8 taken and nothing written, then epoch 9 taken at the same offset: 8 goes.
    log.assign_epoch_start_offset(8, 14).unwrap();
    log.assign_epoch_start_offset(9, 14).unwrap();
    assert_eq!(log.leader_epoch_entries().last(), Some(&(9, 14)));
    assert_eq!(log.end_offset_for_epoch(8), Some((7, 14)));
    // Truncating to the log end (a no-op for the data) drops an epoch nothing was
    // written in, as Kafka does when this replica becomes a follower.
    log.truncate_to(14).unwrap();
    assert_eq!(log.leader_epoch_entries(), vec![(0, 0), (2, 6), (5, 9), (7, 12)]);
    assert_eq!(checkpoint(dir.path()), "0\n4\n0 0\n2 6\n5 9\n7 12\n");
}

#[test]
fn followers_record_the_epochs_of_replicated_batches() {
    let dir = tempfile::tempdir().unwrap();
    let leader = leader_log(dir.path());
    let follower = Log::open(dir.path(), "follower", 0, small_config(), true, 0).unwrap();
    // Fetches of one and then several batches.
    for (offset, max_bytes) in [(0, 1), (3, 1 << 20)] {
        let read = leader.read(offset, max_bytes, i64::MAX, true).unwrap();
        follower.append_as_follower(read.records.read_bytes().unwrap()).unwrap();
    }
    assert_eq!(follower.leader_epoch_entries(), leader.leader_epoch_entries());
    assert_eq!(follower.end_offset_for_epoch(3), leader.end_offset_for_epoch(3));

    // Older or missing epochs record nothing; several new ones in one append, with a
    // gap in offsets, each start at their batch.
    let batches =
        concat(&[replicated(12, 4, 1), replicated(13, -1, 1), replicated(20, 6, 2), replicated(22, 8, 1)]);
    follower.append_as_follower(batches).unwrap();
    assert_eq!(follower.leader_epoch_entries(), vec![(0, 0), (2, 6), (5, 9), (6, 20), (8, 22)]);
    assert_eq!(follower.latest_epoch(), Some(8));
    let dir_text = std::fs::read_to_string(dir.path().join("follower-0/leader-epoch-checkpoint")).unwrap();
    assert_eq!(dir_text, "0\n5\n0 0\n2 6\n5 9\n6 20\n8 22\n");
}

#[test]
fn truncation_removes_later_epochs_on_disk_too() {
    let dir = tempfile::tempdir().unwrap();
    let log = leader_log(dir.path());
    log.truncate_to(9).unwrap();
    assert_eq!(log.leader_epoch_entries(), vec![(0, 0), (2, 6)]);
    assert_eq!(checkpoint(dir.path()), "0\n2\n0 0\n2 6\n");
    assert_eq!(log.end_offset_for_epoch(2), Some((2, 9)));
    // A cut inside the epoch-2 batch removes the whole batch and its epoch.
    log.truncate_to(7).unwrap();
    assert_eq!((log.log_end_offset(), log.leader_epoch_entries()), (6, vec![(0, 0)]));
    assert_eq!(checkpoint(dir.path()), "0\n1\n0 0\n");
    // The follower now gets the new leader's epoch 3 at 6.
    log.append_as_follower(replicated(6, 3, 2)).unwrap();
    assert_eq!(log.leader_epoch_entries(), vec![(0, 0), (3, 6)]);
    // Below the log start: the log restarts empty, without epochs.
    log.delete_records_before(4).unwrap();
    log.truncate_to(2).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (2, 2));
    assert!(log.leader_epoch_entries().is_empty());
    assert_eq!(checkpoint(dir.path()), "0\n0\n");
}

#[test]
fn restarts_keep_the_cache_and_crashes_cut_it_to_the_log_end() {
    let dir = tempfile::tempdir().unwrap();
    let log = leader_log(dir.path());
    log.close().unwrap();
    drop(log);
    let log = open(dir.path(), true);
    assert_eq!(log.leader_epoch_entries(), vec![(0, 0), (2, 6), (5, 9)]);

    // A crash tears the batch that started epoch 9.
    append(&log, 9, 4);
    assert_eq!(checkpoint(dir.path()), "0\n4\n0 0\n2 6\n5 9\n9 12\n");
    let active = *log.segment_base_offsets().last().unwrap();
    drop(log);
    let path = part_dir(dir.path()).join(format!("{active:020}.log"));
    let len = std::fs::metadata(&path).unwrap().len();
    OpenOptions::new().write(true).open(&path).unwrap().set_len(len - 5).unwrap();
    let log = open(dir.path(), false);
    assert_eq!(log.log_end_offset(), 12);
    assert_eq!(log.leader_epoch_entries(), vec![(0, 0), (2, 6), (5, 9)]);
    assert_eq!(checkpoint(dir.path()), "0\n3\n0 0\n2 6\n5 9\n");

    // An epoch taken at the log end with nothing written does not survive a restart
    // (Kafka's load truncates the cache at the log end); the broker takes it again.
    log.assign_epoch_start_offset(10, 12).unwrap();
    log.close().unwrap();
    drop(log);
    let log = open(dir.path(), true);
    assert_eq!(log.latest_epoch(), Some(5));
}

#[test]
fn a_missing_or_corrupt_checkpoint_is_rebuilt_from_the_batch_headers() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    for (epoch, n) in [(0, 30), (3, 20), (3, 20), (4, 30)] {
        for _ in 0..n {
            append(&log, epoch, 2);
        }
    }
    assert!(log.num_segments() > 3, "epochs span segments");
    let expected = log.leader_epoch_entries();
    assert_eq!(expected, vec![(0, 0), (3, 60), (4, 140)]);
    log.delete_records_before(10).unwrap();
    let expected = vec![(0, 10), (3, 60), (4, 140)];
    assert_eq!(log.leader_epoch_entries(), expected);
    let text = checkpoint(dir.path());
    log.close().unwrap();
    drop(log);

    let file = part_dir(dir.path()).join("leader-epoch-checkpoint");
    for damage in [None, Some(&b""[..]), Some(&b"0\n3\n0 10\n3 6"[..]), Some(&b"\x00\xff garbage"[..])] {
        match damage {
            None => std::fs::remove_file(&file).unwrap(),
            Some(bytes) => std::fs::write(&file, bytes).unwrap(),
        }
        for clean in [true, false] {
            let log = open(dir.path(), clean);
            assert_eq!(log.leader_epoch_entries(), expected, "{damage:?} clean {clean}");
            assert_eq!(checkpoint(dir.path()), text, "rewritten");
            log.close().unwrap();
        }
    }
}

#[test]
fn old_data_directories_get_a_checkpoint_on_open() {
    // A log written before Strata had the cache: batches at epoch 0, no checkpoint.
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    for _ in 0..40 {
        append(&log, 0, 3);
    }
    log.close().unwrap();
    drop(log);
    std::fs::remove_file(part_dir(dir.path()).join("leader-epoch-checkpoint")).unwrap();
    let log = open(dir.path(), true);
    assert_eq!(log.leader_epoch_entries(), vec![(0, 0)]);
    assert_eq!(checkpoint(dir.path()), "0\n1\n0 0\n");
    // A brand-new log writes an empty one.
    let new = Log::open(dir.path(), "new", 0, small_config(), true, 0).unwrap();
    assert!(new.leader_epoch_entries().is_empty());
    assert_eq!(std::fs::read_to_string(dir.path().join("new-0/leader-epoch-checkpoint")).unwrap(), "0\n0\n");
}

#[test]
fn retention_and_delete_records_move_the_earliest_epoch_up() {
    let dir = tempfile::tempdir().unwrap();
    let log = leader_log(dir.path());
    log.delete_records_before(4).unwrap();
    assert_eq!(log.leader_epoch_entries(), vec![(0, 4), (2, 6), (5, 9)]);
    log.delete_records_before(7).unwrap();
    assert_eq!(log.leader_epoch_entries(), vec![(2, 7), (5, 9)]);
    assert_eq!(checkpoint(dir.path()), "0\n2\n2 7\n5 9\n");
    assert_eq!(log.end_offset_for_epoch(1), Some((1, 7)), "older than every epoch: where the log starts");

    for _ in 0..60 {
        append(&log, 6, 3);
    }
    let config = LogConfig { retention_bytes: 3_000, ..small_config() };
    log.update_config(config).unwrap();
    assert!(log.apply_retention(1_000).unwrap() > 0);
    let start = log.log_start_offset();
    assert!(start > 12);
    assert_eq!(log.leader_epoch_entries(), vec![(6, start)]);
    assert_eq!(checkpoint(dir.path()), format!("0\n1\n6 {start}\n"));
}

#[test]
fn compaction_leaves_the_cache_alone() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        cleanup_policy_compact: true,
        cleanup_policy_delete: false,
        min_cleanable_dirty_ratio: 0.0,
        ..small_config()
    };
    let log = Log::open(dir.path(), TOPIC, 0, config.clone(), true, 0).unwrap();
    for epoch in 0..6 {
        for _ in 0..8 {
            log.append(batch("k", 4, 1_000), epoch, 1_000).unwrap();
        }
    }
    log.roll().unwrap();
    let before = log.leader_epoch_entries();
    let mut cleaner =
        Cleaner::new(CleanerConfig { dedupe_buffer_bytes: 1 << 20, ..CleanerConfig::default() }).unwrap();
    let stats = cleaner.clean(&log, 10_000, i64::MAX).unwrap();
    assert!(stats.segments_cleaned > 0, "{stats:?}");
    assert_eq!(log.leader_epoch_entries(), before);
    log.close().unwrap();
    drop(log);
    // Cleaned batches keep their epochs, so even a rebuild from what the cleaner left
    // finds each remaining epoch, starting no earlier than it did.
    let log = Log::open(dir.path(), TOPIC, 0, config.clone(), true, 0).unwrap();
    assert_eq!(log.leader_epoch_entries(), before);
    log.close().unwrap();
    drop(log);
    std::fs::remove_file(part_dir(dir.path()).join("leader-epoch-checkpoint")).unwrap();
    let log = Log::open(dir.path(), TOPIC, 0, config, true, 0).unwrap();
    let rebuilt = log.leader_epoch_entries();
    assert!(!rebuilt.is_empty());
    for (epoch, start) in &rebuilt {
        let original = before.iter().find(|(e, _)| e == epoch).map(|(_, s)| *s);
        assert!(original.is_some_and(|s| s <= *start), "{rebuilt:?} vs {before:?}");
    }
}
