//! Two-phase commit (KIP-939) against the real `strata` binary: a producer initialised with
//! `enable_2pc` writes a transaction and "crashes" after preparing it; the broker is killed
//! with SIGKILL and restarted; the transaction is still open (a 2PC transaction never times
//! out, while an ordinary one beside it is aborted by its timeout), and a new producer
//! initialised with `keep_prepared_txn` learns the prepared transaction's producer id and
//! epoch, fences the old producer and commits it: `read_committed` readers then see every
//! record, once.

use bytes::Bytes;
use std::time::{Duration, Instant};
use strata_client::connection::Connection;
use strata_client::{Client, ClientConfig, CoordinatorKind};
use strata_protocol::messages::add_partitions_to_txn::{AddPartitionsToTxnRequest, AddPartitionsToTxnTopic};
use strata_protocol::messages::create_topics::{CreatableTopic, CreateTopicsRequest};
use strata_protocol::messages::describe_transactions::{DescribeTransactionsRequest, TransactionState};
use strata_protocol::messages::end_txn::EndTxnRequest;
use strata_protocol::messages::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use strata_protocol::messages::list_offsets::{ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic};
use strata_protocol::messages::produce::{PartitionProduceData, ProduceRequest, TopicProduceData};
use strata_protocol::records::{NewRecord, RecordBatchBuilder};
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};
use strata_tests::BrokerProcess;

const TOPIC: &str = "two-phase";
const RECORDS: i64 = 5;

