//! InitProducerId: new ids, epoch bumps that fence the previous producer, aborting an
//! ongoing transaction first, KIP-360 bumps and retries, epoch exhaustion, validation.

use super::*;

#[test]
fn new_id_gets_a_producer_id_at_epoch_zero_once_written() {
    let mut h = Harness::new();
    h.auto_ack = false;
    let token = h.send_init(4, Some("a"), TIMEOUT_MS, (-1, -1));
    assert!(h.response(token).is_none(), "answered before the write");
    let (_, partition, records) = h.held.front().cloned().unwrap();
    assert_eq!(partition, h.c.partition_for("a"));
    let value = records[0].value.clone().unwrap();
    assert_eq!((value.producer_id, value.producer_epoch), (FIRST_PID, 0));
    assert_eq!(value.state().unwrap(), TxnState::Empty);
    assert_eq!(value.transaction_partitions, None, "Empty is written with null partitions");
    assert_eq!(value.transaction_timeout_ms, TIMEOUT_MS);
    h.ack();
    let r = h.init_response(token);
    assert_eq!((r.error_code, r.producer_id, r.producer_epoch), (0, FIRST_PID, 0));
}

#[test]
fn second_init_bumps_the_epoch_and_fences_the_first_producer() {
    let mut h = Harness::new();
    let first = h.init("a");
    let second = h.init("a");
    assert_eq!(second, (first.0, first.1 + 1));
    // The zombie can no longer add partitions or end transactions.
    let token = h.send_add(3, "a", first, &[("t", 0)]);
    assert_eq!(h.add_errors(token), vec![("t".into(), 0, code(ErrorCode::ProducerFenced))]);
    let token = h.send_add(1, "a", first, &[("t", 0)]);
    assert_eq!(h.add_errors(token), vec![("t".into(), 0, code(ErrorCode::InvalidProducerEpoch))]);
    assert_eq!(h.end("a", first, true), code(ErrorCode::ProducerFenced));
    let token = h.send_end(1, "a", first, true);
    assert_eq!(h.end_error(token), code(ErrorCode::InvalidProducerEpoch));
    h.add("a", second, &[("t", 0)]);
}

#[test]
fn init_while_ongoing_aborts_first_and_answers_concurrent_transactions() {
    let mut h = Harness::new();
    let first = h.init("a");
    h.add("a", first, &[("t", 0), ("t", 1)]);
    h.auto_markers = false;
    let token = h.send_init(4, Some("a"), TIMEOUT_MS, (-1, -1));
    assert_eq!(h.init_response(token).error_code, code(ErrorCode::ConcurrentTransactions));
    // The fence bumped the epoch: the abort markers carry it, the old producer is out.
    let markers = h.held_markers.front().cloned().unwrap();
    assert_eq!(markers.result, TransactionResult::Abort);
    assert_eq!((markers.producer_id, markers.producer_epoch), (first.0, first.1 + 1));
    assert_eq!(markers.coordinator_epoch, COORDINATOR_EPOCH);
    assert_eq!(markers.partitions, vec![tp("t", 0), tp("t", 1)]);
    assert_eq!(h.state("a"), TxnState::PrepareAbort);
    assert_eq!(h.end("a", first, true), code(ErrorCode::ProducerFenced));
    // Retrying while the abort completes: still CONCURRENT_TRANSACTIONS.
    assert_eq!(h.init_error(4, "a", (-1, -1)), code(ErrorCode::ConcurrentTransactions));
    h.complete_markers(|_| ErrorCode::None);
    assert_eq!(h.state("a"), TxnState::CompleteAbort);
    // The retry gets a second bump.
    assert_eq!(h.init("a"), (first.0, first.1 + 2));
    assert_eq!(
        h.logged_states("a"),
        [
            TxnState::Empty,
            TxnState::Ongoing,
            TxnState::PrepareAbort,
            TxnState::CompleteAbort,
            TxnState::Empty
        ]
        .map(Some)
    );
}

