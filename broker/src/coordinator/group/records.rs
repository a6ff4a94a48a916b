//! The records the group coordinator writes to `__consumer_offsets`, in Apache Kafka's
//! exact binary layout so that Kafka's own tools (`kafka-console-consumer --formatter
//! ...OffsetsMessageFormatter`, `kafka-dump-log --offsets-decoder`) and a Kafka broker
//! taking over the log read them.
//!
//! Each key and each non-null value is a 2-byte big-endian schema version followed by the
//! struct in that version (the layouts of Kafka's `OffsetCommitKey.json`,
//! `OffsetCommitValue.json`, `GroupMetadataKey.json` and `GroupMetadataValue.json`). The
//! key version also says which record it is: 0 and 1 are offset commits, 2 is group
//! metadata; higher key versions are the KIP-848 consumer/share group records, which the
//! classic coordinator skips. A null value is a tombstone.
//!
//! Strata writes what Kafka 2.3+ writes: offset commit key v1 with value v3 (value v1 when
//! the commit carried an explicit retention, OffsetCommit v2-v4), group metadata key v2
//! with value v3. It reads every version Kafka defines (values 0-4, 4 being flexible).
//! Decoding never trusts a length prefix beyond the bytes present.

use bytes::{Buf, Bytes};
use strata_protocol::codec::{Ctx, DecodeError, Reader, Wire, Writer};

strata_protocol::message! {
    /// Key of an offset commit record: versions 0 and 1 (identical layouts); written as 1.
    pub struct OffsetCommitKey {
        group: String [0..=1],
        topic: String [0..=1],
        partition: i32 [0..=1],
    }
    /// Value of an offset commit record, versions 0-4 (4 is the first flexible version).
    pub struct OffsetCommitValue {
        offset: i64 [0..],
        /// Added in v3 (KIP-320); -1 when unknown.
        leader_epoch: i32 [3..] = -1,
        metadata: String [0..],
        commit_timestamp: i64 [0..],
        /// Only in v1: the absolute expiry of a commit made with an explicit retention
        /// time (OffsetCommit v2-v4); -1 otherwise.
        expire_timestamp: i64 [1..=1] = -1,
    }
    /// Key of a group metadata record: version 2 only.
    pub struct GroupMetadataKey {
        group: String [2..=2],
    }
    /// One member inside [`GroupMetadataValue`].
    pub struct MemberMetadata {
        member_id: String [0..],
        /// Added in v3 (KIP-345 static membership).
        group_instance_id: Option<String> [3..],
        client_id: String [0..],
        client_host: String [0..],
        /// Added in v1; -1 means "use the session timeout".
        rebalance_timeout: i32 [1..] = -1,
        session_timeout: i32 [0..],
        /// The member's metadata for the group's selected protocol.
        subscription: Bytes [0..],
        assignment: Bytes [0..],
    }
    /// Value of a group metadata record, versions 0-4 (4 is the first flexible version).
    pub struct GroupMetadataValue {
        protocol_type: String [0..],
        generation: i32 [0..],
        protocol: Option<String> [0..],
        leader: Option<String> [0..],
        /// Added in v2 (KIP-211): when the group entered its current state; -1 if unknown.
        current_state_timestamp: i64 [2..] = -1,
        members: Vec<MemberMetadata> [0..],
    }
}

/// Key version Strata writes for offset commits.
pub const OFFSET_COMMIT_KEY_VERSION: i16 = 1;
/// Key version of group metadata records.
pub const GROUP_METADATA_KEY_VERSION: i16 = 2;
/// Value version Strata writes for offset commits without an explicit expiry.
pub const OFFSET_COMMIT_VALUE_VERSION: i16 = 3;
/// Value version Strata writes for offset commits that carry an expiry timestamp.
pub const OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY: i16 = 1;
/// Value version Strata writes for group metadata.
pub const GROUP_METADATA_VALUE_VERSION: i16 = 3;
/// Highest value version (of either record) that Kafka defines.
const MAX_VALUE_VERSION: i16 = 4;
/// First flexible value version (KIP-915).
const FIRST_FLEXIBLE_VALUE_VERSION: i16 = 4;

/// Why bytes read from `__consumer_offsets` are not a record this coordinator understands.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The key or value is shorter than its 2-byte version prefix.
    #[error("{what} is {len} bytes, too short for its version prefix")]
    MissingVersion {
        /// Which part of the record.
        what: &'static str,
        /// Its length.
        len: usize,
    },
    /// A negative key version.
    #[error("invalid record key version {0}")]
    InvalidKeyVersion(i16),
    /// A value version this coordinator (and Kafka) does not define.
    #[error("unknown {what} value version {version}")]
    UnknownValueVersion {
        /// Which record.
        what: &'static str,
        /// The version found.
        version: i16,
    },
    /// The struct after the version prefix does not decode.
    #[error("malformed {what}: {source}")]
    Malformed {
        /// Which part of which record.
        what: &'static str,
        /// The decoding failure.
        source: DecodeError,
    },
}

