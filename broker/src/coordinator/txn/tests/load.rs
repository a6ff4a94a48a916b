//! Loading `__transaction_state`: replay rebuilds the ids, prepared transactions resume
//! their markers under the new coordinator epoch, and work of an earlier term is never
//! applied to a later one.

use super::*;

/// Replays the harness log of `partition` into a new term at `epoch`, through the bytes.
pub(super) fn reload(h: &mut Harness, partition: i32, epoch: i32) {
    let a = h.c.begin_load(partition, epoch, h.now);
    h.run(a);
    let records: Vec<TxnRecord> =
        h.log.iter().filter(|(p, _)| *p == partition).map(|(_, r)| r.clone()).collect();
    for r in records {
        h.c.replay(partition, r.key_bytes(), r.value_bytes()).unwrap();
    }
    let a = h.c.complete_load(partition, h.now);
    h.run(a);
}

#[test]
fn replay_rebuilds_every_id() {
    let mut h = Harness::new();
    let a = h.init("a");
    h.add("a", a, &[("t", 0), ("u", 2)]);
    let b = h.init("b");
    h.add("b", b, &[("t", 1)]);
    assert_eq!(h.end("b", b, true), 0);
    h.init("c");
    // Value version 0 has no field for the previous producer id: it is -1 after loading.
    let summary =
        |h: &Harness, id: &str| TxnSummary { previous_producer_id: -1, ..h.c.transaction(id).unwrap() };
    let before: Vec<_> = ["a", "b", "c"].iter().map(|id| summary(&h, id)).collect();
    for p in 0..4 {
        reload(&mut h, p, COORDINATOR_EPOCH + 1);
    }
    let after: Vec<_> = ["a", "b", "c"].iter().map(|id| h.c.transaction(id).unwrap()).collect();
    assert_eq!(before, after);
    // The loaded ids are served: "a" commits under the new term.
    assert_eq!(h.end("a", a, true), 0);
    assert_eq!(h.markers.last().unwrap().coordinator_epoch, COORDINATOR_EPOCH + 1);
}

#[test]
fn prepared_transactions_resume_their_markers_after_loading() {
    let mut h = Harness::new();
    let ids = h.init("a");
    h.add("a", ids, &[("t", 0), ("t", 1)]);
    h.auto_markers = false;
    assert_eq!(h.end("a", ids, true), 0);
    // The first marker is written, then the coordinator moves before the rest.
    h.complete_markers(|p| if p.partition == 0 { ErrorCode::None } else { ErrorCode::RequestTimedOut });
    let partition = h.c.partition_for("a");
    h.c.unload(partition, h.now);
    h.advance(1_000);
    assert!(h.held_markers.is_empty(), "no retry after unloading");
    let new_epoch = COORDINATOR_EPOCH + 3;
    reload(&mut h, partition, new_epoch);
    assert_eq!(h.state("a"), TxnState::PrepareCommit);
    // Every partition of the PREPARE_COMMIT record gets its marker again (markers are
    // idempotent at the leaders), carrying the new coordinator epoch.
    let m = h.held_markers.front().cloned().unwrap();
    assert_eq!((m.result, m.coordinator_epoch), (TransactionResult::Commit, new_epoch));
    assert_eq!(m.partitions, vec![tp("t", 0), tp("t", 1)]);
    // EndTxn retried by the client against the new coordinator.
    assert_eq!(h.end("a", ids, true), code(ErrorCode::ConcurrentTransactions));
    h.complete_markers(|_| ErrorCode::None);
    assert_eq!(h.state("a"), TxnState::CompleteCommit);
    assert_eq!(h.end("a", ids, true), 0);
}

#[test]
fn loading_partition_answers_load_in_progress_then_serves() {
    let mut h = Harness::new();
    let ids = h.init("a");
    let partition = h.c.partition_for("a");
    h.c.begin_load(partition, COORDINATOR_EPOCH + 1, h.now);
    assert_eq!(h.c.coordinator_error("a"), Some(ErrorCode::CoordinatorLoadInProgress));
    assert_eq!(h.end("a", ids, true), code(ErrorCode::CoordinatorLoadInProgress));
    let token = h.send_add(3, "a", ids, &[("t", 0)]);
    assert_eq!(h.add_errors(token)[0].2, code(ErrorCode::CoordinatorLoadInProgress));
    assert!(h.c.transaction("a").is_none(), "the old term's state is gone");
    let records: Vec<TxnRecord> = h.log.iter().map(|(_, r)| r.clone()).collect();
    for r in records {
        h.c.replay(partition, r.key_bytes(), r.value_bytes()).unwrap();
    }
    let a = h.c.complete_load(partition, h.now);
    h.run(a);
    assert_eq!(h.c.coordinator_epoch(partition), Some(COORDINATOR_EPOCH + 1));
    h.add("a", ids, &[("t", 0)]);
}

