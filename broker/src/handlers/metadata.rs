//! Metadata (3): brokers, cluster id, controller, and topics with their partitions, as
//! the metadata image describes them, with the endpoints of the listener the client
//! used. Asking for an unknown topic creates it (through the controller) when
//! `auto.create.topics.enable` and the request allow it (Kafka auto-creates on
//! Metadata, not on Produce).

use crate::coordinator::group::service::GroupService;
use crate::coordinator::internal_topics::CONSUMER_OFFSETS;
use crate::coordinator::internal_topics::TRANSACTION_STATE;
use crate::coordinator::txn::service::TxnService;
use crate::handlers::context::RequestContext;
use crate::metadata::{MetadataImage, TopicImage};
use crate::node::Node;
use crate::topics::validate_topic_name;
use std::sync::Arc;
use strata_protocol::messages::metadata::{
    MetadataRequest, MetadataResponse, MetadataResponseBroker, MetadataResponsePartition,
    MetadataResponseTopic,
};
use strata_protocol::ErrorCode;

/// Answers Metadata.
pub async fn handle(
    node: &Arc<Node>,
    groups: &GroupService,
    transactions: &TxnService,
    version: i16,
    request: MetadataRequest,
    ctx: &RequestContext,
) -> MetadataResponse {
    // v0: an empty list means all topics; v1+: null means all topics.
    let requested = match request.topics {
        None => None,
        Some(t) if t.is_empty() && version == 0 => None,
        Some(t) => Some(t),
    };
    let allow_auto_create =
        (version < 4 || request.allow_auto_topic_creation) && node.config.auto_create_topics_enable;
    let mut image = node.metadata.current();
    let mut failed: Vec<(String, ErrorCode)> = Vec::new();
    if let (Some(topics), true) = (&requested, allow_auto_create) {
        let missing: Vec<String> = topics
            .iter()
            .filter(|t| t.topic_id.is_zero())
            .filter_map(|t| t.name.clone())
            .filter(|n| image.topic(n).is_none() && validate_topic_name(n).is_ok())
            .collect();
        // The coordinators' topics are created as their coordinators create them
        // (offsets.topic.num.partitions, compacted, ...), never with the defaults of
        // ordinary topics, as Kafka's auto-creation does: a lag checker that asks for
        // __consumer_offsets before any group exists must not get a one-partition topic.
        let (internal, missing): (Vec<String>, Vec<String>) =
            missing.into_iter().partition(|n| n == CONSUMER_OFFSETS || n == TRANSACTION_STATE);
        for name in &internal {
            let created = if name == CONSUMER_OFFSETS {
                groups.ensure_topic().await
            } else {
                transactions.ensure_topic().await
            };
            if let Err(code) = created {
                failed.push((name.clone(), code));
            }
        }
        if !missing.is_empty() {
            failed.extend(crate::handlers::forward::auto_create(node, &missing).await);
        }
        if !missing.is_empty() || !internal.is_empty() {
            image = node.metadata.current();
        }
    }
    let mut response = MetadataResponse {
        brokers: brokers(&image, &ctx.listener),
        cluster_id: Some(node.cluster_id()),
        controller_id: controller_id(&image, node.config.node_id),
        ..Default::default()
    };
    match requested {
        None => response.topics = image.topics.values().map(|t| describe(&image, t)).collect(),
        Some(topics) => {
            for t in topics {
                // A non-zero id names the topic and its name is ignored, as in Kafka: the Java
                // Admin's describeTopics by id sends `name: ""` (not null) beside the id.
                let by_name = t.name.filter(|_| t.topic_id.is_zero());
                let name = match by_name {
                    Some(name) => name,
                    None => match image.topic_by_id(t.topic_id) {
                        Some(topic) => topic.name.clone(),
                        None => {
                            response.topics.push(MetadataResponseTopic {
                                error_code: ErrorCode::UnknownTopicId.code(),
                                name: None,
                                topic_id: t.topic_id,
                                ..Default::default()
                            });
                            continue;
                        }
                    },
                };
                if validate_topic_name(&name).is_err() {
                    response.topics.push(error_topic(name, ErrorCode::InvalidTopicException));
                    continue;
                }
                match image.topic(&name) {
                    Some(topic) => response.topics.push(describe(&image, topic)),
                    None => {
                        let code = failed
                            .iter()
                            .find(|(n, _)| *n == name)
                            .map(|(_, c)| *c)
                            .filter(|_| allow_auto_create)
                            .unwrap_or(if allow_auto_create {
                                ErrorCode::LeaderNotAvailable
                            } else {
                                ErrorCode::UnknownTopicOrPartition
                            });
                        response.topics.push(error_topic(name, code));
                    }
                }
            }
        }
    }
    response
}

