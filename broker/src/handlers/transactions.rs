//! The transaction APIs: InitProducerId with a transactional id (22), AddPartitionsToTxn
//! (24), AddOffsetsToTxn (25), EndTxn (26), DescribeTransactions (65) and
//! ListTransactions (66) go to the transaction coordinator task
//! ([`crate::coordinator::txn::service`]); WriteTxnMarkers (27) appends the markers on the partitions
//! this broker leads; DescribeProducers (61) reads each led partition's producer state.

use crate::coordinator::group::service::GroupService;
use crate::coordinator::txn::markers::{write_replicated, MarkerWrite};
use crate::coordinator::txn::service::TxnService;
use crate::coordinator::txn::service::{next_token, TxnRequest};
use crate::coordinator::txn::RequestMeta;
use crate::node::Node;
use std::sync::Arc;
use strata_protocol::messages::describe_producers::{
    DescribeProducersRequest, DescribeProducersResponse, PartitionResponse, ProducerState, TopicResponse,
};
use strata_protocol::messages::write_txn_markers::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};

/// How long a marker may take to be replicated before its partition answers
/// REQUEST_TIMED_OUT (the coordinator retries).
const MARKER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Forwards a transaction request to the coordinator; `None` at shutdown.
pub async fn coordinator(transactions: &TxnService, version: i16, body: RequestBody) -> Option<ResponseBody> {
    let request = match body {
        RequestBody::InitProducerId(r) => TxnRequest::InitProducerId(r),
        RequestBody::AddPartitionsToTxn(r) => TxnRequest::AddPartitions(r),
        RequestBody::AddOffsetsToTxn(r) => TxnRequest::AddOffsets(r),
        RequestBody::EndTxn(r) => TxnRequest::EndTxn(r),
        RequestBody::DescribeTransactions(r) => TxnRequest::Describe(r),
        RequestBody::ListTransactions(r) => TxnRequest::List(r),
        _ => return None,
    };
    // As for groups: a client that skips FindCoordinator still gets a coordinator.
    if let Err(code) = transactions.ensure_topic().await {
        tracing::debug!(error = code.name(), "__transaction_state not available yet");
    }
    let meta = RequestMeta { token: next_token(), api_version: version };
    transactions.call(meta, request).await
}

/// Handles WriteTxnMarkers: one control batch per listed partition, each answered once
/// replicated (or why not).
pub async fn write_txn_markers(
    node: &Arc<Node>,
    groups: &GroupService,
    request: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let mut markers = Vec::with_capacity(request.markers.len());
    for m in request.markers {
        let write = MarkerWrite {
            producer_id: m.producer_id,
            producer_epoch: m.producer_epoch,
            coordinator_epoch: m.coordinator_epoch,
            commit: m.transaction_result,
        };
        let mut tasks = tokio::task::JoinSet::new();
        for t in &m.topics {
            for &index in &t.partition_indexes {
                let (node, groups, write, topic) =
                    (node.clone(), groups.clone(), write.clone(), t.name.clone());
                tasks.spawn(async move {
                    let code = write_replicated(&node, &groups, &topic, index, &write, MARKER_TIMEOUT).await;
                    (topic, index, code)
                });
            }
        }
        let mut results: Vec<(String, i32, ErrorCode)> = Vec::new();
        while let Some(done) = tasks.join_next().await {
            if let Ok(r) = done {
                results.push(r);
            }
        }
        let topics = m
            .topics
            .into_iter()
            .map(|t| {
                let partitions = t
                    .partition_indexes
                    .iter()
                    .map(|&index| {
                        let code = results
                            .iter()
                            .find(|(topic, p, _)| *topic == t.name && *p == index)
                            .map_or(ErrorCode::UnknownServerError, |(_, _, c)| *c);
                        WritableTxnMarkerPartitionResult { partition_index: index, error_code: code.code() }
                    })
                    .collect();
                WritableTxnMarkerTopicResult { name: t.name, partitions }
            })
            .collect();
        markers.push(WritableTxnMarkerResult { producer_id: m.producer_id, topics });
    }
    WriteTxnMarkersResponse { markers }
}

/// Handles DescribeProducers from each partition's producer state.
pub fn describe_producers(node: &Node, request: DescribeProducersRequest) -> DescribeProducersResponse {
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&index| match node.leader_partition(&t.name, index) {
                    Err(code) => PartitionResponse {
                        partition_index: index,
                        error_code: code.code(),
                        error_message: None,
                        active_producers: Vec::new(),
                    },
                    Ok(p) => PartitionResponse {
                        partition_index: index,
                        error_code: 0,
                        error_message: None,
                        active_producers: p
                            .log
                            .active_producers()
                            .into_iter()
                            .map(|a| ProducerState {
                                producer_id: a.producer_id,
                                producer_epoch: i32::from(a.producer_epoch),
                                last_sequence: a.last_sequence,
                                last_timestamp: a.last_timestamp,
                                coordinator_epoch: a.coordinator_epoch,
                                current_txn_start_offset: a.current_txn_start_offset,
                            })
                            .collect(),
                    },
                })
                .collect();
            TopicResponse { name: t.name, partitions }
        })
        .collect();
    DescribeProducersResponse { topics, ..Default::default() }
}
