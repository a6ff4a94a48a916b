//! Control batches: the COMMIT/ABORT markers a partition leader appends when a
//! transaction ends (KIP-98), which consumers use to filter aborted data and never
//! deliver as records.
//!
//! A control batch has the transactional and control attribute bits set and holds one
//! record whose key is `version: i16 (0), type: i16 (0 = abort, 1 = commit)` and whose
//! value is `version: i16 (0), coordinator_epoch: i32`. Readers accept higher versions
//! and ignore bytes they do not know, as Kafka does.

use bytes::Bytes;

use super::batch::RecordBatch;
use super::builder::{NewRecord, RecordBatchBuilder};
use super::error::RecordsError;
use super::record::Record;

/// Type of a control record, from its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlRecordType {
    /// The producer's transaction was aborted.
    Abort,
    /// The producer's transaction was committed.
    Commit,
    /// Another control type (e.g. KRaft's leader change or snapshot markers), kept so
    /// readers can skip it instead of failing.
    Unknown(i16),
}

/// Current version of the control record key and of the end-transaction marker value.
const CONTROL_VERSION: i16 = 0;

fn take_i16(buf: &mut &[u8]) -> Option<i16> {
    let (head, rest) = buf.split_at_checked(2)?;
    *buf = rest;
    Some(i16::from_be_bytes([head[0], head[1]]))
}

fn take_i32(buf: &mut &[u8]) -> Option<i32> {
    let (head, rest) = buf.split_at_checked(4)?;
    *buf = rest;
    Some(i32::from_be_bytes([head[0], head[1], head[2], head[3]]))
}

impl ControlRecordType {
    /// The type id stored in the control record key.
    pub fn id(self) -> i16 {
        match self {
            Self::Abort => 0,
            Self::Commit => 1,
            Self::Unknown(id) => id,
        }
    }

    fn from_id(id: i16) -> Self {
        match id {
            0 => Self::Abort,
            1 => Self::Commit,
            other => Self::Unknown(other),
        }
    }

    /// Parses a control record key.
    pub fn parse_key(key: &[u8]) -> Result<Self, RecordsError> {
        let mut cur = key;
        let version = take_i16(&mut cur).ok_or(RecordsError::InvalidControlRecord("key too short"))?;
        if version < 0 {
            return Err(RecordsError::InvalidControlRecord("negative key version"));
        }
        let id = take_i16(&mut cur).ok_or(RecordsError::InvalidControlRecord("key too short"))?;
        Ok(Self::from_id(id))
    }

    /// Encodes the control record key (version 0).
    pub fn encode_key(self) -> Bytes {
        let mut key = Vec::with_capacity(4);
        key.extend_from_slice(&CONTROL_VERSION.to_be_bytes());
        key.extend_from_slice(&self.id().to_be_bytes());
        Bytes::from(key)
    }
}

/// The content of a transaction marker: whether the transaction committed, and the
/// epoch of the transaction coordinator that wrote it (to fence stale coordinators).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EndTxnMarker {
    /// `Commit` or `Abort`.
    pub control_type: ControlRecordType,
    /// Epoch of the transaction coordinator that decided the outcome.
    pub coordinator_epoch: i32,
}

impl EndTxnMarker {
    /// A COMMIT marker.
    pub fn commit(coordinator_epoch: i32) -> Self {
        EndTxnMarker { control_type: ControlRecordType::Commit, coordinator_epoch }
    }

    /// An ABORT marker.
    pub fn abort(coordinator_epoch: i32) -> Self {
        EndTxnMarker { control_type: ControlRecordType::Abort, coordinator_epoch }
    }

    /// Whether this marker commits the transaction.
    pub fn is_commit(&self) -> bool {
        self.control_type == ControlRecordType::Commit
    }

    /// Encodes the marker value (version 0).
    pub fn encode_value(&self) -> Bytes {
        let mut value = Vec::with_capacity(6);
        value.extend_from_slice(&CONTROL_VERSION.to_be_bytes());
        value.extend_from_slice(&self.coordinator_epoch.to_be_bytes());
        Bytes::from(value)
    }

    /// Reads the marker from a control record; `Ok(None)` when the record is a control
    /// record of another type.
    pub fn from_record(record: &Record) -> Result<Option<Self>, RecordsError> {
        let key = record.key.as_ref().ok_or(RecordsError::InvalidControlRecord("null key"))?;
        let control_type = ControlRecordType::parse_key(key)?;
        if matches!(control_type, ControlRecordType::Unknown(_)) {
            return Ok(None);
        }
        let value = record.value.as_ref().ok_or(RecordsError::InvalidControlRecord("null marker value"))?;
        let mut cur = &value[..];
        let version = take_i16(&mut cur).ok_or(RecordsError::InvalidControlRecord("value too short"))?;
        if version < 0 {
            return Err(RecordsError::InvalidControlRecord("negative marker version"));
        }
        let coordinator_epoch =
            take_i32(&mut cur).ok_or(RecordsError::InvalidControlRecord("value too short"))?;
        Ok(Some(EndTxnMarker { control_type, coordinator_epoch }))
    }

    /// Reads the marker of a control batch from its first record; `Ok(None)` if the
    /// batch is not a control batch or holds another control type.
    pub fn from_batch(batch: &RecordBatch) -> Result<Option<Self>, RecordsError> {
        if !batch.is_control() {
            return Ok(None);
        }
        // A marker batch is one small record; 1 MiB is far above any legitimate size.
        let mut records = batch.records(1 << 20)?;
        match records.next() {
            Some(record) => Self::from_record(&record?),
            None => Err(RecordsError::InvalidControlRecord("control batch without records")),
        }
    }
}

/// Everything needed to write a transaction marker batch for one producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndTxnMarkerBatch {
    /// Producer whose transaction ends.
    pub producer_id: i64,
    /// That producer's epoch.
    pub producer_epoch: i16,
    /// Epoch of the leader writing the marker.
    pub partition_leader_epoch: i32,
    /// Timestamp of the marker record (the coordinator's decision time).
    pub timestamp: i64,
    /// Commit or abort, and the coordinator epoch.
    pub marker: EndTxnMarker,
}

impl EndTxnMarkerBatch {
    /// Encodes the control batch at `base_offset`: transactional and control bits set,
    /// no sequence, uncompressed, one record.
    pub fn build(&self, base_offset: i64) -> Result<Bytes, RecordsError> {
        let mut builder = RecordBatchBuilder::new(base_offset)
            .producer(self.producer_id, self.producer_epoch, super::NO_SEQUENCE)
            .transactional(true)
            .control(true)
            .partition_leader_epoch(self.partition_leader_epoch);
        builder.append(&NewRecord::new(
            self.timestamp,
            Some(self.marker.control_type.encode_key()),
            Some(self.marker.encode_value()),
        ))?;
        builder.build()
    }
}
