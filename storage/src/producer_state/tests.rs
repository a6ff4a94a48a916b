//! The validation rules of the pure core, without files or a log.

use strata_protocol::records::EndTxnMarker;

use super::*;
use crate::error::StorageError;
use crate::log::BatchInfo;

fn data(producer_id: i64, epoch: i16, first_seq: i32, records: i32, base_offset: i64) -> BatchInfo {
    BatchInfo {
        base_offset,
        last_offset: base_offset + i64::from(records) - 1,
        producer_id,
        producer_epoch: epoch,
        base_sequence: first_seq,
        last_sequence: ((i64::from(first_seq) + i64::from(records) - 1) % (1 << 31)) as i32,
        is_transactional: false,
        is_control: false,
        end_txn_marker: None,
        max_timestamp: base_offset,
        size_in_bytes: 100,
    }
}

fn txn(producer_id: i64, epoch: i16, first_seq: i32, records: i32, base_offset: i64) -> BatchInfo {
    BatchInfo { is_transactional: true, ..data(producer_id, epoch, first_seq, records, base_offset) }
}

fn marker(producer_id: i64, epoch: i16, commit: bool, coordinator_epoch: i32, offset: i64) -> BatchInfo {
    let m =
        if commit { EndTxnMarker::commit(coordinator_epoch) } else { EndTxnMarker::abort(coordinator_epoch) };
    BatchInfo {
        base_sequence: -1,
        last_sequence: -1,
        is_transactional: true,
        is_control: true,
        end_txn_marker: Some(m),
        ..data(producer_id, epoch, -1, 1, offset)
    }
}

/// Validates and applies like a log append ending at the batches' last offset.
fn append(psm: &mut ProducerStateManager, batches: &[BatchInfo], origin: Origin) -> Result<Vec<AbortedTxn>> {
    let update = psm.prepare_update(batches, origin)?;
    let end = batches.last().map_or(psm.map_end_offset(), |b| b.last_offset + 1);
    Ok(psm.apply(update, end))
}

fn manager() -> (tempfile::TempDir, ProducerStateManager) {
    let dir = tempfile::tempdir().unwrap();
    let psm = ProducerStateManager::new(dir.path()).unwrap();
    (dir, psm)
}

#[test]
fn sequences_must_follow_within_an_epoch() {
    let (_dir, mut psm) = manager();
    append(&mut psm, &[data(1, 0, 0, 3, 0)], Origin::Client).unwrap();
    append(&mut psm, &[data(1, 0, 3, 2, 3)], Origin::Client).unwrap();
    let gap = append(&mut psm, &[data(1, 0, 6, 1, 5)], Origin::Client);
    assert!(matches!(gap, Err(StorageError::OutOfOrderSequence { last_sequence: 4, first_sequence: 6, .. })));
    // Coordinator and replication appends skip sequence checks.
    append(&mut psm, &[data(1, 0, 9, 1, 5)], Origin::Replication).unwrap();
    assert_eq!(psm.active_producers()[0].last_sequence, 9);
}

#[test]
fn unknown_producer_may_start_anywhere_but_a_new_epoch_starts_at_zero() {
    let (_dir, mut psm) = manager();
    append(&mut psm, &[data(1, 4, 17, 1, 0)], Origin::Client).unwrap();
    // Same append, second batch of the same unknown producer: must follow.
    let err = psm.prepare_update(&[data(2, 0, 5, 1, 1), data(2, 0, 9, 1, 2)], Origin::Client);
    assert!(matches!(err, Err(StorageError::OutOfOrderSequence { .. })));
    let bump = append(&mut psm, &[data(1, 5, 3, 1, 1)], Origin::Client);
    assert!(matches!(bump, Err(StorageError::OutOfOrderSequence { .. })));
    append(&mut psm, &[data(1, 5, 0, 1, 1)], Origin::Client).unwrap();
    let old = append(&mut psm, &[data(1, 4, 18, 1, 2)], Origin::Client);
    assert!(matches!(old, Err(StorageError::InvalidProducerEpoch { epoch: 4, current_epoch: 5, .. })));
}

#[test]
fn wrap_around_at_i32_max() {
    let (_dir, mut psm) = manager();
    append(&mut psm, &[data(1, 0, i32::MAX - 1, 2, 0)], Origin::Client).unwrap();
    assert_eq!(psm.active_producers()[0].last_sequence, i32::MAX);
    append(&mut psm, &[data(1, 0, 0, 2, 2)], Origin::Client).unwrap();
    // A batch straddling the wrap.
    append(&mut psm, &[data(2, 0, i32::MAX, 3, 4)], Origin::Client).unwrap();
    append(&mut psm, &[data(2, 0, 2, 1, 7)], Origin::Client).unwrap();
    assert!(psm.find_duplicate(&[data(2, 0, i32::MAX, 3, 99)]).is_some());
}

