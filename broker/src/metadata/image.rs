//! The metadata image: the cluster as the metadata log describes it after applying every
//! record up to `applied_index`. Applying is pure and total (a record that does not fit,
//! such as a fence for an old broker epoch, changes nothing), so every node that applies
//! the same log holds the same image.
//!
//! Images are immutable once published: handlers, the replica manager and the
//! coordinators read an `Arc<MetadataImage>` snapshot and never see a half-applied
//! batch. Per-topic and per-broker entries are `Arc`s, so building the next image copies
//! the maps, not the topics.

use super::records::{BrokerRegistrationRecord, Endpoint, MetadataRecord, PartitionRecord, TopicId};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use strata_protocol::codec::Uuid;

/// A registered broker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerImage {
    /// `node.id`.
    pub node_id: i32,
    /// The broker epoch: the metadata log index of its registration (KIP-380/903), so
    /// requests from a previous incarnation can be told apart.
    pub epoch: i64,
    /// Random id of the broker process that registered.
    pub incarnation_id: String,
    /// Its listeners.
    pub endpoints: Vec<Endpoint>,
    /// `broker.rack`.
    pub rack: Option<String>,
    /// A fenced broker leads nothing, is not in ISRs it left, and is not shown to clients.
    pub fenced: bool,
    /// Set by a controlled shutdown: leadership moves away and it may not rejoin ISRs.
    pub in_controlled_shutdown: bool,
}

impl BrokerImage {
    /// Alive for placement and elections: unfenced and not shutting down.
    pub fn is_active(&self) -> bool {
        !self.fenced && !self.in_controlled_shutdown
    }

    /// The endpoint of `listener`, if the broker has one.
    pub fn endpoint(&self, listener: &str) -> Option<&Endpoint> {
        self.endpoints.iter().find(|e| e.listener == listener)
    }
}

/// A topic with its partitions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicImage {
    /// Name.
    pub name: String,
    /// Id (KIP-516).
    pub id: TopicId,
    /// Config overrides.
    pub configs: BTreeMap<String, String>,
    /// Partitions by index (dense from 0).
    pub partitions: Vec<PartitionRecord>,
}

impl TopicImage {
    /// True for `__consumer_offsets`, `__transaction_state` and other `__` topics.
    pub fn is_internal(&self) -> bool {
        self.name.starts_with("__")
    }

    /// Partition `index`, if it exists.
    pub fn partition(&self, index: i32) -> Option<&PartitionRecord> {
        usize::try_from(index).ok().and_then(|i| self.partitions.get(i))
    }

    /// The topic id as the wire protocol carries it.
    pub fn uuid(&self) -> Uuid {
        self.id.0
    }
}

/// The whole cluster metadata at one point of the metadata log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataImage {
    /// Index of the last Raft entry applied (0: none).
    pub applied_index: u64,
    /// Set by the first active controller; the same on every node.
    pub cluster_id: Option<String>,
    /// Registered brokers by node id.
    pub brokers: BTreeMap<i32, Arc<BrokerImage>>,
    /// Topics by name.
    pub topics: BTreeMap<String, Arc<TopicImage>>,
    /// Topic names by id.
    pub topic_names: HashMap<Uuid, String>,
    /// First producer id of the next block the controller hands out.
    pub next_producer_id: i64,
    /// Dynamic broker configs by resource name (`""`: cluster default; a node id).
    pub broker_configs: BTreeMap<String, BTreeMap<String, String>>,
}

/// What applying a record produced that its writer wants to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ApplyOutcome {
    /// The broker epoch assigned by a [`MetadataRecord::RegisterBroker`].
    pub broker_epoch: Option<i64>,
}

impl MetadataImage {
    /// A topic by name.
    pub fn topic(&self, name: &str) -> Option<&Arc<TopicImage>> {
        self.topics.get(name)
    }

    /// A topic by id.
    pub fn topic_by_id(&self, id: Uuid) -> Option<&Arc<TopicImage>> {
        self.topic_names.get(&id).and_then(|n| self.topics.get(n))
    }

    /// A partition by topic name and index.
    pub fn partition(&self, topic: &str, index: i32) -> Option<&PartitionRecord> {
        self.topic(topic).and_then(|t| t.partition(index))
    }

