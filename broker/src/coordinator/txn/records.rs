//! The records of `__transaction_state`, in Apache Kafka's exact binary layout
//! (`TransactionLogKey.json`, `TransactionLogValue.json`), so that Kafka's tools
//! (`kafka-dump-log --transaction-log-decoder`) and a Kafka broker taking over the log
//! read them.
//!
//! Key and non-null value are each a 2-byte big-endian schema version followed by the
//! struct in that version. The key has version 0 only (the transactional id); other key
//! versions are skipped on load, as Kafka skips them. The value has version 0 (classic
//! encoding) and 1 (flexible, KIP-915, with the tagged fields `PreviousProducerId` (tag 0),
//! `NextProducerId` (tag 1) and `ClientTransactionVersion` (tag 2), and Strata's own tag
//! 1000, the epoch a KIP-939 kept transaction was written under, which a Kafka reader
//! skips as an unknown tag; a kept transaction's records are written in version 1 so they
//! can carry it). The partition list is
//! null for `Empty`, as Kafka writes it. A null value is a tombstone: the id expired.
//! Decoding never trusts a length prefix beyond the bytes present, and never panics.

use bytes::{Buf, Bytes};
use std::collections::BTreeMap;
use strata_protocol::codec::{Ctx, DecodeError, Reader, Wire, Writer};

use super::state::{TxnState, TxnTransit};
use super::TopicPartition;

strata_protocol::message! {
    /// Key of a transaction log record, version 0.
    pub struct TransactionLogKey {
        transactional_id: String [0..=0],
    }
    /// The partitions of one topic inside [`TransactionLogValue`].
    pub struct TxnPartitions {
        topic: String [0..],
        partition_ids: Vec<i32> [0..],
    }
    /// Value of a transaction log record, versions 0-1 (1 is flexible).
    pub struct TransactionLogValue {
        producer_id: i64 [0..],
        /// Tagged (0) from v1: the producer id before the last rotation.
        previous_producer_id: i64 [1..] tag 0 = -1,
        /// Tagged (1) from v1: transaction version 2 only; -1 here.
        next_producer_id: i64 [1..] tag 1 = -1,
        producer_epoch: i16 [0..],
        transaction_timeout_ms: i32 [0..],
        /// [`TxnState::id`].
        transaction_status: i8 [0..],
        /// Null for `Empty`.
        transaction_partitions: Option<Vec<TxnPartitions>> [0..],
        transaction_last_update_timestamp_ms: i64 [0..],
        transaction_start_timestamp_ms: i64 [0..],
        /// Tagged (2) from v1: the client's transaction version (0 here).
        client_transaction_version: i16 [1..] tag 2,
        /// Tagged (Strata's own tag 1000, skipped by Kafka's readers) from v1: the epoch
        /// an ongoing transaction was written under once a KIP-939 keep moved the producer
        /// past it; -1 otherwise.
        kept_txn_producer_epoch: i16 [1..] tag 1000 = -1,
    }
}

/// The only key version.
pub const TRANSACTION_LOG_KEY_VERSION: i16 = 0;
/// Highest value version Kafka defines.
pub const MAX_TRANSACTION_LOG_VALUE_VERSION: i16 = 1;
/// First flexible value version.
const FIRST_FLEXIBLE_VALUE_VERSION: i16 = 1;

/// Why bytes read from `__transaction_state` are not a record this coordinator accepts.
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
    /// A value version Kafka does not define.
    #[error("unknown transaction log value version {0}")]
    UnknownValueVersion(i16),
    /// The struct after the version prefix does not decode.
    #[error("malformed {what}: {source}")]
    Malformed {
        /// Key or value.
        what: &'static str,
        /// The decoding failure.
        source: DecodeError,
    },
    /// A `TransactionStatus` byte that names no state.
    #[error("unknown transaction state id {0}")]
    UnknownState(i8),
    /// A state Kafka never writes (`Dead`, `PrepareEpochFence`): refused on load.
    #[error("transaction state {0:?} is never written to the log")]
    UnexpectedState(TxnState),
}

/// One record of `__transaction_state`: the state of a transactional id, or its deletion.
#[derive(Debug, Clone, PartialEq)]
pub struct TxnRecord {
    /// The id (the record key).
    pub transactional_id: String,
    /// The id's state, or `None` for a tombstone.
    pub value: Option<TransactionLogValue>,
    /// Version the value is written in (0 or 1); ignored for tombstones.
    pub value_version: i16,
}

fn encode<T: Wire>(version: i16, flexible_from: i16, body: &T) -> Bytes {
    let mut w = Writer::new();
    w.i16(version);
    body.write(&mut w, Ctx::new(version, flexible_from));
    w.into_memory_bytes()
}

fn split_version(mut buf: Bytes, what: &'static str) -> Result<(i16, Bytes), RecordError> {
    if buf.len() < 2 {
        return Err(RecordError::MissingVersion { what, len: buf.len() });
    }
    let version = buf.get_i16();
    Ok((version, buf))
}

