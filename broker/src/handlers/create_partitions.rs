//! CreatePartitions (37): grow a topic's partition count.

use crate::broker::Broker;
use strata_protocol::messages::create_partitions::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreatePartitionsTopicResult,
};
use strata_protocol::ErrorCode;

/// Handles CreatePartitions.
pub fn handle(broker: &Broker, request: CreatePartitionsRequest) -> CreatePartitionsResponse {
    let results = request
        .topics
        .into_iter()
        .map(|t| {
            let mut result = CreatePartitionsTopicResult { name: t.name.clone(), ..Default::default() };
            let fail = |r: &mut CreatePartitionsTopicResult, code: ErrorCode, msg: String| {
                r.error_code = code.code();
                r.error_message = Some(msg);
            };
            let Some(meta) = broker.topics.get(&t.name) else {
                fail(
                    &mut result,
                    ErrorCode::UnknownTopicOrPartition,
                    format!("topic {} does not exist", t.name),
                );
                return result;
            };
            if t.count <= meta.partitions {
                fail(
                    &mut result,
                    ErrorCode::InvalidPartitions,
                    format!(
                        "topic {} has {} partitions; the new count must be larger, got {}",
                        t.name, meta.partitions, t.count
                    ),
                );
                return result;
            }
            if let Some(assignments) = &t.assignments {
                let node = broker.config.node_id;
                let added = (t.count - meta.partitions) as usize;
                if assignments.len() != added || assignments.iter().any(|a| a.broker_ids != [node]) {
                    fail(
                        &mut result,
                        ErrorCode::InvalidReplicaAssignment,
                        format!("each new partition must be assigned [{node}]"),
                    );
                    return result;
                }
            }
            if request.validate_only {
                return result;
            }
            let count = t.count;
            let updated = broker.topics.update(&t.name, |old| match old {
                Some(old) if count > old.partitions => {
                    let mut m = old.clone();
                    m.partitions = count;
                    (Some(m.clone()), Some(m))
                }
                other => (other.cloned(), None),
            });
            match updated {
                Ok(Some(m)) => {
                    let config = broker.config.topic_defaults.log_config(&m.configs);
                    if let Err(e) = broker.replicas.ensure_topic(&m.name, m.partitions, &config) {
                        fail(&mut result, crate::errors::storage_error_code(&e), e.to_string());
                    }
                }
                Ok(None) => {
                    fail(&mut result, ErrorCode::InvalidPartitions, "the topic changed concurrently".into())
                }
                Err(e) => fail(&mut result, ErrorCode::UnknownServerError, e.to_string()),
            }
            result
        })
        .collect();
    CreatePartitionsResponse { results, ..Default::default() }
}
