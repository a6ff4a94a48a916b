//! The transaction APIs: InitProducerId with a transactional id (22), AddPartitionsToTxn
//! (24), AddOffsetsToTxn (25), EndTxn (26), DescribeTransactions (65) and
//! ListTransactions (66) go to the transaction coordinator task
//! ([`crate::txn_service`]); WriteTxnMarkers (27) appends the markers on this broker's
//! partitions; DescribeProducers (61) reads each partition's producer state.

use crate::broker::Broker;
use crate::markers::{write_marker, MarkerWrite};
use crate::txn::RequestMeta;
use crate::txn_service::{next_token, TxnRequest};
use std::sync::Arc;
use strata_protocol::messages::describe_producers::{
    DescribeProducersRequest, DescribeProducersResponse, PartitionResponse, ProducerState, TopicResponse,
};
use strata_protocol::messages::write_txn_markers::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};

/// Forwards a transaction request to the coordinator; `None` at shutdown.
pub async fn coordinator(broker: &Arc<Broker>, version: i16, body: RequestBody) -> Option<ResponseBody> {
    let request = match body {
        RequestBody::InitProducerId(r) => TxnRequest::InitProducerId(r),
        RequestBody::AddPartitionsToTxn(r) => TxnRequest::AddPartitions(r),
        RequestBody::AddOffsetsToTxn(r) => TxnRequest::AddOffsets(r),
        RequestBody::EndTxn(r) => TxnRequest::EndTxn(r),
        RequestBody::DescribeTransactions(r) => TxnRequest::Describe(r),
        RequestBody::ListTransactions(r) => TxnRequest::List(r),
        _ => return None,
    };
    let meta = RequestMeta { token: next_token(), api_version: version };
    broker.transactions().call(meta, request).await
}

/// Handles WriteTxnMarkers: one control batch per listed partition.
pub fn write_txn_markers(broker: &Arc<Broker>, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse {
    let markers = request
        .markers
        .into_iter()
        .map(|m| {
            let write = MarkerWrite {
                producer_id: m.producer_id,
                producer_epoch: m.producer_epoch,
                coordinator_epoch: m.coordinator_epoch,
                commit: m.transaction_result,
            };
            let topics = m
                .topics
                .into_iter()
                .map(|t| {
                    let partitions = t
                        .partition_indexes
                        .iter()
                        .map(|&index| WritableTxnMarkerPartitionResult {
                            partition_index: index,
                            error_code: write_marker(broker, &t.name, index, &write).code(),
                        })
                        .collect();
                    WritableTxnMarkerTopicResult { name: t.name, partitions }
                })
                .collect();
            WritableTxnMarkerResult { producer_id: m.producer_id, topics }
        })
        .collect();
    WriteTxnMarkersResponse { markers }
}

/// Handles DescribeProducers from each partition's producer state.
pub fn describe_producers(broker: &Broker, request: DescribeProducersRequest) -> DescribeProducersResponse {
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&index| match broker.replicas.get(&t.name, index) {
                    None => PartitionResponse {
                        partition_index: index,
                        error_code: ErrorCode::UnknownTopicOrPartition.code(),
                        error_message: None,
                        active_producers: Vec::new(),
                    },
                    Some(p) => PartitionResponse {
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
