//! Transactions in the log: open transactions hold the last stable offset, COMMIT and
//! ABORT markers release it, aborted transactions are listed from the `.txnindex` files
//! across segments, and all of it survives restarts, crashes, torn and corrupt indexes,
//! truncation, retention and replication.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_protocol::records::RecordBatch;
use strata_storage::{AbortedTxn, AppendOrigin, Log, LogConfig, StorageError};

const TOPIC: &str = "txn";

/// Opens the log as a single-node broker does: its high watermark is its log end, which
/// the broker tells the log right after opening it.
fn open(root: &Path, clean: bool) -> Log {
    let log = Log::open(root, TOPIC, 0, small_config(), clean, 2_000).expect("open log");
    log.update_high_watermark(log.log_end_offset()).expect("update high watermark");
    log
}

fn part_dir(root: &Path) -> PathBuf {
    root.join(format!("{TOPIC}-0"))
}

fn append(log: &Log, bytes: Bytes) -> i64 {
    log.append(bytes, 0, 2_000).expect("append").first_offset
}

/// A coordinator append on a single-node broker: the high watermark follows.
fn coordinator(log: &Log, bytes: Bytes) -> Result<i64, StorageError> {
    let offset = log.append_with_origin(bytes, 0, AppendOrigin::Coordinator, 2_000)?.first_offset;
    log.update_high_watermark(log.log_end_offset())?;
    Ok(offset)
}

fn aborted(log: &Log, from: i64, upper: i64) -> Vec<(i64, i64, i64)> {
    let txns = log.aborted_transactions(from, upper).expect("aborted transactions");
    txns.iter().map(|t| (t.producer_id, t.first_offset, t.last_offset)).collect()
}

#[test]
fn the_lso_is_held_by_open_transactions_and_moves_on_markers() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    append(&log, batch("plain", 2, 1_000));
    assert_eq!((log.first_unstable_offset(), log.last_stable_offset()), (None, 2));

    assert_eq!(append(&log, transactional(1, 0, 0, 2)), 2);
    assert_eq!((log.first_unstable_offset(), log.last_stable_offset()), (Some(2), 2));
    append(&log, batch("plain", 1, 1_000));
    assert_eq!(append(&log, transactional(2, 0, 0, 1)), 5);
    append(&log, idempotent(3, 0, 0, 1));
    append(&log, transactional(1, 0, 2, 1));
    assert_eq!(log.last_stable_offset(), 2, "other writes do not move the LSO");

    assert_eq!(end_txn(&log, 1, 0, true).first_offset, 8);
    assert_eq!((log.first_unstable_offset(), log.last_stable_offset()), (Some(5), 5));
    assert_eq!(end_txn(&log, 2, 0, false).first_offset, 9);
    assert_eq!((log.first_unstable_offset(), log.last_stable_offset()), (None, 10));

    let txns = log.aborted_transactions(0, 10).unwrap();
    assert_eq!(
        txns,
        vec![AbortedTxn { producer_id: 2, first_offset: 5, last_offset: 9, last_stable_offset: 10 }]
    );
    assert_eq!(aborted(&log, 9, 10), vec![(2, 5, 9)]);
    assert!(aborted(&log, 10, 20).is_empty(), "marker before the range");
    assert!(aborted(&log, 0, 5).is_empty(), "transaction starts at the upper bound");
    assert_eq!(aborted(&log, 0, 6), vec![(2, 5, 9)]);

    // A marker without an open transaction (e.g. a retried WriteTxnMarkers) is appended
    // and changes nothing.
    end_txn(&log, 1, 0, false);
    assert_eq!(aborted(&log, 0, 100), vec![(2, 5, 9)]);
    assert_eq!(log.last_stable_offset(), log.log_end_offset());
}