    /// A registered broker.
    pub fn broker(&self, node_id: i32) -> Option<&Arc<BrokerImage>> {
        self.brokers.get(&node_id)
    }

    /// Unfenced brokers (the ones clients are told about), by node id.
    pub fn unfenced_brokers(&self) -> impl Iterator<Item = &Arc<BrokerImage>> {
        self.brokers.values().filter(|b| !b.fenced)
    }

    /// True if `node_id` is registered, unfenced and not shutting down.
    pub fn is_active(&self, node_id: i32) -> bool {
        self.brokers.get(&node_id).is_some_and(|b| b.is_active())
    }

    /// True if `node_id` leads a partition that another active replica could lead: what
    /// a controlled shutdown waits to have moved.
    pub fn leads_movable(&self, node_id: i32) -> bool {
        self.topics
            .values()
            .flat_map(|t| t.partitions.iter())
            .any(|p| p.leader == node_id && p.isr.iter().any(|&r| r != node_id && self.is_active(r)))
    }

    /// Applies the records of the Raft entry at `index`, in order.
    pub fn apply_batch(&mut self, index: u64, records: &[MetadataRecord]) -> ApplyOutcome {
        let mut outcome = ApplyOutcome::default();
        for record in records {
            let one = self.apply(index, record);
            outcome.broker_epoch = outcome.broker_epoch.or(one.broker_epoch);
        }
        self.applied_index = self.applied_index.max(index);
        outcome
    }

    /// Applies one record of the entry at `index`.
    pub fn apply(&mut self, index: u64, record: &MetadataRecord) -> ApplyOutcome {
        let mut outcome = ApplyOutcome::default();
        match record {
            MetadataRecord::ClusterId { cluster_id } => {
                if self.cluster_id.is_none() {
                    self.cluster_id = Some(cluster_id.clone());
                }
            }
            MetadataRecord::RegisterBroker(r) => {
                let epoch = index as i64;
                self.brokers.insert(r.node_id, Arc::new(registration(r, epoch)));
                outcome.broker_epoch = Some(epoch);
            }
            MetadataRecord::FenceBroker { node_id, broker_epoch } => {
                self.update_broker(*node_id, *broker_epoch, |b| {
                    b.fenced = true;
                    b.in_controlled_shutdown = false;
                });
            }
            MetadataRecord::UnfenceBroker { node_id, broker_epoch } => {
                self.update_broker(*node_id, *broker_epoch, |b| b.fenced = false);
            }
            MetadataRecord::BeginControlledShutdown { node_id, broker_epoch } => {
                self.update_broker(*node_id, *broker_epoch, |b| b.in_controlled_shutdown = true);
            }
            MetadataRecord::UnregisterBroker { node_id, broker_epoch } => {
                if self.brokers.get(node_id).is_some_and(|b| b.epoch == *broker_epoch) {
                    self.brokers.remove(node_id);
                }
            }
            MetadataRecord::Topic { name, topic_id } => {
                if !self.topics.contains_key(name) && !self.topic_names.contains_key(&topic_id.0) {
                    self.topic_names.insert(topic_id.0, name.clone());
                    let topic = TopicImage {
                        name: name.clone(),
                        id: *topic_id,
                        configs: BTreeMap::new(),
                        partitions: Vec::new(),
                    };
                    self.topics.insert(name.clone(), Arc::new(topic));
                }
            }
            MetadataRecord::TopicConfig { topic_id, configs } => {
                self.update_topic(topic_id.0, |t| t.configs = configs.clone());
            }
            MetadataRecord::BrokerConfig { resource_name, configs } => {
                if configs.is_empty() {
                    self.broker_configs.remove(resource_name);
                } else {
                    self.broker_configs.insert(resource_name.clone(), configs.clone());
                }
            }
            MetadataRecord::Partition(p) => {
                self.update_topic(p.topic_id.0, |t| set_partition(t, p));
            }
            MetadataRecord::RemoveTopic { topic_id } => {
                if let Some(name) = self.topic_names.remove(&topic_id.0) {
                    self.topics.remove(&name);
                }
            }
            MetadataRecord::ProducerIds { next_producer_id, .. } => {
                self.next_producer_id = self.next_producer_id.max(*next_producer_id);
            }
            MetadataRecord::Noop => {}
        }
        outcome
    }

