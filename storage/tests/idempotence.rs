//! Idempotent producers: retries of any of a producer's last 5 batches are answered with
//! the original offsets and never stored twice, sequence gaps and stale epochs are
//! refused, and this state survives clean restarts, crashes (snapshot + replay),
//! truncation and expiry.

mod common;

use std::path::Path;

use bytes::Bytes;
use common::*;
use strata_protocol::records::{RecordBatch, TimestampType};
use strata_storage::{ActiveProducer, Log, LogConfig, StorageError};

const TOPIC: &str = "idem";

fn open_with(root: &Path, config: LogConfig, clean: bool) -> Log {
    Log::open(root, TOPIC, 0, config, clean, 2_000).expect("open log")
}

fn open(root: &Path, clean: bool) -> Log {
    open_with(root, small_config(), clean)
}

fn part_dir(root: &Path) -> std::path::PathBuf {
    root.join(format!("{TOPIC}-0"))
}

/// One appended producer batch: its bytes and where it went.
#[derive(Debug, Clone)]
struct Sent {
    bytes: Bytes,
    first_offset: i64,
    last_offset: i64,
}

fn send(log: &Log, bytes: Bytes) -> Sent {
    let info = log.append(bytes.clone(), 0, 2_000).expect("append");
    assert!(!info.duplicate, "fresh batch taken for a duplicate");
    Sent { bytes, first_offset: info.first_offset, last_offset: info.last_offset }
}

/// Retries of each of `sent`'s last five batches come back as duplicates with their
/// original offsets; the one before is out of order. Nothing is written.
fn assert_dedup_window(log: &Log, sent: &[Sent]) {
    let leo = log.log_end_offset();
    let size = log.size_in_bytes();
    let window = &sent[sent.len().saturating_sub(5)..];
    for s in window {
        let info = log.append(s.bytes.clone(), 0, 3_000).expect("retry");
        assert!(info.duplicate, "retry of batch at {} not recognised", s.first_offset);
        assert_eq!((info.first_offset, info.last_offset), (s.first_offset, s.last_offset));
        assert!(info.batches.is_empty());
        assert_eq!(info.valid_bytes, 0);
    }
    if sent.len() > 5 {
        let sixth = &sent[sent.len() - 6];
        assert!(
            matches!(log.append(sixth.bytes.clone(), 0, 3_000), Err(StorageError::OutOfOrderSequence { .. })),
            "the sixth-oldest batch is out of the window"
        );
    }
    assert_eq!((log.log_end_offset(), log.size_in_bytes()), (leo, size), "a retry wrote something");
}

#[test]
fn retries_of_the_last_five_batches_get_their_original_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    log.append(batch("plain", 3, 1_000), 0, 2_000).unwrap();
    let sent: Vec<Sent> = (0..6).map(|i| send(&log, idempotent(7, 0, i * 2, 2))).collect();
    assert_eq!(sent[0].first_offset, 3);
    let records = read_all(&log).len();
    assert_dedup_window(&log, &sent);
    assert_eq!(read_all(&log).len(), records, "duplicates stored");

    // The stream goes on where it was.
    let next = send(&log, idempotent(7, 0, 12, 1));
    assert_eq!(next.first_offset, sent[5].last_offset + 1);
    // A retry of part of a batch is not a duplicate: its range does not match.
    assert!(matches!(
        log.append(idempotent(7, 0, 10, 1), 0, 2_000),
        Err(StorageError::OutOfOrderSequence { first_sequence: 10, last_sequence: 12, .. })
    ));
}

#[test]
fn gaps_stale_epochs_and_new_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    send(&log, idempotent(1, 3, 0, 2));
    let leo = log.log_end_offset();
    assert!(matches!(
        log.append(idempotent(1, 3, 3, 1), 0, 2_000),
        Err(StorageError::OutOfOrderSequence {
            producer_id: 1,
            epoch: 3,
            first_sequence: 3,
            last_sequence: 1
        })
    ));
    assert!(matches!(
        log.append(idempotent(1, 2, 2, 1), 0, 2_000),
        Err(StorageError::InvalidProducerEpoch { producer_id: 1, epoch: 2, current_epoch: 3 })
    ));
    // A new epoch must start at sequence 0.
    assert!(matches!(
        log.append(idempotent(1, 4, 2, 1), 0, 2_000),
        Err(StorageError::OutOfOrderSequence { .. })
    ));
    assert_eq!(log.log_end_offset(), leo, "refused batches were written");
    send(&log, idempotent(1, 4, 0, 1));
    // The old epoch is now fenced, even in sequence.
    assert!(matches!(
        log.append(idempotent(1, 3, 2, 1), 0, 2_000),
        Err(StorageError::InvalidProducerEpoch { .. })
    ));
    // A producer the partition does not know may start anywhere (Kafka since KIP-360).
    send(&log, idempotent(2, 0, 500, 1));
    send(&log, idempotent(2, 0, 501, 1));
}

