//! Two-phase commit (KIP-939): `enable_2pc` only where the broker allows it, no timeout
//! abort for such transactions, and `keep_prepared_txn` handing an ongoing transaction to
//! the restarted producer under a bumped epoch, also after the coordinator moved.

use super::load::reload;
use super::*;

fn two_phase_config() -> TxnConfig {
    TxnConfig { two_phase_commit_enable: true, ..config() }
}

#[test]
fn enable_2pc_is_refused_unless_the_broker_allows_it() {
    let mut h = Harness::new();
    let r = h.init_2pc("a", true, false);
    assert_eq!(r.error_code, code(ErrorCode::TransactionalIdAuthorizationFailed));
    assert_eq!((r.producer_id, r.ongoing_txn_producer_id), (-1, -1));
    // keep_prepared_txn without enable_2pc is a malformed request, allowed or not.
    let mut h = Harness::with_config(two_phase_config());
    assert_eq!(h.init_2pc("a", false, true).error_code, code(ErrorCode::InvalidRequest));
    // Without the flags, v6 is v5.
    let r = h.init_2pc("a", false, false);
    assert_eq!((r.error_code, r.producer_epoch, r.ongoing_txn_producer_id), (0, 0, -1));
}

#[test]
fn a_two_phase_transaction_never_times_out() {
    let mut h = Harness::with_config(two_phase_config());
    let r = h.init_2pc("a", true, false);
    assert_eq!(r.error_code, 0);
    let ids = (r.producer_id, r.producer_epoch);
    h.add("a", ids, &[("t", 0)]);
    // Far past the producer's own timeout and the broker's maximum: still ongoing.
    for _ in 0..50 {
        h.advance(i64::from(TIMEOUT_MS));
    }
    assert_eq!(h.state("a"), TxnState::Ongoing);
    assert_eq!(h.c.transaction("a").unwrap().txn_timeout_ms, i32::MAX);
    assert_eq!(h.end("a", ids, true), 0);
    assert_eq!(h.state("a"), TxnState::CompleteCommit);
}

#[test]
fn keep_prepared_txn_hands_the_ongoing_transaction_to_the_new_producer() {
    let mut h = Harness::with_config(two_phase_config());
    let r = h.init_2pc("a", true, false);
    let old = (r.producer_id, r.producer_epoch);
    h.add("a", old, &[("t", 0), ("t", 1)]);
    // The producer "crashes" after preparing; its successor keeps the transaction.
    let r = h.init_2pc("a", true, true);
    assert_eq!(r.error_code, 0);
    assert_eq!((r.producer_id, r.producer_epoch), (old.0, old.1 + 1));
    assert_eq!((r.ongoing_txn_producer_id, r.ongoing_txn_producer_epoch), old);
    let new = (r.producer_id, r.producer_epoch);
    let summary = h.c.transaction("a").unwrap();
    assert_eq!(summary.state, TxnState::Ongoing);
    assert_eq!(summary.partitions, vec![tp("t", 0), tp("t", 1)]);
    assert_eq!(h.logged_states("a").last(), Some(&Some(TxnState::Ongoing)));
    assert!(h.markers.is_empty(), "nothing aborted");
    // The crashed producer is fenced; the new one commits, markers under its epoch.
    assert_eq!(h.end("a", old, true), code(ErrorCode::ProducerFenced));
    assert_eq!(h.end("a", new, true), 0);
    let m = h.markers.last().unwrap();
    assert_eq!((m.result, m.producer_id, m.producer_epoch), (TransactionResult::Commit, new.0, new.1));
    assert_eq!(m.partitions, vec![tp("t", 0), tp("t", 1)]);
}