#[test]
fn transaction_rules_are_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    append(&log, transactional(1, 2, 0, 1));
    let leo = log.log_end_offset();
    assert!(matches!(
        log.append(idempotent(1, 2, 1, 1), 0, 0),
        Err(StorageError::InvalidTxnState { producer_id: 1 })
    ));
    assert!(matches!(
        coordinator(&log, marker(1, 1, true, 0)),
        Err(StorageError::InvalidProducerEpoch { producer_id: 1, epoch: 1, current_epoch: 2 })
    ));
    assert!(matches!(log.append(marker(1, 2, true, 0), 0, 0), Err(StorageError::InvalidRecord { .. })));
    assert_eq!(log.log_end_offset(), leo);

    coordinator(&log, marker(1, 2, true, 5)).unwrap();
    append(&log, transactional(1, 2, 1, 1));
    assert!(matches!(
        coordinator(&log, marker(1, 2, false, 4)),
        Err(StorageError::TransactionCoordinatorFenced {
            coordinator_epoch: 4,
            current_coordinator_epoch: 5,
            ..
        })
    ));
    // InitProducerId fences the old epoch: the coordinator aborts with the new epoch.
    coordinator(&log, marker(1, 3, false, 5)).unwrap();
    assert!(matches!(
        log.append(transactional(1, 2, 2, 1), 0, 0),
        Err(StorageError::InvalidProducerEpoch { .. })
    ));
    assert!(matches!(
        log.append(transactional(1, 3, 1, 1), 0, 0),
        Err(StorageError::OutOfOrderSequence { .. })
    ));
    append(&log, transactional(1, 3, 0, 1));
    assert_eq!(log.first_unstable_offset(), Some(log.log_end_offset() - 1));
}

/// The transactions of a schedule: `(producer, first offset, marker offset, aborted)`
/// for completed ones, plus the open ones.
#[derive(Debug, Default, Clone)]
struct TxnModel {
    completed: Vec<(i64, i64, i64, bool)>,
    open: BTreeMap<i64, i64>,
    /// Next sequence per producer.
    seq: BTreeMap<i64, i32>,
}

impl TxnModel {
    fn expected(&self, from: i64, upper: i64) -> Vec<(i64, i64, i64)> {
        self.completed
            .iter()
            .filter(|(_, first, marker, aborted)| *aborted && *marker >= from && *first < upper)
            .map(|&(p, first, marker, _)| (p, first, marker))
            .collect()
    }

    fn first_unstable(&self) -> Option<i64> {
        self.open.values().min().copied()
    }
}

/// Four transactional producers, an idempotent one and plain batches, interleaved, with
/// transactions spanning segments.
fn run_schedule(log: &Log, seed: u64, steps: usize, model: &mut TxnModel) {
    let mut rng = StdRng::seed_from_u64(seed);
    for _ in 0..steps {
        let producer = rng.gen_range(1..=5i64);
        match rng.gen_range(0..10) {
            0..=5 if producer <= 4 => {
                let seq = model.seq.entry(producer).or_insert(0);
                let n = rng.gen_range(1..=3);
                let offset = append(log, transactional(producer, 0, *seq, n));
                *seq += n as i32;
                model.open.entry(producer).or_insert(offset);
            }
            6..=7 if producer <= 4 => {
                let commit = rng.gen_bool(0.4);
                let offset = end_txn(log, producer, 0, commit).first_offset;
                if let Some(first) = model.open.remove(&producer) {
                    model.completed.push((producer, first, offset, !commit));
                }
            }
            8 => {
                let seq = model.seq.entry(5).or_insert(0);
                append(log, idempotent(5, 0, *seq, 2));
                *seq += 2;
            }
            _ => {
                append(log, batch("plain", rng.gen_range(1..=4), 1_000));
            }
        }
    }
}

/// Every range query against the model, and the first unstable offset.
fn check(log: &Log, model: &TxnModel, ctx: &str) {
    let leo = log.log_end_offset();
    assert_eq!(log.first_unstable_offset(), model.first_unstable(), "{ctx}");
    for from in (0..=leo).step_by(3) {
        for upper in [from, from + 1, from + 7, from + 40, leo + 1] {
            assert_eq!(aborted(log, from, upper), model.expected(from, upper), "{ctx}: [{from}, {upper})");
        }
    }
}

fn txn_indexes(root: &Path) -> Vec<String> {
    files_with_suffix(&part_dir(root), ".txnindex")
}

