//! Appends: leader appends validate batches and assign offsets; follower appends keep the
//! offsets the leader assigned. Both update producer state under the log lock: leader
//! appends are checked against it first (and a producer's retry is answered from it),
//! follower appends just follow. Both record new leader epochs in the epoch cache,
//! durably, before the batches that start them are written.

use bytes::{Bytes, BytesMut};
use strata_protocol::records::{
    Compression, EndTxnMarker, RecordBatch, RecordBatchHeader, RecordBatchMut, RecordBatches, RecordsError,
    SnappyFormat, TimestampType,
};

use super::{epochs, Log, LogInner};
use crate::config::LogConfig;
use crate::error::{Result, StorageError};
use crate::leader_epoch::EpochEntry;
use crate::producer_state::{BatchMetadata, Origin, ProducerStateUpdate};
use crate::segment::BatchMeta;

/// Who is appending through the leader path, which decides what batches may contain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AppendOrigin {
    /// A producer: control batches are refused.
    #[default]
    Client,
    /// The broker's transaction coordinator writing COMMIT/ABORT markers: control
    /// batches are allowed.
    Coordinator,
}

/// What was appended for one batch, so producer state (idempotence, transactions) can
/// be layered on top of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchInfo {
    /// Offset assigned to the first record.
    pub base_offset: i64,
    /// Offset of the last record.
    pub last_offset: i64,
    /// Producer id, -1 if none.
    pub producer_id: i64,
    /// Producer epoch, -1 if none.
    pub producer_epoch: i16,
    /// First sequence, -1 if none.
    pub base_sequence: i32,
    /// Last sequence (wrapping), -1 if none.
    pub last_sequence: i32,
    /// Part of a transaction.
    pub is_transactional: bool,
    /// A control batch (transaction marker).
    pub is_control: bool,
    /// The COMMIT/ABORT marker of a control batch.
    pub end_txn_marker: Option<EndTxnMarker>,
    /// Max timestamp as stored.
    pub max_timestamp: i64,
    /// Size of the batch in bytes.
    pub size_in_bytes: usize,
}

/// Result of an append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset of the first appended record; -1 if nothing was appended.
    pub first_offset: i64,
    /// Offset of the last appended record; -1 if nothing was appended.
    pub last_offset: i64,
    /// The broker time stamped on the batches under LogAppendTime, else -1 (what the
    /// Produce response returns).
    pub log_append_time: i64,
    /// Log start offset after the append.
    pub log_start_offset: i64,
    /// Largest timestamp among the appended batches (-1 if none).
    pub max_timestamp: i64,
    /// Base offset of the batch holding `max_timestamp`.
    pub offset_of_max_timestamp: i64,
    /// Bytes appended.
    pub valid_bytes: usize,
    /// Per-batch details, in order.
    pub batches: Vec<BatchInfo>,
    /// The append was a producer's retry of a batch already in the log (same producer
    /// id, epoch and sequence range as one of its last 5 batches): nothing was written,
    /// `first_offset`/`last_offset` are the original batch's, `batches` is empty and
    /// `log_append_time` is the original batch's timestamp under LogAppendTime (else -1).
    /// The broker answers the retry as a success with that base offset.
    pub duplicate: bool,
}

/// What an append writes, all computed and checked before anything is.
#[derive(Debug)]
struct PreparedBatches {
    /// What the segment needs of each batch.
    metas: Vec<BatchMeta>,
    /// What producer state and the caller need of each batch.
    infos: Vec<BatchInfo>,
    /// The validated producer state change.
    update: ProducerStateUpdate,
    /// Leader epochs the batches start, in order.
    new_epochs: Vec<EpochEntry>,
}

/// A batch of the request that passed validation, located by byte range.
#[derive(Debug)]
struct CheckedBatch {
    start: usize,
    header: RecordBatchHeader,
    /// Largest record timestamp (what a CreateTime max timestamp must be).
    records_max_timestamp: i64,
    end_txn_marker: Option<EndTxnMarker>,
}

fn parse_error(batch_index: usize, source: RecordsError) -> StorageError {
    match source {
        RecordsError::InvalidMagic(_) => {
            StorageError::InvalidRecord { batch_index, reason: "record batch magic is not 2" }
        }
        source => StorageError::CorruptRecord { batch_index, source },
    }
}