#[test]
fn init_while_a_write_is_pending_is_concurrent() {
    let mut h = Harness::new();
    h.init("a");
    h.auto_ack = false;
    let token = h.send_init(4, Some("a"), TIMEOUT_MS, (-1, -1));
    assert_eq!(h.init_error(4, "a", (-1, -1)), code(ErrorCode::ConcurrentTransactions));
    h.ack();
    assert_eq!(h.init_response(token).producer_epoch, 1);
}

#[test]
fn failed_write_is_answered_with_the_coordinator_error_and_changes_nothing() {
    let mut h = Harness::new();
    h.init("a");
    h.auto_ack = false;
    let token = h.send_init(4, Some("a"), TIMEOUT_MS, (-1, -1));
    h.fail(ErrorCode::NotLeaderOrFollower);
    assert_eq!(h.init_response(token).error_code, code(ErrorCode::NotCoordinator));
    let token = h.send_init(4, Some("a"), TIMEOUT_MS, (-1, -1));
    h.fail(ErrorCode::NotEnoughReplicas);
    assert_eq!(h.init_response(token).error_code, code(ErrorCode::CoordinatorNotAvailable));
    let summary = h.c.transaction("a").unwrap();
    assert_eq!((summary.producer_epoch, summary.pending_state), (0, None));
}

#[test]
fn kip_360_bump_retry_and_zombie() {
    let mut h = Harness::new();
    let (pid, epoch) = h.init("a");
    // The producer bumps its own epoch after an abortable error.
    let token = h.send_init(4, Some("a"), TIMEOUT_MS, (pid, epoch));
    let r = h.init_response(token);
    assert_eq!((r.error_code, r.producer_id, r.producer_epoch), (0, pid, epoch + 1));
    // The answer was lost and the request retried: same epoch, no second bump.
    let token = h.send_init(4, Some("a"), TIMEOUT_MS, (pid, epoch));
    assert_eq!(h.init_response(token).producer_epoch, epoch + 1);
    assert_eq!(h.c.transaction("a").unwrap().producer_epoch, epoch + 1);
    // A new producer (no KIP-360 fields) fences it and resets the last epoch...
    assert_eq!(h.init("a"), (pid, epoch + 2));
    // ...so the old producer's retry is now fenced (INVALID_PRODUCER_EPOCH before v4).
    assert_eq!(h.init_error(4, "a", (pid, epoch)), code(ErrorCode::ProducerFenced));
    assert_eq!(h.init_error(3, "a", (pid, epoch + 1)), code(ErrorCode::InvalidProducerEpoch));
    // A producer id this id never had is fenced.
    assert_eq!(h.init_error(4, "a", (pid + 50, 0)), code(ErrorCode::ProducerFenced));
}

#[test]
fn kip_360_for_an_unknown_id_returns_a_fresh_producer() {
    let mut h = Harness::new();
    // A producer recovering from UNKNOWN_PRODUCER_ID after its id expired.
    let token = h.send_init(4, Some("a"), TIMEOUT_MS, (77, 3));
    let r = h.init_response(token);
    assert_eq!((r.error_code, r.producer_id, r.producer_epoch), (0, FIRST_PID, 0));
}

/// Loads "a" at `epoch` in CompleteCommit through a replayed record.
fn harness_at_epoch(epoch: i16) -> (Harness, i64) {
    let mut h = Harness::new();
    let pid = 500;
    let partition = h.c.partition_for("a");
    let record = records::TxnRecord {
        transactional_id: "a".into(),
        value: Some(records::TransactionLogValue {
            producer_id: pid,
            producer_epoch: epoch,
            transaction_timeout_ms: TIMEOUT_MS,
            transaction_status: TxnState::CompleteCommit.id(),
            transaction_partitions: Some(vec![]),
            transaction_last_update_timestamp_ms: T0,
            transaction_start_timestamp_ms: T0 - 10,
            ..Default::default()
        }),
        value_version: 0,
    };
    let a = h.c.begin_load(partition, COORDINATOR_EPOCH + 1, h.now);
    h.run(a);
    h.c.replay(partition, record.key_bytes(), record.value_bytes()).unwrap();
    let a = h.c.complete_load(partition, h.now);
    h.run(a);
    (h, pid)
}

