//! Time-driven work: transactions aborted after their timeout (fencing the producer) and
//! idle transactional ids expired with a tombstone.

use super::*;

#[test]
fn ongoing_transaction_is_aborted_and_fenced_after_its_timeout() {
    let mut h = Harness::new();
    let ids = h.init("a");
    h.add("a", ids, &[("t", 0)]);
    let start = h.now;
    let scan = h.c.config().abort_timed_out_transaction_cleanup_interval_ms;
    // Kafka aborts once start + timeout < now, at the next scan.
    while h.now + scan <= start + i64::from(TIMEOUT_MS) {
        h.advance(scan);
        assert_eq!(h.state("a"), TxnState::Ongoing, "aborted early at {}", h.now - start);
    }
    h.auto_markers = false;
    h.advance(scan);
    assert_eq!(h.state("a"), TxnState::PrepareAbort);
    let m = h.held_markers.front().cloned().unwrap();
    assert_eq!((m.result, m.producer_id, m.producer_epoch), (TransactionResult::Abort, ids.0, ids.1 + 1));
    h.complete_markers(|_| ErrorCode::None);
    assert_eq!(h.state("a"), TxnState::CompleteAbort);
    // The producer learns it was fenced.
    assert_eq!(h.end("a", ids, true), code(ErrorCode::ProducerFenced));
    let token = h.send_add(3, "a", ids, &[("t", 0)]);
    assert_eq!(h.add_errors(token)[0].2, code(ErrorCode::ProducerFenced));
    // A new InitProducerId continues after the fencing epoch.
    assert_eq!(h.init("a"), (ids.0, ids.1 + 2));
}

#[test]
fn transactions_with_pending_writes_are_left_alone() {
    let mut h = Harness::new();
    let ids = h.init("a");
    h.add("a", ids, &[("t", 0)]);
    h.auto_ack = false;
    let token = h.send_add(3, "a", ids, &[("t", 1)]);
    h.advance(i64::from(TIMEOUT_MS) + 5_000);
    assert_eq!(h.held.len(), 1, "no abort while the add is written");
    h.ack();
    assert_eq!(h.add_errors(token)[0].2, 0);
    h.auto_ack = true;
    h.advance(h.c.config().abort_timed_out_transaction_cleanup_interval_ms);
    assert_eq!(h.state("a"), TxnState::CompleteAbort);
}

#[test]
fn idle_ids_expire_with_a_tombstone() {
    let mut h = Harness::new();
    let a = h.init("a");
    h.init("b");
    h.add("a", a, &[("t", 0)]);
    let expiration = h.c.config().transactional_id_expiration_ms;
    let interval = h.c.config().remove_expired_transaction_cleanup_interval_ms;
    // "b" (Empty) expires once idle long enough. "a" is aborted at its timeout, which
    // updates it, so it expires one scan later; an Ongoing transaction never would.
    h.auto_ack = false;
    let mut waited = 0;
    while h.c.transaction("b").is_some() {
        h.advance(interval);
        waited += interval;
        while !h.held.is_empty() {
            h.ack();
        }
        assert!(waited <= expiration + 2 * interval, "b never expired");
    }
    assert!(waited >= expiration);
    assert_eq!(h.logged_states("b").last(), Some(&None), "tombstone written");
    assert_eq!(h.state("a"), TxnState::CompleteAbort);
    h.advance(interval);
    h.ack();
    assert!(h.c.transaction("a").is_none());
    assert_eq!(h.logged_states("a").last(), Some(&None));
    // The id can be used again from scratch.
    h.auto_ack = true;
    let (pid, epoch) = h.init("b");
    assert!(pid > a.0 && epoch == 0);
}

#[test]
fn an_id_used_while_its_tombstone_is_written_is_kept() {
    let mut h = Harness::with_config(TxnConfig { transactional_id_expiration_ms: 1_000, ..config() });
    let ids = h.init("a");
    h.auto_ack = false;
    h.advance(h.c.config().remove_expired_transaction_cleanup_interval_ms);
    assert_eq!(h.c.transaction("a").unwrap().pending_state, Some(TxnState::Dead));
    assert_eq!(h.init_error(4, "a", (-1, -1)), code(ErrorCode::ConcurrentTransactions));
    h.fail(ErrorCode::NotEnoughReplicas);
    let summary = h.c.transaction("a").unwrap();
    assert_eq!((summary.pending_state, summary.producer_epoch), (None, ids.1));
    h.auto_ack = true;
    assert_eq!(h.init("a"), (ids.0, ids.1 + 1));
}

#[test]
fn deadlines_follow_the_configured_intervals() {
    let mut h = Harness::new();
    let cfg = h.c.config().clone();
    assert_eq!(h.c.next_deadline(), Some(T0 + cfg.abort_timed_out_transaction_cleanup_interval_ms));
    for p in 0..cfg.transaction_state_log_num_partitions {
        h.c.unload(p, h.now);
    }
    assert_eq!(h.c.next_deadline(), None, "nothing to do without partitions");
}
