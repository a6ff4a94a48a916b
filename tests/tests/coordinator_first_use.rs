//! The first use of groups on a fresh broker: the first FindCoordinator creates
//! `__consumer_offsets`; consumers starting at the same moment (librdkafka's test 0113
//! starts several) ask FindCoordinator while it is being created, are told this broker as
//! soon as the metadata shows the topic, and send OffsetFetch at once. That must be
//! answered (or told COORDINATOR_LOAD_IN_PROGRESS, which clients retry), never
//! NOT_COORDINATOR, which sends a client looking for a coordinator that is this same broker
//! (0113 gave up on it). The window is the time between the metadata showing the new
//! partitions and the group coordinator loading them, so many clients start a few
//! milliseconds apart, each pipelining FindCoordinator and OffsetFetch on its own connection
//! as librdkafka does.

use std::time::Duration;
use strata_client::{Client, ClientConfig};
use strata_protocol::messages::find_coordinator::FindCoordinatorRequest;
use strata_protocol::messages::offset_fetch::{
    OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};
use strata_tests::BrokerProcess;

/// One client's pipelined FindCoordinator + OffsetFetch: the error codes of the OffsetFetch
/// if FindCoordinator named a coordinator, else nothing.
async fn first_fetch(addr: String, group: String) -> Option<Vec<i16>> {
    let client = Client::connect(ClientConfig::new(&addr)).await.expect("connect");
    let conn = client.broker(0).await.expect("connection");
    let find =
        FindCoordinatorRequest { key: group.clone(), key_type: 0, coordinator_keys: vec![group.clone()] };
    // Both shapes, so whichever version the connection speaks asks the same (v8+ batches
    // groups).
    let fetch = OffsetFetchRequest {
        group_id: group.clone(),
        topics: Some(vec![OffsetFetchRequestTopic { name: "t".into(), partition_indexes: vec![0] }]),
        groups: vec![OffsetFetchRequestGroup {
            group_id: group.clone(),
            topics: Some(vec![OffsetFetchRequestTopics { name: "t".into(), partition_indexes: vec![0] }]),
            ..Default::default()
        }],
        ..Default::default()
    };
    let (found, fetched) = tokio::join!(
        conn.call(RequestBody::FindCoordinator(find)),
        conn.call(RequestBody::OffsetFetch(fetch))
    );
    let ResponseBody::FindCoordinator(found) = found.expect("find") else { panic!("wrong response") };
    if found.error_code != 0 || found.coordinators.iter().any(|c| c.error_code != 0) {
        return None;
    }
    let ResponseBody::OffsetFetch(r) = fetched.expect("fetch") else { panic!("wrong response") };
    let mut codes = vec![r.error_code];
    codes.extend(r.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)));
    codes.extend(r.groups.iter().map(|g| g.error_code));
    codes.extend(
        r.groups.iter().flat_map(|g| g.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code))),
    );
    Some(codes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_fetch_while_the_offsets_topic_is_created_is_never_not_coordinator() {
    let broker = BrokerProcess::start(&["offsets.topic.num.partitions=50"]).expect("broker");
    let addr = broker.addr().to_string();
    let mut tasks = Vec::new();
    for i in 0..40u64 {
        let addr = addr.clone();
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(i * 4)).await;
            first_fetch(addr, format!("first-{i}")).await
        }));
    }
    let mut answered = 0;
    for (i, t) in tasks.into_iter().enumerate() {
        let Some(codes) = t.await.expect("task") else { continue };
        answered += 1;
        for code in codes {
            assert!(
                code == 0 || code == ErrorCode::CoordinatorLoadInProgress.code(),
                "client {i}: OffsetFetch answered {:?}",
                ErrorCode::from_code(code)
            );
        }
    }
    assert!(answered > 0, "no FindCoordinator named a coordinator");
}