/// Full leader-side validation of every batch, done before taking the log lock.
fn validate_for_leader(
    records: &Bytes,
    config: &LogConfig,
    origin: AppendOrigin,
) -> Result<Vec<CheckedBatch>> {
    let mut checked = Vec::new();
    let mut batches = RecordBatches::new(records.clone());
    let mut batch_index = 0;
    while let Some(batch) = batches.next() {
        let batch = batch.map_err(|e| parse_error(batch_index, e))?;
        let start = batches.position() - batch.size_in_bytes();
        if batch.size_in_bytes() > config.max_message_bytes as usize {
            return Err(StorageError::RecordTooLarge {
                size: batch.size_in_bytes(),
                max: config.max_message_bytes,
            });
        }
        batch.validate_crc().map_err(|source| StorageError::CorruptRecord { batch_index, source })?;
        let header = batch.header();
        let invalid = |reason| StorageError::InvalidRecord { batch_index, reason };
        if header.records_count <= 0 {
            return Err(invalid("batch has no records"));
        }
        if i64::from(header.last_offset_delta) != i64::from(header.records_count) - 1 {
            return Err(invalid("record count disagrees with the last offset delta"));
        }
        if header.is_control() && origin == AppendOrigin::Client {
            return Err(invalid("clients may not write control batches"));
        }
        // Coordinators write transactional offset commits without a sequence, as Kafka's do.
        if header.producer_id >= 0
            && header.base_sequence < 0
            && !header.is_control()
            && origin == AppendOrigin::Client
        {
            return Err(invalid("idempotent batch without a base sequence"));
        }
        if header.is_transactional() && header.producer_id < 0 {
            return Err(invalid("transactional batch without a producer id"));
        }
        let malformed = |source| StorageError::MalformedRecords { batch_index, source };
        let mut records_max_timestamp = i64::MIN;
        let mut end_txn_marker = None;
        let mut records = batch.records(config.max_uncompressed_batch_bytes).map_err(malformed)?;
        if header.is_control() {
            for (i, record) in records.enumerate() {
                let record = record.map_err(malformed)?;
                if i64::from(record.offset_delta) != i as i64 {
                    return Err(invalid("record offset deltas are not consecutive"));
                }
                records_max_timestamp = records_max_timestamp.max(record.timestamp);
                if i == 0 {
                    end_txn_marker = EndTxnMarker::from_record(&record).map_err(malformed)?;
                }
            }
        } else {
            // Every record is checked, as Kafka's LogValidator does, without slicing out
            // keys and values nobody looks at here.
            let mut i = 0i64;
            while let Some(record) = records.next_summary() {
                let record = record.map_err(malformed)?;
                if i64::from(record.offset_delta) != i {
                    return Err(invalid("record offset deltas are not consecutive"));
                }
                records_max_timestamp = records_max_timestamp.max(record.timestamp);
                i += 1;
            }
        }
        checked.push(CheckedBatch { start, header, records_max_timestamp, end_txn_marker });
        batch_index += 1;
    }
    Ok(checked)
}

/// Re-encodes the client batches not in the topic's codec (`compression.type`), as
/// Kafka's LogValidator does, fixing up the validated batches' positions and headers.
/// Control batches stay uncompressed. Returns `records` untouched when every batch is
/// already in `target`; a batch that grows past `max.message.bytes` is refused.
fn recompress(
    records: Bytes,
    checked: &mut [CheckedBatch],
    target: Compression,
    config: &LogConfig,
) -> Result<Bytes> {
    let differs = |b: &CheckedBatch| !b.header.is_control() && b.header.attributes & 0x07 != target.id();
    if !checked.iter().any(differs) {
        return Ok(records);
    }
    let mut out = BytesMut::with_capacity(records.len());
    for (batch_index, b) in checked.iter_mut().enumerate() {
        let size = b.header.size_in_bytes();
        let original = records.slice(b.start..b.start + size);
        let bytes = if differs(b) {
            let batch = RecordBatch::parse(&original).map_err(|e| parse_error(batch_index, e))?;
            batch
                .recompressed_at(
                    target,
                    SnappyFormat::Xerial,
                    config.max_uncompressed_batch_bytes,
                    config.compression_level,
                )
                .map_err(|source| StorageError::MalformedRecords { batch_index, source })?
        } else {
            original
        };
        if bytes.len() > config.max_message_bytes as usize {
            return Err(StorageError::RecordTooLarge { size: bytes.len(), max: config.max_message_bytes });
        }
        b.start = out.len();
        b.header = RecordBatchHeader::parse(&bytes)
            .map_err(|source| StorageError::CorruptRecord { batch_index, source })?;
        out.extend_from_slice(&bytes);
    }
    Ok(out.freeze())
}

