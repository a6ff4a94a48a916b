//! AddPartitionsToTxn (v0-3 and batched v4+), AddOffsetsToTxn and KIP-890 verification.

use strata_protocol::messages::add_offsets_to_txn::AddOffsetsToTxnRequest;
use strata_protocol::messages::add_partitions_to_txn::AddPartitionsToTxnTransaction;

use super::*;

#[test]
fn adding_partitions_starts_the_transaction_once_written() {
    let mut h = Harness::new();
    let ids = h.init("a");
    h.now += 5;
    h.auto_ack = false;
    let token = h.send_add(3, "a", ids, &[("t", 1), ("u", 0), ("t", 0), ("t", 1)]);
    assert!(h.response(token).is_none(), "answered before the write");
    assert_eq!(h.state("a"), TxnState::Empty);
    let (_, _, records) = h.held.front().cloned().unwrap();
    let value = records[0].value.clone().unwrap();
    assert_eq!(value.state().unwrap(), TxnState::Ongoing);
    assert_eq!(value.partitions(), vec![tp("t", 0), tp("t", 1), tp("u", 0)]);
    assert_eq!(value.transaction_start_timestamp_ms, T0 + 5);
    h.ack();
    assert_eq!(h.add_errors(token), vec![("t".into(), 0, 0), ("t".into(), 1, 0), ("u".into(), 0, 0)]);
    let summary = h.c.transaction("a").unwrap();
    assert_eq!(summary.state, TxnState::Ongoing);
    assert_eq!(summary.txn_start_timestamp_ms, T0 + 5);
    // More partitions keep the start time.
    h.now += 5;
    h.auto_ack = true;
    h.add("a", ids, &[("u", 1)]);
    let summary = h.c.transaction("a").unwrap();
    assert_eq!(summary.partitions, vec![tp("t", 0), tp("t", 1), tp("u", 0), tp("u", 1)]);
    assert_eq!(summary.txn_start_timestamp_ms, T0 + 5);
}

#[test]
fn partitions_already_in_the_transaction_are_answered_without_a_write() {
    let mut h = Harness::new();
    let ids = h.init("a");
    h.add("a", ids, &[("t", 0), ("t", 1)]);
    let written = h.log.len();
    h.add("a", ids, &[("t", 1)]);
    assert_eq!(h.log.len(), written);
}

#[test]
fn unknown_partitions_fail_the_whole_request() {
    let mut h = Harness::new();
    let ids = h.init("a");
    let token = h.send_add(3, "a", ids, &[("t", 0), ("nope", 0), ("t", 99)]);
    assert_eq!(
        h.add_errors(token),
        vec![
            ("nope".into(), 0, code(ErrorCode::UnknownTopicOrPartition)),
            ("t".into(), 0, code(ErrorCode::OperationNotAttempted)),
            ("t".into(), 99, code(ErrorCode::UnknownTopicOrPartition)),
        ]
    );
    assert_eq!(h.state("a"), TxnState::Empty);
}

#[test]
fn producer_mismatches_and_concurrent_states() {
    let mut h = Harness::new();
    let (pid, epoch) = h.init("a");
    let err = |h: &mut Harness, v: i16, id: &str, ids: (i64, i16)| {
        let token = h.send_add(v, id, ids, &[("t", 0)]);
        h.add_errors(token)[0].2
    };
    assert_eq!(err(&mut h, 3, "unknown", (pid, epoch)), code(ErrorCode::InvalidProducerIdMapping));
    assert_eq!(err(&mut h, 3, "a", (pid + 1, epoch)), code(ErrorCode::InvalidProducerIdMapping));
    assert_eq!(err(&mut h, 3, "a", (pid, epoch + 1)), code(ErrorCode::ProducerFenced));
    assert_eq!(err(&mut h, 0, "a", (pid, epoch + 1)), code(ErrorCode::InvalidProducerEpoch));
    assert_eq!(err(&mut h, 3, "", (pid, epoch)), code(ErrorCode::InvalidRequest));
    h.add("a", (pid, epoch), &[("t", 0)]);
    // While the add of another partition is being written.
    h.auto_ack = false;
    let pending = h.send_add(3, "a", (pid, epoch), &[("t", 1)]);
    assert_eq!(err(&mut h, 3, "a", (pid, epoch)), code(ErrorCode::ConcurrentTransactions));
    h.ack();
    assert_eq!(h.add_errors(pending)[0].2, 0);
    // While the transaction commits.
    h.auto_ack = true;
    h.auto_markers = false;
    assert_eq!(h.end("a", (pid, epoch), true), 0);
    assert_eq!(err(&mut h, 3, "a", (pid, epoch)), code(ErrorCode::ConcurrentTransactions));
    h.complete_markers(|_| ErrorCode::None);
    // After completion a new transaction starts with a new start time.
    h.now += 100;
    h.add("a", (pid, epoch), &[("t", 2)]);
    let summary = h.c.transaction("a").unwrap();
    assert_eq!((summary.state, summary.txn_start_timestamp_ms), (TxnState::Ongoing, h.now));
    assert_eq!(summary.partitions, vec![tp("t", 2)]);
}

