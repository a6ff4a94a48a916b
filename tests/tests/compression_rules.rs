//! What Kafka's compression KIPs ask of the broker.
//!
//! KIP-110: zstd is for clients that say they know it. A Produce below v7 carrying a zstd
//! batch is refused with UNSUPPORTED_COMPRESSION_TYPE (the other partitions of the
//! request are appended), and a Fetch below v10 of a topic whose `compression.type` is
//! zstd is refused the same way, while v10 and later read it.
//!
//! KIP-390: `compression.{gzip,zstd}.level` set the level a broker recompresses at;
//! a batch already in the topic's codec is kept as the producer compressed it.

use bytes::Bytes;
use strata_client::{Client, ClientConfig};
use strata_protocol::messages::create_topics::{CreatableTopic, CreatableTopicConfig, CreateTopicsRequest};
use strata_protocol::messages::fetch::{FetchPartition, FetchRequest, FetchTopic};
use strata_protocol::messages::produce::{PartitionProduceData, ProduceRequest, TopicProduceData};
use strata_protocol::records::{Compression, NewRecord, RecordBatch, RecordBatchBuilder, RecordBatches};
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};
use strata_tests::BrokerProcess;

fn batch(codec: Compression, n: usize) -> Bytes {
    let mut b = RecordBatchBuilder::new(0).compression(codec);
    for i in 0..n {
        let value = Bytes::from(format!("value-{i}-").repeat(20));
        b.append(&NewRecord::new(1_700_000_000_000 + i as i64, None, Some(value))).unwrap();
    }
    b.build().unwrap()
}

fn produce(parts: &[(&str, Bytes)]) -> RequestBody {
    RequestBody::Produce(ProduceRequest {
        acks: 1,
        timeout_ms: 10_000,
        topic_data: parts
            .iter()
            .map(|(name, records)| TopicProduceData {
                name: name.to_string(),
                partition_data: vec![PartitionProduceData { index: 0, records: Some(records.clone()) }],
            })
            .collect(),
        ..Default::default()
    })
}

