//! DescribeCluster (60): the unfenced brokers with their endpoints on the listener the
//! client used, the cluster id and the controller id clients see. Endpoint type 2
//! (controllers, KIP-919) is refused: clients reach the cluster through brokers.

use crate::handlers::context::RequestContext;
use crate::node::Node;
use strata_protocol::messages::describe_cluster::{
    DescribeClusterBroker, DescribeClusterRequest, DescribeClusterResponse,
};
use strata_protocol::ErrorCode;

/// Answers DescribeCluster.
pub fn handle(node: &Node, request: DescribeClusterRequest, ctx: &RequestContext) -> DescribeClusterResponse {
    if request.endpoint_type != 1 {
        return DescribeClusterResponse {
            error_code: ErrorCode::UnsupportedEndpointType.code(),
            error_message: Some("only broker endpoints (type 1) are served".into()),
            endpoint_type: request.endpoint_type,
            cluster_id: node.cluster_id(),
            controller_id: -1,
            ..Default::default()
        };
    }
    let image = node.metadata.current();
    let brokers = super::metadata::brokers(&image, &ctx.listener)
        .into_iter()
        .map(|b| DescribeClusterBroker { broker_id: b.node_id, host: b.host, port: b.port, rack: b.rack })
        .collect();
    DescribeClusterResponse {
        endpoint_type: 1,
        cluster_id: node.cluster_id(),
        controller_id: super::metadata::controller_id(&image, node.config.node_id),
        brokers,
        ..Default::default()
    }
}
