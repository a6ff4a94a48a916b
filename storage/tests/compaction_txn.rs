//! Log compaction and transactions, as Kafka's cleaner does them: batches of aborted
//! transactions go; committed transactional records are compacted like any others (and
//! supersede older values); a COMMIT/ABORT marker stays while data of its transaction
//! is left, then gets a delete horizon and goes once it has passed; the transaction
//! index keeps exactly the aborts whose markers stay. A `compact` topic written by
//! transactional producers (`__consumer_offsets` under exactly-once) stays bounded.

mod compaction_support;

use compaction_support::*;
use strata_protocol::records::RecordBatch;
use strata_storage::{AppendOrigin, CleanOutcome, CleanStats, Log};

const PID: i64 = 9;

/// A transaction and its marker, replicated at once (the high watermark follows the log
/// end, as on a single-node broker), so the cleaner may clean up to the marker.
fn txn(log: &Log, seq: i32, records: &[(&str, Option<&str>)], commit: bool) {
    log.append(producer_batch(PID, 0, seq, records, true), 0, 100).unwrap();
    log.append_with_origin(marker(PID, 0, commit), 0, AppendOrigin::Coordinator, 100).unwrap();
    log.update_high_watermark(log.log_end_offset()).unwrap();
}

fn control_batches(log: &Log) -> Vec<RecordBatch> {
    all_batches(log).into_iter().filter(RecordBatch::is_control).collect()
}

/// Writes more churn (so there is something dirty), rolls, and cleans at `now`.
fn dirty_and_clean(log: &Log, model: &mut Vec<Rec>, now: i64) -> CleanStats {
    churn(log, model, 10, 3, 100);
    log.roll().unwrap();
    let stats = cleaner().clean(log, now, i64::MAX).unwrap();
    assert_eq!(stats.outcome, CleanOutcome::Cleaned);
    stats
}

fn values(log: &Log) -> Vec<(String, Option<String>)> {
    read_all(log).into_iter().map(|(_, k, v)| (k, v)).collect()
}

#[test]
fn aborted_data_goes_committed_data_compacts_and_markers_follow_their_data() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config(), true);
    let mut model = Vec::new();
    put(&log, &mut model, &[("k", Some("before"))], 100);
    txn(&log, 0, &[("k", Some("aborted")), ("only-aborted", Some("x"))], false);
    txn(&log, 2, &[("k", Some("committed"))], true);
    let aborted_before = log.aborted_transactions(0, i64::MAX).unwrap();
    assert_eq!(aborted_before.len(), 1);

    // Pass 1: the aborted data goes, the committed value supersedes the older one; both
    // markers stay (their data was read in this cleaning), and so does the abort entry.
    let stats = dirty_and_clean(&log, &mut model, 100);
    assert_eq!(stats.aborted_batches_removed, 1);
    let kv = values(&log);
    assert!(!kv.iter().any(|(k, _)| k == "only-aborted"), "aborted data removed: {kv:?}");
    let k: Vec<_> = kv.iter().filter(|(k, _)| k == "k").collect();
    assert_eq!(k, [&("k".to_string(), Some("committed".to_string()))]);
    assert_eq!(control_batches(&log).len(), 2);
    assert_eq!(log.aborted_transactions(0, i64::MAX).unwrap(), aborted_before);

    // Pass 2: the ABORT marker's data is gone: it gets a delete horizon (now + 1 s) and
    // leaves the transaction index; the COMMIT marker still has its data.
    dirty_and_clean(&log, &mut model, 200);
    let markers = control_batches(&log);
    assert_eq!(markers.len(), 2);
    assert!(markers[0].has_delete_horizon() && markers[0].base_timestamp() == 1_200, "abort marker stamped");
    assert!(!markers[1].has_delete_horizon(), "commit marker of live data untouched");
    assert!(log.aborted_transactions(0, i64::MAX).unwrap().is_empty(), "abort entry gone with its data");

    // Pass 3, before the horizon: nothing changes for the markers; after it, the ABORT
    // marker goes.
    let stats = dirty_and_clean(&log, &mut model, 1_199);
    assert_eq!((stats.markers_removed, control_batches(&log).len()), (0, 2));
    let stats = dirty_and_clean(&log, &mut model, 1_200);
    assert_eq!(stats.markers_removed, 1);
    assert_eq!(control_batches(&log).len(), 1);

    // A later transaction of the producer makes its batch the producer's last; a plain
    // write supersedes "committed": the first COMMIT marker's data is gone, so it is
    // stamped, then removed after its horizon. The last transaction's marker stays.
    txn(&log, 3, &[("other", Some("last-txn"))], true);
    put(&log, &mut model, &[("k", Some("after"))], 100);
    dirty_and_clean(&log, &mut model, 2_000);
    dirty_and_clean(&log, &mut model, 2_000);
    let stats = dirty_and_clean(&log, &mut model, 3_000);
    assert_eq!(stats.markers_removed, 1);
    let markers = control_batches(&log);
    assert_eq!(markers.len(), 1);
    assert!(markers[0].base_offset() > 10, "the last transaction's marker is the one left");

    // The non-transactional records are exactly the model's latest values, and the
    // transactional ones are the last transaction's.
    let kv = values(&log);
    assert!(kv.contains(&("other".to_string(), Some("last-txn".to_string()))));
    assert!(kv.contains(&("k".to_string(), Some("after".to_string()))));
    assert!(!kv.iter().any(|(_, v)| v.as_deref() == Some("committed") || v.as_deref() == Some("aborted")));

    // Recovery after a crash rebuilds the same log and producer state.
    drop(log);
    let log = open(dir.path(), compact_config(), false);
    assert_eq!(values(&log), kv);
    let p = log.active_producers().into_iter().find(|p| p.producer_id == PID).expect("producer known");
    assert_eq!(p.last_sequence, 3);
    assert!(log.aborted_transactions(0, i64::MAX).unwrap().is_empty());
}