#[test]
fn duplicates_of_the_last_five_batches() {
    let (_dir, mut psm) = manager();
    for i in 0..6 {
        append(&mut psm, &[data(1, 0, i * 2, 2, i64::from(i) * 2)], Origin::Client).unwrap();
    }
    for i in 1..6 {
        let dup = psm.find_duplicate(&[data(1, 0, i * 2, 2, 1000)]).expect("retained");
        assert_eq!((dup.first_offset, dup.last_offset), (i64::from(i) * 2, i64::from(i) * 2 + 1));
    }
    assert!(psm.find_duplicate(&[data(1, 0, 0, 2, 1000)]).is_none());
    assert!(psm.find_duplicate(&[data(1, 1, 10, 2, 1000)]).is_none(), "other epoch");
    assert!(psm.find_duplicate(&[data(1, 0, 10, 1, 1000)]).is_none(), "other range");
}

#[test]
fn a_transactional_batch_is_a_retry_only_of_a_batch_of_the_open_transaction() {
    let (_dir, mut psm) = manager();
    append(&mut psm, &[txn(1, 0, 0, 2, 10)], Origin::Client).unwrap();
    // A retry while the transaction is open is answered with the original.
    assert_eq!(psm.find_duplicate(&[txn(1, 0, 0, 2, 99)]).map(|d| d.first_offset), Some(10));
    append(&mut psm, &[marker(1, 0, false, 3, 12)], Origin::Coordinator).unwrap();
    // After the abort, the same range in a new transaction is not a retry: the sequence
    // check refuses it instead of answering it without writing it.
    assert!(psm.find_duplicate(&[txn(1, 0, 0, 2, 13)]).is_none());
    let reused = append(&mut psm, &[txn(1, 0, 0, 2, 13)], Origin::Client);
    assert!(matches!(reused, Err(StorageError::OutOfOrderSequence { .. })), "{reused:?}");
    // An idempotent producer's retry is answered whatever happened since.
    append(&mut psm, &[data(2, 0, 0, 2, 20)], Origin::Client).unwrap();
    assert!(psm.find_duplicate(&[data(2, 0, 0, 2, 99)]).is_some());
    // The next transaction's own retry is a retry again.
    append(&mut psm, &[txn(1, 0, 2, 1, 22)], Origin::Client).unwrap();
    assert_eq!(psm.find_duplicate(&[txn(1, 0, 2, 1, 99)]).map(|d| d.first_offset), Some(22));
}

#[test]
fn transactions_open_close_and_give_the_lso() {
    let (_dir, mut psm) = manager();
    append(&mut psm, &[txn(1, 0, 0, 2, 10)], Origin::Client).unwrap();
    append(&mut psm, &[txn(2, 0, 0, 1, 12)], Origin::Client).unwrap();
    append(&mut psm, &[txn(1, 0, 2, 1, 13)], Origin::Client).unwrap();
    assert_eq!(psm.first_undecided_offset(), Some(10));
    let nontxn = append(&mut psm, &[data(1, 0, 3, 1, 14)], Origin::Client);
    assert!(matches!(nontxn, Err(StorageError::InvalidTxnState { producer_id: 1 })));

    let aborted = append(&mut psm, &[marker(1, 0, false, 3, 14)], Origin::Coordinator).unwrap();
    assert_eq!(
        aborted,
        vec![AbortedTxn { producer_id: 1, first_offset: 10, last_offset: 14, last_stable_offset: 12 }]
    );
    assert_eq!(psm.first_undecided_offset(), Some(12));
    let fenced = append(&mut psm, &[marker(1, 0, true, 2, 15)], Origin::Coordinator);
    assert!(matches!(fenced, Err(StorageError::TransactionCoordinatorFenced { .. })));
    let stale = append(&mut psm, &[marker(2, -1, true, 3, 15)], Origin::Coordinator);
    assert!(matches!(stale, Err(StorageError::InvalidProducerEpoch { .. })));
    assert!(append(&mut psm, &[marker(2, 0, true, 3, 15)], Origin::Coordinator).unwrap().is_empty());
    assert_eq!(psm.first_undecided_offset(), None);
    let p = &psm.active_producers()[1];
    assert_eq!((p.coordinator_epoch, p.current_txn_start_offset), (3, -1));
}