/// Returns `records` as a mutable buffer, copying only if the memory is shared.
fn into_mut(records: Bytes) -> BytesMut {
    records.try_into_mut().unwrap_or_else(|shared| BytesMut::from(&shared[..]))
}

/// What one batch (already carrying its final offsets) means for producer state.
pub(crate) fn batch_info(header: &RecordBatchHeader, end_txn_marker: Option<EndTxnMarker>) -> BatchInfo {
    let last_sequence = if header.base_sequence < 0 {
        -1
    } else {
        ((i64::from(header.base_sequence) + i64::from(header.last_offset_delta)) % (i64::from(i32::MAX) + 1))
            as i32
    };
    BatchInfo {
        base_offset: header.base_offset,
        last_offset: header.last_offset(),
        producer_id: header.producer_id,
        producer_epoch: header.producer_epoch,
        base_sequence: header.base_sequence,
        last_sequence,
        is_transactional: header.is_transactional(),
        is_control: header.is_control(),
        end_txn_marker,
        max_timestamp: header.max_timestamp,
        size_in_bytes: header.size_in_bytes(),
    }
}

impl Log {
    /// Appends batches from a producer as the partition leader.
    ///
    /// `records` holds one or more v2 batches as sent. Each is validated (magic, length,
    /// CRC -> `CorruptRecord`; size over `max.message.bytes` -> `RecordTooLarge`; counts,
    /// offset deltas and producer fields -> `InvalidRecord`/`MalformedRecords`). The
    /// producer's base offsets are ignored: dense offsets from the log end are written
    /// into the headers along with `leader_epoch` (the leader's current epoch, recorded
    /// in the leader epoch cache at the first offset of the append if it is new; an
    /// epoch older than the cache's latest is `StaleLeaderEpoch`, a replaced leader's
    /// append, and writes nothing). The bytes are otherwise stored as
    /// sent; only LogAppendTime (or a wrong CreateTime max timestamp) rewrites the max
    /// timestamp and CRC. Nothing is appended unless every batch is valid.
    ///
    /// Batches with a producer id are checked against the producer's state, all before
    /// anything is written: a retry of one of the producer's last 5 batches is not
    /// appended again and comes back with [`AppendInfo::duplicate`] and the original
    /// offsets; an epoch older than the producer's -> `InvalidProducerEpoch`; a sequence
    /// that does not follow (or a new epoch not starting at 0) -> `OutOfOrderSequence`; a
    /// non-transactional batch inside an open transaction -> `InvalidTxnState`.
    pub fn append(&self, records: Bytes, leader_epoch: i32, now_ms: i64) -> Result<AppendInfo> {
        self.append_with_origin(records, leader_epoch, AppendOrigin::Client, now_ms)
    }

    /// [`Log::append`] with an explicit origin, so the broker can write transaction
    /// markers (`AppendOrigin::Coordinator`). Coordinator appends skip sequence checks
    /// and duplicate detection; a marker must carry the producer's epoch or a newer one
    /// (`InvalidProducerEpoch`) and a coordinator epoch no older than the last marker's
    /// (`TransactionCoordinatorFenced`). A COMMIT or ABORT marker ends the producer's
    /// open transaction; an ABORT is recorded in the segment's transaction index.
    pub fn append_with_origin(
        &self,
        records: Bytes,
        leader_epoch: i32,
        origin: AppendOrigin,
        now_ms: i64,
    ) -> Result<AppendInfo> {
        let config = self.config();
        let mut checked = validate_for_leader(&records, &config, origin)?;
        let records = match config.compression {
            Some(target) if origin == AppendOrigin::Client => {
                recompress(records, &mut checked, target, &config)?
            }
            _ => records,
        };
        if records.len() as u64 > config.segment_bytes {
            return Err(StorageError::RecordSetTooLarge {
                size: records.len(),
                segment_bytes: config.segment_bytes,
            });
        }
        let log_append_time = config.message_timestamp_type == TimestampType::LogAppendTime;
        let mut inner = self.write_inner();
        self.check_open(&inner)?;
        inner.observe_now(now_ms);
        epochs::check_not_stale(&inner, leader_epoch)?;
        if checked.is_empty() {
            return Ok(self.empty_append_info(&inner));
        }

        // Assign offsets and patch headers; copy the request buffer only if it is shared.
        let mut next_offset = inner.log_end_offset();
        let new_epochs: Vec<EpochEntry> = if inner.leader_epochs.is_new_epoch(leader_epoch) {
            vec![EpochEntry { epoch: leader_epoch, start_offset: next_offset }]
        } else {
            Vec::new()
        };
        let mut buf = into_mut(records);
        let mut infos = Vec::with_capacity(checked.len());
        let mut metas = Vec::with_capacity(checked.len());
        for (batch_index, batch) in checked.iter().enumerate() {
            let size = batch.header.size_in_bytes();
            let mut view = RecordBatchMut::new(&mut buf[batch.start..batch.start + size])
                .map_err(|source| StorageError::CorruptRecord { batch_index, source })?;
            view.set_base_offset(next_offset);
            view.set_partition_leader_epoch(leader_epoch);
            if log_append_time {
                view.set_max_timestamp_and_log_append_time(now_ms);
            } else {
                view.set_max_timestamp(TimestampType::CreateTime, batch.records_max_timestamp);
            }
            let header = RecordBatchHeader::parse(&buf[batch.start..batch.start + size])
                .map_err(|source| StorageError::CorruptRecord { batch_index, source })?;
            debug_assert_eq!(header.base_offset, next_offset);
            next_offset = header.next_offset();
            metas.push(BatchMeta::from(&header));
            infos.push(batch_info(&header, batch.end_txn_marker));
        }
        let producer_origin = match origin {
            AppendOrigin::Client => {
                if let Some(original) = inner.producer_state.find_duplicate(&infos) {
                    return Ok(self.duplicate_append_info(&inner, original, log_append_time));
                }
                Origin::Client
            }
            AppendOrigin::Coordinator => Origin::Coordinator,
        };
        let update = inner.producer_state.prepare_update(&infos, producer_origin)?;
        let data = buf.freeze();
        let batches = PreparedBatches { metas, infos, update, new_epochs };
        let mut info = self.write_batches(&mut inner, &config, &data, batches, now_ms)?;
        info.log_append_time = if log_append_time { now_ms } else { -1 };
        Ok(info)
    }

