//! The transaction coordinator (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
//! EndTxn, DescribeTransactions, ListTransactions, KIP-890 part 1 verification) as a pure
//! state machine.
//!
//! [`TransactionCoordinator`] owns the transactional ids of every `__transaction_state`
//! partition this broker leads. It does no I/O and reads no clock: every call takes
//! `now_ms` and returns [`Action`]s for the async shell to execute, in order:
//!
//! - [`Action::Respond`]: send the response to the request tagged with that
//!   [`RequestToken`]. Every token passed in is answered exactly once, now or from a later
//!   call ([`TransactionCoordinator::append_complete`] above all).
//! - [`Action::Append`]: write the records, as one batch, to that partition of
//!   `__transaction_state` (uncompressed, `acks=all`, after every earlier append to that
//!   partition), then report with [`TransactionCoordinator::append_complete`]. State
//!   changes become visible only once written, as in Kafka: the answer to the request
//!   that caused the write comes out of that call.
//! - [`Action::WriteMarkers`]: have the leader of each listed partition append a COMMIT or
//!   ABORT control batch for the producer (WriteTxnMarkers; on one node, a local append),
//!   then report per partition with [`TransactionCoordinator::markers_complete`]. The
//!   coordinator retries failed partitions itself (after
//!   [`TxnConfig::marker_retry_backoff_ms`], from [`TransactionCoordinator::tick`]) and
//!   writes the transaction's COMPLETE record once every partition has its marker.
//!
//! Time-driven work (aborting transactions older than their timeout, expiring idle
//! transactional ids, retries) is done by [`TransactionCoordinator::tick`]; the shell
//! sleeps until [`TransactionCoordinator::next_deadline`] or the next request.
//!
//! Ownership follows leadership of `__transaction_state`: the shell calls
//! [`TransactionCoordinator::begin_load`] (with the partition's leader epoch, which
//! becomes the *coordinator epoch* carried on markers) when this broker becomes leader,
//! feeds the partition's records to [`TransactionCoordinator::replay`], then calls
//! [`TransactionCoordinator::complete_load`] (which resumes the markers of transactions
//! found prepared); [`TransactionCoordinator::unload`] when leadership is lost. Requests
//! for ids of a loading partition get COORDINATOR_LOAD_IN_PROGRESS, of a partition not
//! owned NOT_COORDINATOR.
//!
//! Behaviour follows Apache Kafka's `TransactionCoordinator` with transaction version 0
//! (the classic protocol every client of the compatibility table speaks): epoch bumps on
//! InitProducerId fence zombies, an ongoing transaction is aborted (PrepareEpochFence)
//! when a new producer initialises or the transaction times out, KIP-360 lets a producer
//! bump its own epoch after an error, and epoch exhaustion rotates the producer id.
//! Two-phase commit (KIP-939): a producer initialised with `enable_2pc` has its
//! transactions stored without a timeout, and one initialised with `keep_prepared_txn`
//! takes over an ongoing transaction under a bumped epoch instead of aborting it, so it
//! can commit what its crashed predecessor prepared. Not here: transaction version 2
//! (KIP-890 part 2, epoch bump per EndTxn), authorization, and transactional offset
//! commits (the group coordinator's job; it must learn of markers written to
//! `__consumer_offsets`).

mod add;
mod admin;
mod coordinator;
mod end_txn;
mod expiry;
mod init;
mod load;
pub mod markers;
pub mod records;
mod remote;
pub mod service;
mod state;
mod waiting;

#[cfg(test)]
mod tests;

pub use add::{produce_verification_refusal, verification_error_for_client};
pub use coordinator::{TransactionCoordinator, TxnCoordinatorSnapshot};
pub use records::TxnRecord;
pub use state::TxnState;

use strata_protocol::messages::{
    add_offsets_to_txn::AddOffsetsToTxnResponse, add_partitions_to_txn::AddPartitionsToTxnResponse,
    end_txn::EndTxnResponse, init_producer_id::InitProducerIdResponse,
};
use strata_protocol::ErrorCode;

/// Name of the internal topic holding committed offsets (AddOffsetsToTxn adds one of its
/// partitions to the transaction).
pub const CONSUMER_OFFSETS_TOPIC: &str = "__consumer_offsets";

/// The shell's handle for one request, echoed in the [`Action::Respond`] that answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestToken(pub u64);

/// Identifies an [`Action::Append`] when the shell reports its outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppendId(pub u64);

/// Identifies an [`Action::WriteMarkers`] when the shell reports its outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MarkerId(pub u64);

/// What the coordinator needs to know about a request besides its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestMeta {
    /// Echoed in the response action.
    pub token: RequestToken,
    /// API version of the request: decides response shapes and, below the versions that
    /// know PRODUCER_FENCED, its translation to INVALID_PRODUCER_EPOCH.
    pub api_version: i16,
}

/// A partition of a topic, as transactions list them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
}

impl TopicPartition {
    /// `topic`-`partition`.
    pub fn new(topic: impl Into<String>, partition: i32) -> TopicPartition {
        TopicPartition { topic: topic.into(), partition }
    }
}

/// How a transaction ends; the control record type of its markers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransactionResult {
    /// COMMIT markers: the transaction's records become visible to `read_committed`.
    Commit,
    /// ABORT markers: the transaction's records are skipped by `read_committed`.
    Abort,
}

impl TransactionResult {
    /// The `committed` flag of EndTxn and `transaction_result` of WriteTxnMarkers.
    pub fn from_committed(committed: bool) -> TransactionResult {
        if committed {
            TransactionResult::Commit
        } else {
            TransactionResult::Abort
        }
    }

