//! Helpers shared by the storage integration tests: batch builders, a small-segment
//! config, and decoding of what a read returns.
#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use strata_protocol::records::{Compression, NewRecord, RecordBatch, RecordBatchBuilder, RecordBatches};
use strata_storage::{Log, LogConfig, LogReadInfo};

/// A record as the tests track it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rec {
    pub offset: i64,
    pub timestamp: i64,
    pub value: Bytes,
}

/// Config with tiny segments and dense indexes so a few KiB exercise rolls and lookups.
pub fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        index_interval_bytes: 100,
        segment_index_bytes: 4096,
        file_delete_delay_ms: 0,
        retention_ms: -1,
        ..LogConfig::default()
    }
}

/// A producer-style batch (base offset deliberately bogus, the log must ignore it) with
/// one record per timestamp; values are `<tag>-<i>`.
pub fn batch_with(tag: &str, timestamps: &[i64], codec: Compression) -> Bytes {
    let mut b = RecordBatchBuilder::new(987_654).compression(codec);
    for (i, ts) in timestamps.iter().enumerate() {
        let value = Bytes::from(format!("{tag}-{i}"));
        b.append(&NewRecord::new(*ts, Some(Bytes::from(format!("k{i}"))), Some(value)))
            .expect("append to builder");
    }
    b.build().expect("build batch")
}

/// An uncompressed batch of `n` records at timestamp `ts`.
pub fn batch(tag: &str, n: usize, ts: i64) -> Bytes {
    batch_with(tag, &vec![ts; n], Compression::None)
}

/// Concatenates batches into one produce payload.
pub fn concat(batches: &[Bytes]) -> Bytes {
    let mut out = BytesMut::new();
    for b in batches {
        out.extend_from_slice(b);
    }
    out.freeze()
}

/// The batches of a read, checked for CRC.
pub fn batches_of(read: &LogReadInfo) -> Vec<RecordBatch> {
    let bytes = read.records.read_bytes().expect("read slice");
    RecordBatches::new(bytes)
        .map(|b| {
            let b = b.expect("whole batch in read");
            b.validate_crc().expect("crc of stored batch");
            b
        })
        .collect()
}

/// Every record of a read.
pub fn records_of(read: &LogReadInfo) -> Vec<Rec> {
    batches_of(read)
        .iter()
        .flat_map(|b| {
            b.records(1 << 24)
                .expect("records")
                .map(|r| {
                    let r = r.expect("record");
                    Rec { offset: r.offset, timestamp: r.timestamp, value: r.value.unwrap_or_default() }
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Reads the whole log from its start, segment by segment.
pub fn read_all(log: &Log) -> Vec<Rec> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let read = log.read(offset, usize::MAX >> 1, i64::MAX, true).expect("read");
        let batches = batches_of(&read);
        assert!(!batches.is_empty(), "read at {offset} returned nothing before the log end");
        for r in records_of(&read) {
            if r.offset >= offset {
                out.push(r);
            }
        }
        offset = batches.last().map(RecordBatch::next_offset).unwrap_or(offset);
    }
    out
}

/// A batch of `n` records from an idempotent producer starting at sequence `seq`, with
/// timestamps `ts`; `transactional` sets the transactional bit.
pub fn producer_batch(
    producer_id: i64,
    epoch: i16,
    seq: i32,
    n: usize,
    ts: i64,
    transactional: bool,
) -> Bytes {
    let mut b = RecordBatchBuilder::new(0).producer(producer_id, epoch, seq).transactional(transactional);
    for i in 0..n {
        let value = Bytes::from(format!("p{producer_id}-e{epoch}-s{}", i64::from(seq) + i as i64));
        b.append(&NewRecord::new(ts, None, Some(value))).expect("append to builder");
    }
    b.build().expect("build batch")
}

/// An idempotent (non-transactional) batch.
pub fn idempotent(producer_id: i64, epoch: i16, seq: i32, n: usize) -> Bytes {
    producer_batch(producer_id, epoch, seq, n, 1_000, false)
}

/// A transactional batch.
pub fn transactional(producer_id: i64, epoch: i16, seq: i32, n: usize) -> Bytes {
    producer_batch(producer_id, epoch, seq, n, 1_000, true)
}

/// A COMMIT (`commit`) or ABORT marker batch for the producer, from coordinator epoch
/// `coordinator_epoch`.
pub fn marker(producer_id: i64, epoch: i16, commit: bool, coordinator_epoch: i32) -> Bytes {
    let marker = if commit {
        strata_protocol::records::EndTxnMarker::commit(coordinator_epoch)
    } else {
        strata_protocol::records::EndTxnMarker::abort(coordinator_epoch)
    };
    strata_protocol::records::EndTxnMarkerBatch {
        producer_id,
        producer_epoch: epoch,
        partition_leader_epoch: 0,
        timestamp: 1_000,
        marker,
    }
    .build(0)
    .expect("build marker")
}

/// Appends a marker the way the transaction coordinator does, then moves the high
/// watermark to the log end as a single-node broker does after every append, so the
/// completed transaction is stable at once.
pub fn end_txn(log: &Log, producer_id: i64, epoch: i16, commit: bool) -> strata_storage::AppendInfo {
    let info = log
        .append_with_origin(
            marker(producer_id, epoch, commit, 0),
            0,
            strata_storage::AppendOrigin::Coordinator,
            1_000,
        )
        .expect("append marker");
    log.update_high_watermark(log.log_end_offset()).expect("update high watermark");
    info
}

/// Names of the files in `dir` ending with `suffix`, sorted.
pub fn files_with_suffix(dir: &std::path::Path, suffix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list dir")
        .map(|e| e.expect("dir entry").file_name().into_string().expect("utf-8 name"))
        .filter(|n| n.ends_with(suffix))
        .collect();
    names.sort();
    names
}