    /// The answer to a producer's retry: the offsets of the batch already appended. As
    /// in Kafka, a request holding several batches is answered by its first duplicate.
    fn duplicate_append_info(
        &self,
        inner: &LogInner,
        original: BatchMetadata,
        log_append_time: bool,
    ) -> AppendInfo {
        tracing::debug!(
            topic = %self.topic,
            partition = self.partition,
            first_offset = original.first_offset,
            "duplicate batch from an idempotent producer, answering with its original offsets"
        );
        AppendInfo {
            first_offset: original.first_offset,
            last_offset: original.last_offset,
            log_append_time: if log_append_time { original.timestamp } else { -1 },
            duplicate: true,
            ..self.empty_append_info(inner)
        }
    }

    /// Appends batches replicated from the leader, keeping their offsets.
    ///
    /// Batches are checked for length, magic and CRC only (the leader validated the
    /// rest). The first base offset must be >= the log end offset and offsets must grow
    /// from batch to batch (gaps are allowed, as compacted leaders produce them);
    /// otherwise `UnexpectedAppendOffset`, and the follower must truncate first.
    /// Producer state follows the batches without checks (the leader made them);
    /// markers of control batches are decoded (`MalformedRecords` if they do not).
    /// Each batch whose `partitionLeaderEpoch` is newer than the cache's latest epoch
    /// starts that epoch at its base offset; older or negative epochs record nothing.
    pub fn append_as_follower(&self, records: Bytes) -> Result<AppendInfo> {
        let mut headers = Vec::new();
        let mut markers = Vec::new();
        for batch in RecordBatches::new(records.clone()) {
            let batch_index = headers.len();
            let batch = batch.map_err(|e| parse_error(batch_index, e))?;
            batch.validate_crc().map_err(|source| StorageError::CorruptRecord { batch_index, source })?;
            let marker = if batch.is_control() && batch.producer_id() >= 0 {
                EndTxnMarker::from_batch(&batch)
                    .map_err(|source| StorageError::MalformedRecords { batch_index, source })?
            } else {
                None
            };
            headers.push(batch.header());
            markers.push(marker);
        }
        let config = self.config();
        let mut inner = self.write_inner();
        self.check_open(&inner)?;
        if headers.is_empty() {
            return Ok(self.empty_append_info(&inner));
        }
        let mut expected = inner.log_end_offset();
        for header in &headers {
            if header.base_offset < expected || header.last_offset() < header.base_offset {
                return Err(StorageError::UnexpectedAppendOffset {
                    offset: header.base_offset,
                    log_end_offset: expected,
                });
            }
            expected = header.next_offset();
        }
        let new_epochs = self.follower_epochs(&inner, &headers);
        let metas = headers.iter().map(BatchMeta::from).collect();
        let infos: Vec<BatchInfo> = headers.iter().zip(markers).map(|(h, m)| batch_info(h, m)).collect();
        let update = inner.producer_state.prepare_update(&infos, Origin::Replication)?;
        let now_ms = inner.last_seen_ms;
        let batches = PreparedBatches { metas, infos, update, new_epochs };
        self.write_batches(&mut inner, &config, &records, batches, now_ms)
    }

