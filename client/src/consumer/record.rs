//! What `poll` hands out, and the decoding of a partition's fetched bytes into it: CRCs
//! checked, batches before the position skipped, control batches dropped, and under
//! `read_committed` the batches of aborted transactions dropped, as the Java fetcher
//! does from the response's `aborted_transactions` list.

use crate::error::{Error, Result};
use crate::types::{Header, IsolationLevel};
use bytes::Bytes;
use std::collections::BTreeSet;
use std::sync::Arc;
use strata_protocol::messages::fetch::AbortedTransaction;
use strata_protocol::records::{EndTxnMarker, RecordBatches, RecordsError, TimestampType};
use strata_protocol::ErrorCode;

/// One consumed record. Key, value and header values are slices of the fetch response
/// (or of the decompressed batch): no copy per record.
///
/// ```
/// use strata_client::consumer::ConsumerRecord;
/// let r = ConsumerRecord {
///     topic: "t".into(), partition: 0, offset: 7, timestamp: 1, timestamp_type: Default::default(),
///     key: None, value: Some(bytes::Bytes::from_static(b"v")), headers: vec![], leader_epoch: Some(0),
/// };
/// assert_eq!(r.value.as_deref(), Some(&b"v"[..]));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRecord {
    /// Topic (shared by every record of the partition).
    pub topic: Arc<str>,
    /// Partition index.
    pub partition: i32,
    /// The record's offset.
    pub offset: i64,
    /// Its timestamp (ms).
    pub timestamp: i64,
    /// What the timestamp means.
    pub timestamp_type: TimestampType,
    /// Key (`None`: null).
    pub key: Option<Bytes>,
    /// Value (`None`: null, a tombstone on compacted topics).
    pub value: Option<Bytes>,
    /// Headers in order.
    pub headers: Vec<Header>,
    /// The leader epoch of the batch, for committing with KIP-320 truncation checks.
    pub leader_epoch: Option<i32>,
}

/// A partition's decoded fetch: its records and where the next fetch starts.
#[derive(Debug, Default)]
pub(crate) struct Decoded {
    pub records: Vec<ConsumerRecord>,
    /// Past the last batch read, control and aborted ones and compacted gaps included.
    pub next_offset: i64,
    /// Leader epoch of the last batch read.
    pub last_epoch: Option<i32>,
}

/// How to decode.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DecodeOptions {
    pub isolation: IsolationLevel,
    pub check_crcs: bool,
    pub max_uncompressed_bytes: usize,
}

fn corrupt(what: impl std::fmt::Display) -> Error {
    Error::Kafka { code: ErrorCode::CorruptMessage, message: Some(what.to_string()) }
}

