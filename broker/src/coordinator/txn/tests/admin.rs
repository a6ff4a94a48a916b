//! DescribeTransactions and ListTransactions.

use strata_protocol::messages::describe_transactions::DescribeTransactionsRequest;
use strata_protocol::messages::list_transactions::ListTransactionsRequest;

use super::*;

#[test]
fn describe_shows_state_partitions_and_errors() {
    let mut h = Harness::new();
    let ids = h.init("a");
    h.now += 10;
    h.add("a", ids, &[("t", 1), ("t", 0), ("u", 3)]);
    let served = [h.c.partition_for("a"), h.c.partition_for("none")];
    let unowned =
        (0..100).map(|i| format!("y{i}")).find(|id| !served.contains(&h.c.partition_for(id))).unwrap();
    h.c.unload(h.c.partition_for(&unowned), h.now);
    let request = DescribeTransactionsRequest {
        transactional_ids: vec!["a".into(), "none".into(), String::new(), unowned],
    };
    let r = h.c.describe_transactions(&request);
    let a = &r.transaction_states[0];
    assert_eq!((a.error_code, a.transaction_state.as_str()), (0, "Ongoing"));
    assert_eq!((a.producer_id, a.producer_epoch, a.transaction_timeout_ms), (ids.0, ids.1, TIMEOUT_MS));
    assert_eq!(a.transaction_start_time_ms, T0 + 10);
    let topics: Vec<_> = a.topics.iter().map(|t| (t.topic.as_str(), t.partitions.clone())).collect();
    assert_eq!(topics, vec![("t", vec![0, 1]), ("u", vec![3])]);
    let errors: Vec<i16> = r.transaction_states.iter().map(|s| s.error_code).collect();
    let expected = [
        ErrorCode::None,
        ErrorCode::TransactionalIdNotFound,
        ErrorCode::InvalidRequest,
        ErrorCode::NotCoordinator,
    ];
    assert_eq!(errors, expected.map(code));
    assert_eq!(r.transaction_states[1].transactional_id, "none");
}

#[test]
fn list_filters_by_state_producer_and_duration() {
    let mut h = Harness::new();
    let a = h.init("a");
    h.add("a", a, &[("t", 0)]);
    let b = h.init("b");
    h.init("c");
    h.now += 5_000;
    h.add("b", b, &[("t", 0)]);
    let list = |h: &Harness, states: &[&str], pids: &[i64], duration: i64| {
        let request = ListTransactionsRequest {
            state_filters: states.iter().map(|s| (*s).to_owned()).collect(),
            producer_id_filters: pids.to_vec(),
            duration_filter: duration,
        };
        let r = h.c.list_transactions(&request, h.now);
        assert_eq!(r.error_code, 0);
        let ids: Vec<String> = r.transaction_states.iter().map(|t| t.transactional_id.clone()).collect();
        (ids, r.unknown_state_filters)
    };
    assert_eq!(list(&h, &[], &[], -1).0, vec!["a", "b", "c"]);
    assert_eq!(list(&h, &["Ongoing"], &[], -1).0, vec!["a", "b"]);
    assert_eq!(
        list(&h, &["Ongoing", "Bogus"], &[], -1),
        (vec!["a".into(), "b".into()], vec!["Bogus".into()])
    );
    assert_eq!(list(&h, &[], &[b.0], -1).0, vec!["b"]);
    // Running longer than 1 s: "a" (5 s) but not "b" (just started); "c" never started.
    assert_eq!(list(&h, &["Ongoing"], &[], 1_000).0, vec!["a"]);
    let listed = h.c.list_transactions(&ListTransactionsRequest::default(), h.now);
    let c = listed.transaction_states.iter().find(|t| t.transactional_id == "c").unwrap();
    assert_eq!(c.transaction_state, "Empty");
    // While a partition loads, the whole list is unavailable.
    h.c.begin_load(0, COORDINATOR_EPOCH + 1, h.now);
    let r = h.c.list_transactions(&ListTransactionsRequest::default(), h.now);
    assert_eq!(r.error_code, code(ErrorCode::CoordinatorLoadInProgress));
}
