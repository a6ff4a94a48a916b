//! DeleteRecords (21): raise a partition's log start offset on its leader; whole
//! segments below it are deleted and reads below it answer OFFSET_OUT_OF_RANGE.
//! Followers raise theirs when a fetch brings the leader's log start offset and report
//! it in their next fetch; as Kafka's DelayedDeleteRecords, the answer waits (up to the
//! request's `timeout_ms`, else REQUEST_TIMED_OUT) until every replica on a live broker
//! has, and answers the smallest log start offset as the low watermark.

use crate::node::Node;
use crate::replica::WaitError;
use strata_protocol::messages::delete_records::{
    DeleteRecordsPartitionResult, DeleteRecordsRequest, DeleteRecordsResponse, DeleteRecordsTopicResult,
};
use strata_protocol::ErrorCode;

/// Handles DeleteRecords. Offset -1 means "up to the high watermark".
pub async fn handle(node: &Node, request: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let deadline =
        tokio::time::Instant::now() + std::time::Duration::from_millis(request.timeout_ms.max(0) as u64);
    let mut waits = Vec::new();
    let mut topics: Vec<DeleteRecordsTopicResult> = Vec::with_capacity(request.topics.len());
    for t in request.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for dp in t.partitions {
            let mut r = DeleteRecordsPartitionResult {
                partition_index: dp.partition_index,
                low_watermark: -1,
                error_code: 0,
            };
            match node.leader_partition(&t.name, dp.partition_index) {
                Err(code) => r.error_code = code.code(),
                Ok(p) => {
                    let hw = p.high_watermark();
                    let target = if dp.offset == -1 { hw } else { dp.offset };
                    if target < 0 || target > hw {
                        r.error_code = ErrorCode::OffsetOutOfRange.code();
                    } else {
                        let epoch = p.leader_epoch();
                        match node.replicas.delete_records(&p, target) {
                            Ok(_) => waits.push((topics.len(), partitions.len(), p, target, epoch)),
                            Err(e) => r.error_code = crate::errors::storage_error_code(&e).code(),
                        }
                    }
                }
            }
            partitions.push(r);
        }
        topics.push(DeleteRecordsTopicResult { name: t.name, partitions });
    }
    // Every live replica must have moved its log start offset too (Kafka's
    // lowWatermarkIfLeader counts the followers on live brokers, in the ISR or not).
    let alive = |id: i32| node.metadata.current().broker(id).is_some_and(|b| b.is_active());
    for (t, i, p, target, epoch) in waits {
        let r = &mut topics[t].partitions[i];
        match p.wait_for_low_watermark(target, epoch, deadline, alive).await {
            Ok(low) => r.low_watermark = low,
            Err((e, low)) => {
                r.error_code = crate::errors::wait_error_code(e).code();
                if e == WaitError::Timeout {
                    r.low_watermark = low;
                }
            }
        }
    }
    DeleteRecordsResponse { topics, ..Default::default() }
}