    /// True for [`TransactionResult::Commit`].
    pub fn is_commit(self) -> bool {
        self == TransactionResult::Commit
    }
}

/// Source of new producer ids (the broker's durable block allocator, or a counter in
/// tests). Called for InitProducerId of a new transactional id, of an idempotent
/// producer, and when a producer's epochs are exhausted.
pub trait ProducerIdSource: Send {
    /// A producer id never handed out before, or the error to answer InitProducerId with
    /// (Kafka answers allocation failures with the failure's code, e.g.
    /// COORDINATOR_LOAD_IN_PROGRESS or UNKNOWN_SERVER_ERROR).
    fn next_producer_id(&mut self) -> Result<i64, ErrorCode>;
}

impl<F: FnMut() -> Result<i64, ErrorCode> + Send> ProducerIdSource for F {
    fn next_producer_id(&mut self) -> Result<i64, ErrorCode> {
        self()
    }
}

/// A response to send, by API.
#[derive(Debug, Clone, PartialEq)]
pub enum Response {
    /// InitProducerId (22).
    InitProducerId(InitProducerIdResponse),
    /// AddPartitionsToTxn (24).
    AddPartitionsToTxn(AddPartitionsToTxnResponse),
    /// AddOffsetsToTxn (25).
    AddOffsetsToTxn(AddOffsetsToTxnResponse),
    /// EndTxn (26).
    EndTxn(EndTxnResponse),
}

/// Something the shell must do on the coordinator's behalf.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Send `response` to the client as the answer to request `token`.
    Respond {
        /// The request being answered.
        token: RequestToken,
        /// The response body (the shell encodes it at the request's version).
        response: Response,
    },
    /// Append `records` as one batch to `partition` of `__transaction_state`, after any
    /// earlier append to that partition, with `acks=all`; then call
    /// [`TransactionCoordinator::append_complete`].
    Append {
        /// Reported back on completion.
        id: AppendId,
        /// Partition of `__transaction_state`.
        partition: i32,
        /// Records in order; encode with [`TxnRecord::key_bytes`] / [`TxnRecord::value_bytes`].
        records: Vec<TxnRecord>,
    },
    /// Write a `result` control batch for `producer_id`/`producer_epoch` to each of
    /// `partitions` (WriteTxnMarkers to their leaders), then call
    /// [`TransactionCoordinator::markers_complete`] with one outcome per partition.
    WriteMarkers {
        /// Reported back on completion.
        id: MarkerId,
        /// The transaction's id (for logs; WriteTxnMarkers does not carry it).
        transactional_id: String,
        /// Producer whose transaction ends.
        producer_id: i64,
        /// Its epoch (after any fencing bump: leaders reject markers of older epochs).
        producer_epoch: i16,
        /// Leader epoch of the `__transaction_state` partition when it was loaded; the
        /// control record carries it and leaders reject markers of older coordinators.
        coordinator_epoch: i32,
        /// COMMIT or ABORT.
        result: TransactionResult,
        /// The partitions still without their marker, sorted.
        partitions: Vec<TopicPartition>,
    },
}

/// Settings of the transaction coordinator, with Kafka's names and defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnConfig {
    /// `transaction.state.log.num.partitions` (50).
    pub transaction_state_log_num_partitions: i32,
    /// `offsets.topic.num.partitions` (50): AddOffsetsToTxn adds the group's partition.
    pub offsets_topic_num_partitions: i32,
    /// `transaction.max.timeout.ms` (900000): longer client timeouts are refused.
    pub transaction_max_timeout_ms: i32,
    /// `transactional.id.expiration.ms` (7 days): ids idle that long (and not in a
    /// transaction) are deleted.
    pub transactional_id_expiration_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms` (10000): how often
    /// transactions are checked against their timeout.
    pub abort_timed_out_transaction_cleanup_interval_ms: i64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms` (3600000): how often
    /// idle ids are looked for.
    pub remove_expired_transaction_cleanup_interval_ms: i64,
    /// Delay before retrying markers that failed with a retriable error, and COMPLETE
    /// records whose write failed (Kafka retries on its sender thread's next poll).
    pub marker_retry_backoff_ms: i64,
    /// Value version of the records written: 0 (Kafka with `transaction.version` 0, read
    /// by every Kafka since 0.11) or 1 (flexible, KIP-915; carries the previous producer
    /// id so a KIP-360 retry after exhaustion survives a coordinator move).
    pub transaction_log_value_version: i16,
    /// `transaction.two.phase.commit.enable` (false): whether InitProducerId may ask for
    /// two-phase-commit transactions (KIP-939), which never time out.
    pub two_phase_commit_enable: bool,
}

impl Default for TxnConfig {
    fn default() -> Self {
        TxnConfig {
            transaction_state_log_num_partitions: 50,
            offsets_topic_num_partitions: 50,
            transaction_max_timeout_ms: 900_000,
            transactional_id_expiration_ms: 7 * 24 * 60 * 60 * 1000,
            abort_timed_out_transaction_cleanup_interval_ms: 10_000,
            remove_expired_transaction_cleanup_interval_ms: 3_600_000,
            marker_retry_backoff_ms: 100,
            transaction_log_value_version: 0,
            two_phase_commit_enable: false,
        }
    }
}

/// The `__transaction_state` partition of `transactional_id`:
/// `Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions`.
pub fn partition_for_transactional_id(transactional_id: &str, num_partitions: i32) -> i32 {
    use crate::coordinator::group::{java_string_hash_code, kafka_abs};
    kafka_abs(java_string_hash_code(transactional_id)) % num_partitions.max(1)
}