#[test]
fn aborted_transactions_across_segments_survive_restarts_crashes_and_broken_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    let mut model = TxnModel::default();
    run_schedule(&log, 7, 400, &mut model);
    assert!(log.num_segments() >= 5, "{} segments", log.num_segments());
    assert!(model.completed.iter().filter(|t| t.3).count() >= 10, "too few aborts: {:?}", model.completed);
    assert!(model.completed.iter().any(|&(_, first, marker, aborted)| {
        let bases = log.segment_base_offsets();
        aborted && bases.iter().any(|&b| first < b && b <= marker)
    }));
    assert!(txn_indexes(dir.path()).len() >= 2);
    check(&log, &model, "live");

    log.close().unwrap();
    drop(log);
    let log = open(dir.path(), true);
    check(&log, &model, "clean restart");

    run_schedule(&log, 8, 60, &mut model);
    drop(log); // kill -9
    let log = open(dir.path(), false);
    check(&log, &model, "crash");

    // A torn entry at the end of the active segment's index.
    run_schedule(&log, 9, 60, &mut model);
    let seq = model.seq.entry(1).or_insert(0);
    let offset = append(&log, transactional(1, 0, *seq, 1));
    *seq += 1;
    let first = *model.open.entry(1).or_insert(offset);
    let marker = end_txn(&log, 1, 0, false).first_offset;
    model.open.remove(&1);
    model.completed.push((1, first, marker, true));
    let active = *log.segment_base_offsets().last().unwrap();
    drop(log);
    let active_index = part_dir(dir.path()).join(format!("{active:020}.txnindex"));
    let len = std::fs::metadata(&active_index).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&active_index).unwrap();
    f.set_len(len - 10).unwrap();
    drop(f);
    let log = open(dir.path(), false);
    check(&log, &model, "torn transaction index");

    // Garbage in an older segment's index: rebuilt from a replay, even after a clean
    // shutdown.
    let older = txn_indexes(dir.path());
    let victim = part_dir(dir.path()).join(&older[0]);
    log.close().unwrap();
    drop(log);
    std::fs::write(&victim, vec![0x7f; 50]).unwrap();
    let log = open(dir.path(), true);
    check(&log, &model, "corrupt transaction index");

    // No snapshot at all: the whole log is replayed.
    drop(log);
    for name in files_with_suffix(&part_dir(dir.path()), ".snapshot") {
        std::fs::remove_file(part_dir(dir.path()).join(name)).unwrap();
    }
    let log = open(dir.path(), false);
    check(&log, &model, "no snapshots");
}

#[test]
fn truncation_reopens_and_forgets_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    append(&log, batch("plain", 2, 1_000));
    let first = append(&log, transactional(1, 0, 0, 2));
    for _ in 0..60 {
        append(&log, batch("plain", 3, 1_000));
    }
    let abort = end_txn(&log, 1, 0, false).first_offset;
    append(&log, batch("plain", 2, 1_000));
    assert!(log.num_segments() >= 3);
    assert_eq!(aborted(&log, 0, 1_000), vec![(1, first, abort)]);

    // Cutting the marker reopens the transaction, across segments.
    log.truncate_to(abort).unwrap();
    assert_eq!(log.first_unstable_offset(), Some(first));
    assert!(aborted(&log, 0, 1_000).is_empty());
    log.close().unwrap();
    drop(log);
    let log = open(dir.path(), true);
    assert_eq!(log.first_unstable_offset(), Some(first));

    // Cutting its first batch forgets it.
    log.truncate_to(first).unwrap();
    assert_eq!(log.first_unstable_offset(), None);
    assert!(log.active_producers().is_empty());
    drop(log);
    let log = open(dir.path(), false);
    assert_eq!(log.first_unstable_offset(), None);
}

#[test]
fn retention_and_delete_records_keep_transactions_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    let a = append(&log, transactional(1, 0, 0, 1));
    for _ in 0..20 {
        append(&log, batch("plain", 3, 1_000));
    }
    end_txn(&log, 1, 0, false);
    let open_first = append(&log, transactional(2, 0, 0, 1));
    for _ in 0..40 {
        append(&log, batch("plain", 3, 1_000));
    }
    assert_eq!(aborted(&log, 0, 10_000).len(), 1);
    assert_eq!(log.first_unstable_offset(), Some(open_first));
    assert!(a < open_first);

    // DeleteRecords past the open transaction's start: the LSO stays at the log start.
    let start = open_first + 5;
    log.delete_records_before(start).unwrap();
    assert_eq!((log.first_unstable_offset(), log.last_stable_offset()), (Some(start), start));

    // Retention deletes whole segments with their transaction indexes and snapshots.
    let config = LogConfig { retention_bytes: 2_500, ..small_config() };
    log.update_config(config).unwrap();
    assert!(log.apply_retention(5_000).unwrap() > 0);
    let first_base = log.segment_base_offsets()[0];
    for name in txn_indexes(dir.path()).iter().chain(&files_with_suffix(&part_dir(dir.path()), ".snapshot")) {
        let offset: i64 = name[..20].parse().unwrap();
        assert!(offset >= first_base, "{name} outlived its segment (first base {first_base})");
    }
    assert_eq!(log.first_unstable_offset(), Some(log.log_start_offset()), "still open");
    end_txn(&log, 2, 0, true);
    assert_eq!(log.first_unstable_offset(), None);
    // The outcome survives a restart from the snapshot.
    log.close().unwrap();
    drop(log);
    let log = open(dir.path(), true);
    assert_eq!(log.first_unstable_offset(), None);
}

