//! A consume-transform-produce loop entirely on the Rust client: a group consumer with
//! `read_committed`, a transactional producer that writes each batch's transformation and
//! sends the consumed offsets to the transaction (KIP-447 group metadata), and random
//! aborts (a quarter of the transactions) after which the consumer rewinds to the
//! batch's start. A `read_committed` reader of the output must see every input value
//! exactly once, and the group's committed offsets must end at the input's end.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use strata_client::consumer::{Consumer, ConsumerConfig, NoopListener};
use strata_client::producer::{Producer, ProducerConfig, ProducerRecord};
use strata_client::{Client, ClientConfig, OffsetAndMetadata, TopicPartition};
use strata_protocol::messages::create_topics::{CreatableTopic, CreateTopicsRequest};
use strata_protocol::{RequestBody, ResponseBody};
use strata_tests::BrokerProcess;

const PARTITIONS: i32 = 3;
const RECORDS: usize = 3_000;

async fn create_topics(client: &Client, names: &[&str]) {
    let request = CreateTopicsRequest {
        topics: names
            .iter()
            .map(|n| CreatableTopic {
                name: n.to_string(),
                num_partitions: PARTITIONS,
                replication_factor: -1,
                ..Default::default()
            })
            .collect(),
        timeout_ms: 10_000,
        ..Default::default()
    };
    let ResponseBody::CreateTopics(r) =
        client.controller().await.unwrap().call(RequestBody::CreateTopics(request)).await.unwrap()
    else {
        panic!("wrong response")
    };
    assert!(r.topics.iter().all(|t| t.error_code == 0), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_transform_produce_with_random_aborts_is_exactly_once() {
    let broker =
        BrokerProcess::start(&["offsets.topic.num.partitions=2", "transaction.state.log.num.partitions=2"])
            .expect("broker");
    let bootstrap = broker.addr().to_string();
    let client = Client::connect(ClientConfig::new(&bootstrap)).await.unwrap();
    create_topics(&client, &["ctp-in", "ctp-out"]).await;

    // The input: unique values, idempotent, acknowledged.
    let input = Producer::new(ProducerConfig::new(&bootstrap)).await.unwrap();
    let mut deliveries = input
        .send_all(
            (0..RECORDS).map(|i| ProducerRecord::new("ctp-in").key(format!("k{i}")).value(format!("v{i}"))),
        )
        .await
        .unwrap();
    while let Some(result) = deliveries.next().await {
        result.expect("input acknowledged");
    }
    input.close().await.unwrap();

    let mut config = ConsumerConfig::new(&bootstrap);
    config.set("group.id", "ctp").unwrap();
    config.set("isolation.level", "read_committed").unwrap();
    config.set("auto.offset.reset", "earliest").unwrap();
    config.set("enable.auto.commit", "false").unwrap();
    config.set("max.poll.records", "97").unwrap();
    let mut consumer = Consumer::new(config).await.unwrap();
    consumer.subscribe(&["ctp-in"], Box::new(NoopListener)).unwrap();
    let mut config = ProducerConfig::new(&bootstrap);
    config.set("transactional.id", "ctp-app").unwrap();
    let producer = Producer::new(config).await.unwrap();
    producer.init_transactions().await.unwrap();

    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (mut committed, mut aborted) = (0usize, 0usize);
    let deadline = Instant::now() + Duration::from_secs(120);
    while committed < RECORDS {
        assert!(Instant::now() < deadline, "{committed} of {RECORDS} committed");
        let batch = consumer.poll(Duration::from_millis(200)).await.unwrap();
        if batch.is_empty() {
            continue;
        }
        let before = consumer.positions();
        let mut first: BTreeMap<TopicPartition, i64> = BTreeMap::new();
        for r in &batch {
            first.entry(TopicPartition::new(&*r.topic, r.partition)).or_insert(r.offset);
        }
        producer.begin_transaction().unwrap();
        let out = batch.iter().map(|r| {
            let value = format!("out-{}", String::from_utf8_lossy(r.value.as_deref().unwrap()));
            ProducerRecord::new("ctp-out").partition(r.partition).value(value)
        });
        drop(producer.send_all(out).await.unwrap());
        let offsets: BTreeMap<TopicPartition, OffsetAndMetadata> =
            before.iter().map(|(tp, o)| (tp.clone(), OffsetAndMetadata::new(*o))).collect();
        producer.send_offsets_to_transaction(&offsets, &consumer.group_metadata()).await.unwrap();
        if rand() % 4 == 0 {
            producer.abort_transaction().await.unwrap();
            aborted += 1;
            // Read the batch again.
            consumer.restore_positions(&first).unwrap();
        } else {
            producer.commit_transaction().await.unwrap();
            committed += batch.len();
        }
    }
    assert!(aborted > 0, "no transaction was aborted");
    producer.close().await.unwrap();

    // The group's committed offsets end at the input's end (per partition).
    let partitions: Vec<_> = (0..PARTITIONS).map(|p| TopicPartition::new("ctp-in", p)).collect();
    let group_offsets = consumer.committed(&partitions).await.unwrap();
    let total: i64 = group_offsets.values().map(|o| o.as_ref().map_or(0, |o| o.offset)).sum();
    assert_eq!(total, RECORDS as i64, "committed offsets {group_offsets:?}");
    consumer.close().await.unwrap();

    // Every input value once in the committed output.
    let mut config = ConsumerConfig::new(&bootstrap);
    config.set("isolation.level", "read_committed").unwrap();
    config.set("auto.offset.reset", "earliest").unwrap();
    config.set("enable.auto.commit", "false").unwrap();
    let mut reader = Consumer::new(config).await.unwrap();
    let out_partitions: Vec<_> = (0..PARTITIONS).map(|p| TopicPartition::new("ctp-out", p)).collect();
    reader.assign(&out_partitions).unwrap();
    let mut seen: Vec<String> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < RECORDS {
        assert!(Instant::now() < deadline, "{} of {RECORDS} read back", seen.len());
        for r in reader.poll(Duration::from_millis(200)).await.unwrap() {
            seen.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
        }
    }
    // Nothing beyond: a short poll past the end finds no more committed records.
    let extra = reader.poll(Duration::from_millis(500)).await.unwrap();
    assert!(extra.is_empty(), "{} records beyond the input", extra.len());
    let unique: BTreeSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), RECORDS, "values twice in the output");
    let want: BTreeSet<String> = (0..RECORDS).map(|i| format!("out-v{i}")).collect();
    assert_eq!(unique.into_iter().cloned().collect::<BTreeSet<_>>(), want);
}
