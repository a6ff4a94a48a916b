//! Topics: create, delete, list, describe, add partitions.

use super::{check_code, timeout_ms, wrong_api, Admin};
use crate::error::{Error, Result};
use crate::metadata::PartitionInfo;
use std::collections::BTreeMap;
use strata_protocol::codec::Uuid;
use strata_protocol::messages::create_partitions::{
    CreatePartitionsAssignment, CreatePartitionsRequest, CreatePartitionsTopic,
};
use strata_protocol::messages::create_topics::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig, CreateTopicsRequest,
};
use strata_protocol::messages::delete_topics::{DeleteTopicState, DeleteTopicsRequest};
use strata_protocol::{ApiKey, ErrorCode, RequestBody, ResponseBody};

/// A topic to create: partitions and replication factor (or an explicit assignment),
/// and topic configs. `-1` leaves a count to the broker's defaults (`num.partitions`,
/// `default.replication.factor`; KIP-464).
///
/// ```
/// use strata_client::admin::NewTopic;
/// let t = NewTopic::new("orders", 6).replication_factor(3).config("cleanup.policy", "compact");
/// assert_eq!((t.num_partitions, t.replication_factor), (6, 3));
/// let placed = NewTopic::with_assignments("pinned", [(0, vec![1, 2]), (1, vec![2, 1])]);
/// assert_eq!(placed.num_partitions, -1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    /// Name.
    pub name: String,
    /// Partitions, -1 for the broker's default; -1 with explicit assignments.
    pub num_partitions: i32,
    /// Replication factor, -1 for the broker's default; -1 with explicit assignments.
    pub replication_factor: i16,
    /// Explicit replica placement: partition index to broker ids, preferred leader first.
    pub assignments: BTreeMap<i32, Vec<i32>>,
    /// Topic configs (`retention.ms`, `cleanup.policy`, ...).
    pub configs: Vec<(String, String)>,
}

impl NewTopic {
    /// `num_partitions` partitions with the broker's default replication factor.
    pub fn new(name: impl Into<String>, num_partitions: i32) -> NewTopic {
        NewTopic {
            name: name.into(),
            num_partitions,
            replication_factor: -1,
            assignments: BTreeMap::new(),
            configs: Vec::new(),
        }
    }

    /// Replicas placed explicitly; counts come from the assignment.
    pub fn with_assignments(
        name: impl Into<String>,
        assignments: impl IntoIterator<Item = (i32, Vec<i32>)>,
    ) -> NewTopic {
        NewTopic { assignments: assignments.into_iter().collect(), ..NewTopic::new(name, -1) }
    }

    /// Sets the replication factor.
    pub fn replication_factor(mut self, factor: i16) -> NewTopic {
        self.replication_factor = factor;
        self
    }

    /// Adds a topic config.
    pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> NewTopic {
        self.configs.push((key.into(), value.into()));
        self
    }

    fn creatable(&self) -> CreatableTopic {
        CreatableTopic {
            name: self.name.clone(),
            num_partitions: self.num_partitions,
            replication_factor: self.replication_factor,
            assignments: self
                .assignments
                .iter()
                .map(|(&partition_index, brokers)| CreatableReplicaAssignment {
                    partition_index,
                    broker_ids: brokers.clone(),
                })
                .collect(),
            configs: self
                .configs
                .iter()
                .map(|(name, value)| CreatableTopicConfig { name: name.clone(), value: Some(value.clone()) })
                .collect(),
        }
    }
}

/// Partitions to add to a topic: the new total, and optionally where the new ones go.
///
/// ```
/// use strata_client::admin::NewPartitions;
/// let p = NewPartitions::increase_to("orders", 12);
/// assert_eq!((p.total_count, p.assignments), (12, None));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPartitions {
    /// Topic.
    pub topic: String,
    /// Partition count after the change (Kafka never removes partitions).
    pub total_count: i32,
    /// Replicas of each new partition, in order; `None` lets the broker place them.
    pub assignments: Option<Vec<Vec<i32>>>,
}