#[test]
fn snapshots_are_pruned_to_the_last_segments() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    let mut model = TxnModel::default();
    run_schedule(&log, 3, 300, &mut model);
    assert!(log.num_segments() >= 4);
    let snapshots = files_with_suffix(&part_dir(dir.path()), ".snapshot");
    assert!((1..=3).contains(&snapshots.len()), "{snapshots:?}");
    let bases = log.segment_base_offsets();
    let active = bases[bases.len() - 1];
    assert!(snapshots.contains(&format!("{active:020}.snapshot")), "{snapshots:?} active {active}");
    log.close().unwrap();
    let snapshots = files_with_suffix(&part_dir(dir.path()), ".snapshot");
    assert!(snapshots.len() <= 3, "{snapshots:?}");
    assert!(snapshots.contains(&format!("{:020}.snapshot", log.log_end_offset())));
}

#[test]
fn followers_rebuild_the_same_transaction_state() {
    let dir = tempfile::tempdir().unwrap();
    let leader = open(dir.path(), true);
    let follower = Log::open(dir.path(), "follower", 0, small_config(), true, 0).unwrap();
    let mut model = TxnModel::default();
    run_schedule(&leader, 11, 250, &mut model);
    let mut offset = 0;
    while offset < leader.log_end_offset() {
        let read = leader.read(offset, 700, i64::MAX, true).unwrap();
        offset = batches_of(&read).last().map(RecordBatch::next_offset).unwrap();
        follower.append_as_follower(read.records.read_bytes().unwrap()).unwrap();
        // The leader's high watermark (its log end) comes with the fetch response.
        follower.update_high_watermark(leader.log_end_offset()).unwrap();
    }
    let leo = leader.log_end_offset();
    assert_eq!(follower.first_unstable_offset(), leader.first_unstable_offset());
    assert_eq!(follower.aborted_transactions(0, leo).unwrap(), leader.aborted_transactions(0, leo).unwrap());
    assert_eq!(follower.active_producers(), leader.active_producers());
    check(&follower, &model, "follower");
}

/// A marker appended without the high watermark following (replication: the followers
/// have not fetched it yet).
fn unreplicated_marker(log: &Log, producer_id: i64, commit: bool) -> i64 {
    let info = log.append_with_origin(marker(producer_id, 0, commit, 0), 0, AppendOrigin::Coordinator, 2_000);
    info.expect("append marker").first_offset
}

#[test]
fn a_completed_transaction_is_unstable_until_the_high_watermark_passes_its_marker() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), TOPIC, 0, small_config(), true, 2_000).unwrap();
    assert_eq!(append(&log, transactional(1, 0, 0, 3)), 0);
    assert_eq!(unreplicated_marker(&log, 1, true), 3);
    // The marker is in the log but a new leader may not have it.
    assert_eq!((log.first_unstable_offset(), log.last_stable_offset()), (Some(0), 0));
    assert_eq!(log.update_high_watermark(2).unwrap(), 2);
    assert_eq!(log.first_unstable_offset(), Some(0));
    log.update_high_watermark(3).unwrap();
    assert_eq!(log.first_unstable_offset(), Some(0), "the marker itself is not below the high watermark");
    log.update_high_watermark(4).unwrap();
    assert_eq!((log.first_unstable_offset(), log.last_stable_offset()), (None, 4));
    // Out-of-range high watermarks are clamped to the log.
    assert_eq!(log.update_high_watermark(100).unwrap(), 4);
    assert_eq!(log.update_high_watermark(-5).unwrap(), 0);

    // An open transaction and an unreplicated one: the older decides.
    append(&log, transactional(2, 0, 0, 1));
    append(&log, transactional(1, 0, 3, 1));
    unreplicated_marker(&log, 2, false);
    assert_eq!(log.first_unstable_offset(), Some(4), "producer 2's abort is not replicated");
    log.update_high_watermark(log.log_end_offset()).unwrap();
    assert_eq!(log.first_unstable_offset(), Some(5), "producer 1 is still open");
    assert_eq!(aborted(&log, 0, 100), vec![(2, 4, 6)], "the abort is indexed at once");
}

