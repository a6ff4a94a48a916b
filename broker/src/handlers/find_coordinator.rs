//! FindCoordinator (10): every coordinator lives on this node. Group keys make sure
//! `__consumer_offsets` exists and is loaded before answering (transaction keys:
//! `__transaction_state`), so the client's next request finds a ready coordinator.
//! Batched keys from v4 (KIP-699).

use crate::broker::Broker;
use std::sync::Arc;
use strata_protocol::messages::find_coordinator::{
    Coordinator, FindCoordinatorRequest, FindCoordinatorResponse,
};
use strata_protocol::ErrorCode;

const GROUP: i8 = 0;
const TRANSACTION: i8 = 1;

/// Handles FindCoordinator.
pub async fn handle(
    broker: &Arc<Broker>,
    version: i16,
    request: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let keys = if version >= 4 { request.coordinator_keys.clone() } else { vec![request.key.clone()] };
    let (host, port) = broker.advertised_address();
    let node = broker.config.node_id;
    let error = match request.key_type {
        GROUP => broker.groups().ensure_topic().await.err(),
        TRANSACTION => broker.transactions().ensure_topic().await.err(),
        _ => Some(ErrorCode::InvalidRequest),
    };
    let coordinators: Vec<Coordinator> = keys
        .into_iter()
        .map(|key| match error {
            None => Coordinator {
                key,
                node_id: node,
                host: host.clone(),
                port,
                error_code: 0,
                error_message: None,
            },
            Some(code) => Coordinator {
                key,
                node_id: -1,
                host: String::new(),
                port: -1,
                error_code: code.code(),
                error_message: Some(code.name().to_string()),
            },
        })
        .collect();
    if version >= 4 {
        return FindCoordinatorResponse { coordinators, ..Default::default() };
    }
    let first = coordinators.into_iter().next().unwrap_or_default();
    FindCoordinatorResponse {
        error_code: first.error_code,
        error_message: first.error_message,
        node_id: first.node_id,
        host: first.host,
        port: first.port,
        ..Default::default()
    }
}