impl TxnRecord {
    /// A tombstone deleting `transactional_id`.
    pub fn tombstone(transactional_id: &str) -> TxnRecord {
        TxnRecord { transactional_id: transactional_id.to_owned(), value: None, value_version: 0 }
    }

    /// The record key as written to the log: version prefix and struct.
    pub fn key_bytes(&self) -> Bytes {
        let key = TransactionLogKey { transactional_id: self.transactional_id.clone() };
        // The key is never flexible.
        encode(TRANSACTION_LOG_KEY_VERSION, i16::MAX, &key)
    }

    /// The record value as written to the log, or `None` for a tombstone.
    pub fn value_bytes(&self) -> Option<Bytes> {
        let version = self.value_version.clamp(0, MAX_TRANSACTION_LOG_VALUE_VERSION);
        self.value.as_ref().map(|v| encode(version, FIRST_FLEXIBLE_VALUE_VERSION, v))
    }

    /// Decodes a record read from `__transaction_state`. `Ok(None)` for key versions
    /// other than 0, which Kafka skips with a warning ("left over from an aborted
    /// upgrade"). Trailing bytes after a struct are ignored, as Kafka ignores them.
    pub fn decode(key: Bytes, value: Option<Bytes>) -> Result<Option<TxnRecord>, RecordError> {
        let (key_version, key_body) = split_version(key, "transaction log key")?;
        if key_version != TRANSACTION_LOG_KEY_VERSION {
            return Ok(None);
        }
        let key: TransactionLogKey = read_struct(key_body, Ctx::new(key_version, i16::MAX))
            .map_err(|source| RecordError::Malformed { what: "transaction log key", source })?;
        let Some(value) = value else {
            return Ok(Some(TxnRecord::tombstone(&key.transactional_id)));
        };
        let (version, body) = split_version(value, "transaction log value")?;
        if !(0..=MAX_TRANSACTION_LOG_VALUE_VERSION).contains(&version) {
            return Err(RecordError::UnknownValueVersion(version));
        }
        let value: TransactionLogValue =
            read_struct(body, Ctx::new(version, FIRST_FLEXIBLE_VALUE_VERSION))
                .map_err(|source| RecordError::Malformed { what: "transaction log value", source })?;
        Ok(Some(TxnRecord {
            transactional_id: key.transactional_id,
            value: Some(value),
            value_version: version,
        }))
    }
}

fn read_struct<T: Wire>(body: Bytes, ctx: Ctx) -> Result<T, DecodeError> {
    let mut r = Reader::new(body);
    T::read(&mut r, ctx)
}

impl TransactionLogValue {
    /// The state byte as a [`TxnState`].
    pub fn state(&self) -> Result<TxnState, RecordError> {
        TxnState::from_id(self.transaction_status).ok_or(RecordError::UnknownState(self.transaction_status))
    }

    /// The partitions of the record, flattened and deduplicated (none for `Empty`, as
    /// Kafka reads it).
    pub fn partitions(&self) -> Vec<TopicPartition> {
        if self.transaction_status == TxnState::Empty.id() {
            return Vec::new();
        }
        let mut out: Vec<TopicPartition> = self
            .transaction_partitions
            .iter()
            .flatten()
            .flat_map(|t| t.partition_ids.iter().map(|&p| TopicPartition::new(t.topic.clone(), p)))
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// The record of a prepared transition, as Kafka's `valueToBytes` builds it.
pub(super) fn transit_record(transactional_id: &str, transit: &TxnTransit, value_version: i16) -> TxnRecord {
    // A kept transaction's identity needs a tagged field: version 1 for its records.
    let value_version = if transit.kept_txn_epoch >= 0 {
        value_version.max(FIRST_FLEXIBLE_VALUE_VERSION)
    } else {
        value_version
    };
    let partitions = if transit.state == TxnState::Empty {
        None
    } else {
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for tp in &transit.partitions {
            by_topic.entry(tp.topic.as_str()).or_default().push(tp.partition);
        }
        Some(
            by_topic
                .into_iter()
                .map(|(topic, partition_ids)| TxnPartitions { topic: topic.to_owned(), partition_ids })
                .collect(),
        )
    };
    let value = TransactionLogValue {
        producer_id: transit.producer_id,
        // Only version 1 has room for it (a tagged field).
        previous_producer_id: if value_version >= 1 { transit.previous_producer_id } else { -1 },
        next_producer_id: -1,
        producer_epoch: transit.producer_epoch,
        transaction_timeout_ms: transit.txn_timeout_ms,
        transaction_status: transit.state.id(),
        transaction_partitions: partitions,
        transaction_last_update_timestamp_ms: transit.txn_last_update_timestamp_ms,
        transaction_start_timestamp_ms: transit.txn_start_timestamp_ms,
        client_transaction_version: 0,
        kept_txn_producer_epoch: transit.kept_txn_epoch,
    };
    TxnRecord { transactional_id: transactional_id.to_owned(), value: Some(value), value_version }
}
