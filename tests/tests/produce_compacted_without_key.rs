//! KIP-467 on compacted topics, as librdkafka's test 0011 expects: a batch with records
//! without a key is refused with INVALID_RECORD and per-record `record_errors` (the index
//! of each keyless record and why), nothing of that batch is written, and the other
//! partitions of the same request are appended as usual.

use bytes::Bytes;
use strata_client::{Client, ClientConfig};
use strata_protocol::messages::create_topics::{CreatableTopic, CreatableTopicConfig, CreateTopicsRequest};
use strata_protocol::messages::produce::{PartitionProduceData, ProduceRequest, TopicProduceData};
use strata_protocol::records::{NewRecord, RecordBatchBuilder};
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};
use strata_tests::BrokerProcess;

fn batch(keys: &[Option<&str>]) -> Bytes {
    let mut b = RecordBatchBuilder::new(0);
    for (i, k) in keys.iter().enumerate() {
        let key = k.map(|k| Bytes::from(k.to_string()));
        b.append(&NewRecord::new(1_700_000_000_000 + i as i64, key, Some(Bytes::from_static(b"v")))).unwrap();
    }
    b.build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyless_records_on_a_compacted_topic_are_refused_one_by_one() {
    let broker = BrokerProcess::start(&[]).expect("broker");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.unwrap();
    let topic = |name: &str, configs: Vec<CreatableTopicConfig>| CreatableTopic {
        name: name.into(),
        num_partitions: 1,
        replication_factor: -1,
        configs,
        ..Default::default()
    };
    let compact = vec![CreatableTopicConfig { name: "cleanup.policy".into(), value: Some("compact".into()) }];
    let create = CreateTopicsRequest {
        topics: vec![topic("compacted", compact), topic("plain", vec![])],
        timeout_ms: 10_000,
        ..Default::default()
    };
    let ResponseBody::CreateTopics(r) =
        client.controller().await.unwrap().call(RequestBody::CreateTopics(create)).await.unwrap()
    else {
        panic!("wrong response")
    };
    assert!(r.topics.iter().all(|t| t.error_code == 0), "{r:?}");

    let produce = |name: &str, records: Bytes| TopicProduceData {
        name: name.into(),
        partition_data: vec![PartitionProduceData { index: 0, records: Some(records) }],
    };
    let request = ProduceRequest {
        acks: -1,
        timeout_ms: 10_000,
        topic_data: vec![
            produce("compacted", batch(&[Some("a"), None, Some("b"), None])),
            produce("plain", batch(&[None, None])),
        ],
        ..Default::default()
    };
    let (_, leader) = client.leader("compacted", 0).await.unwrap();
    let ResponseBody::Produce(r) = leader.call(RequestBody::Produce(request)).await.unwrap() else {
        panic!("wrong response")
    };
    let compacted = &r.responses.iter().find(|t| t.name == "compacted").unwrap().partition_responses[0];
    assert_eq!(ErrorCode::from_code(compacted.error_code), Some(ErrorCode::InvalidRecord));
    let indexes: Vec<i32> = compacted.record_errors.iter().map(|e| e.batch_index).collect();
    assert_eq!(indexes, vec![1, 3], "{compacted:?}");
    assert!(compacted.record_errors[0].batch_index_error_message.as_deref().unwrap().contains("without key"));
    assert!(compacted.error_message.as_deref().unwrap().contains("2 record errors"));
    let plain = &r.responses.iter().find(|t| t.name == "plain").unwrap().partition_responses[0];
    assert_eq!((plain.error_code, plain.base_offset), (0, 0), "the other partition is appended");

    // Nothing of the refused batch was written; a keyed batch goes in at offset 0.
    let request = ProduceRequest {
        acks: -1,
        timeout_ms: 10_000,
        topic_data: vec![produce("compacted", batch(&[Some("a"), Some("b")]))],
        ..Default::default()
    };
    let ResponseBody::Produce(r) = leader.call(RequestBody::Produce(request)).await.unwrap() else {
        panic!("wrong response")
    };
    let p = &r.responses[0].partition_responses[0];
    assert_eq!((p.error_code, p.base_offset), (0, 0), "{p:?}");
    assert!(p.record_errors.is_empty());
}