/// Unfenced brokers with an endpoint on `listener`.
pub fn brokers(image: &MetadataImage, listener: &str) -> Vec<MetadataResponseBroker> {
    image
        .unfenced_brokers()
        .filter_map(|b| {
            b.endpoint(listener).map(|e| MetadataResponseBroker {
                node_id: b.node_id,
                host: e.host.clone(),
                port: i32::from(e.port),
                rack: b.rack.clone(),
            })
        })
        .collect()
}

/// The id clients see as the controller: the answering broker `me` when it is live, else a
/// random live broker (unfenced, not shutting down; else any unfenced one). Clients send
/// admin requests there and every broker forwards them to the active controller. Kafka's
/// KRaft brokers answer a random live broker; that can be a broker that died a moment ago
/// and whose session has not expired yet, and a librdkafka admin client then waits for a
/// connection to it until its request times out (it does not refresh metadata meanwhile).
/// The broker answering is one the client just reached. DescribeQuorum names the quorum's
/// leader.
pub fn controller_id(image: &MetadataImage, me: i32) -> i32 {
    use rand::seq::SliceRandom;
    if image.is_active(me) {
        return me;
    }
    let mut live: Vec<i32> = image.unfenced_brokers().filter(|b| b.is_active()).map(|b| b.node_id).collect();
    if live.is_empty() {
        live = image.unfenced_brokers().map(|b| b.node_id).collect();
    }
    live.choose(&mut rand::thread_rng()).copied().unwrap_or(-1)
}

fn error_topic(name: String, code: ErrorCode) -> MetadataResponseTopic {
    MetadataResponseTopic { error_code: code.code(), name: Some(name), ..Default::default() }
}

fn describe(image: &MetadataImage, t: &TopicImage) -> MetadataResponseTopic {
    let partitions = t
        .partitions
        .iter()
        .map(|p| MetadataResponsePartition {
            error_code: if p.leader < 0 { ErrorCode::LeaderNotAvailable.code() } else { 0 },
            partition_index: p.partition,
            leader_id: p.leader,
            leader_epoch: p.leader_epoch,
            replica_nodes: p.replicas.clone(),
            isr_nodes: p.isr.clone(),
            offline_replicas: p
                .replicas
                .iter()
                .copied()
                .filter(|r| image.broker(*r).is_none_or(|b| b.fenced))
                .collect(),
        })
        .collect();
    MetadataResponseTopic {
        error_code: 0,
        name: Some(t.name.clone()),
        topic_id: t.uuid(),
        is_internal: t.is_internal(),
        partitions,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::controller_id;
    use crate::metadata::records::{BrokerRegistrationRecord, Endpoint, MetadataRecord};
    use crate::metadata::MetadataImage;

    fn live_brokers(ids: &[i32]) -> MetadataImage {
        let mut image = MetadataImage::default();
        for (i, &node_id) in ids.iter().enumerate() {
            let index = 2 * i as u64 + 1;
            let registration = MetadataRecord::RegisterBroker(BrokerRegistrationRecord {
                node_id,
                incarnation_id: format!("inc-{node_id}"),
                endpoints: vec![Endpoint { listener: "PLAINTEXT".into(), host: "h".into(), port: 9 }],
                rack: None,
            });
            image.apply_batch(index, &[registration]);
            image.apply_batch(
                index + 1,
                &[MetadataRecord::UnfenceBroker { node_id, broker_epoch: index as i64 }],
            );
        }
        image
    }

    #[test]
    fn the_answering_broker_names_itself_while_it_is_live() {
        let mut image = live_brokers(&[0, 1, 2]);
        for me in 0..3 {
            assert_eq!(controller_id(&image, me), me);
        }
        let epoch = image.broker(1).expect("registered").epoch;
        image
            .apply_batch(100, &[MetadataRecord::BeginControlledShutdown { node_id: 1, broker_epoch: epoch }]);
        for _ in 0..50 {
            let id = controller_id(&image, 1);
            assert!(id == 0 || id == 2, "a broker shutting down names a live one, got {id}");
        }
    }

    #[test]
    fn no_live_broker_is_minus_one() {
        assert_eq!(controller_id(&MetadataImage::default(), 0), -1);
    }
}
