//! InitProducerId (22) without a transactional id: a producer id and epoch for an
//! idempotent producer. (With a transactional id the request goes to the transaction
//! coordinator, see `transactions.rs`.)
//!
//! Kafka always hands out a fresh producer id with epoch 0 here, also when a v3+ client
//! asks to bump the epoch of its old id (KIP-360): a new id serves the same purpose.

use crate::broker::Broker;
use strata_protocol::messages::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use strata_protocol::ErrorCode;

/// Handles InitProducerId.
pub fn handle(broker: &Broker, _request: InitProducerIdRequest) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse { producer_id: -1, producer_epoch: -1, ..Default::default() };
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
