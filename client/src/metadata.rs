//! The client's view of the cluster: brokers, topics, partitions and their leaders, as the
//! last Metadata response said. A [`Cluster`] is immutable; a refresh builds a new one
//! and swaps it in, so readers never lock and never see half an update.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;
use strata_protocol::codec::Uuid;
use strata_protocol::messages::metadata::MetadataResponse;
use strata_protocol::ErrorCode;

/// Where a broker listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerAddress {
    /// `node.id`.
    pub id: i32,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: i32,
    /// `broker.rack`, if set.
    pub rack: Option<String>,
}

/// A broker's address from the parts of a `NodeEndpoint` (Produce v10+, Fetch v16+).
pub(crate) fn broker_address(id: i32, host: &str, port: i32, rack: &Option<String>) -> BrokerAddress {
    BrokerAddress { id, host: host.to_string(), port, rack: rack.clone() }
}

impl BrokerAddress {
    /// host:port, as connections are made.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// One partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// Index.
    pub partition: i32,
    /// Leader's node id, -1 if none.
    pub leader: i32,
    /// Leader epoch (-1 if the broker did not say), sent back as `current_leader_epoch`
    /// so a stale leader answers FENCED_LEADER_EPOCH (KIP-320).
    pub leader_epoch: i32,
    /// Replicas, preferred leader first.
    pub replicas: Vec<i32>,
    /// In-sync replicas.
    pub isr: Vec<i32>,
    /// Replicas on brokers that are down.
    pub offline_replicas: Vec<i32>,
    /// The partition's error (LEADER_NOT_AVAILABLE while it has no leader).
    pub error: Option<ErrorCode>,
}

/// One topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// Name.
    pub name: String,
    /// Topic id (zero from brokers before Metadata v10).
    pub id: Uuid,
    /// An internal topic (`__consumer_offsets`, `__transaction_state`).
    pub internal: bool,
    /// Partitions, by index.
    pub partitions: Vec<PartitionInfo>,
    /// The topic's error (UNKNOWN_TOPIC_OR_PARTITION if it does not exist).
    pub error: Option<ErrorCode>,
}

impl TopicInfo {
    /// A partition by index.
    pub fn partition(&self, index: i32) -> Option<&PartitionInfo> {
        self.partitions.iter().find(|p| p.partition == index)
    }
}

/// A snapshot of the cluster.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    /// The cluster id, if the broker sent one.
    pub cluster_id: Option<String>,
    /// The controller's node id (-1 if unknown).
    pub controller_id: i32,
    /// Brokers by node id.
    pub brokers: BTreeMap<i32, BrokerAddress>,
    /// Topics by name.
    pub topics: HashMap<String, Arc<TopicInfo>>,
    /// When each topic was last described (for `metadata.max.age.ms`).
    pub described_at: HashMap<String, Instant>,
}

impl Cluster {
    /// A topic by name.
    pub fn topic(&self, name: &str) -> Option<&Arc<TopicInfo>> {
        self.topics.get(name)
    }

    /// A topic by id.
    pub fn topic_by_id(&self, id: Uuid) -> Option<&Arc<TopicInfo>> {
        self.topics.values().find(|t| t.id == id)
    }

    /// A partition.
    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionInfo> {
        self.topic(topic).and_then(|t| t.partition(partition))
    }

    /// The leader of a partition, if it has one the client knows the address of.
    pub fn leader(&self, topic: &str, partition: i32) -> Option<&BrokerAddress> {
        let p = self.partition(topic, partition)?;
        (p.leader >= 0).then(|| self.brokers.get(&p.leader)).flatten()
    }

    /// This snapshot with a Metadata response merged in: brokers, controller and cluster
    /// id are replaced; topics the response describes are replaced, others kept unless
    /// `all_topics` (a full listing drops topics that are gone).
    pub fn merged(&self, response: &MetadataResponse, all_topics: bool, now: Instant) -> Cluster {
        let mut next = Cluster {
            cluster_id: response.cluster_id.clone().or_else(|| self.cluster_id.clone()),
            controller_id: response.controller_id,
            brokers: response
                .brokers
                .iter()
                .map(|b| {
                    let addr = BrokerAddress {
                        id: b.node_id,
                        host: b.host.clone(),
                        port: b.port,
                        rack: b.rack.clone(),
                    };
                    (b.node_id, addr)
                })
                .collect(),
            topics: if all_topics { HashMap::new() } else { self.topics.clone() },
            described_at: if all_topics { HashMap::new() } else { self.described_at.clone() },
        };
        for t in &response.topics {
            let Some(name) = t.name.clone().filter(|n| !n.is_empty()) else { continue };
            let mut partitions: Vec<PartitionInfo> = t
                .partitions
                .iter()
                .map(|p| PartitionInfo {
                    partition: p.partition_index,
                    leader: p.leader_id,
                    leader_epoch: p.leader_epoch,
                    replicas: p.replica_nodes.clone(),
                    isr: p.isr_nodes.clone(),
                    offline_replicas: p.offline_replicas.clone(),
                    error: code(p.error_code),
                })
                .collect();
            partitions.sort_by_key(|p| p.partition);
            let info = TopicInfo {
                name: name.clone(),
                id: t.topic_id,
                internal: t.is_internal,
                partitions,
                error: code(t.error_code),
            };
            next.described_at.insert(name.clone(), now);
            next.topics.insert(name, Arc::new(info));
        }
        next
    }
}

/// A partition's leader as a Produce or Fetch answer named it (`CurrentLeader`,
/// KIP-951), so the client moves there without waiting for a Metadata round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderHint {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The leader's node id.
    pub leader: i32,
    /// Its leader epoch.
    pub leader_epoch: i32,
}