#[test]
fn a_partition_led_but_not_yet_loaded_answers_load_in_progress() {
    let mut h = Harness::new();
    let ids = h.init("a");
    let partition = h.c.partition_for("a");
    let a = h.c.unload(partition, h.now);
    h.run(a);
    assert_eq!(h.c.coordinator_error("a"), Some(ErrorCode::NotCoordinator));
    h.c.set_awaiting_load([partition].into_iter().collect());
    assert_eq!(h.c.coordinator_error("a"), Some(ErrorCode::CoordinatorLoadInProgress));
    assert_eq!(h.end("a", ids, true), code(ErrorCode::CoordinatorLoadInProgress));
    h.c.set_awaiting_load(Default::default());
    assert_eq!(h.c.coordinator_error("a"), Some(ErrorCode::NotCoordinator));
}

#[test]
fn writes_in_flight_across_a_term_change_answer_not_coordinator() {
    let mut h = Harness::new();
    let ids = h.init("a");
    h.auto_ack = false;
    let token = h.send_add(3, "a", ids, &[("t", 0)]);
    let partition = h.c.partition_for("a");
    // Leadership moves away and back before the write completes.
    h.c.unload(partition, h.now);
    reload(&mut h, partition, COORDINATOR_EPOCH + 1);
    h.ack();
    assert_eq!(h.add_errors(token)[0].2, code(ErrorCode::NotCoordinator));
    // The new term did not apply the old term's transition (it was not loaded).
    let summary = h.c.transaction("a").unwrap();
    assert_eq!((summary.state, summary.pending_state), (TxnState::Empty, None));
}

#[test]
fn kip_360_last_epoch_is_not_persisted_in_value_version_0() {
    let mut h = Harness::new();
    let (pid, epoch) = h.init("a");
    let token = h.send_init(4, Some("a"), TIMEOUT_MS, (pid, epoch));
    assert_eq!(h.init_response(token).producer_epoch, epoch + 1);
    let partition = h.c.partition_for("a");
    reload(&mut h, partition, COORDINATOR_EPOCH + 1);
    // As in Kafka, a retry of that bump after a coordinator move is fenced.
    assert_eq!(h.init_error(4, "a", (pid, epoch)), code(ErrorCode::ProducerFenced));
}

#[test]
fn value_version_1_keeps_the_previous_producer_id() {
    let cfg = TxnConfig { transaction_log_value_version: 1, ..config() };
    let mut h = Harness::with_config(cfg);
    h.init("a");
    let (_, record) = h.log.last().cloned().unwrap();
    assert_eq!(record.value_version, 1);
    assert_eq!(record.value_bytes().unwrap()[..2], [0, 1]);
    assert_eq!(record.value.unwrap().previous_producer_id, FIRST_PID);
    let partition = h.c.partition_for("a");
    reload(&mut h, partition, COORDINATOR_EPOCH + 1);
    assert_eq!(h.c.transaction("a").unwrap().previous_producer_id, FIRST_PID);
}

#[test]
fn tombstones_bad_records_and_foreign_records() {
    let mut h = Harness::new();
    h.init("a");
    let partition = h.c.partition_for("a");
    h.c.begin_load(partition, COORDINATOR_EPOCH + 1, h.now);
    let (_, record) = h.log.last().cloned().unwrap();
    h.c.replay(partition, record.key_bytes(), record.value_bytes()).unwrap();
    assert!(h.c.transaction("a").is_some());
    let tombstone = TxnRecord::tombstone("a");
    h.c.replay(partition, tombstone.key_bytes(), None).unwrap();
    assert!(h.c.transaction("a").is_none());
    // A state Kafka never writes is refused.
    let mut dead = record.clone();
    dead.value.as_mut().unwrap().transaction_status = TxnState::Dead.id();
    let err = h.c.replay(partition, dead.key_bytes(), dead.value_bytes()).unwrap_err();
    assert_eq!(err, RecordError::UnexpectedState(TxnState::Dead));
    // An unknown key version is skipped.
    h.c.replay(partition, bytes::Bytes::from_static(&[0, 9, 1, 2]), None).unwrap();
    // A record of an id that belongs to another partition is skipped.
    let other = (0..100).map(|i| format!("x{i}")).find(|id| h.c.partition_for(id) != partition).unwrap();
    let foreign = TxnRecord { transactional_id: other.clone(), ..record };
    h.c.replay(partition, foreign.key_bytes(), foreign.value_bytes()).unwrap();
    assert!(h.c.transaction(&other).is_none());
    h.c.complete_load(partition, h.now);
    assert!(h.c.transaction("a").is_none());
}
