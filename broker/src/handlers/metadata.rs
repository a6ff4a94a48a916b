//! Metadata (3): brokers, cluster id, controller, and topics with their partitions.
//! Asking for an unknown topic creates it when `auto.create.topics.enable` and the
//! request allow it (Kafka auto-creates on Metadata, not on Produce).

use crate::broker::Broker;
use crate::topics::{validate_topic_name, TopicMeta};
use strata_protocol::messages::metadata::{
    MetadataRequest, MetadataResponse, MetadataResponseBroker, MetadataResponsePartition,
    MetadataResponseTopic,
};
use strata_protocol::ErrorCode;

/// Answers Metadata.
pub fn handle(broker: &Broker, version: i16, request: MetadataRequest) -> MetadataResponse {
    let (host, port) = broker.advertised_address();
    let node = broker.config.node_id;
    let mut response = MetadataResponse {
        brokers: vec![MetadataResponseBroker { node_id: node, host, port, rack: broker.config.rack.clone() }],
        cluster_id: Some(broker.cluster_id.clone()),
        controller_id: node,
        ..Default::default()
    };
    // v0: an empty list means all topics; v1+: null means all topics.
    let requested = match request.topics {
        None => None,
        Some(t) if t.is_empty() && version == 0 => None,
        Some(t) => Some(t),
    };
    let allow_auto_create = version < 4 || request.allow_auto_topic_creation;
    match requested {
        None => {
            let snapshot = broker.topics.snapshot();
            response.topics = snapshot.by_name.values().map(|m| describe(broker, m)).collect();
        }
        Some(topics) => {
            for t in topics {
                let by_name = match t.name {
                    Some(name) => Some(name),
                    None if !t.topic_id.is_zero() => broker.topics.snapshot().by_id.get(&t.topic_id).cloned(),
                    None => None,
                };
                let Some(name) = by_name else {
                    response.topics.push(MetadataResponseTopic {
                        error_code: ErrorCode::UnknownTopicId.code(),
                        name: None,
                        topic_id: t.topic_id,
                        ..Default::default()
                    });
                    continue;
                };
                if validate_topic_name(&name).is_err() {
                    response.topics.push(error_topic(name, ErrorCode::InvalidTopicException));
                    continue;
                }
                match broker.get_or_auto_create(&name, allow_auto_create) {
                    Ok(meta) => response.topics.push(describe(broker, &meta)),
                    Err(code) => response.topics.push(error_topic(name, code)),
                }
            }
        }
    }
    response
}

fn error_topic(name: String, code: ErrorCode) -> MetadataResponseTopic {
    MetadataResponseTopic { error_code: code.code(), name: Some(name), ..Default::default() }
}

fn describe(broker: &Broker, meta: &TopicMeta) -> MetadataResponseTopic {
    let node = broker.config.node_id;
    let partitions = (0..meta.partitions)
        .map(|index| {
            let epoch = broker.replicas.get(&meta.name, index).map(|p| p.leader_epoch());
            MetadataResponsePartition {
                error_code: if epoch.is_some() { 0 } else { ErrorCode::LeaderNotAvailable.code() },
                partition_index: index,
                leader_id: if epoch.is_some() { node } else { -1 },
                leader_epoch: epoch.unwrap_or(-1),
                replica_nodes: vec![node],
                isr_nodes: vec![node],
                offline_replicas: Vec::new(),
            }
        })
        .collect();
    MetadataResponseTopic {
        error_code: 0,
        name: Some(meta.name.clone()),
        topic_id: meta.id,
        is_internal: meta.internal,
        partitions,
        ..Default::default()
    }
}
