//! Writing transaction markers (WriteTxnMarkers, 27): a COMMIT or ABORT control batch
//! appended by a partition's leader for a producer's transaction, answered once it is
//! replicated (Kafka writes markers with `acks=all`). The transaction coordinator
//! reaches local partitions through this path directly and remote ones through
//! WriteTxnMarkers, which lands here on their leader. A marker on `__consumer_offsets`
//! also settles the group coordinator's pending transactional offsets, once replicated.

use crate::clock::now_ms;
use crate::coordinator::group::service::GroupService;
use crate::coordinator::internal_topics::CONSUMER_OFFSETS;
use crate::node::Node;
use crate::replica::AppendError;
use std::time::Duration;
use strata_protocol::records::{EndTxnMarker, EndTxnMarkerBatch};
use strata_protocol::ErrorCode;
use strata_storage::AppendOrigin;

/// One marker to write on one partition.
#[derive(Debug, Clone)]
pub struct MarkerWrite {
    /// The producer whose transaction ends.
    pub producer_id: i64,
    /// Its epoch.
    pub producer_epoch: i16,
    /// Epoch of the coordinator that decided (a deposed coordinator's is refused).
    pub coordinator_epoch: i32,
    /// Commit (true) or abort.
    pub commit: bool,
}

/// Appends the marker to `topic`-`partition` as its leader and waits (up to `timeout`)
/// until it is replicated; the error code is what WriteTxnMarkers answers for that
/// partition. A marker on `__consumer_offsets` is passed on to `groups` once replicated.
pub async fn write_replicated(
    broker: &Node,
    groups: &GroupService,
    topic: &str,
    partition: i32,
    m: &MarkerWrite,
    timeout: Duration,
) -> ErrorCode {
    let p = match broker.leader_partition(topic, partition) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let marker = if m.commit {
        EndTxnMarker::commit(m.coordinator_epoch)
    } else {
        EndTxnMarker::abort(m.coordinator_epoch)
    };
    let leader_epoch = p.leader_epoch();
    let batch = EndTxnMarkerBatch {
        producer_id: m.producer_id,
        producer_epoch: m.producer_epoch,
        partition_leader_epoch: leader_epoch,
        timestamp: now_ms(),
        marker,
    };
    let bytes = match batch.build(0) {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(error = %e, "cannot encode a transaction marker");
            return ErrorCode::UnknownServerError;
        }
    };
    let info = match p.append_as_leader(bytes, AppendOrigin::Coordinator, now_ms()) {
        Ok(info) => info,
        Err(e) => {
            if let AppendError::Storage(e) = &e {
                tracing::warn!(topic, partition, error = %e, "transaction marker refused");
            }
            return crate::errors::append_error_code(&e);
        }
    };
    let deadline = tokio::time::Instant::now() + timeout;
    match p.wait_for_high_watermark(info.last_offset, leader_epoch, deadline).await {
        Ok(()) => {
            if topic == CONSUMER_OFFSETS {
                groups.transaction_completed(partition, m.producer_id, m.commit);
            }
            ErrorCode::None
        }
        Err(e) => crate::errors::wait_error_code(e),
    }
}
