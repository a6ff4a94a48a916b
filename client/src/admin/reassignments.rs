//! Partition reassignment (KIP-455): AlterPartitionReassignments and
//! ListPartitionReassignments, sent to the controller as Kafka's `Admin` does
//! (`kafka-reassign-partitions.sh`).

use super::{check_code, timeout_ms, wrong_api, Admin};
use crate::error::Result;
use crate::types::TopicPartition;
use std::collections::BTreeMap;
use strata_protocol::messages::alter_partition_reassignments::{
    AlterPartitionReassignmentsRequest, ReassignablePartition, ReassignableTopic,
};
use strata_protocol::messages::list_partition_reassignments::{
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsTopics,
};
use strata_protocol::{ApiKey, RequestBody, ResponseBody};

/// A reassignment in progress: the partition's replicas while it moves (the target
/// first, then those leaving), and which of them are arriving and leaving.
///
/// ```no_run
/// # async fn demo(admin: strata_client::admin::Admin) -> Result<(), strata_client::Error> {
/// for r in admin.list_partition_reassignments(None).await? {
///     println!("{}: adding {:?}, removing {:?}", r.partition, r.adding, r.removing);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionReassignment {
    /// The partition.
    pub partition: TopicPartition,
    /// Every replica while the move lasts.
    pub replicas: Vec<i32>,
    /// Replicas being added (catching up).
    pub adding: Vec<i32>,
    /// Replicas removed once every target replica is in sync.
    pub removing: Vec<i32>,
}

impl Admin {
    /// Starts moving each partition to its target replicas (preference order), or with
    /// `None` cancels its move in progress. One result per partition:
    /// INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS or UNKNOWN_TOPIC_OR_PARTITION
    /// where refused. A move finishes on its own once the new replicas are in sync; follow
    /// it with [`Admin::list_partition_reassignments`].
    ///
    /// ```no_run
    /// # async fn demo(admin: strata_client::admin::Admin) -> Result<(), strata_client::Error> {
    /// use strata_client::TopicPartition;
    /// let moves = [(TopicPartition::new("orders", 0), Some(vec![2, 3]))];
    /// for (tp, result) in admin.alter_partition_reassignments(&moves).await? {
    ///     result?;
    ///     println!("{tp} is moving");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn alter_partition_reassignments(
        &self,
        moves: &[(TopicPartition, Option<Vec<i32>>)],
    ) -> Result<Vec<(TopicPartition, Result<()>)>> {
        let mut topics: BTreeMap<&str, Vec<ReassignablePartition>> = BTreeMap::new();
        for (tp, target) in moves {
            topics
                .entry(&tp.topic)
                .or_default()
                .push(ReassignablePartition { partition_index: tp.partition, replicas: target.clone() });
        }
        let request = AlterPartitionReassignmentsRequest {
            timeout_ms: timeout_ms(&self.client),
            allow_replication_factor_change: true,
            topics: topics
                .into_iter()
                .map(|(name, partitions)| ReassignableTopic { name: name.to_string(), partitions })
                .collect(),
        };
        let client = self.client.clone();
        self.call_retrying(
            || client.controller(),
            RequestBody::AlterPartitionReassignments(request),
            |body| {
                let ResponseBody::AlterPartitionReassignments(r) = body else {
                    return Err(wrong_api(ApiKey::AlterPartitionReassignments));
                };
                check_code(r.error_code, r.error_message.as_deref())?;
                Ok(r.responses
                    .into_iter()
                    .flat_map(|t| {
                        let topic = t.name;
                        t.partitions.into_iter().map(move |p| {
                            let message = p.error_message.as_deref().filter(|m| !m.is_empty());
                            (
                                TopicPartition::new(topic.clone(), p.partition_index),
                                check_code(p.error_code, message),
                            )
                        })
                    })
                    .collect())
            },
        )
        .await
    }

    /// The reassignments in progress: of `partitions`, or of every partition with `None`.
    pub async fn list_partition_reassignments(
        &self,
        partitions: Option<&[TopicPartition]>,
    ) -> Result<Vec<PartitionReassignment>> {
        let topics = partitions.map(|ps| {
            let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
            for tp in ps {
                by_topic.entry(&tp.topic).or_default().push(tp.partition);
            }
            by_topic
                .into_iter()
                .map(|(name, partition_indexes)| ListPartitionReassignmentsTopics {
                    name: name.to_string(),
                    partition_indexes,
                })
                .collect()
        });
        let request = ListPartitionReassignmentsRequest { timeout_ms: timeout_ms(&self.client), topics };
        let client = self.client.clone();
        self.call_retrying(
            || client.controller(),
            RequestBody::ListPartitionReassignments(request),
            |body| {
                let ResponseBody::ListPartitionReassignments(r) = body else {
                    return Err(wrong_api(ApiKey::ListPartitionReassignments));
                };
                check_code(r.error_code, r.error_message.as_deref())?;
                Ok(r.topics
                    .into_iter()
                    .flat_map(|t| {
                        let topic = t.name;
                        t.partitions.into_iter().map(move |p| PartitionReassignment {
                            partition: TopicPartition::new(topic.clone(), p.partition_index),
                            replicas: p.replicas,
                            adding: p.adding_replicas,
                            removing: p.removing_replicas,
                        })
                    })
                    .collect())
            },
        )
        .await
    }
}
