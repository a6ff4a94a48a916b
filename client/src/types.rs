//! The small value types producer, consumer, admin and the stream pieces pass between
//! each other, so a consumer's group metadata or positions go into a transactional
//! producer or a checkpoint without conversion.

use bytes::Bytes;
use std::fmt;

/// A partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
}

impl TopicPartition {
    /// `topic`-`partition`.
    ///
    /// ```
    /// let tp = strata_client::TopicPartition::new("orders", 3);
    /// assert_eq!(tp.to_string(), "orders-3");
    /// ```
    pub fn new(topic: impl Into<String>, partition: i32) -> TopicPartition {
        TopicPartition { topic: topic.into(), partition }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// A record header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Header key.
    pub key: String,
    /// Header value (null allowed).
    pub value: Option<Bytes>,
}

/// An offset to commit, with its metadata string and the leader epoch of the record
/// before it (KIP-320: a consumer resuming there detects a truncated log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetAndMetadata {
    /// The next offset to consume.
    pub offset: i64,
    /// Free-form metadata stored with the commit.
    pub metadata: String,
    /// Leader epoch of the last consumed record, if known.
    pub leader_epoch: Option<i32>,
}

impl OffsetAndMetadata {
    /// An offset with no metadata and no epoch.
    ///
    /// ```
    /// let o = strata_client::OffsetAndMetadata::new(42);
    /// assert_eq!((o.offset, o.metadata.as_str(), o.leader_epoch), (42, "", None));
    /// ```
    pub fn new(offset: i64) -> OffsetAndMetadata {
        OffsetAndMetadata { offset, metadata: String::new(), leader_epoch: None }
    }
}

/// What a transactional producer needs of a group consumer to commit its offsets
/// inside a transaction (KIP-447): the coordinator fences a zombie whose generation or
/// member id is stale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupMetadata {
    /// `group.id`.
    pub group_id: String,
    /// The group generation the consumer is in (-1 outside a group).
    pub generation_id: i32,
    /// The consumer's member id ("" before it joined).
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub group_instance_id: Option<String>,
}

impl ConsumerGroupMetadata {
    /// Metadata for a group without generation (offsets committed by a transactional
    /// producer that is not part of the group's membership).
    ///
    /// ```
    /// let m = strata_client::ConsumerGroupMetadata::new("g");
    /// assert_eq!(m.generation_id, -1);
    /// ```
    pub fn new(group_id: impl Into<String>) -> ConsumerGroupMetadata {
        ConsumerGroupMetadata {
            group_id: group_id.into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
        }
    }
}

/// `isolation.level` of a consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationLevel {
    /// Read everything up to the high watermark, open and aborted transactions included.
    #[default]
    ReadUncommitted,
    /// Read up to the last stable offset and skip aborted transactions.
    ReadCommitted,
}

impl IsolationLevel {
    /// The wire value.
    pub fn as_i8(self) -> i8 {
        match self {
            IsolationLevel::ReadUncommitted => 0,
            IsolationLevel::ReadCommitted => 1,
        }
    }
}