#[test]
fn add_offsets_adds_the_groups_offsets_partition() {
    let mut h = Harness::new();
    let (pid, epoch) = h.init("a");
    let meta = h.meta(3);
    let request = AddOffsetsToTxnRequest {
        transactional_id: "a".into(),
        producer_id: pid,
        producer_epoch: epoch,
        group_id: "my-group".into(),
    };
    let a = h.c.add_offsets_to_txn(&meta, &request, h.now);
    h.run(a);
    let Some(Response::AddOffsetsToTxn(r)) = h.response(meta.token) else { panic!() };
    assert_eq!(r.error_code, 0);
    let expected = crate::coordinator::group::partition_for_group("my-group", 8);
    assert_eq!(h.c.transaction("a").unwrap().partitions, vec![tp(CONSUMER_OFFSETS_TOPIC, expected)]);
    // Fenced producers: INVALID_PRODUCER_EPOCH before v2.
    let meta = h.meta(1);
    let request = AddOffsetsToTxnRequest { producer_epoch: epoch + 1, ..request };
    let a = h.c.add_offsets_to_txn(&meta, &request, h.now);
    h.run(a);
    let Some(Response::AddOffsetsToTxn(r)) = h.response(meta.token) else { panic!() };
    assert_eq!(r.error_code, code(ErrorCode::InvalidProducerEpoch));
}

fn v4_transaction(
    id: &str,
    ids: (i64, i16),
    verify_only: bool,
    parts: &[i32],
) -> AddPartitionsToTxnTransaction {
    AddPartitionsToTxnTransaction {
        transactional_id: id.into(),
        producer_id: ids.0,
        producer_epoch: ids.1,
        verify_only,
        topics: vec![AddPartitionsToTxnTopic { name: "t".into(), partitions: parts.to_vec() }],
    }
}

#[test]
fn batched_v4_request_is_answered_once_every_transaction_is_done() {
    let mut h = Harness::new();
    let a = h.init("a");
    let b = h.init("b");
    h.add("b", b, &[("t", 3)]);
    h.auto_ack = false;
    let meta = h.meta(4);
    let request = AddPartitionsToTxnRequest {
        transactions: vec![
            v4_transaction("a", a, false, &[0, 1]),
            v4_transaction("b", b, true, &[3, 4]),
            v4_transaction("c", (1, 0), false, &[0]),
        ],
        ..Default::default()
    };
    let actions = h.c.add_partitions_to_txn(&meta, &request, &|_, _| true, h.now);
    h.run(actions);
    assert!(h.response(meta.token).is_none());
    h.ack();
    let Some(Response::AddPartitionsToTxn(r)) = h.response(meta.token) else { panic!() };
    assert!(r.results_by_topic_v3_and_below.is_empty());
    let summary: Vec<(String, Vec<(i32, i16)>)> = r
        .results_by_transaction
        .iter()
        .map(|t| {
            let parts = t.topic_results[0].results_by_partition.iter();
            (t.transactional_id.clone(), parts.map(|p| (p.partition_index, p.partition_error_code)).collect())
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("a".into(), vec![(0, 0), (1, 0)]),
            ("b".into(), vec![(3, 0), (4, code(ErrorCode::TransactionAbortable))]),
            ("c".into(), vec![(0, code(ErrorCode::InvalidProducerIdMapping))]),
        ]
    );
    assert_eq!(h.state("a"), TxnState::Ongoing);
    assert_eq!(h.c.transaction("b").unwrap().partitions, vec![tp("t", 3)], "verify_only adds nothing");
}

#[test]
fn verify_partitions_follows_kafka() {
    let mut h = Harness::new();
    let (pid, epoch) = h.init("a");
    let parts = [tp("t", 0), tp("t", 1)];
    let errors = |h: &Harness, id: &str, pid: i64, epoch: i16| -> Vec<i16> {
        h.c.verify_partitions(id, pid, epoch, &parts).iter().map(|(_, e)| e.code()).collect()
    };
    let abortable = code(ErrorCode::TransactionAbortable);
    assert_eq!(
        errors(&h, "a", pid, epoch),
        vec![abortable, abortable],
        "Empty: nothing is in the transaction"
    );
    h.add("a", (pid, epoch), &[("t", 0)]);
    assert_eq!(errors(&h, "a", pid, epoch), vec![0, abortable]);
    assert_eq!(errors(&h, "a", pid + 1, epoch), vec![code(ErrorCode::InvalidProducerIdMapping); 2]);
    assert_eq!(errors(&h, "a", pid, epoch - 1), vec![code(ErrorCode::ProducerFenced); 2]);
    assert_eq!(errors(&h, "zz", pid, epoch), vec![code(ErrorCode::InvalidProducerIdMapping); 2]);
    assert_eq!(errors(&h, "", pid, epoch), vec![code(ErrorCode::InvalidRequest); 2]);
    h.auto_markers = false;
    assert_eq!(h.end("a", (pid, epoch), false), 0);
    assert_eq!(errors(&h, "a", pid, epoch), vec![code(ErrorCode::ConcurrentTransactions); 2]);
    h.complete_markers(|_| ErrorCode::None);
    // A late produce after the abort (the Jepsen hole KIP-890 closes) is refused.
    assert_eq!(errors(&h, "a", pid, epoch), vec![abortable, abortable]);
    let partition = h.c.partition_for("a");
    h.c.unload(partition, h.now);
    assert_eq!(errors(&h, "a", pid, epoch), vec![code(ErrorCode::NotCoordinator); 2]);
}

#[test]
fn verification_errors_as_clients_see_them() {
    use ErrorCode::*;
    assert_eq!(verification_error_for_client(TransactionAbortable, true), TransactionAbortable);
    assert_eq!(verification_error_for_client(TransactionAbortable, false), InvalidTxnState);
    assert_eq!(verification_error_for_client(ProducerFenced, true), InvalidProducerEpoch);
    assert_eq!(verification_error_for_client(ConcurrentTransactions, false), ConcurrentTransactions);
}
