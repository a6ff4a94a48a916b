//! Topic administration on the active controller: CreateTopics (with a replication
//! factor or explicit assignments), CreatePartitions, DeleteTopics and topic config
//! changes, each validated against the image and turned into records.
//!
//! Requests arrive in the newest version's shape (the forwarding broker normalises
//! older ones) and answers leave in it; the broker encodes them at the client's version.

use super::pending::Pending;
use super::{placement, ControllerState};
use crate::config::topic;
use crate::metadata::{MetadataImage, MetadataRecord, PartitionRecord, TopicId};
use crate::topics::{new_topic_id, validate_topic_name};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use strata_protocol::codec::Uuid;
use strata_protocol::messages::create_partitions::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreatePartitionsTopicResult,
};
use strata_protocol::messages::create_topics::{
    CreatableTopic, CreatableTopicConfigs, CreatableTopicResult, CreateTopicsRequest, CreateTopicsResponse,
};
use strata_protocol::messages::delete_topics::DeletableTopicResult;
use strata_protocol::ErrorCode;

type Refusal = (ErrorCode, String);

impl ControllerState {
    /// CreateTopics: the records for every valid topic and a result per topic.
    pub fn create_topics(
        &self,
        image: &Arc<MetadataImage>,
        request: &CreateTopicsRequest,
    ) -> (Vec<MetadataRecord>, CreateTopicsResponse) {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for t in &request.topics {
            *seen.entry(t.name.as_str()).or_default() += 1;
        }
        let mut pending = Pending::new(image);
        let mut results = Vec::with_capacity(request.topics.len());
        for t in &request.topics {
            let mut result = CreatableTopicResult { name: t.name.clone(), ..Default::default() };
            let outcome = if seen.get(t.name.as_str()).copied().unwrap_or(0) > 1 {
                Err((
                    ErrorCode::InvalidRequest,
                    format!("topic {} appears more than once in the request", t.name),
                ))
            } else {
                self.plan_topic(pending.image(), t)
            };
            match outcome {
                Err((code, message)) => {
                    result.error_code = code.code();
                    result.error_message = Some(message);
                }
                Ok(plan) => {
                    result.num_partitions = plan.assignments.len() as i32;
                    result.replication_factor = plan.assignments.first().map_or(0, |a| a.len() as i16);
                    result.configs = Some(self.describe_new_topic_configs(pending.image(), &plan.configs));
                    if !request.validate_only {
                        result.topic_id = plan.id.0;
                        tracing::info!(topic = %t.name, partitions = plan.assignments.len(), "creating topic");
                        for record in plan.into_records(pending.image()) {
                            pending.push(record);
                        }
                    }
                }
            }
            results.push(result);
        }
        (pending.into_records(), CreateTopicsResponse { topics: results, ..Default::default() })
    }

