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
