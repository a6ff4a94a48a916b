//! DeleteTopics (20): by name (v0-5) or by name or id (v6+), forwarded to the active
//! controller; answered once this broker's metadata no longer shows the topics.

use super::forward::RequestDeadline;
use crate::node::Node;
use strata_protocol::messages::delete_topics::{DeleteTopicState, DeleteTopicsRequest, DeleteTopicsResponse};
use strata_protocol::{RequestBody, ResponseBody};

/// Handles DeleteTopics.
pub async fn handle(node: &Node, version: i16, request: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let topics: Vec<DeleteTopicState> = if version >= 6 {
        request.topics
    } else {
        request
            .topic_names
            .into_iter()
            .map(|n| DeleteTopicState { name: Some(n), ..Default::default() })
            .collect()
    };
    let timeout_ms = request.timeout_ms;
    let deadline = RequestDeadline::new(timeout_ms);
    let body = RequestBody::DeleteTopics(DeleteTopicsRequest { topics, topic_names: Vec::new(), timeout_ms });
    let response = match super::forward::within(node, body, deadline).await {
        ResponseBody::DeleteTopics(r) => r,
        _ => return DeleteTopicsResponse::default(),
    };
    let deleted: Vec<String> =
        response.responses.iter().filter(|r| r.error_code == 0).filter_map(|r| r.name.clone()).collect();
    node.await_topics_gone(&deleted, deadline.apply_wait()).await;
    response
}
