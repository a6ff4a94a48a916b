//! EndTxn: commit and abort with their markers and COMPLETE records, retries of EndTxn,
//! marker failures and retries, failed writes.

use super::*;

/// "a" initialised with t-0 and u-1 in its transaction.
fn ongoing() -> (Harness, (i64, i16)) {
    let mut h = Harness::new();
    let ids = h.init("a");
    h.add("a", ids, &[("t", 0), ("u", 1)]);
    (h, ids)
}

#[test]
fn commit_answers_after_prepare_then_writes_markers_then_completes() {
    let (mut h, ids) = ongoing();
    h.auto_ack = false;
    h.auto_markers = false;
    let token = h.send_end(3, "a", ids, true);
    assert!(h.response(token).is_none(), "answered before PREPARE_COMMIT is written");
    assert!(h.held_markers.is_empty(), "markers before PREPARE_COMMIT is written");
    h.ack();
    assert_eq!(h.end_error(token), 0);
    assert_eq!(h.state("a"), TxnState::PrepareCommit);
    let markers = h.held_markers.front().cloned().unwrap();
    assert_eq!(
        markers,
        Markers {
            id: markers.id,
            producer_id: ids.0,
            producer_epoch: ids.1,
            coordinator_epoch: COORDINATOR_EPOCH,
            result: TransactionResult::Commit,
            partitions: vec![tp("t", 0), tp("u", 1)],
        }
    );
    h.complete_markers(|_| ErrorCode::None);
    assert_eq!(h.state("a"), TxnState::PrepareCommit, "COMPLETE_COMMIT not yet written");
    let (_, _, records) = h.held.front().cloned().unwrap();
    let value = records[0].value.clone().unwrap();
    assert_eq!(value.state().unwrap(), TxnState::CompleteCommit);
    assert_eq!(value.transaction_partitions, Some(vec![]));
    h.ack();
    let summary = h.c.transaction("a").unwrap();
    assert_eq!(
        (summary.state, summary.partitions.len(), summary.pending_state),
        (TxnState::CompleteCommit, 0, None)
    );
    assert_eq!(
        h.logged_states("a"),
        [TxnState::Empty, TxnState::Ongoing, TxnState::PrepareCommit, TxnState::CompleteCommit].map(Some)
    );
}

#[test]
fn abort_writes_abort_markers() {
    let (mut h, ids) = ongoing();
    assert_eq!(h.end("a", ids, false), 0);
    assert_eq!(h.state("a"), TxnState::CompleteAbort);
    let m = h.markers.last().unwrap();
    assert_eq!((m.result, m.producer_epoch), (TransactionResult::Abort, ids.1));
    assert_eq!(h.init("a"), (ids.0, ids.1 + 1));
}

#[test]
fn end_txn_retries_and_wrong_states() {
    let (mut h, ids) = ongoing();
    h.auto_markers = false;
    assert_eq!(h.end("a", ids, true), 0);
    // During PrepareCommit: the same result is concurrent, the other is invalid.
    assert_eq!(h.end("a", ids, true), code(ErrorCode::ConcurrentTransactions));
    assert_eq!(h.end("a", ids, false), code(ErrorCode::InvalidTxnState));
    // While COMPLETE_COMMIT is being written, every EndTxn is concurrent.
    h.auto_ack = false;
    h.complete_markers(|_| ErrorCode::None);
    assert_eq!(h.end("a", ids, true), code(ErrorCode::ConcurrentTransactions));
    h.ack();
    // After completion: the same result is OK (a retry), the other is invalid.
    h.auto_ack = true;
    let token = h.send_end(5, "a", ids, true);
    let Some(Response::EndTxn(r)) = h.response(token) else { panic!() };
    assert_eq!((r.error_code, r.producer_id, r.producer_epoch), (0, ids.0, ids.1));
    assert_eq!(h.end("a", ids, false), code(ErrorCode::InvalidTxnState));
    // Empty (after a new InitProducerId): no transaction to end.
    let ids = h.init("a");
    assert_eq!(h.end("a", ids, true), code(ErrorCode::InvalidTxnState));
    assert_eq!(h.end("a", (ids.0 + 1, ids.1), true), code(ErrorCode::InvalidProducerIdMapping));
    assert_eq!(h.end("nobody", ids, true), code(ErrorCode::InvalidProducerIdMapping));
    assert_eq!(h.end("", ids, true), code(ErrorCode::InvalidRequest));
}