#[test]
fn exhausted_epochs_rotate_the_producer_id() {
    let (mut h, pid) = harness_at_epoch(i16::MAX - 2);
    assert_eq!(h.init("a"), (pid, i16::MAX - 1));
    // i16::MAX - 1 is exhausted: the next init starts a new producer id at epoch 0.
    assert_eq!(h.init("a"), (FIRST_PID, 0));
    let summary = h.c.transaction("a").unwrap();
    assert_eq!((summary.previous_producer_id, summary.last_producer_epoch), (pid, -1));
}

#[test]
fn kip_360_retry_across_a_rotation() {
    let (mut h, pid) = harness_at_epoch(i16::MAX - 1);
    let token = h.send_init(4, Some("a"), TIMEOUT_MS, (pid, i16::MAX - 1));
    let r = h.init_response(token);
    assert_eq!((r.producer_id, r.producer_epoch), (FIRST_PID, 0));
    // The retry names the old producer id with its exhausted epoch: same answer.
    let token = h.send_init(4, Some("a"), TIMEOUT_MS, (pid, i16::MAX - 1));
    let r = h.init_response(token);
    assert_eq!((r.error_code, r.producer_id, r.producer_epoch), (0, FIRST_PID, 0));
    // An older epoch of the old producer id is a zombie.
    assert_eq!(h.init_error(4, "a", (pid, 5)), code(ErrorCode::ProducerFenced));
}

#[test]
fn idempotent_producers_get_fresh_ids_without_state() {
    let mut h = Harness::new();
    let a = h.send_init(4, None, 0, (-1, -1));
    let b = h.send_init(0, None, 0, (-1, -1));
    let (ra, rb) = (h.init_response(a), h.init_response(b));
    assert_eq!((ra.error_code, ra.producer_id, ra.producer_epoch), (0, FIRST_PID, 0));
    assert_eq!((rb.producer_id, rb.producer_epoch), (FIRST_PID + 1, 0));
    assert!(h.log.is_empty());
    assert_eq!(h.c.transactional_id_count(), 0);
}

#[test]
fn invalid_requests() {
    let mut h = Harness::new();
    assert_eq!(h.init_error(4, "", (-1, -1)), code(ErrorCode::InvalidRequest));
    assert_eq!(h.init_error(4, "a", (5, -1)), code(ErrorCode::InvalidRequest));
    assert_eq!(h.init_error(4, "a", (-1, 5)), code(ErrorCode::InvalidRequest));
    let over = h.c.config().transaction_max_timeout_ms + 1;
    for timeout in [over, 0, -5] {
        let token = h.send_init(4, Some("a"), timeout, (-1, -1));
        assert_eq!(h.init_response(token).error_code, code(ErrorCode::InvalidTransactionTimeout));
    }
    assert_eq!(h.c.transactional_id_count(), 0, "nothing created for refused requests");
}

#[test]
fn producer_id_allocation_failure_is_answered() {
    let mut h = Harness::new();
    h.c = TransactionCoordinator::new(config(), Box::new(|| Err(ErrorCode::CoordinatorLoadInProgress)));
    for p in 0..4 {
        h.c.begin_load(p, 1, h.now);
        h.c.complete_load(p, h.now);
    }
    assert_eq!(h.init_error(4, "a", (-1, -1)), code(ErrorCode::CoordinatorLoadInProgress));
    let token = h.send_init(4, None, 0, (-1, -1));
    assert_eq!(h.init_response(token).error_code, code(ErrorCode::CoordinatorLoadInProgress));
}

#[test]
fn not_coordinator_and_loading() {
    let mut h = Harness::new();
    let partition = h.c.partition_for("a");
    h.c.unload(partition, h.now);
    assert_eq!(h.init_error(4, "a", (-1, -1)), code(ErrorCode::NotCoordinator));
    h.c.begin_load(partition, COORDINATOR_EPOCH + 1, h.now);
    assert_eq!(h.init_error(4, "a", (-1, -1)), code(ErrorCode::CoordinatorLoadInProgress));
    let a = h.c.complete_load(partition, h.now);
    h.run(a);
    assert_eq!(h.init("a"), (FIRST_PID, 0));
}
