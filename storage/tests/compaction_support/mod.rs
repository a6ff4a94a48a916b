//! Helpers of the compaction tests (`compaction.rs`, `compaction_crash.rs`,
//! `compaction_txn.rs`): a
//! compacted log config, keyed batches, reading a log back across holes, and the model
//! of what compaction must keep.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use strata_protocol::records::{
    Compression, EndTxnMarker, EndTxnMarkerBatch, NewRecord, RecordBatch, RecordBatchBuilder, RecordBatches,
};
use strata_storage::{Cleaner, CleanerConfig, Log, LogConfig};

pub const TOPIC: &str = "compacted";

/// A record as read back: offset, key, value (`None` = tombstone).
pub type Rec = (i64, String, Option<String>);

pub fn compact_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 256,
        segment_index_bytes: 4096,
        file_delete_delay_ms: 0,
        retention_ms: -1,
        cleanup_policy_compact: true,
        cleanup_policy_delete: false,
        min_cleanable_dirty_ratio: 0.0,
        delete_retention_ms: 1_000,
        ..LogConfig::default()
    }
}

pub fn cleaner() -> Cleaner {
    Cleaner::new(CleanerConfig { dedupe_buffer_bytes: 1 << 20, ..CleanerConfig::default() }).unwrap()
}

pub fn open(root: &Path, config: LogConfig, clean_shutdown: bool) -> Log {
    Log::open(root, TOPIC, 0, config, clean_shutdown, 0).expect("open log")
}

pub fn part_dir(root: &Path) -> PathBuf {
    root.join(format!("{TOPIC}-0"))
}

/// A batch of keyed records (`None` value = tombstone) at timestamp `ts`.
pub fn keyed(records: &[(&str, Option<&str>)], ts: i64, codec: Compression) -> Bytes {
    let mut b = RecordBatchBuilder::new(0).compression(codec);
    for (key, value) in records {
        let rec =
            NewRecord::new(ts, Some(Bytes::from(key.to_string())), value.map(|v| Bytes::from(v.to_string())));
        b.append(&rec).unwrap();
    }
    b.build().unwrap()
}

/// Appends and returns the offsets given, recording them in `model`.
pub fn put(log: &Log, model: &mut Vec<Rec>, records: &[(&str, Option<&str>)], ts: i64) {
    let info = log.append(keyed(records, ts, Compression::None), 0, ts).unwrap();
    for (i, (k, v)) in records.iter().enumerate() {
        model.push((info.first_offset + i as i64, k.to_string(), v.map(str::to_string)));
    }
}

/// Every batch of the log from its start, following holes and empty batches.
pub fn all_batches(log: &Log) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let read = log.read(offset, 1 << 30, i64::MAX, true).expect("read");
        let bytes = read.records.read_bytes().expect("read slice");
        let batches: Vec<RecordBatch> = RecordBatches::new(bytes).map(|b| b.expect("whole batch")).collect();
        assert!(!batches.is_empty(), "read at {offset} returned nothing below the log end");
        for b in batches {
            b.validate_crc().expect("stored batch crc");
            assert!(b.last_offset() >= offset, "read at {offset} returned an older batch");
            offset = b.next_offset();
            out.push(b);
        }
    }
    out
}

pub fn records(batches: &[RecordBatch]) -> Vec<Rec> {
    let mut out = Vec::new();
    for b in batches {
        for r in b.records(1 << 24).unwrap() {
            let r = r.unwrap();
            let key = String::from_utf8(r.key.unwrap_or_default().to_vec()).unwrap();
            out.push((r.offset, key, r.value.map(|v| String::from_utf8(v.to_vec()).unwrap())));
        }
    }
    out
}

pub fn read_all(log: &Log) -> Vec<Rec> {
    records(&all_batches(log))
}

/// The latest record of each key, in offset order, optionally without tombstones.
pub fn latest(model: &[Rec], keep_tombstones: bool) -> Vec<Rec> {
    let mut by_key: BTreeMap<&str, &Rec> = BTreeMap::new();
    for r in model {
        by_key.insert(&r.1, r);
    }
    let mut out: Vec<Rec> =
        by_key.values().filter(|r| keep_tombstones || r.2.is_some()).map(|r| (*r).clone()).collect();
    out.sort();
    out
}

pub fn files_with_suffix(dir: &Path, suffix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(suffix))
        .collect();
    names.sort();
    names
}

/// Writes `rounds` batches updating keys k0..k{keys} (every 7th write a tombstone).
pub fn churn(log: &Log, model: &mut Vec<Rec>, rounds: usize, keys: usize, ts: i64) {
    for round in 0..rounds {
        let mut batch = Vec::new();
        let values: Vec<(String, Option<String>)> = (0..4)
            .map(|j| {
                let n = round * 4 + j;
                let value = (n % 7 != 6).then(|| format!("v{n}"));
                (format!("k{}", n % keys), value)
            })
            .collect();
        for (k, v) in &values {
            batch.push((k.as_str(), v.as_deref()));
        }
        put(log, model, &batch, ts);
    }
}

/// A batch of producer `pid` (transactional if `txn`) holding `records`.
pub fn producer_batch(pid: i64, epoch: i16, seq: i32, records: &[(&str, Option<&str>)], txn: bool) -> Bytes {
    let mut b = RecordBatchBuilder::new(0).producer(pid, epoch, seq).transactional(txn);
    for (k, v) in records {
        b.append(&NewRecord::new(
            100,
            Some(Bytes::from(k.to_string())),
            v.map(|v| Bytes::from(v.to_string())),
        ))
        .unwrap();
    }
    b.build().unwrap()
}

/// A COMMIT or ABORT marker batch of producer `pid`.
pub fn marker(pid: i64, epoch: i16, commit: bool) -> Bytes {
    let marker = if commit { EndTxnMarker::commit(0) } else { EndTxnMarker::abort(0) };
    EndTxnMarkerBatch {
        producer_id: pid,
        producer_epoch: epoch,
        partition_leader_epoch: 0,
        timestamp: 100,
        marker,
    }
    .build(0)
    .unwrap()
}