    fn update_broker(&mut self, node_id: i32, epoch: i64, change: impl FnOnce(&mut BrokerImage)) {
        if let Some(b) = self.brokers.get_mut(&node_id) {
            if b.epoch == epoch {
                change(Arc::make_mut(b));
            }
        }
    }

    fn update_topic(&mut self, id: Uuid, change: impl FnOnce(&mut TopicImage)) {
        let Some(name) = self.topic_names.get(&id) else { return };
        if let Some(t) = self.topics.get_mut(name) {
            change(Arc::make_mut(t));
        }
    }

    /// The image as a snapshot: what a new node or a restarted one loads instead of
    /// replaying the log from the start.
    pub fn to_snapshot(&self) -> ImageSnapshot {
        ImageSnapshot {
            applied_index: self.applied_index,
            cluster_id: self.cluster_id.clone(),
            brokers: self.brokers.values().map(|b| (**b).clone()).collect(),
            topics: self.topics.values().map(|t| (**t).clone()).collect(),
            next_producer_id: self.next_producer_id,
            broker_configs: self.broker_configs.clone(),
        }
    }

    /// The image a snapshot describes.
    pub fn from_snapshot(s: ImageSnapshot) -> MetadataImage {
        let mut image = MetadataImage {
            applied_index: s.applied_index,
            cluster_id: s.cluster_id,
            next_producer_id: s.next_producer_id,
            broker_configs: s.broker_configs,
            ..MetadataImage::default()
        };
        for b in s.brokers {
            image.brokers.insert(b.node_id, Arc::new(b));
        }
        for t in s.topics {
            image.topic_names.insert(t.id.0, t.name.clone());
            image.topics.insert(t.name.clone(), Arc::new(t));
        }
        image
    }
}

fn registration(r: &BrokerRegistrationRecord, epoch: i64) -> BrokerImage {
    BrokerImage {
        node_id: r.node_id,
        epoch,
        incarnation_id: r.incarnation_id.clone(),
        endpoints: r.endpoints.clone(),
        rack: r.rack.clone(),
        fenced: true,
        in_controlled_shutdown: false,
    }
}

/// Replaces (or appends, when it is the next index) a partition. A record that would move
/// the leader epoch backwards is a controller bug; it is refused loudly and ignored so the
/// image keeps its invariant (leader epochs never decrease).
fn set_partition(t: &mut TopicImage, p: &PartitionRecord) {
    let Ok(index) = usize::try_from(p.partition) else { return };
    let len = t.partitions.len();
    match t.partitions.get_mut(index) {
        Some(current) => {
            if p.leader_epoch < current.leader_epoch || p.partition_epoch < current.partition_epoch {
                tracing::error!(
                    topic = %t.name,
                    partition = p.partition,
                    leader_epoch = p.leader_epoch,
                    current_leader_epoch = current.leader_epoch,
                    "metadata record moves a leader epoch backwards; ignored"
                );
                debug_assert!(false, "leader epoch moved backwards");
                return;
            }
            *current = p.clone();
        }
        None if index == len => t.partitions.push(p.clone()),
        None => {
            tracing::error!(topic = %t.name, partition = p.partition, "partition record out of order; ignored")
        }
    }
}

