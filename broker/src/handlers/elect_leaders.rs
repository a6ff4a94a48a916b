//! ElectLeaders (43): preferred or unclean leader elections, forwarded to the active
//! controller (`kafka-leader-election.sh`, `AdminClient.electLeaders`).

use crate::node::Node;
use strata_protocol::messages::elect_leaders::{ElectLeadersRequest, ElectLeadersResponse};
use strata_protocol::{RequestBody, ResponseBody};

/// Handles ElectLeaders.
pub async fn handle(node: &Node, request: ElectLeadersRequest) -> ElectLeadersResponse {
    let before = node.metadata.current().applied_index;
    match super::forward::plain(node, RequestBody::ElectLeaders(request)).await {
        ResponseBody::ElectLeaders(r) => {
            let elected = r
                .replica_election_results
                .iter()
                .flat_map(|t| &t.partition_result)
                .any(|p| p.error_code == 0);
            if elected {
                node.metadata.wait_for(std::time::Duration::from_secs(2), |i| i.applied_index > before).await;
            }
            r
        }
        _ => ElectLeadersResponse::default(),
    }
}
