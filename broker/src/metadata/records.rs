//! The records of the replicated metadata log, KRaft style: every change to the cluster's
//! metadata (brokers, topics, partitions, leaders, ISRs, producer-id blocks) is one of
//! these, written by the active controller and applied in log order by every node.
//!
//! Records are serialised with serde (JSON) inside the controller's Raft log and its
//! snapshots; nothing outside the cluster reads them, so the encoding is Strata's own.
//! A batch of records ([`MetadataBatch`]) is one Raft entry and is applied atomically.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use strata_protocol::codec::Uuid;

/// A topic id on the wire of the metadata log: 32 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct TopicId(pub Uuid);

impl From<TopicId> for String {
    fn from(id: TopicId) -> String {
        id.0 .0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl TryFrom<String> for TopicId {
    type Error = String;
    fn try_from(s: String) -> Result<TopicId, String> {
        if s.len() != 32 || !s.is_ascii() {
            return Err(format!("topic id {s:?} is not 32 hex digits"));
        }
        let mut out = [0u8; 16];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte =
                u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|e| format!("topic id {s:?}: {e}"))?;
        }
        Ok(TopicId(Uuid(out)))
    }
}

/// One listener of a broker, as other nodes and clients reach it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// Listener name (`PLAINTEXT`, `INTERNAL`, ...).
    pub listener: String,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: u16,
}

/// A broker's registration (Kafka's RegisterBrokerRecord). A new registration replaces
/// the node's previous one and starts fenced: the broker is unfenced once it has caught
/// up with the metadata log and asks to be (BrokerHeartbeat `want_fence=false`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistrationRecord {
    /// `node.id`.
    pub node_id: i32,
    /// A random id per broker process start, so a second process with the same node id
    /// is told apart from a restart.
    pub incarnation_id: String,
    /// Listeners the broker serves.
    pub endpoints: Vec<Endpoint>,
    /// `broker.rack`.
    pub rack: Option<String>,
}

/// The full state of one partition (Kafka's PartitionRecord and PartitionChangeRecord in
/// one: every change writes the whole state, which keeps apply trivial).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRecord {
    /// The topic.
    pub topic_id: TopicId,
    /// Partition index.
    pub partition: i32,
    /// Replicas in preference order (the first is the preferred leader).
    pub replicas: Vec<i32>,
    /// In-sync replicas: only these may be elected (unless unclean election is enabled).
    pub isr: Vec<i32>,
    /// Leader node id, or -1 when the partition is offline.
    pub leader: i32,
    /// Bumped on every leader change (KIP-101); never decreases.
    pub leader_epoch: i32,
    /// Bumped on every change of this record (KIP-497), so stale AlterPartition
    /// requests are refused.
    pub partition_epoch: i32,
    /// Replicas being added by a reassignment (also in `replicas`).
    #[serde(default)]
    pub adding_replicas: Vec<i32>,
    /// Replicas being removed by a reassignment (also in `replicas`).
    #[serde(default)]
    pub removing_replicas: Vec<i32>,
}

/// One change to the cluster metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetadataRecord {
    /// Fixes the cluster id; written once, by the first active controller.
    ClusterId {
        /// The id (`meta.properties` `cluster.id`).
        cluster_id: String,
    },
    /// A broker (re-)registered; its broker epoch is the log index of this record.
    RegisterBroker(BrokerRegistrationRecord),
    /// The broker stopped heartbeating (or shut down): it leads nothing and is not
    /// listed to clients.
    FenceBroker {
        /// The broker.
        node_id: i32,
        /// The registration this applies to.
        broker_epoch: i64,
    },
    /// The broker caught up and may lead partitions and rejoin ISRs.
    UnfenceBroker {
        /// The broker.
        node_id: i32,
        /// The registration this applies to.
        broker_epoch: i64,
    },
    /// The broker asked to shut down (SIGTERM): leadership moves away from it and it
    /// may not rejoin ISRs.
    BeginControlledShutdown {
        /// The broker.
        node_id: i32,
        /// The registration this applies to.
        broker_epoch: i64,
    },
    /// The broker was removed from the cluster (UnregisterBroker).
    UnregisterBroker {
        /// The broker.
        node_id: i32,
        /// The registration this applies to.
        broker_epoch: i64,
    },
    /// A topic was created (its partitions follow as [`MetadataRecord::Partition`]).
    Topic {
        /// Name.
        name: String,
        /// Id (KIP-516).
        topic_id: TopicId,
    },
    /// A topic's config overrides, replaced as a whole.
    TopicConfig {
        /// The topic.
        topic_id: TopicId,
        /// Every override set on the topic.
        configs: BTreeMap<String, String>,
    },
    /// Dynamic broker configs (IncrementalAlterConfigs / AlterConfigs on a BROKER
    /// resource), replaced as a whole: `resource_name` is a node id for one broker's, or
    /// empty for the cluster-wide default every broker applies.
    BrokerConfig {
        /// `""` (cluster default) or a node id.
        resource_name: String,
        /// Every dynamic key set on the resource (broker key names, e.g. `log.retention.ms`).
        configs: BTreeMap<String, String>,
    },
    /// A partition's full state.
    Partition(PartitionRecord),
    /// A topic and its partitions were deleted.
    RemoveTopic {
        /// The topic.
        topic_id: TopicId,
    },
    /// A block of producer ids was handed to a broker (KIP-730); ids below
    /// `next_producer_id` are never handed out again.
    ProducerIds {
        /// The broker that received the block.
        node_id: i32,
        /// Its epoch at the time.
        broker_epoch: i64,
        /// First id of the next block.
        next_producer_id: i64,
    },
    /// Changes nothing; a new active controller writes one to learn that everything
    /// before it is applied.
    Noop,
}

/// The records of one Raft entry, applied together.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MetadataBatch(pub Vec<MetadataRecord>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_json() {
        let id = TopicId(Uuid([0xab; 16]));
        let batch = MetadataBatch(vec![
            MetadataRecord::ClusterId { cluster_id: "c".into() },
            MetadataRecord::Topic { name: "t".into(), topic_id: id },
            MetadataRecord::Partition(PartitionRecord {
                topic_id: id,
                partition: 0,
                replicas: vec![1, 2, 3],
                isr: vec![1, 2],
                leader: 1,
                leader_epoch: 4,
                partition_epoch: 7,
                adding_replicas: vec![],
                removing_replicas: vec![],
            }),
        ]);
        let text = serde_json::to_string(&batch).expect("encode");
        assert!(text.contains(&"ab".repeat(16)), "{text}");
        let back: MetadataBatch = serde_json::from_str(&text).expect("decode");
        assert_eq!(back, batch);
    }

    #[test]
    fn a_malformed_topic_id_is_refused() {
        assert!(serde_json::from_str::<TopicId>("\"xyz\"").is_err());
        assert!(serde_json::from_str::<TopicId>(&format!("\"{}\"", "g".repeat(32))).is_err());
    }
}
