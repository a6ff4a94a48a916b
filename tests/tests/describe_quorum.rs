//! DescribeQuorum on a client listener of a single node with no configuration (a cluster of
//! one, its own quorum of one voter): answered as Kafka's brokers answer it, at every
//! version, naming this node as the leader with KRaft's offsets; any other topic or
//! partition is UNKNOWN_TOPIC_OR_PARTITION.

use strata_client::{Client, ClientConfig};
use strata_protocol::messages::describe_quorum::{DescribeQuorumRequest, PartitionData, TopicData};
use strata_protocol::{ApiKey, ErrorCode, RequestBody, ResponseBody};
use strata_tests::BrokerProcess;

fn request(topic: &str, partition: i32) -> RequestBody {
    RequestBody::DescribeQuorum(DescribeQuorumRequest {
        topics: vec![TopicData {
            topic_name: topic.into(),
            partitions: vec![PartitionData { partition_index: partition }],
        }],
    })
}

#[tokio::test]
async fn a_single_node_describes_its_quorum_of_one_at_every_version() {
    let broker = BrokerProcess::start(&[]).expect("broker");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("connect");
    let conn = client.broker(0).await.expect("connection");
    assert_eq!(conn.version(ApiKey::DescribeQuorum).expect("advertised"), 2);
    for version in 0..=2 {
        let response = conn.call_at(version, request("__cluster_metadata", 0)).await.expect("answer");
        let ResponseBody::DescribeQuorum(r) = response.body else { panic!("wrong response") };
        assert_eq!(r.error_code, 0, "v{version}");
        let p = &r.topics[0].partitions[0];
        assert_eq!((p.error_code, p.leader_id), (0, 0), "v{version}: {p:?}");
        assert!(p.leader_epoch >= 1 && p.high_watermark > 0, "v{version}: {p:?}");
        assert_eq!(p.current_voters.len(), 1, "v{version}");
        assert!(p.current_voters[0].log_end_offset >= p.high_watermark, "v{version}: {p:?}");
    }
    for (topic, partition) in [("t", 0), ("__cluster_metadata", 3)] {
        let response = conn.call(request(topic, partition)).await.expect("answer");
        let ResponseBody::DescribeQuorum(r) = response else { panic!("wrong response") };
        assert_eq!(r.topics[0].partitions[0].error_code, ErrorCode::UnknownTopicOrPartition.code());
    }
}