    fn plan_topic(&self, image: &MetadataImage, t: &CreatableTopic) -> Result<TopicPlan, Refusal> {
        validate_topic_name(&t.name).map_err(|m| (ErrorCode::InvalidTopicException, m))?;
        if image.topic(&t.name).is_some() {
            return Err((ErrorCode::TopicAlreadyExists, format!("Topic '{}' already exists.", t.name)));
        }
        let mut configs = BTreeMap::new();
        for c in &t.configs {
            let Some(v) = &c.value else {
                return Err((ErrorCode::InvalidConfig, format!("null value for config {}", c.name)));
            };
            topic::validate(&c.name, v).map_err(|reason| {
                (ErrorCode::InvalidConfig, format!("invalid config {}={v}: {reason}", c.name))
            })?;
            configs.insert(c.name.clone(), v.clone());
        }
        let assignments = if t.assignments.is_empty() {
            let partitions =
                if t.num_partitions == -1 { self.settings.num_partitions } else { t.num_partitions };
            let rf = if t.replication_factor == -1 {
                self.settings.default_replication_factor
            } else {
                t.replication_factor
            };
            if partitions <= 0 {
                return Err((
                    ErrorCode::InvalidPartitions,
                    format!("number of partitions must be larger than 0, got {partitions}"),
                ));
            }
            if rf <= 0 {
                return Err((
                    ErrorCode::InvalidReplicationFactor,
                    format!("replication factor must be larger than 0, got {rf}"),
                ));
            }
            let brokers = usable_brokers(image);
            if rf as usize > brokers.len() {
                return Err((
                    ErrorCode::InvalidReplicationFactor,
                    format!(
                        "unable to replicate the partition {rf} time(s): the target replication factor of {rf} \
                         cannot be reached because only {} broker(s) are registered",
                        brokers.len()
                    ),
                ));
            }
            placement::assign_random(&brokers, partitions, rf as usize, 0)
        } else {
            if t.num_partitions != -1 || t.replication_factor != -1 {
                return Err((
                    ErrorCode::InvalidRequest,
                    "num_partitions and replication_factor must be -1 with manual assignments".into(),
                ));
            }
            let mut by_index: Vec<(i32, Vec<i32>)> =
                t.assignments.iter().map(|a| (a.partition_index, a.broker_ids.clone())).collect();
            by_index.sort_by_key(|(i, _)| *i);
            if by_index.iter().enumerate().any(|(i, (index, _))| *index != i as i32) {
                return Err((
                    ErrorCode::InvalidReplicaAssignment,
                    "partition indexes of the assignments must be 0, 1, 2, ...".into(),
                ));
            }
            let assignments: Vec<Vec<i32>> = by_index.into_iter().map(|(_, r)| r).collect();
            validate_assignments(image, &assignments, None)?;
            assignments
        };
        Ok(TopicPlan { name: t.name.clone(), id: TopicId(new_topic_id()), configs, assignments })
    }

    /// The new topic's configs as CreateTopics v5+ answers them, under the cluster-wide
    /// dynamic defaults (a broker's own dynamic values apply on that broker only).
    fn describe_new_topic_configs(
        &self,
        image: &MetadataImage,
        configs: &BTreeMap<String, String>,
    ) -> Vec<CreatableTopicConfigs> {
        let defaults = self.settings.topic_defaults.with_dynamic(image.broker_configs.get(""), None);
        topic::KEYS
            .iter()
            .chain(topic::TOPIC_ONLY_KEYS)
            .map(|k| {
                let (value, source) = defaults.resolve(configs, k.name);
                CreatableTopicConfigs {
                    name: k.name.to_string(),
                    value: Some(value),
                    read_only: false,
                    config_source: source as i8,
                    is_sensitive: false,
                }
            })
            .collect()
    }

    /// DeleteTopics, by name or id: the records and a result per topic.
    pub fn delete_topics(
        &self,
        image: &Arc<MetadataImage>,
        topics: &[(Option<String>, Uuid)],
    ) -> (Vec<MetadataRecord>, Vec<DeletableTopicResult>) {
        let mut pending = Pending::new(image);
        let mut results = Vec::with_capacity(topics.len());
        for (name, id) in topics {
            let found = match (name, id.is_zero()) {
                (Some(n), _) => pending.image().topic(n).map(|t| (t.name.clone(), t.id)),
                (None, false) => pending.image().topic_by_id(*id).map(|t| (t.name.clone(), t.id)),
                (None, true) => None,
            };
            let mut result = DeletableTopicResult { name: name.clone(), topic_id: *id, ..Default::default() };
            match found {
                None => {
                    let code = if name.is_some() {
                        ErrorCode::UnknownTopicOrPartition
                    } else {
                        ErrorCode::UnknownTopicId
                    };
                    result.error_code = code.code();
                    result.error_message = Some(code.name().to_string());
                }
                Some(_) if !self.settings.delete_topic_enable => {
                    result.error_code = ErrorCode::TopicDeletionDisabled.code();
                    result.error_message = Some("delete.topic.enable is false".into());
                }
                Some((topic, topic_id)) => {
                    tracing::info!(topic = %topic, "deleting topic");
                    result.name = Some(topic);
                    result.topic_id = topic_id.0;
                    pending.push(MetadataRecord::RemoveTopic { topic_id });
                }
            }
            results.push(result);
        }
        (pending.into_records(), results)
    }