impl NewPartitions {
    /// Grows `topic` to `total_count` partitions, placed by the broker.
    pub fn increase_to(topic: impl Into<String>, total_count: i32) -> NewPartitions {
        NewPartitions { topic: topic.into(), total_count, assignments: None }
    }
}

/// A topic as Metadata describes it.
///
/// ```no_run
/// # async fn demo(admin: strata_client::admin::Admin) -> Result<(), strata_client::Error> {
/// for (name, d) in admin.describe_topics(&["orders".to_string()]).await? {
///     let d = d?;
///     println!("{name} {}: {} partitions", d.id, d.partitions.len());
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicDescription {
    /// Name.
    pub name: String,
    /// Topic id (zero from brokers before Metadata v10).
    pub id: Uuid,
    /// An internal topic (`__consumer_offsets`, `__transaction_state`).
    pub internal: bool,
    /// Partitions by index: leader, replicas, ISR, offline replicas.
    pub partitions: Vec<PartitionInfo>,
}

impl Admin {
    /// Creates `topics` (CreateTopics, to the controller); with `validate_only` the
    /// broker only checks the request. One result per topic, in request order:
    /// TOPIC_ALREADY_EXISTS, INVALID_CONFIG, INVALID_REPLICATION_FACTOR, ... for that
    /// topic alone.
    pub async fn create_topics(&self, topics: &[NewTopic], validate_only: bool) -> Vec<(String, Result<()>)> {
        let by_name: BTreeMap<String, &NewTopic> = topics.iter().map(|t| (t.name.clone(), t)).collect();
        let names: Vec<String> = topics.iter().map(|t| t.name.clone()).collect();
        let results = self
            .per_item(names.clone(), &[], |pending| async {
                let request = CreateTopicsRequest {
                    topics: pending.iter().map(|n| by_name[n].creatable()).collect(),
                    timeout_ms: timeout_ms(&self.client),
                    validate_only,
                };
                let answer = match self.client.controller().await {
                    Ok(conn) => conn.call(RequestBody::CreateTopics(request)).await,
                    Err(e) => Err(e),
                };
                match answer {
                    Ok(ResponseBody::CreateTopics(r)) => r
                        .topics
                        .into_iter()
                        .map(|t| (t.name, check_code(t.error_code, t.error_message.as_deref())))
                        .collect(),
                    Ok(_) => all_failed(pending, wrong_api(ApiKey::CreateTopics)),
                    Err(e) => all_failed(pending, e),
                }
            })
            .await;
        in_order(names, results)
    }

    /// Deletes `topics` (DeleteTopics, to the controller), one result per topic;
    /// UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist.
    pub async fn delete_topics(&self, topics: &[String]) -> Vec<(String, Result<()>)> {
        let names = topics.to_vec();
        let results = self
            .per_item(names.clone(), &[ErrorCode::UnknownTopicOrPartition], |pending| async {
                let request = DeleteTopicsRequest {
                    topics: pending
                        .iter()
                        .map(|n| DeleteTopicState { name: Some(n.clone()), topic_id: Uuid::default() })
                        .collect(),
                    topic_names: pending.clone(),
                    timeout_ms: timeout_ms(&self.client),
                };
                let answer = match self.client.controller().await {
                    Ok(conn) => conn.call(RequestBody::DeleteTopics(request)).await,
                    Err(e) => Err(e),
                };
                match answer {
                    Ok(ResponseBody::DeleteTopics(r)) => r
                        .responses
                        .into_iter()
                        .map(|t| {
                            (t.name.unwrap_or_default(), check_code(t.error_code, t.error_message.as_deref()))
                        })
                        .collect(),
                    Ok(_) => all_failed(pending, wrong_api(ApiKey::DeleteTopics)),
                    Err(e) => all_failed(pending, e),
                }
            })
            .await;
        in_order(names, results)
    }

