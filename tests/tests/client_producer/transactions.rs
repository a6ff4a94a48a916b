//! Transactions of our producer against the real broker: a batch the broker refuses makes
//! the transaction abortable and the abort lets the next one commit, readers with
//! read_committed see only committed records, a zombie instance is fenced by a new one,
//! and offsets sent to a transaction are committed with it. Split out of
//! `client_producer.rs` to keep each file short.

use crate::{await_all, config, read_partition, values};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use strata_client::producer::{Producer, ProducerRecord};
use strata_client::{
    Client, ClientConfig, ConsumerGroupMetadata, ErrorCode, OffsetAndMetadata, TopicPartition,
};
use strata_protocol::messages::offset_fetch::{OffsetFetchRequest, OffsetFetchRequestTopic};
use strata_protocol::{ApiKey, RequestBody, ResponseBody};
use strata_tests::{create_topic, BrokerProcess};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_batch_makes_the_transaction_abortable_and_the_abort_lets_the_next_one_commit() {
    let broker = BrokerProcess::start(&["message.max.bytes=2000"]).expect("broker");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("connect");
    create_topic(&client, "txn-refused", 1).await;
    let producer = Producer::new(config(&broker, &[("transactional.id", "refused"), ("linger.ms", "50")]))
        .await
        .expect("producer");
    producer.init_transactions().await.expect("init");
    let before = producer.producer_id_and_epoch();
    producer.begin_transaction().expect("begin");
    let mut big = Vec::new();
    for i in 0..10 {
        big.push(
            producer
                .send(ProducerRecord::new("txn-refused").value(format!("{i:0>500}")))
                .await
                .expect("send"),
        );
    }
    let e = producer.commit_transaction().await.unwrap_err();
    assert!(e.requires_abort() && !e.is_fatal(), "{e}");
    for f in big {
        assert!(f.await.unwrap_err().requires_abort());
    }
    assert!(producer.send(ProducerRecord::new("txn-refused").value("x")).await.unwrap_err().requires_abort());
    producer.abort_transaction().await.expect("abort");
    let after = producer.producer_id_and_epoch();
    assert_eq!(after.id, before.id);
    assert!(after.epoch > before.epoch, "the abort bumped the epoch (KIP-360): {before:?} -> {after:?}");
    producer.begin_transaction().expect("begin");
    producer.send(ProducerRecord::new("txn-refused").value("small")).await.expect("send");
    producer.commit_transaction().await.expect("commit");
    let read = read_partition(&client, "txn-refused", 0, 1).await;
    assert_eq!(values(&read.records), vec!["small"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_commit_and_abort_and_readers_see_only_the_committed() {
    let broker = BrokerProcess::start(&[]).expect("broker");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("connect");
    create_topic(&client, "txn", 2).await;
    let producer =
        Producer::new(config(&broker, &[("transactional.id", "txn-app")])).await.expect("producer");
    assert!(producer.begin_transaction().is_err(), "before init_transactions");
    producer.init_transactions().await.expect("init");
    let pid = producer.producer_id_and_epoch();
    assert!(pid.is_set());
    assert!(
        producer.send(ProducerRecord::new("txn").value("outside")).await.is_err(),
        "outside a transaction"
    );

    let mut expected_committed: Vec<Vec<String>> = vec![Vec::new(), Vec::new()];
    let mut futures = Vec::new();
    for round in 0..3 {
        producer.begin_transaction().expect("begin");
        for i in 0..50 {
            let value = format!("r{round}-{i}");
            let p = i % 2;
            futures.push(
                producer
                    .send(ProducerRecord::new("txn").partition(p).value(value.clone()))
                    .await
                    .expect("send"),
            );
            if round != 1 {
                expected_committed[p as usize].push(value);
            }
        }
        if round == 1 {
            producer.flush().await.expect("flush");
            producer.abort_transaction().await.expect("abort");
        } else {
            producer.commit_transaction().await.expect("commit");
        }
    }
    await_all(futures).await;
    // An aborted transaction whose records were never sent: they fail, nothing is written.
    producer.begin_transaction().expect("begin");
    let lost = producer.send(ProducerRecord::new("txn").partition(0).value("never")).await.expect("send");
    producer.abort_transaction().await.expect("abort");
    let e = lost.await.unwrap_err();
    assert!(e.requires_abort(), "{e}");

    for p in 0..2 {
        let committed = read_partition(&client, "txn", p, 1).await;
        assert_eq!(
            values(&committed.records),
            expected_committed[p as usize],
            "partition {p}: committed records"
        );
        assert_eq!(committed.aborted.len(), 1, "partition {p}: the aborted transaction is listed");
        assert_eq!(committed.aborted[0].producer_id, pid.id);
        let all = read_partition(&client, "txn", p, 0).await;
        assert_eq!(all.records.len(), 75, "read_uncommitted sees the aborted records too");
        assert!(all.batch_of.iter().all(|(id, txn)| *id == pid.id && *txn));
    }
    producer.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zombie_transactional_producer_is_fenced_by_a_new_instance() {
    let broker = BrokerProcess::start(&[]).expect("broker");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("connect");
    create_topic(&client, "fenced", 1).await;
    let zombie = Producer::new(config(&broker, &[("transactional.id", "fence-me")])).await.expect("zombie");
    zombie.init_transactions().await.expect("init");
    zombie.begin_transaction().expect("begin");
    zombie.send(ProducerRecord::new("fenced").value("z1")).await.expect("send").await.expect("written");

    let successor =
        Producer::new(config(&broker, &[("transactional.id", "fence-me")])).await.expect("successor");
    successor.init_transactions().await.expect("init fences the zombie");
    assert!(successor.producer_id_and_epoch().epoch > zombie.producer_id_and_epoch().epoch);

    let e = zombie.commit_transaction().await.unwrap_err();
    assert!(e.is_fatal(), "{e}");
    assert!(
        matches!(e.code(), Some(ErrorCode::ProducerFenced) | Some(ErrorCode::InvalidProducerEpoch)),
        "{e}"
    );
    let again = zombie.begin_transaction().unwrap_err();
    assert!(again.is_fatal(), "the zombie can only close: {again}");

    successor.begin_transaction().expect("begin");
    successor.send(ProducerRecord::new("fenced").value("s1")).await.expect("send");
    successor.commit_transaction().await.expect("commit");
    let read = read_partition(&client, "fenced", 0, 1).await;
    assert_eq!(values(&read.records), vec!["s1".to_string()], "the zombie's open transaction was aborted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_sent_to_a_transaction_are_committed_with_it() {
    let broker = BrokerProcess::start(&[]).expect("broker");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("connect");
    create_topic(&client, "in", 1).await;
    create_topic(&client, "out", 1).await;
    let producer = Producer::new(config(&broker, &[("transactional.id", "rpw")])).await.expect("producer");
    producer.init_transactions().await.expect("init");
    let group = ConsumerGroupMetadata::new("rpw-group");
    let mut offsets = BTreeMap::new();
    offsets.insert(TopicPartition::new("in", 0), OffsetAndMetadata::new(42));

    producer.begin_transaction().expect("begin");
    producer.send(ProducerRecord::new("out").value("processed")).await.expect("send");
    producer.send_offsets_to_transaction(&offsets, &group).await.expect("offsets");
    producer.abort_transaction().await.expect("abort");
    assert_eq!(committed_offset(&client, "rpw-group").await, -1, "aborted offsets are not committed");

    producer.begin_transaction().expect("begin");
    producer.send(ProducerRecord::new("out").value("processed")).await.expect("send");
    producer.send_offsets_to_transaction(&offsets, &group).await.expect("offsets");
    producer.commit_transaction().await.expect("commit");
    assert_eq!(committed_offset(&client, "rpw-group").await, 42);
}

async fn committed_offset(client: &Client, group: &str) -> i64 {
    let (_, conn) =
        client.coordinator(strata_client::CoordinatorKind::Group, group).await.expect("coordinator");
    let version = conn.version_at_most(ApiKey::OffsetFetch, 7).expect("version");
    let request = OffsetFetchRequest {
        group_id: group.to_string(),
        topics: Some(vec![OffsetFetchRequestTopic { name: "in".to_string(), partition_indexes: vec![0] }]),
        require_stable: true,
        ..Default::default()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let ResponseBody::OffsetFetch(r) = conn
            .call_at(version, RequestBody::OffsetFetch(request.clone()))
            .await
            .expect("offset fetch")
            .body
        else {
            panic!("wrong api")
        };
        let p = &r.topics[0].partitions[0];
        // UNSTABLE_OFFSET_COMMIT while the markers are being written.
        if p.error_code == 0 {
            return p.committed_offset;
        }
        assert!(Instant::now() < deadline, "offset fetch error {}", p.error_code);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