/// A serialisable copy of an image (the Raft snapshot's content).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageSnapshot {
    /// Index of the last entry the snapshot includes.
    pub applied_index: u64,
    /// The cluster id.
    pub cluster_id: Option<String>,
    /// Every registered broker.
    pub brokers: Vec<BrokerImage>,
    /// Every topic.
    pub topics: Vec<TopicImage>,
    /// Next producer-id block start.
    pub next_producer_id: i64,
    /// Dynamic broker configs (absent in snapshots written before they existed).
    #[serde(default)]
    pub broker_configs: BTreeMap<String, BTreeMap<String, String>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn id(n: u8) -> TopicId {
        TopicId(Uuid([n; 16]))
    }

    fn partition(topic: TopicId, index: i32, leader: i32, leader_epoch: i32) -> PartitionRecord {
        PartitionRecord {
            topic_id: topic,
            partition: index,
            replicas: vec![1, 2, 3],
            isr: vec![1, 2, 3],
            leader,
            leader_epoch,
            partition_epoch: leader_epoch,
            adding_replicas: vec![],
            removing_replicas: vec![],
        }
    }

    fn register(node_id: i32) -> MetadataRecord {
        MetadataRecord::RegisterBroker(BrokerRegistrationRecord {
            node_id,
            incarnation_id: format!("inc-{node_id}"),
            endpoints: vec![Endpoint { listener: "PLAINTEXT".into(), host: "h".into(), port: 9 }],
            rack: None,
        })
    }

    #[test]
    fn a_registration_gets_its_log_index_as_epoch_and_starts_fenced() {
        let mut image = MetadataImage::default();
        let outcome = image.apply_batch(7, &[register(1)]);
        assert_eq!(outcome.broker_epoch, Some(7));
        let b = image.broker(1).expect("registered");
        assert!(b.fenced && b.epoch == 7);
        image.apply_batch(8, &[MetadataRecord::UnfenceBroker { node_id: 1, broker_epoch: 6 }]);
        assert!(image.broker(1).expect("b").fenced, "an old epoch changes nothing");
        image.apply_batch(9, &[MetadataRecord::UnfenceBroker { node_id: 1, broker_epoch: 7 }]);
        assert!(image.is_active(1));
        image.apply_batch(10, &[MetadataRecord::BeginControlledShutdown { node_id: 1, broker_epoch: 7 }]);
        assert!(!image.is_active(1) && !image.broker(1).expect("b").fenced);
        assert_eq!(image.applied_index, 10);
    }

    #[test]
    fn topics_partitions_and_removal() {
        let mut image = MetadataImage::default();
        let t = id(1);
        image.apply_batch(
            1,
            &[
                MetadataRecord::Topic { name: "t".into(), topic_id: t },
                MetadataRecord::Partition(partition(t, 0, 1, 0)),
                MetadataRecord::Partition(partition(t, 1, 2, 0)),
                MetadataRecord::TopicConfig { topic_id: t, configs: [("a".into(), "b".into())].into() },
            ],
        );
        assert_eq!(image.topic("t").expect("t").partitions.len(), 2);
        assert_eq!(image.topic_by_id(t.0).expect("by id").configs.get("a").map(String::as_str), Some("b"));
        // A second topic with the same name or id is ignored.
        image.apply_batch(2, &[MetadataRecord::Topic { name: "t".into(), topic_id: id(2) }]);
        assert!(image.topic_by_id(id(2).0).is_none());
        image.apply_batch(3, &[MetadataRecord::Partition(partition(t, 0, 2, 1))]);
        assert_eq!(image.partition("t", 0).expect("p").leader, 2);
        image.apply_batch(4, &[MetadataRecord::RemoveTopic { topic_id: t }]);
        assert!(image.topic("t").is_none() && image.topic_names.is_empty());
    }

    #[test]
    fn snapshots_rebuild_the_same_image() {
        let mut image = MetadataImage::default();
        let t = id(3);
        image.apply_batch(
            5,
            &[
                MetadataRecord::ClusterId { cluster_id: "abc".into() },
                register(1),
                MetadataRecord::Topic { name: "x".into(), topic_id: t },
                MetadataRecord::Partition(partition(t, 0, 1, 3)),
                MetadataRecord::ProducerIds { node_id: 1, broker_epoch: 5, next_producer_id: 2000 },
            ],
        );
        let text = serde_json::to_vec(&image.to_snapshot()).expect("encode");
        let back = MetadataImage::from_snapshot(serde_json::from_slice(&text).expect("decode"));
        assert_eq!(back, image);
    }

    #[test]
    fn the_cluster_id_is_set_once() {
        let mut image = MetadataImage::default();
        image.apply_batch(1, &[MetadataRecord::ClusterId { cluster_id: "first".into() }]);
        image.apply_batch(2, &[MetadataRecord::ClusterId { cluster_id: "second".into() }]);
        assert_eq!(image.cluster_id.as_deref(), Some("first"));
    }
}
