//! Any byte string as the records of a produce request or a log segment: the batch
//! iterator, header parser, CRC check, record decoder (decompression capped) and
//! control-marker parser must return errors, never panic, and agree with each other
//! (the validation scan with the record decoder among them).

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use strata_protocol::records::{valid_batches_len, EndTxnMarker, RecordBatchHeader, RecordBatches};

/// Decompressed bytes allowed per batch: small, so a zip bomb is an error, not an OOM.
const MAX_UNCOMPRESSED: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let buf = Bytes::copy_from_slice(data);
    let mut at = 0;
    let mut crc_valid_prefix = 0;
    let mut crcs_valid_so_far = true;
    let mut batches = RecordBatches::new(buf.clone());
    for batch in batches.by_ref() {
        let Ok(batch) = batch else { break };
        // The header-only parser storage scans use must agree with the full view.
        let header = RecordBatchHeader::parse(&data[at..]).expect("header of a parsed batch");
        assert_eq!(header, batch.header());
        assert_eq!(header.size_in_bytes(), batch.size_in_bytes());
        // What the broker computes from a producer's batch before assigning offsets.
        let _ = (batch.last_offset(), batch.next_offset(), batch.last_sequence());
        let _ = (batch.compression(), batch.timestamp_type(), batch.is_control());
        at += batch.size_in_bytes();

        crcs_valid_so_far &= batch.validate_crc().is_ok();
        if crcs_valid_so_far {
            crc_valid_prefix = at;
        }
        let _ = EndTxnMarker::from_batch(&batch);
        if let Ok(records) = batch.records(MAX_UNCOMPRESSED) {
            // The leader's validation scan accepts exactly what decoding accepts.
            let mut scan = records.clone();
            for record in records {
                let summary = scan.next_summary().expect("a summary for every record");
                match (record, summary) {
                    (Ok(r), Ok(s)) => assert_eq!((r.offset_delta, r.timestamp), (s.offset_delta, s.timestamp)),
                    (Err(_), Err(_)) => break,
                    (r, s) => panic!("decoding ok: {}, scan ok: {}", r.is_ok(), s.is_ok()),
                }
            }
        }
    }
    assert!(batches.position() <= buf.len());
    // Log recovery truncates to this prefix: whole batches, each with a valid CRC.
    assert_eq!(valid_batches_len(&buf), crc_valid_prefix);
});
