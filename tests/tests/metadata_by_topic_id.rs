//! Metadata v10+ by topic id: a non-zero id names the topic and the name sent beside it is
//! ignored, as in Kafka. Kafka's Java Admin (`describeTopics(TopicCollection.ofTopicIds(..))`)
//! sends `name: ""` with the id; answering by that empty name (INVALID_TOPIC_EXCEPTION with a
//! zero id) made the client throw IllegalStateException. An unknown id is UNKNOWN_TOPIC_ID with
//! the id echoed.

use strata_client::{Client, ClientConfig};
use strata_protocol::codec::Uuid;
use strata_protocol::messages::metadata::{MetadataRequest, MetadataRequestTopic};
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};
use strata_tests::BrokerProcess;

fn by(topic_id: Uuid, name: Option<&str>) -> RequestBody {
    RequestBody::Metadata(MetadataRequest {
        topics: Some(vec![MetadataRequestTopic { topic_id, name: name.map(String::from) }]),
        allow_auto_topic_creation: false,
        ..Default::default()
    })
}

#[tokio::test]
async fn a_topic_id_names_the_topic_whatever_name_comes_with_it() {
    let broker = BrokerProcess::start(&[]).expect("broker");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("connect");
    client.refresh_metadata_creating(&["by-id".to_string()]).await.expect("topic");
    let conn = client.broker(0).await.expect("connection");
    let response = conn.call_at(12, by(Uuid::ZERO, Some("by-id"))).await.expect("by name");
    let ResponseBody::Metadata(r) = response.body else { panic!("wrong response") };
    let id = r.topics[0].topic_id;
    assert!(!id.is_zero(), "{:?}", r.topics[0]);
    for (version, name) in [(12, Some("")), (12, None), (12, Some("another")), (10, Some(""))] {
        let response = conn.call_at(version, by(id, name)).await.expect("by id");
        let ResponseBody::Metadata(r) = response.body else { panic!("wrong response") };
        let t = &r.topics[0];
        assert_eq!(
            (t.error_code, t.name.as_deref(), t.topic_id),
            (0, Some("by-id"), id),
            "v{version} {name:?}"
        );
        assert_eq!(t.partitions.len(), 1, "v{version} {name:?}");
    }
    let unknown = Uuid([7; 16]);
    let response = conn.call_at(12, by(unknown, Some(""))).await.expect("unknown id");
    let ResponseBody::Metadata(r) = response.body else { panic!("wrong response") };
    let t = &r.topics[0];
    assert_eq!((t.error_code, t.topic_id), (ErrorCode::UnknownTopicId.code(), unknown), "{t:?}");
}
