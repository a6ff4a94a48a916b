//! KIP-110 as Kafka applies it: zstd is for clients that say they know it. A Produce
//! below v7 carrying a zstd batch is refused with UNSUPPORTED_COMPRESSION_TYPE (the
//! other partitions of the request are appended), and a Fetch below v10 of a topic
//! whose `compression.type` is zstd is refused the same way, while v10 and later read it.

use bytes::Bytes;
use strata_client::{Client, ClientConfig};
use strata_protocol::messages::create_topics::{CreatableTopic, CreatableTopicConfig, CreateTopicsRequest};
use strata_protocol::messages::fetch::{FetchPartition, FetchRequest, FetchTopic};
use strata_protocol::messages::produce::{PartitionProduceData, ProduceRequest, TopicProduceData};
use strata_protocol::records::{Compression, NewRecord, RecordBatchBuilder, RecordBatches};
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zstd_is_refused_below_produce_v7_and_fetch_v10() {
    let broker = BrokerProcess::start(&[]).expect("broker");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.unwrap();
    let topic = |name: &str, configs: Vec<CreatableTopicConfig>| CreatableTopic {
        name: name.into(),
        num_partitions: 1,
        replication_factor: -1,
        configs,
        ..Default::default()
    };
    let zstd = vec![CreatableTopicConfig { name: "compression.type".into(), value: Some("zstd".into()) }];
    let create = CreateTopicsRequest {
        topics: vec![topic("stored-zstd", zstd), topic("plain", vec![])],
        timeout_ms: 10_000,
        ..Default::default()
    };
    let ResponseBody::CreateTopics(r) =
        client.controller().await.unwrap().call(RequestBody::CreateTopics(create)).await.unwrap()
    else {
        panic!("wrong response")
    };
    assert!(r.topics.iter().all(|t| t.error_code == 0), "{r:?}");
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
        let ResponseBody::Fetch(r) = conn.call_at(version, fetch(topic)).await.unwrap().body else {
            panic!("wrong response")
        };
        let pd = &r.responses[0].partitions[0];
        assert_eq!(pd.error_code, expect.map_or(0, |c| c.code()), "{topic} at v{version}: {pd:?}");
        let records = pd.records.as_ref().and_then(|r| r.memory()).unwrap_or_default();
        if expect.is_some() {
            assert!(records.is_empty(), "{topic} at v{version}: no records with the error");
            continue;
        }
        let batches: Vec<_> = RecordBatches::new(records).map(|b| b.unwrap()).collect();
        assert_eq!(batches.len(), 1, "{topic} at v{version}");
        let (codec, count) =
            (batches[0].compression().unwrap(), batches[0].records(1 << 20).unwrap().count());
        let expected = if topic == "plain" { (Compression::Zstd, 3) } else { (Compression::Zstd, 4) };
        assert_eq!((codec, count), expected, "{topic} at v{version}: stored as the topic says");
    }
}
