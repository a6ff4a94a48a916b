//! Writing transaction markers (WriteTxnMarkers, 27): a COMMIT or ABORT control batch
//! appended by each partition's leader for a producer's transaction. The transaction
//! coordinator reaches leaders through this one path, on one node as in a cluster.
//! Markers on `__consumer_offsets` also settle the group coordinator's pending
//! transactional offsets.

use crate::broker::Broker;
use crate::handlers::now_ms;
use crate::internal_topics::CONSUMER_OFFSETS;
use std::sync::Arc;
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
    /// Epoch of the coordinator that decided.
    pub coordinator_epoch: i32,
    /// Commit (true) or abort.
    pub commit: bool,
}

/// Appends the marker to `topic`-`partition`; the error code is what WriteTxnMarkers
/// answers for that partition.
pub fn write_marker(broker: &Arc<Broker>, topic: &str, partition: i32, m: &MarkerWrite) -> ErrorCode {
    let Some(p) = broker.replicas.get(topic, partition) else {
        return ErrorCode::UnknownTopicOrPartition;
    };
    let marker = if m.commit {
        EndTxnMarker::commit(m.coordinator_epoch)
    } else {
        EndTxnMarker::abort(m.coordinator_epoch)
    };
    let batch = EndTxnMarkerBatch {
        producer_id: m.producer_id,
        producer_epoch: m.producer_epoch,
        partition_leader_epoch: p.leader_epoch(),
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
    match p.append_with_origin(bytes, AppendOrigin::Coordinator, now_ms()) {
        Ok(_) => {
            if topic == CONSUMER_OFFSETS {
                broker.groups().transaction_completed(partition, m.producer_id, m.commit);
            }
            ErrorCode::None
        }
        Err(e) => {
            tracing::warn!(topic, partition, error = %e, "transaction marker refused");
            crate::errors::storage_error_code(&e)
        }
    }
}
