//! The transaction coordinator's traffic to partition leaders: markers for every
//! partition of a transaction (local appends, or WriteTxnMarkers to the leader's
//! broker), and KIP-890 verification asked of a coordinator on another broker
//! (AddPartitionsToTxn v4 with `verify_only`).

use crate::coordinator::group::service::GroupService;
use crate::coordinator::txn::markers::{write_replicated, MarkerWrite};
use crate::coordinator::txn::TopicPartition;
use crate::node::Node;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use strata_protocol::messages::add_partitions_to_txn::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use strata_protocol::messages::write_txn_markers::{
    WritableTxnMarker, WritableTxnMarkerTopic, WriteTxnMarkersRequest,
};
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};

/// How long one marker round may take before the coordinator retries.
const MARKER_TIMEOUT: Duration = Duration::from_secs(10);

/// Writes `marker` on every partition, each at its leader, concurrently; the outcome per
/// partition (a partition whose topic is gone counts as done, as Kafka drops it).
pub async fn write_everywhere(
    broker: &Arc<Node>,
    groups: &GroupService,
    marker: &MarkerWrite,
    partitions: Vec<TopicPartition>,
) -> Vec<(TopicPartition, ErrorCode)> {
    let image = broker.metadata.current();
    let me = broker.config.node_id;
    let mut results = Vec::with_capacity(partitions.len());
    let mut local = Vec::new();
    let mut remote: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
    for tp in partitions {
        match image.partition(&tp.topic, tp.partition) {
            None => results.push((tp, ErrorCode::None)),
            Some(p) if p.leader == me => local.push(tp),
            Some(p) if p.leader < 0 => results.push((tp, ErrorCode::LeaderNotAvailable)),
            Some(p) => remote.entry(p.leader).or_default().push(tp),
        }
    }
    let local_writes = async {
        let mut out = Vec::with_capacity(local.len());
        for tp in local {
            let code =
                write_replicated(broker, groups, &tp.topic, tp.partition, marker, MARKER_TIMEOUT).await;
            out.push((tp, code));
        }
        out
    };
    let mut remote_writes = tokio::task::JoinSet::new();
    for (leader, tps) in remote {
        let (broker, marker) = (broker.clone(), marker.clone());
        remote_writes.spawn(async move { send_markers(&broker, leader, &marker, tps).await });
    }
    results.extend(local_writes.await);
    while let Some(done) = remote_writes.join_next().await {
        match done {
            Ok(r) => results.extend(r),
            Err(e) => tracing::error!(error = %e, "marker task failed"),
        }
    }
    results
}

/// One WriteTxnMarkers request to `leader` for `partitions`.
async fn send_markers(
    broker: &Node,
    leader: i32,
    marker: &MarkerWrite,
    partitions: Vec<TopicPartition>,
) -> Vec<(TopicPartition, ErrorCode)> {
    let fail =
        |code: ErrorCode, tps: &[TopicPartition]| tps.iter().map(|tp| (tp.clone(), code)).collect::<Vec<_>>();
    let Some(client) = broker.peer(leader) else {
        return fail(ErrorCode::CoordinatorNotAvailable, &partitions);
    };
    let mut topics: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for tp in &partitions {
        topics.entry(tp.topic.clone()).or_default().push(tp.partition);
    }
    let request = WriteTxnMarkersRequest {
        markers: vec![WritableTxnMarker {
            producer_id: marker.producer_id,
            producer_epoch: marker.producer_epoch,
            transaction_result: marker.commit,
            topics: topics
                .into_iter()
                .map(|(name, partition_indexes)| WritableTxnMarkerTopic { name, partition_indexes })
                .collect(),
            coordinator_epoch: marker.coordinator_epoch,
            transaction_version: 0,
        }],
    };
    match client.call(RequestBody::WriteTxnMarkers(request), 1, MARKER_TIMEOUT + Duration::from_secs(5)).await
    {
        Ok(ResponseBody::WriteTxnMarkers(r)) => partitions
            .iter()
            .map(|tp| {
                let code = r
                    .markers
                    .iter()
                    .flat_map(|m| m.topics.iter())
                    .filter(|t| t.name == tp.topic)
                    .flat_map(|t| t.partitions.iter())
                    .find(|p| p.partition_index == tp.partition)
                    .and_then(|p| ErrorCode::from_code(p.error_code))
                    .unwrap_or(ErrorCode::UnknownServerError);
                (tp.clone(), code)
            })
            .collect(),
        other => {
            tracing::debug!(leader, answer = ?other.as_ref().map(|r| r.api_key()), "WriteTxnMarkers failed");
            fail(ErrorCode::NotLeaderOrFollower, &partitions)
        }
    }
}

/// KIP-890 verification asked of the coordinator on `coordinator` (another broker).
pub async fn verify_remote(
    broker: &Node,
    coordinator: i32,
    transactional_id: String,
    producer_id: i64,
    producer_epoch: i16,
    partitions: Vec<TopicPartition>,
) -> Vec<(TopicPartition, ErrorCode)> {
    let fail = |code: ErrorCode| partitions.iter().map(|tp| (tp.clone(), code)).collect::<Vec<_>>();
    let Some(client) = (coordinator >= 0).then(|| broker.peer(coordinator)).flatten() else {
        return fail(ErrorCode::CoordinatorNotAvailable);
    };
    let mut topics: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for tp in &partitions {
        topics.entry(tp.topic.clone()).or_default().push(tp.partition);
    }
    let request = AddPartitionsToTxnRequest {
        transactions: vec![AddPartitionsToTxnTransaction {
            transactional_id: transactional_id.clone(),
            producer_id,
            producer_epoch,
            verify_only: true,
            topics: topics
                .into_iter()
                .map(|(name, partitions)| AddPartitionsToTxnTopic { name, partitions })
                .collect(),
        }],
        ..Default::default()
    };
    match client.call(RequestBody::AddPartitionsToTxn(request), 4, Duration::from_secs(10)).await {
        Ok(ResponseBody::AddPartitionsToTxn(r)) if r.error_code == 0 => partitions
            .iter()
            .map(|tp| {
                let code = r
                    .results_by_transaction
                    .iter()
                    .filter(|t| t.transactional_id == transactional_id)
                    .flat_map(|t| t.topic_results.iter())
                    .filter(|t| t.name == tp.topic)
                    .flat_map(|t| t.results_by_partition.iter())
                    .find(|p| p.partition_index == tp.partition)
                    .and_then(|p| ErrorCode::from_code(p.partition_error_code))
                    .unwrap_or(ErrorCode::UnknownServerError);
                (tp.clone(), code)
            })
            .collect(),
        Ok(ResponseBody::AddPartitionsToTxn(r)) => {
            fail(ErrorCode::from_code(r.error_code).unwrap_or(ErrorCode::UnknownServerError))
        }
        _ => fail(ErrorCode::CoordinatorNotAvailable),
    }
}
