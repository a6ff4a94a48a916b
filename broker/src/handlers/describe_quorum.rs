//! DescribeQuorum on a client listener: forwarded to the quorum's leader, as Kafka's
//! brokers forward it (`kafka-metadata-quorum.sh --bootstrap-server`), and the answer
//! encoded at the client's version. With no leader reachable in time the answer is
//! NOT_CONTROLLER, which clients retry.

use super::forward;
use crate::controller::quorum_answer;
use crate::node::Node;
use strata_protocol::messages::describe_quorum::{DescribeQuorumRequest, DescribeQuorumResponse};
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};

/// How long the forwarded request may look for the leader.
const TIMEOUT_MS: i32 = 5_000;

/// Handles DescribeQuorum.
pub async fn handle(node: &Node, request: DescribeQuorumRequest) -> DescribeQuorumResponse {
    match forward::to_controller(
        node,
        RequestBody::DescribeQuorum(request),
        forward::RequestDeadline::new(TIMEOUT_MS),
    )
    .await
    {
        Some(ResponseBody::DescribeQuorum(r)) if !quorum_answer::is_not_leader(&r) => r,
        _ => DescribeQuorumResponse { error_code: ErrorCode::NotController.code(), ..Default::default() },
    }
}
