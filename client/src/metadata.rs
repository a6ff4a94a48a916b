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
