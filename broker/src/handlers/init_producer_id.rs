//! InitProducerId (22) without a transactional id: a producer id and epoch for an
//! idempotent producer, from this broker's block of ids (allocated by the controller,
//! so ids are unique across the cluster). (With a transactional id the request goes to
//! the transaction coordinator, see `transactions.rs`.)
//!
//! Kafka always hands out a fresh producer id with epoch 0 here, also when a v3+ client
//! asks to bump the epoch of its old id (KIP-360): a new id serves the same purpose.

use crate::node::Node;
use std::time::Duration;
use strata_protocol::messages::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};

/// How long to wait for a block of ids before answering COORDINATOR_LOAD_IN_PROGRESS.
const BLOCK_WAIT: Duration = Duration::from_secs(5);

/// Handles InitProducerId.
pub async fn handle(node: &Node, _request: InitProducerIdRequest) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse { producer_id: -1, producer_epoch: -1, ..Default::default() };
    match node.producer_ids.next_id_waiting(BLOCK_WAIT).await {
        Ok(id) => {
            response.producer_id = id;
            response.producer_epoch = 0;
        }
        Err(code) => response.error_code = code.code(),
    }
    response
}
