//! The classic group coordinator (JoinGroup/SyncGroup/Heartbeat/LeaveGroup, offsets,
//! group administration) as a pure state machine.
//!
//! [`GroupCoordinator`] owns the groups of every `__consumer_offsets` partition this
//! broker coordinates. It does no I/O and reads no clock: every call takes `now_ms`, and
//! returns [`Action`]s for the async shell to execute:
//!
//! - [`Action::Respond`]: send the response to the request the shell tagged with that
//!   [`RequestToken`]. JoinGroup and SyncGroup responses are *deferred*: they come out of
//!   a later call (another member's request, [`GroupCoordinator::tick`],
//!   [`GroupCoordinator::append_complete`]). Every token passed in gets exactly one
//!   response, eventually; a token superseded by a newer request of the same member is
//!   answered with REBALANCE_IN_PROGRESS.
//! - [`Action::Append`]: write the records, as one batch, to that partition of
//!   `__consumer_offsets` (uncompressed or not, as the shell likes), in the order the
//!   appends were issued for that partition; a batch with a [`TransactionalProducer`]
//!   is written as a transactional batch of that producer id and epoch (base sequence
//!   0, as Kafka's coordinators write them), every other batch as a plain one.
//!   Once the write is acknowledged (`acks=all`) or has failed, call
//!   [`GroupCoordinator::append_complete`] with its [`AppendId`]. Responses that depend
//!   on the write (SyncGroup, OffsetCommit, TxnOffsetCommit, DeleteGroups, ...) come out
//!   of that call.
//!
//! Timers (session timeouts, rebalance timeouts, the initial rebalance delay, offset
//! expiry) are deadlines: the shell sleeps until [`GroupCoordinator::next_deadline`] (or
//! the next request) and calls [`GroupCoordinator::tick`]. With
//! `group.initial.rebalance.delay.ms=0` the first join of a group still completes on the
//! next `tick`, as in Kafka, so the shell should tick whenever the deadline has passed.
//!
//! Requests that change state take a [`RequestMeta`] and return actions (their own
//! response among them, now or later): [`GroupCoordinator::join_group`],
//! [`GroupCoordinator::sync_group`], [`GroupCoordinator::heartbeat`],
//! [`GroupCoordinator::leave_group`], [`GroupCoordinator::commit_offsets`],
//! [`GroupCoordinator::txn_offset_commit`], [`GroupCoordinator::delete_offsets`],
//! [`GroupCoordinator::delete_groups`]. Reads answer directly:
//! [`GroupCoordinator::fetch_offsets`] (every version; v8+ groups one by one),
//! [`GroupCoordinator::list_groups`], [`GroupCoordinator::describe_groups`].
//!
//! Transactional offsets (KIP-98): TxnOffsetCommit writes the commits in a transactional
//! batch of the producer; once written they are *pending* for that producer, invisible to
//! OffsetFetch. When a COMMIT or ABORT marker of the producer has been appended to a
//! `__consumer_offsets` partition (WriteTxnMarkers), the shell calls
//! [`GroupCoordinator::complete_transaction`]: a commit makes the producer's pending
//! offsets of that partition's groups the committed ones (unless a plain commit of the
//! same partition was written after them), an abort drops them. The shell must call it
//! only once every TxnOffsetCommit append of that producer issued before the marker
//! was written has completed (see [`GroupCoordinator::complete_transaction`]).
//!
//! Changes that need no answer from the log apply at once and are then written (group
//! deletion, offset deletion and expiry, a group becoming Empty); commits and the
//! leader's assignment become visible only once written. If such a write fails, memory
//! is ahead of the log until the partition is reloaded; a failed write almost always
//! means leadership moved, and the partition is then unloaded anyway.
//!
//! Partition ownership is the shell's knowledge: it calls
//! [`GroupCoordinator::begin_load`] when this broker becomes leader of a
//! `__consumer_offsets` partition, feeds the partition's log to the coordinator in offset
//! order — records of plain batches to [`GroupCoordinator::replay`], records of
//! transactional batches to [`GroupCoordinator::replay_transactional`], COMMIT/ABORT
//! control batches to [`GroupCoordinator::replay_marker`] — then calls
//! [`GroupCoordinator::complete_load`]; and
//! [`GroupCoordinator::unload`] when it loses leadership. Requests for groups of a
//! partition that is loading get COORDINATOR_LOAD_IN_PROGRESS; of a partition not owned,
//! NOT_COORDINATOR.
//!
//! The behaviour follows Apache Kafka's classic group coordinator (KIP-394 member ids,
//! KIP-345 static membership, InitialDelayedJoin, KIP-211 offset expiry); the records
//! are Kafka's exact `__consumer_offsets` formats ([`records`]). The group's partition is
//! [`partition_for_group`]. Not handled here: the KIP-848 consumer protocol,
//! authorization, and checking that a TxnOffsetCommit belongs to an ongoing transaction
//! (AddOffsetsToTxn, KIP-890 verification), which is the shell's and the transaction
//! coordinator's job.

