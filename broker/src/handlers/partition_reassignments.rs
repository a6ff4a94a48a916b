//! AlterPartitionReassignments (45) and ListPartitionReassignments (46), forwarded to the
//! active controller, which decides and lists moves from the metadata log
//! (`kafka-reassign-partitions.sh`, `AdminClient.alterPartitionReassignments`; the
//! controller side is `crate::controller::reassign`).

use crate::node::Node;
use std::time::Duration;
use strata_protocol::messages::alter_partition_reassignments::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
};
use strata_protocol::messages::list_partition_reassignments::{
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};

/// How long an accepted change may take to show in this broker's metadata.
const APPLY_WAIT: Duration = Duration::from_secs(2);

/// Handles AlterPartitionReassignments; once the controller accepted a change, waits
/// briefly until this broker's metadata has it, so a Metadata or
/// ListPartitionReassignments sent here next sees the move.
pub async fn alter(
    node: &Node,
    request: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    let before = node.metadata.current().applied_index;
    let allow = request.allow_replication_factor_change;
    match super::forward::plain(node, RequestBody::AlterPartitionReassignments(request)).await {
        ResponseBody::AlterPartitionReassignments(r) => {
            let accepted = r.error_code == 0
                && r.responses.iter().flat_map(|t| &t.partitions).any(|p| p.error_code == 0);
            if accepted {
                node.metadata.wait_for(APPLY_WAIT, |i| i.applied_index > before).await;
            }
            r
        }
        _ => AlterPartitionReassignmentsResponse {
            error_code: ErrorCode::UnknownServerError.code(),
            error_message: Some("the controller answered with another API".into()),
            allow_replication_factor_change: allow,
            ..Default::default()
        },
    }
}

/// Handles ListPartitionReassignments.
pub async fn list(
    node: &Node,
    request: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    match super::forward::plain(node, RequestBody::ListPartitionReassignments(request)).await {
        ResponseBody::ListPartitionReassignments(r) => r,
        _ => ListPartitionReassignmentsResponse {
            error_code: ErrorCode::UnknownServerError.code(),
            error_message: Some("the controller answered with another API".into()),
            ..Default::default()
        },
    }
}