#[test]
fn a_compacted_topic_written_in_transactions_stays_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config(), true);
    let mut model = Vec::new();
    let mut cleaner = cleaner();
    // 400 transactions over 4 keys, every 5th aborted: like a sink committing its
    // offsets in a transaction at every checkpoint.
    for i in 0..400 {
        let value = format!("v{i}");
        let key = format!("t{}", i % 4);
        txn(&log, i, &[(key.as_str(), Some(value.as_str()))], i % 5 != 4);
        if i % 50 == 49 {
            log.roll().unwrap();
            cleaner.clean(&log, 100 + i64::from(i) * 100, i64::MAX).unwrap();
        }
    }
    put(&log, &mut model, &[("end", Some("x"))], 100);
    log.roll().unwrap();
    // A marker goes three cleanings after its data: the one that removes the data keeps
    // it, the next stamps its horizon, the first after the horizon removes it.
    for now in [100_000, 200_000, 300_000, 400_000, 500_000] {
        cleaner.clean(&log, now, i64::MAX).unwrap();
        churn(&log, &mut model, 1, 1, 100);
        log.roll().unwrap();
    }
    let batches = all_batches(&log);
    let markers = batches.iter().filter(|b| b.is_control()).count();
    let txn_data = batches.iter().filter(|b| b.is_transactional() && !b.is_control()).count();
    // Left: the latest committed value of each key and their markers, plus the
    // producer's last batch (an aborted one, kept empty for its sequence, as Kafka
    // does) and its ABORT marker, which stays while that batch does.
    assert!(txn_data <= 5, "{txn_data} transactional batches left of 400");
    assert!(markers <= 5, "{markers} markers left of 400");
    let kv = values(&log);
    for k in 0..4 {
        let latest_committed = (0..400).rev().find(|i| i % 4 == k && i % 5 != 4).unwrap();
        let got: Vec<_> = kv.iter().filter(|(key, _)| *key == format!("t{k}")).collect();
        assert_eq!(got, [&(format!("t{k}"), Some(format!("v{latest_committed}")))]);
    }
    assert!(log.aborted_transactions(0, i64::MAX).unwrap().len() <= 1);
}

#[test]
fn passed_delete_horizons_bring_the_cleaner_back_without_new_writes() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config(), true);
    let mut model = Vec::new();
    txn(&log, 0, &[("k", Some("aborted"))], false);
    txn(&log, 1, &[("k", Some("committed"))], true);
    put(&log, &mut model, &[("k", Some("after"))], 100);
    // Removes the transactions' data (their markers stay: the data was read), then
    // stamps the markers' horizons (now + 1 s).
    dirty_and_clean(&log, &mut model, 100);
    dirty_and_clean(&log, &mut model, 200);
    assert_eq!(control_batches(&log).len(), 2);

    // No more writes: nothing is dirty, but the horizons bring the cleaner back.
    let mut cleaner = cleaner();
    let mut removed = 0;
    for now in (1_000..=1_300).step_by(50) {
        let stats = cleaner.clean(&log, now, i64::MAX).unwrap();
        let info = stats.info.unwrap();
        assert_eq!(info.dirty_bytes, 0);
        if stats.outcome == CleanOutcome::Cleaned {
            assert!(info.delete_horizon_passed && now >= 1_100, "cleaned at {now} before any horizon");
        }
        removed += stats.markers_removed;
    }
    // The ABORT marker goes; the COMMIT marker stays with the producer's last batch,
    // kept empty for its sequence (as Kafka keeps it).
    assert_eq!(removed, 1);
    let left = control_batches(&log);
    assert_eq!(left.len(), 1);
    assert!(strata_protocol::records::EndTxnMarker::from_batch(&left[0]).unwrap().unwrap().is_commit());
    assert_eq!(
        cleaner.clean(&log, 10_000, i64::MAX).unwrap().outcome,
        CleanOutcome::NotDue,
        "no horizon left"
    );
    let data: Vec<RecordBatch> = all_batches(&log).into_iter().filter(|b| !b.is_control()).collect();
    assert_eq!(records(&data), latest(&model, false));
}

#[test]
fn a_cleaning_that_drops_a_transactions_data_comes_back_for_its_marker() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config(), true);
    let mut model = Vec::new();
    // The first transaction's data goes entirely (aborted, and not the producer's last
    // batch); the second's stays (the latest value of its key).
    txn(&log, 0, &[("a", Some("aborted"))], false);
    txn(&log, 1, &[("b", Some("committed"))], true);
    dirty_and_clean(&log, &mut model, 100);
    assert_eq!(control_batches(&log).len(), 2, "the markers stay: their data was read");

    // Nothing new is written, yet the cleaner is due again to stamp the first marker...
    let mut cleaner = cleaner();
    let stats = cleaner.clean(&log, 150, i64::MAX).unwrap();
    assert_eq!(stats.outcome, CleanOutcome::Cleaned, "{:?}", stats.info);
    assert_eq!(stats.info.unwrap().dirty_bytes, 0);
    // ... and, once its horizon passed, to remove it; the COMMIT marker of data that
    // stays stays.
    let mut removed = 0;
    for now in (200..=5_000).step_by(100) {
        removed += cleaner.clean(&log, now, i64::MAX).unwrap().markers_removed;
    }
    assert_eq!(removed, 1);
    let left = control_batches(&log);
    assert_eq!(left.len(), 1);
    assert!(strata_protocol::records::EndTxnMarker::from_batch(&left[0]).unwrap().unwrap().is_commit());
}
