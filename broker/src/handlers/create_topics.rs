//! CreateTopics (19): forwarded to the active controller, which validates names,
//! partition counts, replication factors (or explicit assignments) and configs and
//! creates each topic (or only validates, with `validate_only`).

use crate::node::Node;
use std::sync::Arc;
use strata_protocol::messages::create_topics::{CreateTopicsRequest, CreateTopicsResponse};

/// Handles CreateTopics.
pub async fn handle(node: &Arc<Node>, _version: i16, request: CreateTopicsRequest) -> CreateTopicsResponse {
    super::forward::create_topics(node, request).await
}
