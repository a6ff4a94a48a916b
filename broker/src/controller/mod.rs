//! The controller: the KRaft-style quorum that owns the cluster metadata.
//!
//! - [`raft`]: the replicated metadata log on openraft (log store, state machine,
//!   snapshots, the Raft RPC transport); nothing outside it touches openraft types.
//! - The pure decision logic, tested without sockets or clocks: [`ControllerState`] takes
//!   the current [`MetadataImage`], a request and `now_ms` and returns the
//!   [`MetadataRecord`](crate::metadata::MetadataRecord)s to write plus the answer: broker registration, heartbeats,
//!   fencing and controlled shutdown ([`brokers`]), topics and configs ([`topics`]), ISR
//!   changes from leaders ([`isr`]), leader elections ([`election`], [`leaders`]),
//!   producer-id blocks ([`producer_ids`]), replica placement ([`placement`]).
//! - [`service`]: the async shell on every controller node. On the active controller
//!   (the Raft leader) one task serialises decisions: it computes records from the
//!   applied image, writes them through Raft, waits until they are applied, and only
//!   then decides the next request, so every decision sees every earlier one.

pub mod brokers;
pub mod channel;
pub mod configs;
pub mod election;
pub mod follower;
pub mod isr;
pub mod leaders;
mod pending;
pub mod placement;
pub mod producer_ids;
pub mod quorum_answer;
pub mod raft;
pub mod reassign;
pub mod service;
pub mod topics;
pub mod transport;

use crate::config::topic::TopicDefaults;
use crate::metadata::MetadataImage;
use std::collections::HashMap;

/// The settings decisions depend on, from the controller node's configuration.
#[derive(Debug, Clone)]
pub struct ControllerSettings {
    /// `broker.session.timeout.ms`.
    pub session_timeout_ms: i64,
    /// `unclean.leader.election.enable` (broker default; a topic may override it).
    pub unclean_leader_election_enable: bool,
    /// `num.partitions`, for CreateTopics with -1.
    pub num_partitions: i32,
    /// `default.replication.factor`, for CreateTopics with -1.
    pub default_replication_factor: i16,
    /// `leader.imbalance.per.broker.percentage`.
    pub leader_imbalance_per_broker_percentage: u32,
    /// `delete.topic.enable`.
    pub delete_topic_enable: bool,
    /// Broker-level topic config defaults, to describe a new topic's configs.
    pub topic_defaults: TopicDefaults,
    /// The node id of the broker in this controller's own process (combined roles): a new
    /// incarnation of it registering means the old one is dead, so it need not wait out the
    /// old session (a single node restarted after kill -9 is back at once).
    pub local_broker: Option<i32>,
}

/// The active controller's decision state: the metadata image is the input; the only
/// state kept here is soft (broker sessions), rebuilt when a controller becomes active.
#[derive(Debug)]
pub struct ControllerState {
    settings: ControllerSettings,
    sessions: HashMap<i32, brokers::Session>,
}

impl ControllerState {
    /// A controller with no sessions yet.
    pub fn new(settings: ControllerSettings) -> ControllerState {
        ControllerState { settings, sessions: HashMap::new() }
    }

    /// The settings.
    pub fn settings(&self) -> &ControllerSettings {
        &self.settings
    }

    /// Whether a partition of `topic` may elect a replica outside its ISR.
    pub fn unclean_allowed(&self, image: &MetadataImage, topic: &str) -> bool {
        image
            .topic(topic)
            .and_then(|t| t.configs.get("unclean.leader.election.enable"))
            .map_or(self.settings.unclean_leader_election_enable, |v| v.eq_ignore_ascii_case("true"))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::metadata::{BrokerRegistrationRecord, Endpoint, MetadataRecord, PartitionRecord, TopicId};
    use std::sync::Arc;
    use strata_protocol::codec::Uuid;

    pub fn settings() -> ControllerSettings {
        ControllerSettings {
            session_timeout_ms: 9000,
            unclean_leader_election_enable: false,
            num_partitions: 1,
            default_replication_factor: 1,
            leader_imbalance_per_broker_percentage: 10,
            delete_topic_enable: true,
            topic_defaults: crate::config::BrokerConfig::default().topic_defaults,
            local_broker: None,
        }
    }

    /// An image with `nodes` registered and unfenced, and a controller state.
    pub fn cluster(nodes: &[i32]) -> (MetadataImage, ControllerState) {
        let mut image = MetadataImage::default();
        image.apply_batch(1, &[MetadataRecord::ClusterId { cluster_id: "test-cluster".into() }]);
        for (i, &node_id) in nodes.iter().enumerate() {
            let index = 10 + i as u64;
            image.apply_batch(
                index,
                &[MetadataRecord::RegisterBroker(BrokerRegistrationRecord {
                    node_id,
                    incarnation_id: format!("inc-{node_id}"),
                    endpoints: vec![Endpoint {
                        listener: "PLAINTEXT".into(),
                        host: "127.0.0.1".into(),
                        port: 9000 + node_id as u16,
                    }],
                    rack: None,
                })],
            );
            image
                .apply_batch(index, &[MetadataRecord::UnfenceBroker { node_id, broker_epoch: index as i64 }]);
        }
        (image, ControllerState::new(settings()))
    }

    /// Adds topic `name` with one partition per replica list (leader: the first).
    pub fn topic(image: &mut MetadataImage, name: &str, assignments: &[Vec<i32>]) -> TopicId {
        let id = TopicId(Uuid([name.len() as u8 + 1; 16]));
        let mut records = vec![MetadataRecord::Topic { name: name.into(), topic_id: id }];
        for (i, replicas) in assignments.iter().enumerate() {
            records.push(MetadataRecord::Partition(PartitionRecord {
                topic_id: id,
                partition: i as i32,
                replicas: replicas.clone(),
                isr: replicas.clone(),
                leader: replicas[0],
                leader_epoch: 0,
                partition_epoch: 0,
                adding_replicas: vec![],
                removing_replicas: vec![],
            }));
        }
        let index = image.applied_index + 1;
        image.apply_batch(index, &records);
        id
    }

    #[test]
    fn topic_configs_override_the_unclean_default() {
        let (mut image, state) = cluster(&[1]);
        topic(&mut image, "t", &[vec![1]]);
        assert!(!state.unclean_allowed(&image, "t"));
        let id = image.topic("t").expect("t").id;
        image.apply_batch(
            99,
            &[MetadataRecord::TopicConfig {
                topic_id: id,
                configs: [("unclean.leader.election.enable".into(), "true".into())].into(),
            }],
        );
        assert!(state.unclean_allowed(&Arc::new(image), "t"));
    }
}