#[test]
fn abort_with_epoch_bump_resets_sequences() {
    let (_dir, mut psm) = manager();
    append(&mut psm, &[txn(1, 0, 0, 2, 0)], Origin::Client).unwrap();
    let aborted = append(&mut psm, &[marker(1, 1, false, 0, 2)], Origin::Coordinator).unwrap();
    assert_eq!(aborted[0].last_stable_offset, 3);
    let p = &psm.active_producers()[0];
    assert_eq!((p.producer_epoch, p.last_sequence), (1, -1));
    assert!(append(&mut psm, &[txn(1, 1, 5, 1, 3)], Origin::Client).is_err());
    append(&mut psm, &[txn(1, 1, 0, 1, 3)], Origin::Client).unwrap();
}

#[test]
fn expiration_spares_open_transactions() {
    let (_dir, mut psm) = manager();
    append(&mut psm, &[data(1, 0, 0, 1, 0)], Origin::Client).unwrap();
    append(&mut psm, &[txn(2, 0, 0, 1, 1)], Origin::Client).unwrap();
    assert_eq!(psm.remove_expired(100, 1000), 0);
    assert_eq!(psm.remove_expired(10_000, 1000), 1);
    assert_eq!(psm.active_producers()[0].producer_id, 2);
}

#[test]
fn snapshots_round_trip_state_and_skip_corrupt_files() {
    let (dir, mut psm) = manager();
    append(&mut psm, &[data(1, 0, 0, 1, 0)], Origin::Client).unwrap();
    append(&mut psm, &[txn(2, 3, 0, 1, 1)], Origin::Client).unwrap();
    assert!(psm.take_snapshot(false).unwrap());
    assert!(!psm.take_snapshot(false).unwrap(), "nothing new");
    append(&mut psm, &[data(1, 0, 1, 1, 2)], Origin::Client).unwrap();
    assert!(psm.take_snapshot(true).unwrap());
    assert_eq!(psm.snapshot_offsets(), vec![2, 3]);
    std::fs::write(dir.path().join("00000000000000000003.snapshot"), b"garbage").unwrap();

    let mut reloaded = ProducerStateManager::new(dir.path()).unwrap();
    assert_eq!(reloaded.load_latest_snapshot(0, 100, 0, i64::MAX).unwrap(), Some(2));
    assert_eq!(reloaded.snapshot_offsets(), vec![2]);
    assert_eq!(reloaded.len(), 2);
    assert_eq!(reloaded.first_undecided_offset(), Some(1));
    assert_eq!(reloaded.map_end_offset(), 2);
    // Expired producers are left out at load.
    assert_eq!(reloaded.load_latest_snapshot(0, 100, 1_000_000, 1000).unwrap(), Some(2));
    assert_eq!(reloaded.len(), 1, "the producer with an open transaction stays");
}

#[test]
fn completed_transactions_stay_unstable_until_the_high_watermark_passes_their_markers() {
    let (_dir, mut psm) = manager();
    append(&mut psm, &[txn(1, 0, 0, 3, 0)], Origin::Client).unwrap();
    append(&mut psm, &[txn(2, 0, 0, 1, 3)], Origin::Client).unwrap();
    append(&mut psm, &[marker(1, 0, true, 0, 4)], Origin::Coordinator).unwrap();
    assert_eq!(psm.first_undecided_offset(), Some(3), "only producer 2 is open");
    assert_eq!(psm.first_unstable_offset(), Some(0), "producer 1's commit is not replicated");
    assert_eq!(psm.unreplicated_below(5), vec![(0, 4)]);
    assert!(psm.unreplicated_below(4).is_empty(), "a cut at the marker would reopen it");
    psm.on_high_watermark_updated(4);
    assert_eq!(psm.first_unstable_offset(), Some(0), "the marker itself is at the high watermark");
    psm.on_high_watermark_updated(5);
    assert_eq!(psm.first_unstable_offset(), Some(3));
    append(&mut psm, &[marker(2, 0, false, 0, 5)], Origin::Coordinator).unwrap();
    assert_eq!(psm.first_unstable_offset(), Some(3));
    psm.restore_unreplicated(vec![(0, 4)]);
    assert_eq!(psm.first_unstable_offset(), Some(0));
    psm.reset_to(6);
    assert_eq!(psm.first_unstable_offset(), None);
}