#[test]
fn a_multi_batch_append_is_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    let bad = concat(&[idempotent(1, 0, 0, 1), idempotent(2, 0, 0, 1), idempotent(1, 0, 5, 1)]);
    assert!(matches!(
        log.append(bad, 0, 2_000),
        Err(StorageError::OutOfOrderSequence { producer_id: 1, .. })
    ));
    assert_eq!(log.log_end_offset(), 0);
    assert!(log.active_producers().is_empty(), "state of a refused append kept");
    let info = log.append(concat(&[idempotent(1, 0, 0, 1), idempotent(1, 0, 1, 2)]), 0, 2_000).unwrap();
    assert_eq!((info.first_offset, info.last_offset, info.batches.len()), (0, 2, 2));
    // A retried request with both batches is answered by the first one found.
    let info = log.append(concat(&[idempotent(1, 0, 0, 1), idempotent(1, 0, 1, 2)]), 0, 2_000).unwrap();
    assert!(info.duplicate);
    assert_eq!(info.first_offset, 0);
}

#[test]
fn sequences_wrap_at_i32_max() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    // Sequences MAX-1, MAX, 0.
    let wrap = send(&log, idempotent(1, 0, i32::MAX - 1, 3));
    assert_eq!(log.active_producers()[0].last_sequence, 0);
    assert!(matches!(
        log.append(idempotent(1, 0, 2, 1), 0, 2_000),
        Err(StorageError::OutOfOrderSequence { .. })
    ));
    send(&log, idempotent(1, 0, 1, 1));
    assert!(log.append(wrap.bytes, 0, 2_000).unwrap().duplicate);
}

#[test]
fn duplicate_under_log_append_time_reports_the_original_time() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { message_timestamp_type: TimestampType::LogAppendTime, ..small_config() };
    let log = open_with(dir.path(), config, true);
    let b = idempotent(1, 0, 0, 1);
    assert_eq!(log.append(b.clone(), 0, 5_000).unwrap().log_append_time, 5_000);
    let retry = log.append(b, 0, 9_000).unwrap();
    assert!(retry.duplicate);
    assert_eq!(retry.log_append_time, 5_000);
}

/// Three producers interleaved over several segments.
fn fill(log: &Log) -> Vec<Vec<Sent>> {
    let mut sent = vec![Vec::new(), Vec::new(), Vec::new()];
    for i in 0..12 {
        for (p, s) in sent.iter_mut().enumerate() {
            s.push(send(log, idempotent(p as i64 + 1, 0, i * 3, 3)));
        }
        log.append(batch("filler", 2, 1_000), 0, 2_000).unwrap();
    }
    assert!(log.num_segments() >= 3, "want several segments, got {}", log.num_segments());
    sent
}

fn assert_all_windows(log: &Log, sent: &[Vec<Sent>]) {
    for s in sent {
        assert_dedup_window(log, s);
    }
    let producers = log.active_producers();
    assert_eq!(
        producers.iter().map(|p| (p.producer_id, p.last_sequence)).collect::<Vec<_>>(),
        vec![(1, 35), (2, 35), (3, 35)]
    );
}

#[test]
fn state_survives_a_clean_restart_from_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    let sent = fill(&log);
    let leo = log.log_end_offset();
    log.close().unwrap();
    drop(log);
    let snapshots = files_with_suffix(&part_dir(dir.path()), ".snapshot");
    assert!(snapshots.contains(&format!("{leo:020}.snapshot")), "no snapshot at the log end: {snapshots:?}");
    assert!(snapshots.len() <= 3, "old snapshots not pruned: {snapshots:?}");

    let log = open(dir.path(), true);
    assert_all_windows(&log, &sent);
}

#[test]
fn state_survives_a_crash_by_snapshot_and_replay() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    let sent = fill(&log);
    drop(log); // no close: like kill -9, no snapshot at the log end
    let log = open(dir.path(), false);
    assert_all_windows(&log, &sent);
    drop(log);

    // Without any snapshot the whole log is replayed.
    for name in files_with_suffix(&part_dir(dir.path()), ".snapshot") {
        std::fs::remove_file(part_dir(dir.path()).join(name)).unwrap();
    }
    let log = open(dir.path(), false);
    assert_all_windows(&log, &sent);
    log.close().unwrap();
    drop(log);

    // A corrupt snapshot is skipped (and deleted) in favour of an older one or a replay.
    for name in files_with_suffix(&part_dir(dir.path()), ".snapshot") {
        std::fs::write(part_dir(dir.path()).join(name), b"\0\x01garbage").unwrap();
    }
    let log = open(dir.path(), true);
    assert_all_windows(&log, &sent);
}

