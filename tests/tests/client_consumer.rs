//! The client crate's consumer against the real broker: every codec read back; three
//! consumers joining and leaving a group under load with nothing lost and nothing
//! processed twice by committed offsets; static membership surviving a restart without
//! a rebalance; `read_committed` skipping an aborted transaction written by
//! librdkafka; positions restored from a checkpoint; and a librdkafka consumer sharing
//! a group with ours. Test data is produced with raw Produce requests.
//!
//! One test binary; the tests live in `client_consumer/` by concern: `positions`
//! (reading, checkpoints, seeks, `auto.offset.reset`, commits on a manual assignment),
//! `groups` (membership and rebalancing) and `librdkafka` (interop with it). This file
//! holds the helpers they share.

use bytes::Bytes;
use std::time::{Duration, Instant};
use strata_client::consumer::{Consumer, ConsumerConfig};
use strata_client::{Client, TopicPartition};
use strata_protocol::messages::produce::{PartitionProduceData, ProduceRequest, TopicProduceData};
use strata_protocol::records::{Compression, NewRecord, RecordBatchBuilder};
use strata_protocol::{RequestBody, ResponseBody};
use strata_tests::BrokerProcess;

// A test crate root resolves `mod` next to itself, hence the paths.
#[path = "client_consumer/groups.rs"]
mod groups;
#[path = "client_consumer/librdkafka.rs"]
mod librdkafka;
#[path = "client_consumer/positions.rs"]
mod positions;

fn broker() -> BrokerProcess {
    BrokerProcess::start(&["group.initial.rebalance.delay.ms=0"]).expect("broker")
}

/// Produces one batch of `values` (acks=all); returns its base offset.
async fn produce(client: &Client, topic: &str, partition: i32, values: &[String], codec: Compression) -> i64 {
    let mut builder = RecordBatchBuilder::new(0).compression(codec);
    for (i, v) in values.iter().enumerate() {
        let record = NewRecord::new(
            1_700_000_000_000 + i as i64,
            Some(Bytes::from(format!("k{i}"))),
            Some(Bytes::from(v.clone())),
        )
        .with_header("h", Some(Bytes::from_static(b"hv")));
        builder.append(&record).expect("append");
    }
    let batch = builder.build().expect("build");
    let request = ProduceRequest {
        transactional_id: None,
        acks: -1,
        timeout_ms: 10_000,
        topic_data: vec![TopicProduceData {
            name: topic.to_string(),
            partition_data: vec![PartitionProduceData { index: partition, records: Some(batch) }],
        }],
    };
    let (_, conn) = client.leader(topic, partition).await.expect("leader");
    let ResponseBody::Produce(r) = conn.call(RequestBody::Produce(request)).await.expect("produce") else {
        panic!("wrong api")
    };
    let p = &r.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 0, "produce to {topic}-{partition}");
    p.base_offset
}

fn config(broker: &BrokerProcess, group: Option<&str>) -> ConsumerConfig {
    let mut c = ConsumerConfig::new(&broker.addr().to_string());
    if let Some(g) = group {
        c.set("group.id", g).expect("group.id");
    }
    c.set("auto.offset.reset", "earliest").expect("reset");
    c.set("enable.auto.commit", "false").expect("auto commit");
    c.set("fetch.max.wait.ms", "100").expect("wait");
    c.set("heartbeat.interval.ms", "300").expect("hb");
    c.set("session.timeout.ms", "10000").expect("session");
    c.set("max.poll.interval.ms", "15000").expect("poll interval");
    c
}

/// Polls until `done` says so or the deadline passes; returns everything polled.
async fn poll_until(
    consumer: &mut Consumer,
    deadline: Duration,
    mut done: impl FnMut(&[(TopicPartition, i64, String)]) -> bool,
) -> Vec<(TopicPartition, i64, String)> {
    let end = Instant::now() + deadline;
    let mut seen = Vec::new();
    while !done(&seen) {
        assert!(Instant::now() < end, "timed out; got {} records", seen.len());
        for r in consumer.poll(Duration::from_millis(200)).await.expect("poll") {
            let value = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
            seen.push((TopicPartition::new(&*r.topic, r.partition), r.offset, value));
        }
    }
    seen
}
