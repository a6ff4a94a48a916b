//! CreateTopics (19): validate names, partition counts, replication factors and
//! configs, then create each topic (or only validate, with `validate_only`).

use crate::broker::Broker;
use std::collections::{BTreeMap, HashMap};
use strata_protocol::messages::create_topics::{
    CreatableTopicConfigs, CreatableTopicResult, CreateTopicsRequest, CreateTopicsResponse,
};
use strata_protocol::ErrorCode;

/// Handles CreateTopics.
pub fn handle(broker: &Broker, version: i16, request: CreateTopicsRequest) -> CreateTopicsResponse {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for t in &request.topics {
        *seen.entry(t.name.clone()).or_default() += 1;
    }
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let mut result = CreatableTopicResult { name: t.name.clone(), ..Default::default() };
            if seen.get(&t.name).copied().unwrap_or(0) > 1 {
                result.error_code = ErrorCode::InvalidRequest.code();
                result.error_message =
                    Some(format!("topic {} appears more than once in the request", t.name));
                return result;
            }
            let mut partitions = t.num_partitions;
            let mut replication_factor = t.replication_factor;
            if !t.assignments.is_empty() {
                if partitions != -1 || replication_factor != -1 {
                    result.error_code = ErrorCode::InvalidRequest.code();
                    result.error_message = Some(
                        "num_partitions and replication_factor must be -1 with manual assignments".into(),
                    );
                    return result;
                }
                let node = broker.config.node_id;
                let bad = t.assignments.iter().any(|a| a.broker_ids.iter().any(|b| *b != node));
                let sizes_differ =
                    t.assignments.iter().any(|a| a.broker_ids.len() != t.assignments[0].broker_ids.len());
                if bad || sizes_differ || t.assignments[0].broker_ids.is_empty() {
                    result.error_code = ErrorCode::InvalidReplicaAssignment.code();
                    result.error_message = Some(format!("replicas must be exactly [{node}]"));
                    return result;
                }
                partitions = t.assignments.len() as i32;
                replication_factor = t.assignments[0].broker_ids.len() as i16;
            }
            let mut configs = BTreeMap::new();
            for c in &t.configs {
                match &c.value {
                    Some(v) => {
                        configs.insert(c.name.clone(), v.clone());
                    }
                    None => {
                        result.error_code = ErrorCode::InvalidConfig.code();
                        result.error_message = Some(format!("null value for config {}", c.name));
                        return result;
                    }
                }
            }
            match broker.create_topic(&t.name, partitions, replication_factor, configs, request.validate_only)
            {
                Ok(meta) => {
                    result.topic_id = if request.validate_only { Default::default() } else { meta.id };
                    result.num_partitions = meta.partitions;
                    result.replication_factor = 1;
                    if version >= 5 {
                        result.configs = Some(
                            crate::config::topic::KEYS
                                .iter()
                                .map(|k| {
                                    let (value, source) =
                                        broker.config.topic_defaults.resolve(&meta.configs, k.name);
                                    CreatableTopicConfigs {
                                        name: k.name.to_string(),
                                        value: Some(value),
                                        read_only: false,
                                        config_source: source as i8,
                                        is_sensitive: false,
                                    }
                                })
                                .collect(),
                        );
                    }
                }
                Err(e) => {
                    result.error_code = e.code().code();
                    result.error_message = Some(e.to_string());
                }
            }
            result
        })
        .collect();
    CreateTopicsResponse { topics, ..Default::default() }
}