#[test]
fn truncation_rebuilds_state() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    let mut sent = Vec::new();
    for i in 0..40 {
        sent.push(send(&log, idempotent(1, 0, i, 1)));
        log.append(batch("filler", 3, 1_000), 0, 2_000).unwrap();
    }
    let segments = log.num_segments();
    assert!(segments >= 3);
    // Cut within the active segment, then back into an older one.
    for keep in [35usize, 12] {
        log.truncate_to(sent[keep].first_offset).unwrap();
        sent.truncate(keep);
        assert_eq!(log.log_end_offset(), sent[keep - 1].last_offset + 1 + 3);
        assert_dedup_window(&log, &sent);
        assert_eq!(log.active_producers()[0].last_sequence, keep as i32 - 1);
        // The removed batch is not a duplicate any more: it is appended again.
        let next = send(&log, idempotent(1, 0, keep as i32, 1));
        assert_eq!(next.first_offset, log.log_end_offset() - 1);
        log.truncate_to(next.first_offset).unwrap();
    }
    assert!(log.num_segments() < segments);
    // Truncating below the log start empties the state.
    log.delete_records_before(log.log_end_offset()).unwrap();
    log.truncate_to(0).unwrap();
    assert!(log.active_producers().is_empty());
    send(&log, idempotent(1, 0, 99, 1));
}

#[test]
fn idle_producers_expire_but_not_with_an_open_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { producer_id_expiration_ms: 1_000, ..small_config() };
    let log = open_with(dir.path(), config.clone(), true);
    send(&log, idempotent(1, 0, 0, 1)); // timestamp 1000
    send(&log, transactional(2, 0, 0, 1));
    assert_eq!(log.remove_expired_producers(1_500).unwrap(), 0);
    assert_eq!(log.remove_expired_producers(2_000).unwrap(), 1);
    assert_eq!(log.active_producers().iter().map(|p| p.producer_id).collect::<Vec<_>>(), vec![2]);
    // Forgotten: the next batch is accepted at any sequence.
    send(&log, idempotent(1, 0, 7, 1));
    log.close().unwrap();
    drop(log);
    // Producers already expired when the log opens (at 2000) are not loaded back.
    let log = open_with(dir.path(), config, true);
    assert_eq!(log.active_producers().iter().map(|p| p.producer_id).collect::<Vec<_>>(), vec![2]);
}

#[test]
fn active_producers_describe_the_state() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    send(&log, idempotent(5, 2, 0, 4));
    let first = send(&log, transactional(9, 1, 0, 1)).first_offset;
    end_txn(&log, 9, 1, true);
    send(&log, transactional(9, 1, 1, 2));
    assert_eq!(
        log.active_producers(),
        vec![
            ActiveProducer {
                producer_id: 5,
                producer_epoch: 2,
                last_sequence: 3,
                last_timestamp: 1_000,
                coordinator_epoch: -1,
                current_txn_start_offset: -1,
            },
            ActiveProducer {
                producer_id: 9,
                producer_epoch: 1,
                last_sequence: 2,
                last_timestamp: 1_000,
                coordinator_epoch: 0,
                current_txn_start_offset: first + 2,
            },
        ]
    );
}

#[test]
fn follower_appends_keep_the_state_a_new_leader_needs() {
    let dir = tempfile::tempdir().unwrap();
    let leader = open(dir.path(), true);
    let follower = Log::open(dir.path(), "follower", 0, small_config(), true, 0).unwrap();
    let sent: Vec<Sent> = (0..7).map(|i| send(&leader, idempotent(3, 0, i, 1))).collect();
    let mut offset = 0;
    while offset < leader.log_end_offset() {
        let read = leader.read(offset, 1 << 20, i64::MAX, true).unwrap();
        let bytes = read.records.read_bytes().unwrap();
        let batches = batches_of(&read);
        offset = batches.last().map(RecordBatch::next_offset).unwrap();
        follower.append_as_follower(bytes).unwrap();
    }
    // The follower becomes leader: the producer's retries are still recognised.
    assert_dedup_window(&follower, &sent);
}