mod admin;
mod classic_group;
mod consumer_protocol;
mod coordinator;
mod join;
mod load;
mod member;
mod membership;
mod offsets;
mod partition;
pub mod records;
pub mod service;
mod snapshot;
mod timer;
mod txn_offsets;

#[cfg(test)]
mod tests;

pub use classic_group::GroupState;
pub use coordinator::GroupCoordinator;
pub use partition::{java_string_hash_code, kafka_abs, partition_for_group, PartitionState};
pub use records::Record;
pub use snapshot::GroupsSnapshot;
pub use txn_offsets::txn_commit_response;

use strata_protocol::messages::{
    delete_groups::DeleteGroupsResponse, heartbeat::HeartbeatResponse, join_group::JoinGroupResponse,
    leave_group::LeaveGroupResponse, offset_commit::OffsetCommitResponse,
    offset_delete::OffsetDeleteResponse, sync_group::SyncGroupResponse,
    txn_offset_commit::TxnOffsetCommitResponse,
};

/// The shell's handle for one request, echoed in the [`Action::Respond`] that answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestToken(pub u64);

/// Identifies an [`Action::Append`] when the shell reports its outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppendId(pub u64);

/// What the coordinator needs to know about a request besides its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestMeta {
    /// Echoed in the response action.
    pub token: RequestToken,
    /// API version of the request (decides KIP-394, `skip_assignment`, response shapes).
    pub api_version: i16,
    /// `client_id` of the request header; prefixes generated member ids.
    pub client_id: String,
    /// The client's address as Kafka shows it (`/127.0.0.1`), for DescribeGroups.
    pub client_host: String,
}

/// A response to send, by API.
#[derive(Debug, Clone, PartialEq)]
pub enum Response {
    /// JoinGroup (11).
    JoinGroup(JoinGroupResponse),
    /// SyncGroup (14).
    SyncGroup(SyncGroupResponse),
    /// Heartbeat (12).
    Heartbeat(HeartbeatResponse),
    /// LeaveGroup (13).
    LeaveGroup(LeaveGroupResponse),
    /// OffsetCommit (8).
    OffsetCommit(OffsetCommitResponse),
    /// OffsetDelete (47).
    OffsetDelete(OffsetDeleteResponse),
    /// DeleteGroups (42).
    DeleteGroups(DeleteGroupsResponse),
    /// TxnOffsetCommit (28).
    TxnOffsetCommit(TxnOffsetCommitResponse),
}

/// The producer whose transaction an [`Action::Append`] belongs to: the shell writes the
/// batch with this producer id and epoch, the transactional attribute set and base
/// sequence 0 (`RecordBatchBuilder::producer(id, epoch, 0).transactional(true)`,
/// appended with the coordinator origin, which skips sequence checks, as Kafka's
/// coordinators do), so that the partition's producer state fences stale epochs and the
/// COMMIT/ABORT marker of the producer applies to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TransactionalProducer {
    /// The producer id of the transaction.
    pub producer_id: i64,
    /// Its epoch, as sent in TxnOffsetCommit.
    pub producer_epoch: i16,
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
    /// Append `records` as one batch to `partition` of `__consumer_offsets`, after any
    /// earlier append to that partition, then report with
    /// [`GroupCoordinator::append_complete`].
    Append {
        /// Reported back on completion.
        id: AppendId,
        /// Partition of `__consumer_offsets`.
        partition: i32,
        /// `Some` for the offsets of a TxnOffsetCommit: write a transactional batch of
        /// this producer. `None`: a plain batch.
        producer: Option<TransactionalProducer>,
        /// Records in order; encode with [`Record::key_bytes`] / [`Record::value_bytes`].
        records: Vec<Record>,
    },
}

/// Settings of the group coordinator, with Kafka's names and defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    /// `offsets.topic.num.partitions` (50).
    pub offsets_topic_num_partitions: i32,
    /// `group.min.session.timeout.ms` (6000).
    pub group_min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms` (1800000).
    pub group_max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms` (3000).
    pub group_initial_rebalance_delay_ms: i32,
    /// `group.max.size` (unbounded).
    pub group_max_size: usize,
    /// How long a new member's parked JoinGroup may wait (Kafka's fixed 5 minutes).
    pub new_member_join_timeout_ms: i32,
    /// `offset.metadata.max.bytes` (4096), compared, as Kafka does, with the metadata's
    /// length in UTF-16 code units.
    pub offset_metadata_max_bytes: usize,
    /// `offsets.retention.minutes` (7 days), in milliseconds.
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms` (600000).
    pub offsets_retention_check_interval_ms: i64,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            offsets_topic_num_partitions: 50,
            group_min_session_timeout_ms: 6_000,
            group_max_session_timeout_ms: 1_800_000,
            group_initial_rebalance_delay_ms: 3_000,
            group_max_size: usize::MAX,
            new_member_join_timeout_ms: 300_000,
            offset_metadata_max_bytes: 4096,
            offsets_retention_ms: 7 * 24 * 60 * 60 * 1000,
            offsets_retention_check_interval_ms: 600_000,
        }
    }
}
