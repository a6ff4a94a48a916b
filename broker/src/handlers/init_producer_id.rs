//! InitProducerId (22): a producer id and epoch for an idempotent producer.
//!
//! Without a transactional id Kafka always hands out a fresh producer id with epoch 0,
//! also when a v3+ client asks to bump the epoch of its old id (KIP-360): a new id
//! serves the same purpose. Transactional ids need the transaction coordinator, which
//! is not built yet; they are refused with a message saying so.

use crate::broker::Broker;
use strata_protocol::messages::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use strata_protocol::ErrorCode;

/// Handles InitProducerId.
pub fn handle(broker: &Broker, request: InitProducerIdRequest) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse { producer_id: -1, producer_epoch: -1, ..Default::default() };
    if request.transactional_id.as_deref().is_some_and(|t| !t.is_empty()) {
        tracing::info!("refusing InitProducerId with a transactional id: transactions are not served yet");
        response.error_code = ErrorCode::InvalidRequest.code();
        return response;
    }
    match broker.producer_ids.next_id() {
        Ok(id) => {
            response.producer_id = id;
            response.producer_epoch = 0;
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot persist the producer id block");
            response.error_code = ErrorCode::UnknownServerError.code();
        }
    }
    response
}