#[test]
fn retriable_marker_errors_are_retried_after_the_backoff() {
    let (mut h, ids) = ongoing();
    h.auto_markers = false;
    assert_eq!(h.end("a", ids, true), 0);
    h.complete_markers(|p| if p.topic == "u" { ErrorCode::NotLeaderOrFollower } else { ErrorCode::None });
    assert_eq!(h.c.transaction("a").unwrap().partitions, vec![tp("u", 1)]);
    assert!(h.held_markers.is_empty());
    let backoff = h.c.config().marker_retry_backoff_ms;
    assert_eq!(h.c.next_deadline(), Some(h.now + backoff));
    h.advance(backoff - 1);
    assert!(h.held_markers.is_empty());
    h.advance(1);
    let retry = h.held_markers.front().cloned().unwrap();
    assert_eq!(retry.partitions, vec![tp("u", 1)]);
    assert_eq!(retry.result, TransactionResult::Commit);
    // A partition left out of the report is retried too.
    let m = h.held_markers.pop_front().unwrap();
    let a = h.c.markers_complete(m.id, &[], h.now);
    h.run(a);
    h.advance(backoff);
    h.complete_markers(|_| ErrorCode::None);
    assert_eq!(h.state("a"), TxnState::CompleteCommit);
    // A stale completion is ignored.
    let a = h.c.markers_complete(m.id, &[(tp("u", 1), ErrorCode::None)], h.now);
    assert!(a.is_empty());
}

#[test]
fn fenced_markers_stop_the_transaction_in_prepare() {
    let (mut h, ids) = ongoing();
    h.auto_markers = false;
    assert_eq!(h.end("a", ids, true), 0);
    h.complete_markers(|_| ErrorCode::InvalidProducerEpoch);
    h.advance(10_000);
    assert!(h.held_markers.is_empty());
    // Stuck in PrepareCommit until the partition is reloaded, as in Kafka.
    assert_eq!(h.state("a"), TxnState::PrepareCommit);
    assert_eq!(h.init_error(4, "a", (-1, -1)), code(ErrorCode::ConcurrentTransactions));
}

#[test]
fn partitions_that_cannot_take_markers_are_skipped() {
    let (mut h, ids) = ongoing();
    h.auto_markers = false;
    assert_eq!(h.end("a", ids, false), 0);
    h.complete_markers(
        |p| if p.topic == "t" { ErrorCode::UnsupportedForMessageFormat } else { ErrorCode::None },
    );
    assert_eq!(h.state("a"), TxnState::CompleteAbort);
}

#[test]
fn transaction_without_partitions_completes_without_markers() {
    let mut h = Harness::new();
    let ids = h.init("a");
    h.add("a", ids, &[]);
    assert_eq!(h.state("a"), TxnState::Ongoing);
    assert_eq!(h.end("a", ids, true), 0);
    assert_eq!(h.state("a"), TxnState::CompleteCommit);
    assert!(h.markers.is_empty());
}

#[test]
fn failed_prepare_write_leaves_the_transaction_ongoing() {
    let (mut h, ids) = ongoing();
    h.auto_ack = false;
    let token = h.send_end(3, "a", ids, true);
    h.fail(ErrorCode::RequestTimedOut);
    assert_eq!(h.end_error(token), code(ErrorCode::CoordinatorNotAvailable));
    assert_eq!(h.state("a"), TxnState::Ongoing);
    assert!(h.markers.is_empty());
    h.auto_ack = true;
    assert_eq!(h.end("a", ids, true), 0);
    assert_eq!(h.state("a"), TxnState::CompleteCommit);
}

#[test]
fn failed_complete_write_is_retried() {
    let (mut h, ids) = ongoing();
    h.auto_ack = false;
    let token = h.send_end(3, "a", ids, true);
    h.ack();
    assert_eq!(h.end_error(token), 0);
    h.fail(ErrorCode::NotEnoughReplicas);
    assert_eq!(h.state("a"), TxnState::PrepareCommit);
    assert!(h.held.is_empty());
    h.advance(h.c.config().marker_retry_backoff_ms);
    assert_eq!(h.held.len(), 1, "COMPLETE_COMMIT written again");
    h.ack();
    assert_eq!(h.state("a"), TxnState::CompleteCommit);
    assert_eq!(h.markers.len(), 1, "markers are not written twice");
}

#[test]
fn failed_fence_write_reuses_the_bumped_epoch() {
    let (mut h, ids) = ongoing();
    h.auto_ack = false;
    let token = h.send_init(4, Some("a"), TIMEOUT_MS, (-1, -1));
    let (_, _, records) = h.held.front().cloned().unwrap();
    assert_eq!(records[0].value.as_ref().unwrap().producer_epoch, ids.1 + 1);
    h.fail(ErrorCode::NotEnoughReplicasAfterAppend);
    assert_eq!(h.init_response(token).error_code, code(ErrorCode::CoordinatorNotAvailable));
    assert_eq!(h.state("a"), TxnState::Ongoing);
    // The next fence does not bump again: the failed epoch was never handed out.
    h.send_init(4, Some("a"), TIMEOUT_MS, (-1, -1));
    let (_, _, records) = h.held.front().cloned().unwrap();
    assert_eq!(records[0].value.as_ref().unwrap().producer_epoch, ids.1 + 1);
    h.auto_ack = true;
    h.ack();
    assert_eq!(h.state("a"), TxnState::CompleteAbort);
    assert_eq!(h.init("a"), (ids.0, ids.1 + 2));
}
