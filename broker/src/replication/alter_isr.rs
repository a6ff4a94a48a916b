//! Sending ISR changes to the controller (Kafka's `AlterPartitionManager`): partitions
//! queue their [`IsrProposal`]s; one task batches whatever is queued into one
//! AlterPartition request (v3, with topic ids and broker epochs) and hands each answer
//! back to its partition. A change that gets no answer is dropped from the partition's
//! pending state, so the next fetch or lag check proposes it again.

use crate::node::Node;
use crate::replica::{IsrProposal, Partition};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use strata_protocol::messages::alter_partition::{
    AlterPartitionRequest, AlterPartitionResponse, BrokerState, PartitionData, TopicData,
};
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};
use tokio::sync::mpsc;

/// AlterPartition version sent: topic ids and broker epochs (KIP-903).
const VERSION: i16 = 3;

/// Queue of ISR changes to send. Unbounded, yet never longer than the partitions this
/// broker leads: a partition proposes again only once its pending change is answered
/// (`LeaderIsr::pending`).
#[derive(Debug, Clone)]
pub struct IsrChanges {
    tx: mpsc::UnboundedSender<(Arc<Partition>, IsrProposal)>,
}

impl IsrChanges {
    /// Starts the sending task.
    pub fn start(node: Arc<Node>) -> IsrChanges {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(node, rx));
        IsrChanges { tx }
    }

    /// Queues a change of `partition`.
    pub fn submit(&self, partition: Arc<Partition>, proposal: IsrProposal) {
        if self.tx.send((partition.clone(), proposal.clone())).is_err() {
            partition.isr_change_answered(proposal.leader_epoch, None);
        }
    }
}

async fn run(node: Arc<Node>, mut rx: mpsc::UnboundedReceiver<(Arc<Partition>, IsrProposal)>) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        send(&node, batch).await;
    }
}

async fn send(broker: &Node, batch: Vec<(Arc<Partition>, IsrProposal)>) {
    let mut topics: BTreeMap<[u8; 16], Vec<PartitionData>> = BTreeMap::new();
    for (_, p) in &batch {
        topics.entry(p.topic_id.0).or_default().push(PartitionData {
            partition_index: p.partition,
            leader_epoch: p.leader_epoch,
            new_isr: p.new_isr.iter().map(|(id, _)| *id).collect(),
            new_isr_with_epochs: p
                .new_isr
                .iter()
                .map(|&(broker_id, broker_epoch)| BrokerState { broker_id, broker_epoch })
                .collect(),
            leader_recovery_state: 0,
            partition_epoch: p.partition_epoch,
        });
    }
    let request = AlterPartitionRequest {
        broker_id: broker.config.node_id,
        broker_epoch: broker.broker_epoch(),
        topics: topics
            .into_iter()
            .map(|(id, partitions)| TopicData {
                topic_id: strata_protocol::codec::Uuid(id),
                partitions,
                ..Default::default()
            })
            .collect(),
    };
    let timeout = Duration::from_millis(broker.config.cluster.quorum_request_timeout_ms.max(1000));
    let answer =
        broker.controller_channel().call(RequestBody::AlterPartition(request), VERSION, timeout).await;
    match answer {
        Ok(ResponseBody::AlterPartition(response)) => apply(&batch, response),
        other => {
            if let Err(e) = other {
                tracing::warn!(error = %e, changes = batch.len(), "AlterPartition not answered; will propose again");
            }
            for (partition, proposal) in &batch {
                partition.isr_change_answered(proposal.leader_epoch, None);
            }
        }
    }
}

fn apply(batch: &[(Arc<Partition>, IsrProposal)], response: AlterPartitionResponse) {
    let top = ErrorCode::from_code(response.error_code).unwrap_or(ErrorCode::UnknownServerError);
    for (partition, proposal) in batch {
        let answer = response
            .topics
            .iter()
            .filter(|t| t.topic_id == proposal.topic_id)
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == proposal.partition);
        let committed = match (top, answer) {
            (ErrorCode::None, Some(a)) if a.error_code == 0 && a.leader_epoch == proposal.leader_epoch => {
                Some((a.isr.clone(), a.partition_epoch))
            }
            (_, a) => {
                let code = if top != ErrorCode::None {
                    top
                } else {
                    a.and_then(|a| ErrorCode::from_code(a.error_code))
                        .unwrap_or(ErrorCode::UnknownServerError)
                };
                tracing::info!(
                    topic = %partition.topic,
                    partition = partition.index,
                    error = code.name(),
                    "ISR change refused by the controller"
                );
                None
            }
        };
        partition.isr_change_answered(proposal.leader_epoch, committed);
    }
}
