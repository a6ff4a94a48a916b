//! OffsetCommit for a topic that does not exist answers UNKNOWN_TOPIC_OR_PARTITION for
//! its partitions, as Kafka does (librdkafka's test 0030 expects it), while the topics
//! that exist in the same request are committed.

use strata_client::{Client, ClientConfig, CoordinatorKind};
use strata_protocol::messages::create_topics::{CreatableTopic, CreateTopicsRequest};
use strata_protocol::messages::offset_commit::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic, OffsetCommitResponse,
};
use strata_protocol::messages::offset_fetch::{OffsetFetchRequest, OffsetFetchRequestTopic};
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};
use strata_tests::BrokerProcess;

fn topic(name: &str, offset: i64) -> OffsetCommitRequestTopic {
    OffsetCommitRequestTopic {
        name: name.into(),
        partitions: vec![OffsetCommitRequestPartition {
            partition_index: 0,
            committed_offset: offset,
            ..Default::default()
        }],
    }
}

async fn commit(client: &Client, topics: Vec<OffsetCommitRequestTopic>) -> OffsetCommitResponse {
    let (_, conn) = client.coordinator(CoordinatorKind::Group, "g-unknown").await.expect("coordinator");
    let request = OffsetCommitRequest { group_id: "g-unknown".into(), topics, ..Default::default() };
    match conn.call(RequestBody::OffsetCommit(request)).await.expect("commit") {
        ResponseBody::OffsetCommit(r) => r,
        other => panic!("wrong response {other:?}"),
    }
}

fn errors(r: &OffsetCommitResponse) -> Vec<(String, i16)> {
    let mut out: Vec<_> = r.topics.iter().map(|t| (t.name.clone(), t.partitions[0].error_code)).collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_commit_for_an_unknown_topic_answers_unknown_topic_or_partition() {
    let broker = BrokerProcess::start(&["offsets.topic.num.partitions=1", "auto.create.topics.enable=true"])
        .expect("broker");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("connect");
    let create = CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: "exists".into(),
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
    let unknown = ErrorCode::UnknownTopicOrPartition.code();

    let r = commit(&client, vec![topic("exists", 5), topic("missing", 7)]).await;
    assert_eq!(errors(&r), vec![("exists".into(), 0), ("missing".into(), unknown)]);
    let r = commit(&client, vec![topic("missing", 7)]).await;
    assert_eq!(errors(&r), vec![("missing".into(), unknown)]);
    // The commit did not auto-create the topic (Kafka does not either).
    let r = commit(&client, vec![topic("missing", 8)]).await;
    assert_eq!(errors(&r), vec![("missing".into(), unknown)]);

    let (_, conn) = client.coordinator(CoordinatorKind::Group, "g-unknown").await.unwrap();
    let fetch = OffsetFetchRequest {
        group_id: "g-unknown".into(),
        topics: Some(vec![
            OffsetFetchRequestTopic { name: "exists".into(), partition_indexes: vec![0] },
            OffsetFetchRequestTopic { name: "missing".into(), partition_indexes: vec![0] },
        ]),
        ..Default::default()
    };
    let ResponseBody::OffsetFetch(r) = conn.call_at(7, RequestBody::OffsetFetch(fetch)).await.unwrap().body
    else {
        panic!("wrong response")
    };
    let committed: Vec<_> =
        r.topics.iter().map(|t| (t.name.clone(), t.partitions[0].committed_offset)).collect();
    assert!(committed.contains(&("exists".to_string(), 5)), "{committed:?}");
    assert!(
        committed.contains(&("missing".to_string(), -1)),
        "nothing stored for the unknown topic: {committed:?}"
    );
}