    /// CreatePartitions: the records for every valid topic and a result per topic.
    pub fn create_partitions(
        &self,
        image: &Arc<MetadataImage>,
        request: &CreatePartitionsRequest,
    ) -> (Vec<MetadataRecord>, CreatePartitionsResponse) {
        let mut pending = Pending::new(image);
        let mut results = Vec::with_capacity(request.topics.len());
        for t in &request.topics {
            let mut result = CreatePartitionsTopicResult { name: t.name.clone(), ..Default::default() };
            match plan_partitions(pending.image(), &t.name, t.count, t.assignments.as_deref()) {
                Err((code, message)) => {
                    result.error_code = code.code();
                    result.error_message = Some(message);
                }
                Ok(records) => {
                    if !request.validate_only {
                        for r in records {
                            pending.push(r);
                        }
                    }
                }
            }
            results.push(result);
        }
        (pending.into_records(), CreatePartitionsResponse { results, ..Default::default() })
    }

    /// Replaces a topic's overrides with `edit`'s result, validated; the record, or why not.
    pub fn alter_topic_configs(
        &self,
        image: &MetadataImage,
        name: &str,
        edit: impl FnOnce(&mut BTreeMap<String, String>) -> Result<(), Refusal>,
    ) -> Result<MetadataRecord, Refusal> {
        let Some(t) = image.topic(name) else {
            return Err((ErrorCode::UnknownTopicOrPartition, format!("topic {name} does not exist")));
        };
        let mut configs = t.configs.clone();
        edit(&mut configs)?;
        for (k, v) in &configs {
            topic::validate(k, v)
                .map_err(|reason| (ErrorCode::InvalidConfig, format!("invalid config {k}={v}: {reason}")))?;
        }
        Ok(MetadataRecord::TopicConfig { topic_id: t.id, configs })
    }
}

/// What a valid CreateTopics entry will write.
struct TopicPlan {
    name: String,
    id: TopicId,
    configs: BTreeMap<String, String>,
    assignments: Vec<Vec<i32>>,
}

impl TopicPlan {
    fn into_records(self, image: &MetadataImage) -> Vec<MetadataRecord> {
        let mut records = vec![MetadataRecord::Topic { name: self.name, topic_id: self.id }];
        if !self.configs.is_empty() {
            records.push(MetadataRecord::TopicConfig { topic_id: self.id, configs: self.configs });
        }
        for (i, replicas) in self.assignments.into_iter().enumerate() {
            records.push(MetadataRecord::Partition(new_partition(image, self.id, i as i32, replicas)));
        }
        records
    }
}

/// A new partition: the ISR is every active replica, the leader the first of them.
fn new_partition(
    image: &MetadataImage,
    topic_id: TopicId,
    partition: i32,
    replicas: Vec<i32>,
) -> PartitionRecord {
    let isr: Vec<i32> = replicas.iter().copied().filter(|&r| image.is_active(r)).collect();
    let leader = isr.first().copied().unwrap_or(super::election::NO_LEADER);
    // An offline new partition keeps every replica in its ISR: all are equally empty.
    let isr = if isr.is_empty() { replicas.clone() } else { isr };
    PartitionRecord {
        topic_id,
        partition,
        replicas,
        isr,
        leader,
        leader_epoch: 0,
        partition_epoch: 0,
        adding_replicas: Vec::new(),
        removing_replicas: Vec::new(),
    }
}

/// Unfenced brokers not shutting down, sorted: where new replicas may go.
fn usable_brokers(image: &MetadataImage) -> Vec<placement::Candidate<'_>> {
    let active = image.brokers.values().filter(|b| b.is_active());
    active.map(|b| placement::Candidate { id: b.node_id, rack: b.rack.as_deref() }).collect()
}

