//! Internal topics that coordinators keep their state in (`__consumer_offsets`, later
//! `__transaction_state`): creating them on first use, appending coordinator records,
//! and reading a partition back from its start when a coordinator loads it.

use crate::broker::Broker;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::Arc;
use strata_protocol::records::{NewRecord, RecordBatch, RecordBatches};
use strata_protocol::ErrorCode;
use strata_storage::AppendOrigin;

/// Name of the group coordinator's topic.
pub const CONSUMER_OFFSETS: &str = "__consumer_offsets";

/// Creates `name` with `partitions` partitions and `configs` unless it exists; returns
/// whether it already existed.
pub fn ensure(
    broker: &Broker,
    name: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> Result<bool, ErrorCode> {
    if broker.topics.get(name).is_some() {
        return Ok(true);
    }
    let configs: BTreeMap<String, String> =
        configs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    match broker.create_topic(name, partitions, -1, configs, false) {
        Ok(_) => Ok(false),
        Err(crate::broker::CreateTopicError::AlreadyExists(_)) => Ok(true),
        Err(e) => {
            tracing::error!(topic = name, error = %e, "cannot create internal topic");
            Err(e.code())
        }
    }
}

/// Creates a coordinator's compacted topic (`__consumer_offsets`, `__transaction_state`)
/// unless it exists: `partitions` partitions, segment size from the broker key
/// `segment_bytes_key` (Kafka's default 100 MiB), and the given `compression.type`.
pub fn ensure_coordinator_topic(
    broker: &Broker,
    name: &str,
    partitions: i32,
    segment_bytes_key: &str,
    compression: &str,
) -> Result<bool, ErrorCode> {
    let segment_bytes =
        broker.config.raw.get(segment_bytes_key).cloned().unwrap_or_else(|| "104857600".to_string());
    ensure(
        broker,
        name,
        partitions,
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", &segment_bytes),
            ("compression.type", compression),
        ],
    )
}

/// How long a coordinator task may sleep before its state machine's next deadline
/// (`None`: nothing scheduled, wake up hourly anyway).
pub fn until_deadline(deadline_ms: Option<i64>, now_ms: i64) -> std::time::Duration {
    match deadline_ms {
        Some(deadline) => std::time::Duration::from_millis((deadline - now_ms).clamp(0, 3_600_000) as u64),
        None => std::time::Duration::from_secs(3600),
    }
}

/// Appends `records` (key, value-or-tombstone) as one batch to `topic`-`partition`;
/// with `transactional = Some((producer id, epoch))` as a transactional batch of that
/// producer (no sequence, as Kafka's coordinators write them). Single node: the write
/// is committed (high watermark) once this returns.
pub fn append(
    broker: &Broker,
    topic: &str,
    partition: i32,
    records: &[(Bytes, Option<Bytes>)],
    transactional: Option<(i64, i16)>,
    now_ms: i64,
) -> Result<(), ErrorCode> {
    let Some(p) = broker.replicas.get(topic, partition) else {
        return Err(ErrorCode::NotCoordinator);
    };
    let mut builder = strata_protocol::records::RecordBatchBuilder::new(0);
    if let Some((producer_id, producer_epoch)) = transactional {
        builder = builder.producer(producer_id, producer_epoch, -1).transactional(true);
    }
    for (key, value) in records {
        builder
            .append(&NewRecord::new(now_ms, Some(key.clone()), value.clone()))
            .map_err(|_| ErrorCode::UnknownServerError)?;
    }
    let batch = builder.build().map_err(|_| ErrorCode::UnknownServerError)?;
    p.append_with_origin(batch, AppendOrigin::Coordinator, now_ms)
        .map_err(|e| crate::errors::storage_error_code(&e))?;
    Ok(())
}

/// What a replayed record's batch says about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchContext {
    /// Producer id of the batch (-1 for plain coordinator writes).
    pub producer_id: i64,
    /// Producer epoch of the batch.
    pub producer_epoch: i16,
    /// True for records written inside a transaction.
    pub is_transactional: bool,
    /// True for a control batch (transaction marker): key and value are the control
    /// record's.
    pub is_control: bool,
}

/// Calls `f(batch, key, value)` for every keyed record of `topic`-`partition` from its
/// log start to its high watermark, in offset order, control records included.
pub fn replay(
    broker: &Arc<Broker>,
    topic: &str,
    partition: i32,
    mut f: impl FnMut(BatchContext, Bytes, Option<Bytes>),
) -> Result<(), ErrorCode> {
    let Some(p) = broker.replicas.get(topic, partition) else {
        return Err(ErrorCode::NotCoordinator);
    };
    let max_uncompressed = p.log.config().max_uncompressed_batch_bytes;
    let mut offset = p.log.log_start_offset();
    let end = p.high_watermark();
    while offset < end {
        let info = p.read(offset, 1 << 20, true, false).map_err(|e| crate::errors::storage_error_code(&e))?;
        let data = info.records.read_bytes().map_err(|_| ErrorCode::KafkaStorageError)?;
        if data.is_empty() {
            break;
        }
        for batch in RecordBatches::new(data) {
            let batch: RecordBatch = batch.map_err(|_| ErrorCode::CorruptMessage)?;
            let context = BatchContext {
                producer_id: batch.producer_id(),
                producer_epoch: batch.producer_epoch(),
                is_transactional: batch.is_transactional(),
                is_control: batch.is_control(),
            };
            for record in batch.records(max_uncompressed).map_err(|_| ErrorCode::CorruptMessage)? {
                let record = record.map_err(|_| ErrorCode::CorruptMessage)?;
                if record.offset >= offset {
                    if let Some(key) = record.key {
                        f(context, key, record.value);
                    }
                }
            }
            offset = offset.max(batch.next_offset());
        }
    }
    Ok(())
}