impl Cluster {
    /// This snapshot with the leaders Produce or Fetch answers named and the broker
    /// endpoints those answers carried (KIP-951), applied as Kafka's clients apply them: a
    /// partition moves only to a newer leader epoch than the one known (or when none is
    /// known), and only to a broker whose address is known, here or in `endpoints`.
    /// Returns the new snapshot with the positions in `hints` of those it applied, or
    /// `None` when none applies.
    pub fn with_leaders(
        &self,
        hints: &[LeaderHint],
        endpoints: &[BrokerAddress],
    ) -> Option<(Cluster, Vec<usize>)> {
        let mut next: Option<Cluster> = None;
        let mut applied = Vec::new();
        for (i, h) in hints.iter().enumerate() {
            // Judged against what earlier hints made of the snapshot, so of two hints for
            // one partition the newer wins whatever their order.
            let current = next.as_ref().unwrap_or(self);
            let Some(known) = current.partition(&h.topic, h.partition) else { continue };
            let newer = known.leader_epoch < 0 || h.leader_epoch > known.leader_epoch;
            let reachable =
                current.brokers.contains_key(&h.leader) || endpoints.iter().any(|e| e.id == h.leader);
            if h.leader < 0 || !newer || !reachable {
                continue;
            }
            let c = next.get_or_insert_with(|| self.clone());
            let topic = c.topics.get_mut(&h.topic).map(Arc::make_mut);
            if let Some(p) = topic.and_then(|t| t.partitions.iter_mut().find(|p| p.partition == h.partition))
            {
                p.leader = h.leader;
                p.leader_epoch = h.leader_epoch;
                p.error = None;
                applied.push(i);
            }
        }
        let mut next = next?;
        for e in endpoints {
            next.brokers.insert(e.id, e.clone());
        }
        Some((next, applied))
    }
}

fn code(c: i16) -> Option<ErrorCode> {
    (c != 0).then(|| ErrorCode::from_code(c).unwrap_or(ErrorCode::UnknownServerError))
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_protocol::messages::metadata::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };

    fn response(topics: &[(&str, i32)]) -> MetadataResponse {
        MetadataResponse {
            brokers: vec![MetadataResponseBroker { node_id: 1, host: "h".into(), port: 9, rack: None }],
            controller_id: 1,
            cluster_id: Some("c".into()),
            topics: topics
                .iter()
                .map(|(name, n)| MetadataResponseTopic {
                    name: Some(name.to_string()),
                    partitions: (0..*n)
                        .rev()
                        .map(|i| MetadataResponsePartition {
                            partition_index: i,
                            leader_id: 1,
                            leader_epoch: 3,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn hint(partition: i32, leader: i32, leader_epoch: i32) -> LeaderHint {
        LeaderHint { topic: "a".into(), partition, leader, leader_epoch }
    }

    #[test]
    fn named_leaders_apply_only_with_a_newer_epoch_and_a_known_address() {
        let now = Instant::now();
        let c = Cluster::default().merged(&response(&[("a", 3)]), true, now);
        let two = BrokerAddress { id: 2, host: "h2".into(), port: 10, rack: None };
        // Epoch 3 is known: an equal or older epoch is stale, an unknown broker unreachable.
        assert!(c.with_leaders(&[hint(0, 1, 3), hint(1, 1, 2), hint(2, 7, 9)], &[]).is_none());
        assert!(c.with_leaders(&[hint(0, 2, 4)], &[]).is_none(), "no address for broker 2");
        let hints = [hint(0, 2, 4), hint(1, 1, 3), hint(9, 2, 4), hint(2, 2, 5)];
        let (moved, applied) = c.with_leaders(&hints, std::slice::from_ref(&two)).expect("some apply");
        assert_eq!(applied, vec![0, 3]);
        assert_eq!(moved.leader("a", 0), Some(&two));
        assert_eq!(moved.partition("a", 0).map(|p| p.leader_epoch), Some(4));
        assert_eq!(moved.partition("a", 2).map(|p| (p.leader, p.leader_epoch)), Some((2, 5)));
        assert_eq!(moved.partition("a", 1).map(|p| (p.leader, p.leader_epoch)), Some((1, 3)), "untouched");
        assert_eq!(c.partition("a", 0).map(|p| p.leader), Some(1), "the old snapshot is unchanged");
        // Two hints for one partition: the newer wins whatever the order.
        let (moved, _) = c.with_leaders(&[hint(0, 2, 6), hint(0, 1, 5)], &[two]).expect("applies");
        assert_eq!(moved.partition("a", 0).map(|p| (p.leader, p.leader_epoch)), Some((2, 6)));
    }

    #[test]
    fn a_refresh_of_some_topics_keeps_the_others_and_a_full_listing_replaces_them() {
        let now = Instant::now();
        let c = Cluster::default().merged(&response(&[("a", 2), ("b", 1)]), true, now);
        assert_eq!(c.topic("a").map(|t| t.partitions.len()), Some(2));
        assert_eq!(c.partition("a", 1).map(|p| p.leader_epoch), Some(3));
        assert_eq!(c.topic("a").expect("a").partitions[0].partition, 0, "sorted by index");
        assert_eq!(c.leader("a", 0).map(BrokerAddress::addr).as_deref(), Some("h:9"));
        let partial = c.merged(&response(&[("a", 3)]), false, now);
        assert_eq!(partial.topic("a").map(|t| t.partitions.len()), Some(3));
        assert!(partial.topic("b").is_some(), "kept");
        let full = c.merged(&response(&[("a", 3)]), true, now);
        assert!(full.topic("b").is_none(), "gone from a full listing");
    }
}