    /// The names of every topic, sorted; internal topics only if `include_internal`.
    pub async fn list_topics(&self, include_internal: bool) -> Result<Vec<String>> {
        let cluster = self.client.refresh_all_topics().await?;
        let mut names: Vec<String> = cluster
            .topics
            .values()
            .filter(|t| t.error.is_none() && (include_internal || !t.internal))
            .map(|t| t.name.clone())
            .collect();
        names.sort();
        Ok(names)
    }

    /// Describes `topics` (Metadata), one result per topic, in request order;
    /// UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist.
    pub async fn describe_topics(
        &self,
        topics: &[String],
    ) -> Result<Vec<(String, Result<TopicDescription>)>> {
        let cluster = self.client.refresh_metadata(topics).await?;
        Ok(topics
            .iter()
            .map(|name| {
                let described = match cluster.topic(name) {
                    None => Err(Error::kafka(ErrorCode::UnknownTopicOrPartition)),
                    Some(t) => match t.error {
                        Some(code) if t.partitions.is_empty() => Err(Error::kafka(code)),
                        _ => Ok(TopicDescription {
                            name: t.name.clone(),
                            id: t.id,
                            internal: t.internal,
                            partitions: t.partitions.clone(),
                        }),
                    },
                };
                (name.clone(), described)
            })
            .collect())
    }

    /// Adds partitions (CreatePartitions, to the controller), one result per topic;
    /// INVALID_PARTITIONS if a count does not grow the topic.
    pub async fn create_partitions(
        &self,
        changes: &[NewPartitions],
        validate_only: bool,
    ) -> Vec<(String, Result<()>)> {
        let by_name: BTreeMap<String, &NewPartitions> =
            changes.iter().map(|c| (c.topic.clone(), c)).collect();
        let names: Vec<String> = changes.iter().map(|c| c.topic.clone()).collect();
        let results = self
            .per_item(names.clone(), &[ErrorCode::UnknownTopicOrPartition], |pending| async {
                let request = CreatePartitionsRequest {
                    topics: pending
                        .iter()
                        .map(|n| {
                            let c = by_name[n];
                            CreatePartitionsTopic {
                                name: c.topic.clone(),
                                count: c.total_count,
                                assignments: c.assignments.as_ref().map(|a| {
                                    a.iter()
                                        .map(|b| CreatePartitionsAssignment { broker_ids: b.clone() })
                                        .collect()
                                }),
                            }
                        })
                        .collect(),
                    timeout_ms: timeout_ms(&self.client),
                    validate_only,
                };
                let answer = match self.client.controller().await {
                    Ok(conn) => conn.call(RequestBody::CreatePartitions(request)).await,
                    Err(e) => Err(e),
                };
                match answer {
                    Ok(ResponseBody::CreatePartitions(r)) => r
                        .results
                        .into_iter()
                        .map(|t| (t.name, check_code(t.error_code, t.error_message.as_deref())))
                        .collect(),
                    Ok(_) => all_failed(pending, wrong_api(ApiKey::CreatePartitions)),
                    Err(e) => all_failed(pending, e),
                }
            })
            .await;
        in_order(names, results)
    }
}

/// Every pending item failed with `e` (the whole request failed).
pub(super) fn all_failed<K, T>(pending: Vec<K>, e: Error) -> Vec<(K, Result<T>)> {
    pending.into_iter().map(|k| (k, Err(e.clone()))).collect()
}

/// Results put back in the order the caller asked (rounds finish out of order).
pub(super) fn in_order<K: PartialEq, T>(
    keys: Vec<K>,
    mut results: Vec<(K, Result<T>)>,
) -> Vec<(K, Result<T>)> {
    let mut ordered = Vec::with_capacity(results.len());
    for key in keys {
        if let Some(i) = results.iter().position(|(k, _)| *k == key) {
            ordered.push(results.swap_remove(i));
        }
    }
    ordered.extend(results);
    ordered
}
