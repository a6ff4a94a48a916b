//! Fetch (1): whole record batches from each requested partition, up to the high
//! watermark, within the request's byte limits; parked until `min_bytes` arrive or
//! `max_wait_ms` passes.
//!
//! Fetch sessions (KIP-227) are not kept: every request is answered as a full fetch
//! with session id 0, which tells clients to keep sending full requests. Topic ids
//! (v13+) are resolved through the topic registry.

use crate::broker::Broker;
use crate::errors::storage_error_code;
use crate::replica::ReadError;
use std::sync::Arc;
use std::time::Duration;
use strata_protocol::messages::fetch::{
    AbortedTransaction, FetchRequest, FetchResponse, FetchableTopicResponse, PartitionData,
};
use strata_protocol::records::RecordSet;
use strata_protocol::ErrorCode;
use tokio::sync::Notify;

/// Handles a Fetch request.
pub async fn handle(broker: &Arc<Broker>, version: i16, request: FetchRequest) -> FetchResponse {
    if request.session_epoch > 0 || request.session_id != 0 {
        // We never hand out sessions, so an incremental fetch names one we do not have.
        return FetchResponse {
            error_code: ErrorCode::FetchSessionIdNotFound.code(),
            session_id: 0,
            ..Default::default()
        };
    }
    let deadline = tokio::time::Instant::now() + Duration::from_millis(request.max_wait_ms.max(0) as u64);
    // Woken only by appends to the partitions this fetch reads.
    let waker = (request.max_wait_ms > 0).then(|| Arc::new(Notify::new()));
    loop {
        let (response, bytes, errors) = read_all(broker, version, &request, waker.as_ref());
        let done =
            errors || bytes >= request.min_bytes.max(0) as usize || tokio::time::Instant::now() >= deadline;
        let Some(waker) = waker.as_ref().filter(|_| !done) else {
            return response;
        };
        if tokio::time::timeout_at(deadline, waker.notified()).await.is_err() {
            return read_all(broker, version, &request, None).0;
        }
    }
}

/// One pass over every requested partition: the response, the bytes it carries, and
/// whether any partition answered with an error (which ends the wait, like Kafka).
/// With `park`, each partition is asked to wake it on its next append before it is
/// read, so an append between the read and the wait is not missed.
fn read_all(
    broker: &Broker,
    version: i16,
    request: &FetchRequest,
    park: Option<&Arc<Notify>>,
) -> (FetchResponse, usize, bool) {
    let mut remaining = if version >= 3 { request.max_bytes.max(0) as usize } else { usize::MAX };
    let mut total = 0usize;
    let mut any_error = false;
    let mut responses = Vec::with_capacity(request.topics.len());
    let snapshot = broker.topics.snapshot();
    for topic in &request.topics {
        let name = if version >= 13 {
            snapshot.by_id.get(&topic.topic_id).cloned()
        } else {
            Some(topic.topic.clone())
        };
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for fp in &topic.partitions {
            let mut pd = PartitionData {
                partition_index: fp.partition,
                high_watermark: -1,
                last_stable_offset: -1,
                log_start_offset: -1,
                records: Some(RecordSet::new()),
                ..Default::default()
            };
            let partition = name.as_deref().and_then(|n| broker.replicas.get(n, fp.partition));
            match (&name, partition) {
                (None, _) => pd.error_code = ErrorCode::UnknownTopicId.code(),
                (Some(_), None) => pd.error_code = ErrorCode::UnknownTopicOrPartition.code(),
                (Some(_), Some(p)) => {
                    if let Some(waker) = park {
                        p.park(waker);
                    }
                    let epoch = p.leader_epoch();
                    let read_committed = request.isolation_level == 1;
                    pd.high_watermark = p.high_watermark();
                    pd.last_stable_offset = p.last_stable_offset();
                    pd.log_start_offset = p.log.log_start_offset();
                    if fp.current_leader_epoch >= 0 && fp.current_leader_epoch > epoch {
                        pd.error_code = ErrorCode::UnknownLeaderEpoch.code();
                    } else if fp.current_leader_epoch >= 0 && fp.current_leader_epoch < epoch {
                        pd.error_code = ErrorCode::FencedLeaderEpoch.code();
                    } else {
                        let limit = remaining.min(fp.partition_max_bytes.max(0) as usize);
                        match p.read_for_fetch(fp.fetch_offset, limit, total == 0, read_committed) {
                            Ok(data) => {
                                if read_committed {
                                    pd.aborted_transactions =
                                        aborted(&p, fp.fetch_offset, pd.last_stable_offset, !data.is_empty());
                                }
                                remaining = remaining.saturating_sub(data.len());
                                total += data.len();
                                pd.records = Some(data);
                            }
                            Err(ReadError::Io(e)) => {
                                tracing::error!(topic = %p.topic, partition = p.index, error = %e, "fetch read failed");
                                pd.error_code = ErrorCode::KafkaStorageError.code();
                            }
                            Err(ReadError::Storage(e)) => pd.error_code = storage_error_code(&e).code(),
                        }
                    }
                }
            }
            any_error |= pd.error_code != 0;
            partitions.push(pd);
        }
        responses.push(FetchableTopicResponse {
            topic: if version < 13 { topic.topic.clone() } else { String::new() },
            topic_id: topic.topic_id,
            partitions,
        });
    }
    (FetchResponse { responses, ..Default::default() }, total, any_error)
}

/// The aborted transactions a `read_committed` consumer must skip in the fetched range
/// (Kafka sends null when the fetch returned no data).
fn aborted(
    p: &crate::replica::Partition,
    from: i64,
    upper: i64,
    has_data: bool,
) -> Option<Vec<AbortedTransaction>> {
    if !has_data {
        return None;
    }
    match p.log.aborted_transactions(from, upper) {
        Ok(list) => Some(
            list.into_iter()
                .map(|a| AbortedTransaction { producer_id: a.producer_id, first_offset: a.first_offset })
                .collect(),
        ),
        Err(e) => {
            tracing::error!(topic = %p.topic, partition = p.index, error = %e, "aborted transactions lookup failed");
            Some(Vec::new())
        }
    }
}
