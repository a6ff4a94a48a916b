//! CreatePartitions (37): grow a topic's partition count, forwarded to the active
//! controller (new partitions get the topic's replication factor, placed over the live
//! brokers, or the assignments given).

use crate::broker::Broker;
use std::sync::Arc;
use std::time::Duration;
use strata_protocol::messages::create_partitions::{CreatePartitionsRequest, CreatePartitionsResponse};
use strata_protocol::{RequestBody, ResponseBody};

/// Handles CreatePartitions.
pub async fn handle(broker: &Arc<Broker>, request: CreatePartitionsRequest) -> CreatePartitionsResponse {
    let validate_only = request.validate_only;
    let wanted: Vec<(String, i32)> = request.topics.iter().map(|t| (t.name.clone(), t.count)).collect();
    let response = match super::forward::plain(broker, RequestBody::CreatePartitions(request)).await {
        ResponseBody::CreatePartitions(r) => r,
        _ => return CreatePartitionsResponse::default(),
    };
    if !validate_only {
        let grown: Vec<(String, i32)> = wanted
            .into_iter()
            .filter(|(n, _)| response.results.iter().any(|r| r.name == *n && r.error_code == 0))
            .collect();
        broker
            .metadata
            .wait_for(Duration::from_secs(5), |i| {
                grown.iter().all(|(n, count)| i.topic(n).is_some_and(|t| t.partitions.len() as i32 >= *count))
            })
            .await;
        let names: Vec<String> = grown.into_iter().map(|(n, _)| n).collect();
        broker.await_topics_applied(&names, Duration::from_secs(5)).await;
    }
    response
}
