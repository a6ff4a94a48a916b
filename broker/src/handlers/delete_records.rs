//! DeleteRecords (21): raise a partition's log start offset on its leader; whole
//! segments below it are deleted and reads below it answer OFFSET_OUT_OF_RANGE.
//! Followers raise theirs when their next fetch brings the leader's log start offset;
//! the answer does not wait for them (Kafka waits until every replica has, and answers
//! the smallest as the low watermark).

use crate::broker::Broker;
use strata_protocol::messages::delete_records::{
    DeleteRecordsPartitionResult, DeleteRecordsRequest, DeleteRecordsResponse, DeleteRecordsTopicResult,
};
use strata_protocol::ErrorCode;

/// Handles DeleteRecords. Offset -1 means "up to the high watermark".
pub fn handle(broker: &Broker, request: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .into_iter()
                .map(|dp| {
                    let mut r = DeleteRecordsPartitionResult {
                        partition_index: dp.partition_index,
                        low_watermark: -1,
                        error_code: 0,
                    };
                    let p = match broker.leader_partition(&t.name, dp.partition_index) {
                        Ok(p) => p,
                        Err(code) => {
                            r.error_code = code.code();
                            return r;
                        }
                    };
                    let hw = p.high_watermark();
                    let target = if dp.offset == -1 { hw } else { dp.offset };
                    if target < 0 || target > hw {
                        r.error_code = ErrorCode::OffsetOutOfRange.code();
                        return r;
                    }
                    match broker.replicas.delete_records(&p, target) {
                        Ok(low) => r.low_watermark = low,
                        Err(e) => r.error_code = crate::errors::storage_error_code(&e).code(),
                    }
                    r
                })
                .collect();
            DeleteRecordsTopicResult { name: t.name, partitions }
        })
        .collect();
    DeleteRecordsResponse { topics, ..Default::default() }
}
