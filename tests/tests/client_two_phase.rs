//! The producer's two-phase-commit API (KIP-939) against the real broker: a prepared
//! transaction survives its producer (dropped without a word, as a crash would) and the
//! broker's kill -9; the next producer keeps it (and a successor of one that kept it and
//! crashed is told the same identity), and `complete_transaction` commits it when it is the
//! stored one and aborts it otherwise. Every transaction gets its own identity.

use std::time::Duration;
use strata_client::consumer::{Consumer, ConsumerConfig};
use strata_client::producer::{PreparedTxnState, Producer, ProducerConfig, ProducerRecord};
use strata_client::{Client, ClientConfig, TopicPartition};
use strata_protocol::messages::create_topics::{CreatableTopic, CreateTopicsRequest};
use strata_protocol::{RequestBody, ResponseBody};
use strata_tests::BrokerProcess;

const TOPIC: &str = "two-phase-api";

async fn producer(bootstrap: &str, tid: &str) -> Producer {
    let mut config = ProducerConfig::new(bootstrap);
    config.set("transactional.id", tid).unwrap();
    config.set("transaction.two.phase.commit.enable", "true").unwrap();
    Producer::new(config).await.unwrap()
}

async fn write(p: &Producer, values: &[&str]) {
    p.begin_transaction().unwrap();
    for v in values {
        drop(p.send(ProducerRecord::new(TOPIC).partition(0).value(v.to_string())).await.unwrap());
    }
}

/// Values of partition 0 under read_committed, up to the last stable offset.
async fn committed_values(bootstrap: &str) -> Vec<String> {
    let mut config = ConsumerConfig::new(bootstrap);
    config.set("isolation.level", "read_committed").unwrap();
    config.set("auto.offset.reset", "earliest").unwrap();
    config.set("enable.auto.commit", "false").unwrap();
    let mut c = Consumer::new(config).await.unwrap();
    let tp = TopicPartition::new(TOPIC, 0);
    c.assign(std::slice::from_ref(&tp)).unwrap();
    let end = c
        .client()
        .admin()
        .list_offsets(
            &[(tp.clone(), strata_client::admin::OffsetSpec::Latest)],
            strata_client::IsolationLevel::ReadCommitted,
        )
        .await
        .remove(0)
        .1
        .unwrap()
        .offset;
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while c.positions().get(&tp).is_none_or(|&p| p < end) {
        assert!(std::time::Instant::now() < deadline, "not read to {end}");
        for r in c.poll(Duration::from_millis(200)).await.unwrap() {
            out.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepared_transaction_is_kept_across_crashes_and_completed_by_identity() {
    let mut broker = BrokerProcess::start(&["transaction.two.phase.commit.enable=true"]).expect("broker");
    let bootstrap = broker.addr().to_string();
    let client = Client::connect(ClientConfig::new(&bootstrap)).await.unwrap();
    let create = CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: TOPIC.into(),
            num_partitions: 1,
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

    // A first producer: one transaction committed through both phases, then a second
    // prepared, and the producer "crashes" (dropped, nothing more sent).
    let p = producer(&bootstrap, "sink-a").await;
    assert_eq!(p.init_transactions_keeping_prepared().await.unwrap(), None, "nothing was open");
    write(&p, &["a1", "a2"]).await;
    let first = p.prepare_transaction().await.unwrap();
    assert!(p.send(ProducerRecord::new(TOPIC).value("late")).await.is_err(), "no sends once prepared");
    assert!(p.complete_transaction(Some(&first)).await.unwrap(), "committed");
    write(&p, &["b1", "b2", "b3"]).await;
    let second = p.prepare_transaction().await.unwrap();
    assert_ne!(first, second, "each transaction has its own identity");
    let stored = PreparedTxnState::from_bytes(&second.to_bytes()).unwrap();
    drop(p);

    broker.kill().unwrap();
    broker.restart().unwrap();
    assert_eq!(committed_values(&bootstrap).await, ["a1", "a2"], "the prepared one is not visible yet");

    // The next producer keeps it and crashes too before completing it; the one after
    // (past another kill -9) is still told the stored identity, and commits it.
    let p = producer(&bootstrap, "sink-a").await;
    assert_eq!(p.init_transactions_keeping_prepared().await.unwrap(), Some(second));
    drop(p);
    let p = producer(&bootstrap, "sink-a").await;
    assert_eq!(p.init_transactions_keeping_prepared().await.unwrap(), Some(second), "kept twice");
    drop(p);
    broker.kill().unwrap();
    broker.restart().unwrap();
    let p = producer(&bootstrap, "sink-a").await;
    assert_eq!(p.init_transactions_keeping_prepared().await.unwrap(), Some(second), "after a restart");
    assert!(p.complete_transaction(stored.as_ref()).await.unwrap());
    assert_eq!(committed_values(&bootstrap).await, ["a1", "a2", "b1", "b2", "b3"]);

    // A transaction begun after the last stored state is aborted on recovery.
    write(&p, &["c1"]).await;
    let third = p.prepare_transaction().await.unwrap();
    drop(p);
    let p = producer(&bootstrap, "sink-a").await;
    assert_eq!(p.init_transactions_keeping_prepared().await.unwrap(), Some(third));
    assert!(!p.complete_transaction(stored.as_ref()).await.unwrap(), "not the stored one: aborted");
    // The recovered producer goes on with transactions of its own.
    write(&p, &["d1"]).await;
    let fourth = p.prepare_transaction().await.unwrap();
    assert!(p.complete_transaction(Some(&fourth)).await.unwrap());
    assert_eq!(committed_values(&bootstrap).await, ["a1", "a2", "b1", "b2", "b3", "d1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keeping_a_prepared_transaction_needs_two_phase_commit_on_both_sides() {
    let broker = BrokerProcess::start(&[]).expect("broker");
    let bootstrap = broker.addr().to_string();
    // The broker does not allow it: refused, and the error is fatal for the producer.
    let p = producer(&bootstrap, "sink-b").await;
    let e = p.init_transactions_keeping_prepared().await.unwrap_err();
    assert_eq!(e.code(), Some(strata_client::ErrorCode::TransactionalIdAuthorizationFailed), "{e}");
    // The producer was not configured for it.
    let mut config = ProducerConfig::new(&bootstrap);
    config.set("transactional.id", "sink-c").unwrap();
    let p = Producer::new(config).await.unwrap();
    assert!(p.init_transactions_keeping_prepared().await.is_err());
    p.init_transactions().await.unwrap();
    p.begin_transaction().unwrap();
    assert!(p.prepare_transaction().await.is_err(), "prepare needs transaction.two.phase.commit.enable");
}