async fn coordinator(client: &Client, id: &str) -> Connection {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match client.coordinator(CoordinatorKind::Transaction, id).await {
            Ok((_, conn)) => return conn,
            Err(e) if Instant::now() < deadline => {
                eprintln!("coordinator of {id}: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("no coordinator for {id}: {e}"),
        }
    }
}

/// InitProducerId, retried while the coordinator loads or aborts (as clients do).
async fn init(
    client: &Client,
    id: &str,
    timeout_ms: i32,
    enable_2pc: bool,
    keep: bool,
) -> InitProducerIdResponse {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let conn = coordinator(client, id).await;
        let request = InitProducerIdRequest {
            transactional_id: Some(id.into()),
            transaction_timeout_ms: timeout_ms,
            enable_2pc,
            keep_prepared_txn: keep,
            ..Default::default()
        };
        let response = match conn.call(RequestBody::InitProducerId(request)).await {
            Ok(ResponseBody::InitProducerId(r)) => r,
            Ok(other) => panic!("wrong response {other:?}"),
            Err(e) => {
                assert!(Instant::now() < deadline, "InitProducerId: {e}");
                client.forget_coordinator(CoordinatorKind::Transaction, id);
                continue;
            }
        };
        let error = ErrorCode::from_code(response.error_code).expect("known error");
        let retry = matches!(
            error,
            ErrorCode::CoordinatorLoadInProgress
                | ErrorCode::ConcurrentTransactions
                | ErrorCode::NotCoordinator
        );
        if !retry || Instant::now() >= deadline {
            return response;
        }
        if error == ErrorCode::NotCoordinator {
            client.forget_coordinator(CoordinatorKind::Transaction, id);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Adds partition `partition` to the transaction and writes `RECORDS` records into it.
async fn write_transaction(client: &Client, id: &str, ids: (i64, i16), partition: i32, tag: &str) {
    let conn = coordinator(client, id).await;
    let add = AddPartitionsToTxnRequest {
        v3_and_below_transactional_id: id.into(),
        v3_and_below_producer_id: ids.0,
        v3_and_below_producer_epoch: ids.1,
        v3_and_below_topics: vec![AddPartitionsToTxnTopic {
            name: TOPIC.into(),
            partitions: vec![partition],
        }],
        ..Default::default()
    };
    let ResponseBody::AddPartitionsToTxn(r) =
        conn.call_at(3, RequestBody::AddPartitionsToTxn(add)).await.unwrap().body
    else {
        panic!("wrong response")
    };
    assert_eq!(r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code, 0);

    let mut batch = RecordBatchBuilder::new(0).producer(ids.0, ids.1, 0).transactional(true);
    // Today's timestamps: records of 1970 would be deleted by retention at the restart.
    let now_ms =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    for i in 0..RECORDS {
        let value = Bytes::from(format!("{tag}-{i}"));
        batch.append(&NewRecord::new(now_ms + i, None, Some(value))).unwrap();
    }
    let produce = ProduceRequest {
        transactional_id: Some(id.into()),
        acks: -1,
        timeout_ms: 10_000,
        topic_data: vec![TopicProduceData {
            name: TOPIC.into(),
            partition_data: vec![PartitionProduceData {
                index: partition,
                records: Some(batch.build().unwrap()),
            }],
        }],
    };
    let (_, leader) = client.leader(TOPIC, partition).await.unwrap();
    let ResponseBody::Produce(r) = leader.call(RequestBody::Produce(produce)).await.unwrap() else {
        panic!("wrong response")
    };
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0, "{r:?}");
}

async fn describe(client: &Client, id: &str) -> TransactionState {
    let conn = coordinator(client, id).await;
    let request = DescribeTransactionsRequest { transactional_ids: vec![id.into()] };
    let ResponseBody::DescribeTransactions(r) =
        conn.call(RequestBody::DescribeTransactions(request)).await.unwrap()
    else {
        panic!("wrong response")
    };
    r.transaction_states.into_iter().next().unwrap()
}

/// The partition's last stable offset (ListOffsets latest under read_committed).
async fn last_stable_offset(client: &Client, partition: i32) -> i64 {
    let request = ListOffsetsRequest {
        replica_id: -1,
        isolation_level: 1,
        topics: vec![ListOffsetsTopic {
            name: TOPIC.into(),
            partitions: vec![ListOffsetsPartition {
                partition_index: partition,
                timestamp: -1,
                ..Default::default()
            }],
        }],
        ..Default::default()
    };
    let (_, leader) = client.leader(TOPIC, partition).await.unwrap();
    let ResponseBody::ListOffsets(r) = leader.call(RequestBody::ListOffsets(request)).await.unwrap() else {
        panic!("wrong response")
    };
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.offset
}

async fn end(client: &Client, id: &str, ids: (i64, i16), commit: bool) -> i16 {
    let conn = coordinator(client, id).await;
    let request = EndTxnRequest {
        transactional_id: id.into(),
        producer_id: ids.0,
        producer_epoch: ids.1,
        committed: commit,
    };
    let ResponseBody::EndTxn(r) = conn.call(RequestBody::EndTxn(request)).await.unwrap() else {
        panic!("wrong response")
    };
    r.error_code
}

async fn await_state(client: &Client, id: &str, state: &str) -> TransactionState {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = describe(client, id).await;
        if s.transaction_state == state {
            return s;
        }
        assert!(Instant::now() < deadline, "{id} still {} (want {state})", s.transaction_state);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepared_transaction_survives_kill_9_and_is_committed_by_the_next_producer() {
    let mut broker = BrokerProcess::start(&[
        "transaction.two.phase.commit.enable=true",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms=100",
        "transaction.state.log.num.partitions=4",
    ])
    .expect("broker");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("connect");
    let create = CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: TOPIC.into(),
            num_partitions: 2,
            replication_factor: -1,
            ..Default::default()
        }],
        timeout_ms: 10_000,
        ..Default::default()
    };
    let ResponseBody::CreateTopics(r) =
        client.controller().await.unwrap().call(RequestBody::CreateTopics(create)).await.unwrap()
    else {
        panic!("wrong response")
    };
    assert_eq!(r.topics[0].error_code, 0);

    // The 2PC producer writes its transaction into partition 0 and prepares it (a flushed
    // transaction, nothing more is sent). An ordinary producer with a 1 s timeout writes
    // into partition 1 and never ends its transaction either.
    let first = init(&client, "sink-0", 60_000, true, false).await;
    assert_eq!(first.error_code, 0);
    let prepared = (first.producer_id, first.producer_epoch);
    assert_eq!((first.ongoing_txn_producer_id, first.ongoing_txn_producer_epoch), (-1, -1));
    write_transaction(&client, "sink-0", prepared, 0, "prepared").await;
    let plain = init(&client, "plain-0", 1_000, false, false).await;
    assert_eq!(plain.error_code, 0);
    write_transaction(&client, "plain-0", (plain.producer_id, plain.producer_epoch), 1, "plain").await;
    assert_eq!(last_stable_offset(&client, 0).await, 0, "the prepared transaction holds the LSO");

    broker.kill().expect("kill");
    broker.restart().expect("restart");

    // The ordinary transaction times out and is aborted; the 2PC one is still open.
    await_state(&client, "plain-0", "CompleteAbort").await;
    let kept = describe(&client, "sink-0").await;
    assert_eq!(kept.transaction_state, "Ongoing");
    assert_eq!(kept.transaction_timeout_ms, i32::MAX);
    assert_eq!(last_stable_offset(&client, 0).await, 0);

    // An ordinary InitProducerId would abort it; the recovering producer keeps it instead
    // and finds the producer id and epoch it stored when it prepared.
    let second = init(&client, "sink-0", 60_000, true, true).await;
    assert_eq!(second.error_code, 0, "{second:?}");
    assert_eq!((second.ongoing_txn_producer_id, second.ongoing_txn_producer_epoch), prepared);
    assert_eq!((second.producer_id, second.producer_epoch), (prepared.0, prepared.1 + 1));
    let fenced = ErrorCode::from_code(end(&client, "sink-0", prepared, true).await);
    assert!(
        matches!(fenced, Some(ErrorCode::ProducerFenced | ErrorCode::InvalidProducerEpoch)),
        "the crashed producer is fenced: {fenced:?}"
    );
    assert_eq!(end(&client, "sink-0", (second.producer_id, second.producer_epoch), true).await, 0);
    await_state(&client, "sink-0", "CompleteCommit").await;
    // The records and the commit marker are stable.
    let deadline = Instant::now() + Duration::from_secs(30);
    while last_stable_offset(&client, 0).await != RECORDS + 1 {
        assert!(Instant::now() < deadline, "LSO never passed the committed transaction");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_phase_commit_is_refused_unless_the_broker_enables_it() {
    let broker = BrokerProcess::start(&[]).expect("broker");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("connect");
    let r = init(&client, "sink-1", 60_000, true, false).await;
    assert_eq!(ErrorCode::from_code(r.error_code), Some(ErrorCode::TransactionalIdAuthorizationFailed));
    let r = init(&client, "sink-1", 60_000, false, false).await;
    assert_eq!(r.error_code, 0);
}
