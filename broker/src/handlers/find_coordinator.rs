//! FindCoordinator (10): the group coordinator of a group is the leader of its
//! `__consumer_offsets` partition, the transaction coordinator of a transactional id the
//! leader of its `__transaction_state` partition. The topic is created on the first
//! lookup; a partition without a leader answers COORDINATOR_NOT_AVAILABLE so the client
//! retries. Batched keys from v4 (KIP-699).

use crate::coordinator::group::service::GroupService;
use crate::coordinator::internal_topics::CONSUMER_OFFSETS;
use crate::coordinator::internal_topics::TRANSACTION_STATE;
use crate::coordinator::txn::service::TxnService;
use crate::handlers::context::RequestContext;
use crate::node::Node;
use strata_protocol::messages::find_coordinator::{
    Coordinator, FindCoordinatorRequest, FindCoordinatorResponse,
};
use strata_protocol::ErrorCode;

const GROUP: i8 = 0;
const TRANSACTION: i8 = 1;

/// Handles FindCoordinator.
pub async fn handle(
    node: &Node,
    groups: &GroupService,
    transactions: &TxnService,
    version: i16,
    request: FindCoordinatorRequest,
    ctx: &RequestContext,
) -> FindCoordinatorResponse {
    let keys = if version >= 4 { request.coordinator_keys.clone() } else { vec![request.key.clone()] };
    let ensured = match request.key_type {
        GROUP => groups.ensure_topic().await,
        TRANSACTION => transactions.ensure_topic().await,
        _ => Err(ErrorCode::InvalidRequest),
    };
    let image = node.metadata.current();
    let coordinators: Vec<Coordinator> = keys
        .into_iter()
        .map(|key| {
            let found = ensured.and_then(|()| {
                let (topic, partition) = match request.key_type {
                    GROUP => (CONSUMER_OFFSETS, groups.partition_for(&key)),
                    _ => (TRANSACTION_STATE, transactions.partition_for(&key)),
                };
                let leader = image.partition(topic, partition).map_or(-1, |p| p.leader);
                let endpoint = image
                    .broker(leader)
                    .filter(|b| !b.fenced)
                    .and_then(|b| b.endpoint(&ctx.listener).cloned())
                    .ok_or(ErrorCode::CoordinatorNotAvailable)?;
                Ok((leader, endpoint))
            });
            match found {
                Ok((node_id, e)) => Coordinator {
                    key,
                    node_id,
                    host: e.host,
                    port: i32::from(e.port),
                    error_code: 0,
                    error_message: None,
                },
                Err(code) => Coordinator {
                    key,
                    node_id: -1,
                    host: String::new(),
                    port: -1,
                    error_code: code.code(),
                    error_message: Some(code.name().to_string()),
                },
            }
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