/// Decodes `bytes` (whole batches, maybe a truncated last one) fetched from `fetch_offset`.
pub(crate) fn decode(
    topic: &Arc<str>,
    partition: i32,
    fetch_offset: i64,
    bytes: &Bytes,
    aborted: &[AbortedTransaction],
    options: DecodeOptions,
) -> Result<Decoded> {
    let mut out = Decoded { records: Vec::new(), next_offset: fetch_offset, last_epoch: None };
    let mut aborted: Vec<&AbortedTransaction> = aborted.iter().collect();
    aborted.sort_by_key(|a| a.first_offset);
    let mut next_aborted = 0usize;
    let mut aborting: BTreeSet<i64> = BTreeSet::new();
    let read_committed = options.isolation == IsolationLevel::ReadCommitted;
    for batch in RecordBatches::new(bytes.clone()) {
        let batch = match batch {
            Ok(b) => b,
            // A fetch may end inside a batch (the broker cuts at the byte limit).
            Err(RecordsError::Truncated { .. }) => break,
            Err(e) => return Err(corrupt(format!("{topic}-{partition}: {e}"))),
        };
        if batch.next_offset() <= fetch_offset {
            continue;
        }
        if options.check_crcs {
            batch
                .validate_crc()
                .map_err(|e| corrupt(format!("{topic}-{partition} at {}: {e}", batch.base_offset())))?;
        }
        let epoch = Some(batch.partition_leader_epoch()).filter(|e| *e >= 0);
        if read_committed && batch.producer_id() >= 0 {
            // Transactions that started at or before this batch are open from here on.
            while next_aborted < aborted.len() && aborted[next_aborted].first_offset <= batch.last_offset() {
                aborting.insert(aborted[next_aborted].producer_id);
                next_aborted += 1;
            }
            if batch.is_control() {
                let marker = EndTxnMarker::from_batch(&batch)
                    .map_err(|e| corrupt(format!("{topic}-{partition}: {e}")))?;
                if marker.is_some_and(|m| !m.is_commit()) {
                    aborting.remove(&batch.producer_id());
                }
            } else if batch.is_transactional() && aborting.contains(&batch.producer_id()) {
                out.next_offset = batch.next_offset();
                continue;
            }
        }
        out.next_offset = batch.next_offset();
        out.last_epoch = epoch;
        if batch.is_control() {
            continue;
        }
        let timestamp_type = batch.timestamp_type();
        let records = batch
            .records(options.max_uncompressed_bytes)
            .map_err(|e| corrupt(format!("{topic}-{partition}: {e}")))?;
        for record in records {
            let record = record.map_err(|e| corrupt(format!("{topic}-{partition}: {e}")))?;
            if record.offset < fetch_offset {
                continue;
            }
            out.records.push(ConsumerRecord {
                topic: topic.clone(),
                partition,
                offset: record.offset,
                timestamp: record.timestamp,
                timestamp_type,
                key: record.key,
                value: record.value,
                headers: record
                    .headers
                    .into_iter()
                    .map(|h| Header { key: String::from_utf8_lossy(&h.key).into_owned(), value: h.value })
                    .collect(),
                leader_epoch: epoch,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use strata_protocol::records::{EndTxnMarkerBatch, NewRecord, RecordBatchBuilder};

    fn batch(base: i64, pid: i64, transactional: bool, values: &[&str]) -> Bytes {
        let mut b = RecordBatchBuilder::new(base).producer(pid, 0, 0).transactional(transactional);
        for v in values {
            b.append(&NewRecord::new(1, None, Some(Bytes::from(v.to_string())))).expect("append");
        }
        b.build().expect("build")
    }

    fn marker(offset: i64, pid: i64, commit: bool) -> Bytes {
        let m = if commit { EndTxnMarker::commit(0) } else { EndTxnMarker::abort(0) };
        EndTxnMarkerBatch {
            producer_id: pid,
            producer_epoch: 0,
            partition_leader_epoch: 0,
            timestamp: 1,
            marker: m,
        }
        .build(offset)
        .expect("marker")
    }

    fn join(parts: &[Bytes]) -> Bytes {
        let mut out = BytesMut::new();
        for p in parts {
            out.extend_from_slice(p);
        }
        out.freeze()
    }

    fn opts(isolation: IsolationLevel) -> DecodeOptions {
        DecodeOptions { isolation, check_crcs: true, max_uncompressed_bytes: 1 << 20 }
    }

    fn values(d: &Decoded) -> Vec<String> {
        d.records
            .iter()
            .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
            .collect()
    }

    #[test]
    fn read_committed_drops_aborted_transactions_and_every_control_batch() {
        // pid 1 aborts [0,1], pid 2 commits [2], pid 1 again commits [5,6] after its abort
        // marker at 3; a plain batch at 8.
        let bytes = join(&[
            batch(0, 1, true, &["a0", "a1"]),
            batch(2, 2, true, &["c2"]),
            marker(3, 1, false),
            marker(4, 2, true),
            batch(5, 1, true, &["c5", "c6"]),
            marker(7, 1, true),
            batch(8, -1, false, &["p8"]),
        ]);
        let aborted = vec![AbortedTransaction { producer_id: 1, first_offset: 0 }];
        let topic: Arc<str> = "t".into();
        let committed =
            decode(&topic, 0, 0, &bytes, &aborted, opts(IsolationLevel::ReadCommitted)).expect("decode");
        assert_eq!(values(&committed), vec!["c2", "c5", "c6", "p8"]);
        assert_eq!(committed.next_offset, 9);
        let all =
            decode(&topic, 0, 0, &bytes, &aborted, opts(IsolationLevel::ReadUncommitted)).expect("decode");
        assert_eq!(values(&all), vec!["a0", "a1", "c2", "c5", "c6", "p8"], "markers never delivered");
        // From the middle of a batch: the records before the position are skipped (the
        // broker lists only transactions aborted at or after the fetch offset: none).
        let mid = decode(&topic, 0, 6, &bytes, &[], opts(IsolationLevel::ReadCommitted)).expect("decode");
        assert_eq!(values(&mid), vec!["c6", "p8"]);
    }

    #[test]
    fn a_bad_crc_is_an_error_unless_unchecked_and_a_truncated_tail_is_left_for_later() {
        let first = batch(0, -1, false, &["x"]);
        let mut bytes = BytesMut::from(&join(&[first.clone(), batch(1, -1, false, &["y"])])[..]);
        // The second batch's stored CRC (bytes 17..21 of it) no longer matches.
        bytes[first.len() + 18] ^= 0xff;
        let bytes = bytes.freeze();
        let topic: Arc<str> = "t".into();
        let e = decode(&topic, 0, 0, &bytes, &[], opts(IsolationLevel::ReadUncommitted)).unwrap_err();
        assert_eq!(e.code(), Some(ErrorCode::CorruptMessage));
        let unchecked = DecodeOptions { check_crcs: false, ..opts(IsolationLevel::ReadUncommitted) };
        let d = decode(&topic, 0, 0, &bytes, &[], unchecked).expect("check.crcs=false");
        assert_eq!(values(&d), vec!["x", "y"]);
        let truncated = bytes.slice(..bytes.len() - 3);
        let d = decode(&topic, 0, 0, &truncated, &[], opts(IsolationLevel::ReadUncommitted)).expect("prefix");
        assert_eq!((values(&d), d.next_offset), (vec!["x".to_string()], 1));
    }
}