#[test]
fn keep_prepared_txn_without_an_ongoing_transaction_names_none() {
    let mut h = Harness::with_config(two_phase_config());
    let r = h.init_2pc("a", true, true);
    assert_eq!(
        (r.error_code, r.producer_epoch, r.ongoing_txn_producer_id, r.ongoing_txn_producer_epoch),
        (0, 0, -1, -1)
    );
    let ids = (r.producer_id, r.producer_epoch);
    h.add("a", ids, &[("t", 0)]);
    assert_eq!(h.end("a", ids, true), 0);
    // Completed: the next keep_prepared_txn bumps the epoch and names nothing.
    let r = h.init_2pc("a", true, true);
    assert_eq!((r.producer_epoch, r.ongoing_txn_producer_id), (1, -1));
    // A producer without keep_prepared_txn still aborts an ongoing one first.
    let ids = (r.producer_id, r.producer_epoch);
    h.add("a", ids, &[("t", 0)]);
    assert_eq!(h.init_2pc("a", true, false).error_code, code(ErrorCode::ConcurrentTransactions));
    assert_eq!(h.markers.last().unwrap().result, TransactionResult::Abort);
}

#[test]
fn the_kept_transaction_survives_a_coordinator_move() {
    let mut h = Harness::with_config(two_phase_config());
    let r = h.init_2pc("a", true, false);
    let old = (r.producer_id, r.producer_epoch);
    h.add("a", old, &[("t", 3)]);
    let partition = h.c.partition_for("a");
    // The coordinator moves before and after the takeover; both are in the log.
    reload(&mut h, partition, COORDINATOR_EPOCH + 1);
    let summary = h.c.transaction("a").unwrap();
    assert_eq!((summary.state, summary.txn_timeout_ms), (TxnState::Ongoing, i32::MAX));
    let r = h.init_2pc("a", true, true);
    assert_eq!((r.ongoing_txn_producer_id, r.ongoing_txn_producer_epoch), old);
    let new = (r.producer_id, r.producer_epoch);
    reload(&mut h, partition, COORDINATOR_EPOCH + 2);
    let summary = h.c.transaction("a").unwrap();
    assert_eq!((summary.state, summary.producer_epoch), (TxnState::Ongoing, new.1));
    for _ in 0..50 {
        h.advance(i64::from(TIMEOUT_MS));
    }
    assert_eq!(h.state("a"), TxnState::Ongoing, "a reloaded 2PC transaction timed out");
    assert_eq!(h.end("a", old, true), code(ErrorCode::ProducerFenced));
    assert_eq!(h.end("a", new, true), 0);
    let m = h.markers.last().unwrap();
    assert_eq!((m.producer_epoch, m.coordinator_epoch), (new.1, COORDINATOR_EPOCH + 2));
}

#[test]
fn a_transaction_kept_twice_keeps_its_identity_also_across_a_coordinator_move() {
    // A sink prepares under `old`, crashes; its successor keeps the transaction and crashes
    // before completing it; the next successor must still be told `old`, the identity the
    // checkpoint stored, or it would abort what a complete checkpoint prepared.
    let mut h = Harness::with_config(two_phase_config());
    let r = h.init_2pc("a", true, false);
    let old = (r.producer_id, r.producer_epoch);
    h.add("a", old, &[("t", 0)]);
    let r = h.init_2pc("a", true, true);
    assert_eq!((r.ongoing_txn_producer_id, r.ongoing_txn_producer_epoch), old);
    let r = h.init_2pc("a", true, true);
    assert_eq!((r.error_code, r.producer_epoch), (0, old.1 + 2));
    assert_eq!((r.ongoing_txn_producer_id, r.ongoing_txn_producer_epoch), old, "second keep");
    let partition = h.c.partition_for("a");
    reload(&mut h, partition, COORDINATOR_EPOCH + 1);
    let r = h.init_2pc("a", true, true);
    assert_eq!((r.ongoing_txn_producer_id, r.ongoing_txn_producer_epoch), old, "after the move");
    let newest = (r.producer_id, r.producer_epoch);
    assert_eq!(newest.1, old.1 + 3);
    assert_eq!(h.end("a", newest, true), 0);
    // Completed: the identity is forgotten; the next transaction names its own.
    let r = h.init_2pc("a", true, true);
    assert_eq!(r.ongoing_txn_producer_id, -1);
    let ids = (r.producer_id, r.producer_epoch);
    h.add("a", ids, &[("t", 0)]);
    let r = h.init_2pc("a", true, true);
    assert_eq!((r.ongoing_txn_producer_id, r.ongoing_txn_producer_epoch), ids);
}