/// A record of the classic group coordinator. `None` values are tombstones.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// A committed offset of one partition, or its deletion.
    OffsetCommit {
        /// Group, topic and partition.
        key: OffsetCommitKey,
        /// The commit, or `None` to delete it.
        value: Option<OffsetCommitValue>,
    },
    /// A group's membership and assignment, or its deletion.
    GroupMetadata {
        /// The group.
        key: GroupMetadataKey,
        /// The group's metadata, or `None` to delete the group.
        value: Option<GroupMetadataValue>,
    },
}

fn ctx(version: i16) -> Ctx {
    Ctx::new(version, FIRST_FLEXIBLE_VALUE_VERSION)
}

fn encode<T: Wire>(version: i16, body: &T) -> Bytes {
    let mut w = Writer::new();
    w.i16(version);
    body.write(&mut w, ctx(version));
    w.into_memory_bytes()
}

fn decode<T: Wire>(version: i16, body: Bytes, what: &'static str) -> Result<T, RecordError> {
    let mut r = Reader::new(body);
    T::read(&mut r, ctx(version)).map_err(|source| RecordError::Malformed { what, source })
}

fn split_version(mut buf: Bytes, what: &'static str) -> Result<(i16, Bytes), RecordError> {
    if buf.len() < 2 {
        return Err(RecordError::MissingVersion { what, len: buf.len() });
    }
    let version = buf.get_i16();
    Ok((version, buf))
}

impl Record {
    /// A tombstone for the committed offset of `topic`-`partition` in `group`.
    pub fn offset_tombstone(group: &str, topic: &str, partition: i32) -> Record {
        Record::OffsetCommit {
            key: OffsetCommitKey { group: group.to_owned(), topic: topic.to_owned(), partition },
            value: None,
        }
    }

    /// A tombstone for the metadata of `group`.
    pub fn group_tombstone(group: &str) -> Record {
        Record::GroupMetadata { key: GroupMetadataKey { group: group.to_owned() }, value: None }
    }

    /// The group the record belongs to (which decides its partition).
    pub fn group_id(&self) -> &str {
        match self {
            Record::OffsetCommit { key, .. } => &key.group,
            Record::GroupMetadata { key, .. } => &key.group,
        }
    }

    /// The record key as written to the log: version prefix and struct.
    pub fn key_bytes(&self) -> Bytes {
        match self {
            Record::OffsetCommit { key, .. } => encode(OFFSET_COMMIT_KEY_VERSION, key),
            Record::GroupMetadata { key, .. } => encode(GROUP_METADATA_KEY_VERSION, key),
        }
    }

    /// The record value as written to the log, or `None` for a tombstone.
    pub fn value_bytes(&self) -> Option<Bytes> {
        match self {
            Record::OffsetCommit { value, .. } => value.as_ref().map(|v| {
                let version = if v.expire_timestamp >= 0 {
                    OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
                } else {
                    OFFSET_COMMIT_VALUE_VERSION
                };
                encode(version, v)
            }),
            Record::GroupMetadata { value, .. } => {
                value.as_ref().map(|v| encode(GROUP_METADATA_VALUE_VERSION, v))
            }
        }
    }

    /// Decodes a record read from `__consumer_offsets`. Returns `Ok(None)` for record types
    /// the classic coordinator does not handle (key versions 3 and up: KIP-848 consumer
    /// groups, share groups), which the caller skips. Trailing bytes after a struct are
    /// ignored, as Kafka ignores them.
    pub fn decode(key: Bytes, value: Option<Bytes>) -> Result<Option<Record>, RecordError> {
        let (key_version, key_body) = split_version(key, "record key")?;
        match key_version {
            0 | 1 => {
                let key: OffsetCommitKey = decode(key_version, key_body, "offset commit key")?;
                let value = match value {
                    None => None,
                    Some(v) => Some(decode_value(v, "offset commit value")?),
                };
                Ok(Some(Record::OffsetCommit { key, value }))
            }
            2 => {
                let key: GroupMetadataKey = decode(key_version, key_body, "group metadata key")?;
                let value = match value {
                    None => None,
                    Some(v) => Some(decode_value(v, "group metadata value")?),
                };
                Ok(Some(Record::GroupMetadata { key, value }))
            }
            v if v < 0 => Err(RecordError::InvalidKeyVersion(v)),
            _ => Ok(None),
        }
    }
}

fn decode_value<T: Wire>(value: Bytes, what: &'static str) -> Result<T, RecordError> {
    let (version, body) = split_version(value, what)?;
    if !(0..=MAX_VALUE_VERSION).contains(&version) {
        return Err(RecordError::UnknownValueVersion { what, version });
    }
    decode(version, body, what)
}

/// Encodes `value` at an explicit version, for tests and tools that need the older
/// layouts Kafka wrote before 2.3.
#[cfg(test)]
pub fn encode_value_at<T: Wire>(version: i16, value: &T) -> Bytes {
    encode(version, value)
}
