//! DescribeCluster (60): this node as the whole cluster, and its controller.

use crate::broker::Broker;
use strata_protocol::messages::describe_cluster::{
    DescribeClusterBroker, DescribeClusterRequest, DescribeClusterResponse,
};
use strata_protocol::ErrorCode;

/// Answers DescribeCluster. Endpoint type 2 (controllers, KIP-919) is refused: there is
/// no separate controller listener yet.
pub fn handle(broker: &Broker, request: DescribeClusterRequest) -> DescribeClusterResponse {
    if request.endpoint_type != 1 {
        return DescribeClusterResponse {
            error_code: ErrorCode::UnsupportedEndpointType.code(),
            error_message: Some("only broker endpoints (type 1) are served".into()),
            endpoint_type: request.endpoint_type,
            cluster_id: broker.cluster_id.clone(),
            controller_id: -1,
            ..Default::default()
        };
    }
    let (host, port) = broker.advertised_address();
    DescribeClusterResponse {
        endpoint_type: 1,
        cluster_id: broker.cluster_id.clone(),
        controller_id: broker.config.node_id,
        brokers: vec![DescribeClusterBroker {
            broker_id: broker.config.node_id,
            host,
            port,
            rack: broker.config.rack.clone(),
        }],
        ..Default::default()
    }
}
