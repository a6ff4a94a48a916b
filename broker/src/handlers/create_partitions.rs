//! CreatePartitions (37): grow a topic's partition count, forwarded to the active
//! controller (new partitions get the topic's replication factor, placed over the live
//! brokers, or the assignments given).

use crate::node::Node;
use std::sync::Arc;
use strata_protocol::messages::create_partitions::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreatePartitionsTopicResult,
};
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};

/// Handles CreatePartitions. Growth that would not fit this broker's open files limit
/// is refused with POLICY_VIOLATION before the controller sees it.
pub async fn handle(node: &Arc<Node>, mut request: CreatePartitionsRequest) -> CreatePartitionsResponse {
    let refused = refuse_by_descriptors(node, &mut request);
    if request.topics.is_empty() {
        return CreatePartitionsResponse { results: refused, ..Default::default() };
    }
    let mut response = grow(node, request).await;
    response.results.extend(refused);
    response
}

/// Takes out of `request` the topics whose new partitions would not fit, returning
/// their refusals.
fn refuse_by_descriptors(
    node: &Node,
    request: &mut CreatePartitionsRequest,
) -> Vec<CreatePartitionsTopicResult> {
    let image = node.metadata.current();
    let mut refused = Vec::new();
    let mut total = 0;
    request.topics.retain(|t| {
        let Some(topic) = image.topic(&t.name) else { return true };
        let current = topic.partitions.len() as i64;
        let added = i64::from(t.count) - current;
        if added <= 0 {
            return true;
        }
        let here = match t.assignments.as_ref().filter(|a| !a.is_empty()) {
            Some(a) => a.iter().filter(|a| a.broker_ids.contains(&node.config.node_id)).count() as u64,
            None => {
                let rf = topic.partitions.first().map_or(1, |p| p.replicas.len()) as i64;
                super::forward::replicas_per_broker(node, added, rf)
            }
        };
        match crate::limits::refuse_new_partitions(total + here) {
            Some(why) => {
                tracing::warn!(topic = %t.name, reason = %why, "partitions refused");
                refused.push(CreatePartitionsTopicResult {
                    name: t.name.clone(),
                    error_code: ErrorCode::PolicyViolation.code(),
                    error_message: Some(why),
                });
                false
            }
            None => {
                total += here;
                true
            }
        }
    });
    refused
}

async fn grow(node: &Arc<Node>, request: CreatePartitionsRequest) -> CreatePartitionsResponse {
    let validate_only = request.validate_only;
    let deadline = super::forward::RequestDeadline::new(request.timeout_ms);
    let wanted: Vec<(String, i32)> = request.topics.iter().map(|t| (t.name.clone(), t.count)).collect();
    let response = match super::forward::within(node, RequestBody::CreatePartitions(request), deadline).await
    {
        ResponseBody::CreatePartitions(r) => r,
        _ => return CreatePartitionsResponse::default(),
    };
    if !validate_only {
        let grown: Vec<(String, i32)> = wanted
            .into_iter()
            .filter(|(n, _)| response.results.iter().any(|r| r.name == *n && r.error_code == 0))
            .collect();
        node.metadata
            .wait_for(deadline.apply_wait(), |i| {
                grown.iter().all(|(n, count)| i.topic(n).is_some_and(|t| t.partitions.len() as i32 >= *count))
            })
            .await;
        let names: Vec<String> = grown.into_iter().map(|(n, _)| n).collect();
        node.await_topics_applied(&names, deadline.apply_wait()).await;
    }
    response
}