fn fetch(topic: &str) -> RequestBody {
    RequestBody::Fetch(FetchRequest {
        max_wait_ms: 0,
        min_bytes: 1,
        topics: vec![FetchTopic {
            topic: topic.into(),
            partitions: vec![FetchPartition {
                partition: 0,
                fetch_offset: 0,
                partition_max_bytes: 1 << 20,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    })
}

/// Creates one-partition topics with the given configs; each answer's error code.
async fn create(client: &Client, topics: &[(&str, &[(&str, &str)])]) -> Vec<i16> {
    let topics = topics
        .iter()
        .map(|(name, configs)| CreatableTopic {
            name: name.to_string(),
            num_partitions: 1,
            replication_factor: -1,
            configs: configs
                .iter()
                .map(|(k, v)| CreatableTopicConfig { name: k.to_string(), value: Some(v.to_string()) })
                .collect(),
            ..Default::default()
        })
        .collect();
    let create = CreateTopicsRequest { topics, timeout_ms: 10_000, ..Default::default() };
    let ResponseBody::CreateTopics(r) =
        client.controller().await.unwrap().call(RequestBody::CreateTopics(create)).await.unwrap()
    else {
        panic!("wrong response")
    };
    r.topics.iter().map(|t| t.error_code).collect()
}

/// The batches a Fetch at `version` returns for partition 0 of `topic` (asserting no error).
async fn fetch_batches(
    conn: &strata_client::connection::Connection,
    topic: &str,
    version: i16,
) -> Vec<RecordBatch> {
    let ResponseBody::Fetch(r) = conn.call_at(version, fetch(topic)).await.unwrap().body else {
        panic!("wrong response")
    };
    let pd = &r.responses[0].partitions[0];
    assert_eq!(pd.error_code, 0, "{topic} at v{version}: {pd:?}");
    let records = pd.records.as_ref().and_then(|r| r.memory()).unwrap_or_default();
    RecordBatches::new(records).map(|b| b.unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zstd_is_refused_below_produce_v7_and_fetch_v10() {
    let broker = BrokerProcess::start(&[]).expect("broker");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.unwrap();
    let codes = create(&client, &[("stored-zstd", &[("compression.type", "zstd")]), ("plain", &[])]).await;
    assert_eq!(codes, vec![0, 0]);
    let (_, conn) = client.leader("plain", 0).await.unwrap();

    // Produce v6: the zstd batch is refused, the lz4 one beside it is appended.
    let body =
        produce(&[("plain", batch(Compression::Zstd, 3)), ("stored-zstd", batch(Compression::Lz4, 4))]);
    let ResponseBody::Produce(r) = conn.call_at(6, body).await.unwrap().body else {
        panic!("wrong response")
    };
    let part =
        |name: &str| r.responses.iter().find(|t| t.name == name).unwrap().partition_responses[0].clone();
    let refused = part("plain");
    assert_eq!(
        ErrorCode::from_code(refused.error_code),
        Some(ErrorCode::UnsupportedCompressionType),
        "{refused:?}"
    );
    assert_eq!((part("stored-zstd").error_code, part("stored-zstd").base_offset), (0, 0));

    // Produce v7 may carry zstd.
    let body = produce(&[("plain", batch(Compression::Zstd, 3))]);
    let ResponseBody::Produce(r) = conn.call_at(7, body).await.unwrap().body else {
        panic!("wrong response")
    };
    let p = &r.responses[0].partition_responses[0];
    assert_eq!((p.error_code, p.base_offset), (0, 0), "{p:?}");

    // Fetch v9 of the zstd topic is refused; of the other topic (whose batch is zstd
    // because its producer chose it, not the topic) it is served, as in Kafka.
    for (topic, version, expect) in [
        ("stored-zstd", 9, Some(ErrorCode::UnsupportedCompressionType)),
        ("stored-zstd", 4, Some(ErrorCode::UnsupportedCompressionType)),
        ("plain", 9, None),
        ("stored-zstd", 10, None),
        ("stored-zstd", 12, None),
    ] {
        if let Some(code) = expect {
            let ResponseBody::Fetch(r) = conn.call_at(version, fetch(topic)).await.unwrap().body else {
                panic!("wrong response")
            };
            let pd = &r.responses[0].partitions[0];
            assert_eq!(pd.error_code, code.code(), "{topic} at v{version}: {pd:?}");
            assert!(pd.records.as_ref().is_none_or(|r| r.is_empty()), "{topic} at v{version}: no records");
            continue;
        }
        let batches = fetch_batches(&conn, topic, version).await;
        assert_eq!(batches.len(), 1, "{topic} at v{version}");
        let (codec, count) =
            (batches[0].compression().unwrap(), batches[0].records(1 << 20).unwrap().count());
        let expected = if topic == "plain" { (Compression::Zstd, 3) } else { (Compression::Zstd, 4) };
        assert_eq!((codec, count), expected, "{topic} at v{version}: stored as the topic says");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_topics_level_is_what_the_broker_recompresses_at() {
    let broker = BrokerProcess::start(&["compression.gzip.level=1"]).expect("broker");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.unwrap();
    let codes = create(
        &client,
        &[
            ("zstd-1", &[("compression.type", "zstd"), ("compression.zstd.level", "1")]),
            ("zstd-19", &[("compression.type", "zstd"), ("compression.zstd.level", "19")]),
            ("gzip-broker-1", &[("compression.type", "gzip")]),
            ("gzip-9", &[("compression.type", "gzip"), ("compression.gzip.level", "9")]),
            ("bad-level", &[("compression.type", "zstd"), ("compression.zstd.level", "23")]),
        ],
    )
    .await;
    assert_eq!(codes[..4], [0, 0, 0, 0]);
    assert_eq!(codes[4], ErrorCode::InvalidConfig.code(), "a level out of Kafka's range");
    let (_, conn) = client.leader("zstd-1", 0).await.unwrap();

    // The same uncompressed batch to every topic: text that compresses better with effort.
    let mut b = RecordBatchBuilder::new(0);
    for i in 0..400u64 {
        let value = format!(
            "{{\"id\":{i},\"user\":\"u{}\",\"score\":{},\"tags\":[\"t{}\",\"t{}\"]}}",
            i * 7919 % 1000,
            i * 31 % 97,
            i % 13,
            i % 29
        );
        b.append(&NewRecord::new(1_700_000_000_000, None, Some(Bytes::from(value)))).unwrap();
    }
    let plain = b.build().unwrap();
    let topics = ["zstd-1", "zstd-19", "gzip-broker-1", "gzip-9"];
    let body = produce(&topics.iter().map(|t| (*t, plain.clone())).collect::<Vec<_>>());
    let ResponseBody::Produce(r) = conn.call_at(9, body).await.unwrap().body else {
        panic!("wrong response")
    };
    assert!(r.responses.iter().all(|t| t.partition_responses[0].error_code == 0), "{r:?}");

    let mut sizes = Vec::new();
    for topic in topics {
        let batches = fetch_batches(&conn, topic, 12).await;
        assert_eq!(batches.len(), 1, "{topic}");
        let expected = if topic.starts_with("zstd") { Compression::Zstd } else { Compression::Gzip };
        assert_eq!(batches[0].compression().unwrap(), expected, "{topic}");
        assert_eq!(batches[0].records(1 << 20).unwrap().count(), 400, "{topic}");
        sizes.push(batches[0].size_in_bytes());
    }
    assert!(sizes[1] < sizes[0], "zstd level 19 ({}) beats level 1 ({})", sizes[1], sizes[0]);
    assert!(sizes[3] < sizes[2], "gzip level 9 ({}) beats the broker's level 1 ({})", sizes[3], sizes[2]);
}
