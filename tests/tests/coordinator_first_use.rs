//! The first use of a group on a fresh broker: FindCoordinator creates `__consumer_offsets`
//! and names this broker, and the OffsetFetch the client sends at once must be answered
//! (or told COORDINATOR_LOAD_IN_PROGRESS, which clients retry), never NOT_COORDINATOR,
//! which sends a client looking for a coordinator that is this same broker (librdkafka's
//! test 0113 gave up on it). The window is the time between the metadata showing the new
//! partitions and the group coordinator loading them, so each try uses a fresh broker.

use strata_client::{Client, ClientConfig, CoordinatorKind};
use strata_protocol::messages::offset_fetch::{
    OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};
use strata_tests::BrokerProcess;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_fetch_right_after_the_offsets_topic_is_created_is_never_not_coordinator() {
    for attempt in 0..3 {
        let broker = BrokerProcess::start(&["offsets.topic.num.partitions=50"]).expect("broker");
        let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("connect");
        let group = format!("first-{attempt}");
        let (_, conn) = client.coordinator(CoordinatorKind::Group, &group).await.expect("coordinator");
        // Both shapes, so whichever version the connection speaks asks the same (v8+
        // batches groups).
        let request = OffsetFetchRequest {
            group_id: group.clone(),
            topics: Some(vec![OffsetFetchRequestTopic { name: "t".into(), partition_indexes: vec![0] }]),
            groups: vec![OffsetFetchRequestGroup {
                group_id: group.clone(),
                topics: Some(vec![OffsetFetchRequestTopics { name: "t".into(), partition_indexes: vec![0] }]),
                ..Default::default()
            }],
            ..Default::default()
        };
        let ResponseBody::OffsetFetch(r) = conn.call(RequestBody::OffsetFetch(request)).await.expect("fetch")
        else {
            panic!("wrong response")
        };
        let mut codes = vec![r.error_code];
        codes.extend(r.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)));
        codes.extend(r.groups.iter().map(|g| g.error_code));
        codes.extend(
            r.groups
                .iter()
                .flat_map(|g| g.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code))),
        );
        assert!(codes.len() >= 2, "a partition answered: {r:?}");
        for code in codes {
            assert!(
                code == 0 || code == ErrorCode::CoordinatorLoadInProgress.code(),
                "attempt {attempt}: OffsetFetch answered {:?}",
                ErrorCode::from_code(code)
            );
        }
    }
}
