//! What the transaction coordinator keeps while an operation waits for its append or
//! its markers (who is answered when, and how), shared by the files that start and
//! finish those operations ([`super::add`], [`super::end_txn`], [`super::init`]).

use std::collections::BTreeSet;
use strata_protocol::messages::init_producer_id::InitProducerIdResponse;
use strata_protocol::ErrorCode;

use super::state::{NO_PRODUCER_EPOCH, NO_PRODUCER_ID};
use super::{Action, RequestToken, Response, TopicPartition, TransactionResult};

/// Who waits for partitions to be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AddReply {
    /// Slot `index` of AddPartitionsToTxn request `op`.
    Partitions { op: u64, index: usize },
    /// An AddOffsetsToTxn request.
    Offsets { token: RequestToken, api_version: i16 },
}

/// An AddPartitionsToTxn request whose transactions are not all answered yet.
#[derive(Debug)]
pub(super) struct AddPartitionsOp {
    pub token: RequestToken,
    pub api_version: i16,
    pub slots: Vec<Slot>,
    pub remaining: usize,
}

/// One transaction of an AddPartitionsToTxn request.
#[derive(Debug)]
pub(super) struct Slot {
    pub transactional_id: String,
    pub partitions: BTreeSet<TopicPartition>,
    pub errors: Option<Vec<(TopicPartition, ErrorCode)>>,
}

/// Who is told that a Prepare* record was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EndReply {
    /// The producer's EndTxn: NONE with its producer id and epoch.
    EndTxn { token: RequestToken, api_version: i16 },
    /// An InitProducerId that found a transaction ongoing: CONCURRENT_TRANSACTIONS, so
    /// the client retries once the abort completed.
    InitProducerId { token: RequestToken, api_version: i16 },
    /// A timed-out transaction: nobody waits.
    Timeout,
}

/// A transaction whose markers are being written (Kafka's `PendingCompleteTxn`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct MarkerTxn {
    pub load_id: u64,
    pub coordinator_epoch: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub result: TransactionResult,
}

/// A [`Action::WriteMarkers`] in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct MarkerSend {
    pub transactional_id: String,
    pub load_id: u64,
    pub partitions: Vec<TopicPartition>,
}

/// The `OngoingTxnProducerId` / `OngoingTxnProducerEpoch` of an answer that kept nothing.
pub(super) const NO_ONGOING: (i64, i16) = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH);

/// Answers InitProducerId. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v4, which
/// older clients do not understand otherwise.
pub(super) fn respond_init(
    out: &mut Vec<Action>,
    token: RequestToken,
    api_version: i16,
    answer: Result<(i64, i16), ErrorCode>,
    ongoing: (i64, i16),
) {
    let response = match answer {
        Ok((producer_id, producer_epoch)) => InitProducerIdResponse {
            throttle_time_ms: 0,
            error_code: ErrorCode::None.code(),
            producer_id,
            producer_epoch,
            ongoing_txn_producer_id: ongoing.0,
            ongoing_txn_producer_epoch: ongoing.1,
        },
        Err(error) => {
            let error = if api_version < 4 && error == ErrorCode::ProducerFenced {
                ErrorCode::InvalidProducerEpoch
            } else {
                error
            };
            InitProducerIdResponse {
                throttle_time_ms: 0,
                error_code: error.code(),
                producer_id: NO_PRODUCER_ID,
                producer_epoch: NO_PRODUCER_EPOCH,
                ..InitProducerIdResponse::default()
            }
        }
    };
    out.push(Action::Respond { token, response: Response::InitProducerId(response) });
}