    /// The epochs replicated batches start: each batch stamped with an epoch newer than
    /// the latest so far (Kafka's rule when it recovers a segment). A batch with an
    /// older epoch is left as it is: after the truncation replication does first, it
    /// should not happen, so it is logged.
    fn follower_epochs(&self, inner: &LogInner, headers: &[RecordBatchHeader]) -> Vec<EpochEntry> {
        let mut latest = inner.leader_epochs.latest_epoch();
        let mut new_epochs = Vec::new();
        for header in headers {
            let epoch = header.partition_leader_epoch;
            if epoch >= 0 && latest.is_none_or(|latest| epoch > latest) {
                new_epochs.push(EpochEntry { epoch, start_offset: header.base_offset });
                latest = Some(epoch);
            } else if epoch >= 0 && latest.is_some_and(|latest| epoch < latest) {
                tracing::warn!(
                    topic = %self.topic,
                    partition = self.partition,
                    offset = header.base_offset,
                    epoch,
                    latest_epoch = ?latest,
                    "replicated batch with an older leader epoch than the log's latest"
                );
            }
        }
        new_epochs
    }

    fn empty_append_info(&self, inner: &LogInner) -> AppendInfo {
        AppendInfo {
            first_offset: -1,
            last_offset: -1,
            log_append_time: -1,
            log_start_offset: inner.log_start_offset,
            max_timestamp: -1,
            offset_of_max_timestamp: -1,
            valid_bytes: 0,
            batches: Vec::new(),
            duplicate: false,
        }
    }

    /// Rolls if needed, records the new leader epochs (durably), writes `data` to the
    /// active segment, updates counters, flushes per `flush.messages`, applies the
    /// producer state update (recording aborted transactions in the active segment's
    /// transaction index), and publishes the new log end offset and first unstable
    /// offset.
    fn write_batches(
        &self,
        inner: &mut LogInner,
        config: &LogConfig,
        data: &[u8],
        batches: PreparedBatches,
        now_ms: i64,
    ) -> Result<AppendInfo> {
        let PreparedBatches { metas, infos, update, new_epochs } = batches;
        let (Some(first), Some(last)) = (metas.first(), metas.last()) else {
            return Ok(self.empty_append_info(inner));
        };
        let (first_offset, last_offset) = (first.base_offset, last.last_offset);
        let mut max_timestamp = -1;
        let mut offset_of_max_timestamp = -1;
        for meta in &metas {
            if meta.max_timestamp > max_timestamp {
                max_timestamp = meta.max_timestamp;
                offset_of_max_timestamp = meta.base_offset;
            }
        }
        if inner.active().should_roll(config, data.len() as u64, max_timestamp, last_offset, now_ms) {
            self.roll_locked(inner, config)?;
        }
        debug_assert!(first_offset >= inner.log_end_offset(), "offsets must not go backwards");
        let epochs_before = self.assign_new_epochs(inner, &new_epochs)?;
        if let Err(e) = inner.active_mut().append(data, &metas) {
            // Nothing was written: the epochs these batches started did not start. The
            // checkpoint may keep them; loading drops entries at or after the log end.
            if let Some(before) = epochs_before {
                inner.leader_epochs = before;
            }
            return Err(e);
        }
        let records: u64 = metas.iter().map(|m| (m.last_offset - m.base_offset + 1) as u64).sum();
        inner.unflushed_messages = inner.unflushed_messages.saturating_add(records);
        // The data is in the log: producer state must follow whatever happens next. A
        // failed transaction index write is repaired by replay at the next recovery.
        let aborted = inner.producer_state.apply(update, last_offset + 1);
        let indexed = aborted.into_iter().try_for_each(|txn| inner.active_mut().txn_index_mut().append(txn));
        self.publish(inner);
        indexed?;
        if inner.unflushed_messages >= config.flush_interval_messages {
            Self::flush_locked(inner)?;
        }
        Ok(AppendInfo {
            first_offset,
            last_offset,
            log_append_time: -1,
            log_start_offset: inner.log_start_offset,
            max_timestamp,
            offset_of_max_timestamp,
            valid_bytes: data.len(),
            batches: infos,
            duplicate: false,
        })
    }
}