/// Every replica list names registered brokers, once each, and all lists have the same
/// length (`expected_len` if given).
fn validate_assignments(
    image: &MetadataImage,
    assignments: &[Vec<i32>],
    expected_len: Option<usize>,
) -> Result<(), Refusal> {
    let want = expected_len.or(assignments.first().map(Vec::len)).unwrap_or(0);
    for (i, replicas) in assignments.iter().enumerate() {
        let mut distinct = replicas.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if replicas.is_empty() || distinct.len() != replicas.len() || replicas.len() != want {
            return Err((
                ErrorCode::InvalidReplicaAssignment,
                format!("partition {i}: replicas {replicas:?} must be {want} distinct brokers"),
            ));
        }
        if let Some(b) = replicas.iter().find(|b| image.broker(**b).is_none()) {
            return Err((
                ErrorCode::InvalidReplicaAssignment,
                format!("partition {i}: broker {b} is not registered"),
            ));
        }
    }
    Ok(())
}

fn plan_partitions(
    image: &MetadataImage,
    name: &str,
    count: i32,
    assignments: Option<&[strata_protocol::messages::create_partitions::CreatePartitionsAssignment]>,
) -> Result<Vec<MetadataRecord>, Refusal> {
    let Some(t) = image.topic(name) else {
        return Err((ErrorCode::UnknownTopicOrPartition, format!("topic {name} does not exist")));
    };
    let current = t.partitions.len() as i32;
    if count <= current {
        return Err((
            ErrorCode::InvalidPartitions,
            // Kafka's text (kafka-topics --alter prints it).
            format!(
                "The topic {name} currently has {current} partition(s); {count} would not be an increase."
            ),
        ));
    }
    let rf = t.partitions.first().map_or(1, |p| p.replicas.len());
    let added = count - current;
    let lists = match assignments {
        Some(a) if !a.is_empty() => {
            if a.len() != added as usize {
                return Err((
                    ErrorCode::InvalidReplicaAssignment,
                    format!("{} assignments given for {added} new partitions", a.len()),
                ));
            }
            let lists: Vec<Vec<i32>> = a.iter().map(|x| x.broker_ids.clone()).collect();
            validate_assignments(image, &lists, Some(rf))?;
            lists
        }
        _ => {
            let brokers = usable_brokers(image);
            if rf > brokers.len() {
                return Err((
                    ErrorCode::InvalidReplicationFactor,
                    format!(
                        "the topic's replication factor {rf} is above the {} usable broker(s)",
                        brokers.len()
                    ),
                ));
            }
            placement::assign_random(&brokers, added, rf, current)
        }
    };
    Ok(lists
        .into_iter()
        .enumerate()
        .map(|(i, replicas)| {
            MetadataRecord::Partition(new_partition(image, t.id, current + i as i32, replicas))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::super::tests::cluster;
    use super::*;
    use strata_protocol::messages::create_topics::CreatableReplicaAssignment;

    fn create(name: &str, partitions: i32, rf: i16) -> CreatableTopic {
        CreatableTopic {
            name: name.into(),
            num_partitions: partitions,
            replication_factor: rf,
            ..Default::default()
        }
    }

    #[test]
    fn a_new_topic_is_described_under_the_cluster_wide_dynamic_defaults() {
        let (mut image, state) = cluster(&[1]);
        image.apply_batch(
            50,
            &[MetadataRecord::BrokerConfig {
                resource_name: String::new(),
                configs: [("compression.type".to_string(), "lz4".to_string())].into(),
            }],
        );
        let request = CreateTopicsRequest { topics: vec![create("t", 1, 1)], ..Default::default() };
        let (_, response) = state.create_topics(&Arc::new(image), &request);
        let configs = response.topics[0].configs.as_ref().expect("configs described");
        let c = configs.iter().find(|c| c.name == "compression.type").expect("compression.type");
        assert_eq!(
            (c.value.as_deref(), c.config_source),
            (Some("lz4"), topic::Source::DynamicDefaultBroker as i8)
        );
    }

    #[test]
    fn a_topic_is_placed_over_the_active_brokers() {
        let (image, state) = cluster(&[1, 2, 3]);
        let image = Arc::new(image);
        let request = CreateTopicsRequest { topics: vec![create("t", 6, 3)], ..Default::default() };
        let (records, response) = state.create_topics(&image, &request);
        assert_eq!(response.topics[0].error_code, 0, "{:?}", response.topics[0].error_message);
        assert_eq!((response.topics[0].num_partitions, response.topics[0].replication_factor), (6, 3));
        let mut next = (*image).clone();
        next.apply_batch(100, &records);
        let t = next.topic("t").expect("created");
        assert_eq!(t.partitions.len(), 6);
        for p in &t.partitions {
            assert_eq!(p.isr, p.replicas);
            assert_eq!(p.leader, p.replicas[0]);
        }
    }

    #[test]
    fn invalid_requests_get_kafkas_codes() {
        let (mut image, state) = cluster(&[1, 2]);
        super::super::tests::topic(&mut image, "exists", &[vec![1]]);
        let image = Arc::new(image);
        let cases: Vec<(CreatableTopic, ErrorCode)> = vec![
            (create("exists", 1, 1), ErrorCode::TopicAlreadyExists),
            (create("bad name", 1, 1), ErrorCode::InvalidTopicException),
            (create("t", 0, 1), ErrorCode::InvalidPartitions),
            (create("t", 1, 3), ErrorCode::InvalidReplicationFactor),
            (
                CreatableTopic {
                    name: "t".into(),
                    num_partitions: -1,
                    replication_factor: -1,
                    assignments: vec![CreatableReplicaAssignment {
                        partition_index: 0,
                        broker_ids: vec![1, 9],
                    }],
                    ..Default::default()
                },
                ErrorCode::InvalidReplicaAssignment,
            ),
        ];
        for (t, code) in cases {
            let request = CreateTopicsRequest { topics: vec![t.clone()], ..Default::default() };
            let (records, response) = state.create_topics(&image, &request);
            assert!(records.is_empty(), "{t:?}");
            assert_eq!(
                response.topics[0].error_code,
                code.code(),
                "{t:?}: {:?}",
                response.topics[0].error_message
            );
        }
    }

    #[test]
    fn manual_assignments_and_validate_only() {
        let (image, state) = cluster(&[1, 2, 3]);
        let image = Arc::new(image);
        let t = CreatableTopic {
            name: "m".into(),
            num_partitions: -1,
            replication_factor: -1,
            assignments: vec![
                CreatableReplicaAssignment { partition_index: 1, broker_ids: vec![3, 1] },
                CreatableReplicaAssignment { partition_index: 0, broker_ids: vec![2, 3] },
            ],
            ..Default::default()
        };
        let only = CreateTopicsRequest { topics: vec![t.clone()], validate_only: true, ..Default::default() };
        let (records, response) = state.create_topics(&image, &only);
        assert!(records.is_empty() && response.topics[0].error_code == 0);
        let (records, _) =
            state.create_topics(&image, &CreateTopicsRequest { topics: vec![t], ..Default::default() });
        let mut next = (*image).clone();
        next.apply_batch(100, &records);
        let topic = next.topic("m").expect("m");
        assert_eq!(topic.partitions[0].replicas, vec![2, 3]);
        assert_eq!(topic.partitions[1].leader, 3);
    }

    #[test]
    fn partitions_grow_with_the_topics_replication_factor_and_topics_are_deleted() {
        let (mut image, state) = cluster(&[1, 2, 3]);
        let id = super::super::tests::topic(&mut image, "t", &[vec![1, 2]]);
        let image = Arc::new(image);
        let request = CreatePartitionsRequest {
            topics: vec![strata_protocol::messages::create_partitions::CreatePartitionsTopic {
                name: "t".into(),
                count: 3,
                assignments: None,
            }],
            ..Default::default()
        };
        let (records, response) = state.create_partitions(&image, &request);
        assert_eq!(response.results[0].error_code, 0);
        let mut next = (*image).clone();
        next.apply_batch(100, &records);
        let t = next.topic("t").expect("t");
        assert_eq!(t.partitions.len(), 3);
        assert!(t.partitions.iter().all(|p| p.replicas.len() == 2));
        let next = Arc::new(next);
        let (records, results) =
            state.delete_topics(&next, &[(None, id.0), (Some("nope".into()), Uuid::ZERO)]);
        assert_eq!(records, vec![MetadataRecord::RemoveTopic { topic_id: id }]);
        assert_eq!(results[0].name.as_deref(), Some("t"));
        assert_eq!(results[1].error_code, ErrorCode::UnknownTopicOrPartition.code());
    }
}