#[test]
fn unreplicated_transactions_through_follower_appends_and_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let leader = Log::open(dir.path(), TOPIC, 0, small_config(), true, 2_000).unwrap();
    let follower = Log::open(dir.path(), "follower", 0, small_config(), true, 0).unwrap();
    append(&leader, transactional(1, 0, 0, 3));
    unreplicated_marker(&leader, 1, true);
    let read = leader.read(0, 1 << 20, i64::MAX, true).unwrap();
    follower.append_as_follower(read.records.read_bytes().unwrap()).unwrap();
    assert_eq!(follower.log_end_offset(), 4);
    follower.update_high_watermark(2).unwrap();
    assert_eq!(follower.first_unstable_offset(), Some(0));
    follower.update_high_watermark(4).unwrap();
    assert_eq!(follower.first_unstable_offset(), None);

    // Cutting the marker opens the transaction again, whatever the high watermark.
    follower.truncate_to(3).unwrap();
    assert_eq!((follower.log_end_offset(), follower.first_unstable_offset()), (3, Some(0)));
    assert_eq!(follower.update_high_watermark(4).unwrap(), 3, "clamped to the new log end");
    assert_eq!(follower.first_unstable_offset(), Some(0));
    // The marker comes back; the high watermark the follower knows (3) is below it.
    let read = leader.read(3, 1 << 20, i64::MAX, true).unwrap();
    follower.append_as_follower(read.records.read_bytes().unwrap()).unwrap();
    assert_eq!(follower.first_unstable_offset(), Some(0));

    // A crash: the replay sees the marker complete the transaction, and no high
    // watermark is known yet, so it is unstable until the broker reports one.
    drop(follower);
    let follower = Log::open(dir.path(), "follower", 0, small_config(), false, 0).unwrap();
    assert_eq!(follower.first_unstable_offset(), Some(0));
    follower.update_high_watermark(4).unwrap();
    assert_eq!(follower.first_unstable_offset(), None);
}

#[test]
fn truncation_keeps_unreplicated_transactions_completed_before_its_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), TOPIC, 0, small_config(), true, 2_000).unwrap();
    append(&log, transactional(1, 0, 0, 3));
    let commit = unreplicated_marker(&log, 1, true);
    log.update_high_watermark(2).unwrap();
    for _ in 0..60 {
        append(&log, batch("plain", 3, 1_000));
    }
    let bases = log.segment_base_offsets();
    assert!(bases.len() >= 3 && bases[1] > commit, "snapshots after the marker: {bases:?}");
    // Truncating into the last segment rebuilds producer state from a snapshot taken
    // after the marker; the transaction is still not replicated.
    let last_base = *bases.last().unwrap();
    log.truncate_to(last_base + 1).unwrap();
    assert_eq!(log.first_unstable_offset(), Some(0));
    log.update_high_watermark(commit + 1).unwrap();
    assert_eq!(log.first_unstable_offset(), None);
}

#[test]
fn delete_records_past_a_marker_makes_its_transaction_stable() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), TOPIC, 0, small_config(), true, 2_000).unwrap();
    append(&log, transactional(1, 0, 0, 3));
    unreplicated_marker(&log, 1, false);
    append(&log, batch("plain", 3, 1_000));
    log.delete_records_before(2).unwrap();
    assert_eq!(log.first_unstable_offset(), Some(2), "held at the log start while the marker is above it");
    log.delete_records_before(4).unwrap();
    assert_eq!(log.first_unstable_offset(), None);
    assert_eq!(log.update_high_watermark(0).unwrap(), 4, "the high watermark is at least the log start");
}
