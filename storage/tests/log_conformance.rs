//! Conformance suite for `Log`: what a Kafka log guarantees on append, read, roll,
//! index lookups, timestamp queries, retention, DeleteRecords and truncation.

mod common;

use bytes::{Bytes, BytesMut};
use common::*;
use strata_protocol::records::{
    Compression, EndTxnMarker, EndTxnMarkerBatch, RecordBatch, RecordBatchMut, TimestampType, NO_SEQUENCE,
};
use strata_storage::{AppendOrigin, Log, LogConfig, StorageError, TimestampAndOffset};

fn open(dir: &std::path::Path, config: LogConfig) -> Log {
    Log::open(dir, "orders.v1-eu", 3, config, true, 0).expect("open log")
}

#[test]
fn append_assigns_dense_offsets_and_stamps_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small_config());
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
    assert!(dir.path().join("orders.v1-eu-3/00000000000000000000.log").exists());

    let info = log.append(batch("a", 3, 10), 7, 100).unwrap();
    assert_eq!((info.first_offset, info.last_offset, info.log_append_time), (0, 2, -1));
    let info = log.append(concat(&[batch("b", 2, 11), batch("c", 4, 12)]), 7, 100).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (3, 8));
    assert_eq!(info.batches.len(), 2);
    assert_eq!((info.batches[1].base_offset, info.batches[1].last_offset), (5, 8));
    assert_eq!((info.max_timestamp, info.offset_of_max_timestamp), (12, 5));
    assert_eq!(log.log_end_offset(), 9);

    let read = log.read(0, 1 << 20, i64::MAX, false).unwrap();
    assert_eq!((read.log_start_offset, read.log_end_offset), (0, 9));
    for b in batches_of(&read) {
        assert_eq!(b.partition_leader_epoch(), 7);
    }
    let offsets: Vec<i64> = records_of(&read).iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (0..9).collect::<Vec<_>>());
    assert_eq!(records_of(&read)[5].value, Bytes::from("c-0"));
}

#[test]
fn producer_metadata_reaches_batch_info() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small_config());
    let mut b = strata_protocol::records::RecordBatchBuilder::new(0).producer(42, 3, 100).transactional(true);
    for i in 0..5 {
        b.append(&strata_protocol::records::NewRecord::new(i, None, Some(Bytes::from("x")))).unwrap();
    }
    let info = log.append(b.build().unwrap(), 0, 0).unwrap();
    let bi = &info.batches[0];
    assert_eq!((bi.producer_id, bi.producer_epoch, bi.base_sequence, bi.last_sequence), (42, 3, 100, 104));
    assert!(bi.is_transactional && !bi.is_control && bi.end_txn_marker.is_none());

    // Clients cannot write markers; the coordinator can.
    let marker = EndTxnMarkerBatch {
        producer_id: 42,
        producer_epoch: 3,
        partition_leader_epoch: 0,
        timestamp: 9,
        marker: EndTxnMarker::commit(4),
    }
    .build(0)
    .unwrap();
    assert!(matches!(log.append(marker.clone(), 0, 0), Err(StorageError::InvalidRecord { .. })));
    let info = log.append_with_origin(marker, 0, AppendOrigin::Coordinator, 0).unwrap();
    assert_eq!(info.first_offset, 5);
    assert!(info.batches[0].is_control);
    assert_eq!(info.batches[0].end_txn_marker, Some(EndTxnMarker::commit(4)));
    assert_eq!(info.batches[0].base_sequence, NO_SEQUENCE);
}

#[test]
fn every_codec_round_trips_through_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), LogConfig { segment_bytes: 1 << 20, ..small_config() });
    let codecs =
        [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];
    for (i, codec) in codecs.into_iter().enumerate() {
        log.append(batch_with(&format!("z{i}"), &[5, 1, 9], codec), 0, 0).unwrap();
    }
    let all = read_all(&log);
    assert_eq!(all.len(), 15);
    assert_eq!(all[13].value, Bytes::from("z4-1"));
    assert_eq!(all[13].timestamp, 1);
}

#[test]
fn read_starts_at_the_batch_containing_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small_config());
    log.append(batch("a", 5, 1), 0, 0).unwrap(); // 0..=4
    log.append(batch("b", 5, 1), 0, 0).unwrap(); // 5..=9
    let read = log.read(7, 1 << 20, i64::MAX, false).unwrap();
    let batches = batches_of(&read);
    assert_eq!(batches[0].base_offset(), 5);
    assert_eq!(batches.len(), 1);
    // The slice knows its first batch's header (fetch uses it to choose sendfile).
    assert_eq!(read.records.first_batch_header().unwrap(), Some(batches[0].header()));
    // At the log end: empty, not an error.
    let read = log.read(10, 1 << 20, i64::MAX, false).unwrap();
    assert!(read.records.is_empty());
    assert_eq!(read.records.first_batch_header().unwrap(), None);
    // Outside the log.
    assert!(matches!(
        log.read(11, 100, i64::MAX, true),
        Err(StorageError::OffsetOutOfRange { offset: 11, .. })
    ));
    assert!(matches!(log.read(-1, 100, i64::MAX, true), Err(StorageError::OffsetOutOfRange { .. })));
}

#[test]
fn read_respects_byte_and_offset_limits() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), LogConfig { segment_bytes: 1 << 20, ..small_config() });
    let a = batch("a", 3, 1);
    let size = a.len();
    for tag in ["a", "b", "c", "d"] {
        log.append(batch(tag, 3, 1), 0, 0).unwrap(); // batches at 0, 3, 6, 9
    }
    let count = |read: &strata_storage::LogReadInfo| batches_of(read).len();
    // Less than one batch: nothing, unless min_one_batch.
    assert_eq!(count(&log.read(0, size - 1, i64::MAX, false).unwrap()), 0);
    assert_eq!(count(&log.read(0, 1, i64::MAX, true).unwrap()), 1);
    // Exactly two batches, and a byte short of three.
    assert_eq!(count(&log.read(0, 2 * size, i64::MAX, false).unwrap()), 2);
    assert_eq!(count(&log.read(0, 3 * size - 1, i64::MAX, false).unwrap()), 2);
    assert_eq!(log.read(0, 2 * size, i64::MAX, false).unwrap().records.len() as usize, 2 * size);
    // max_offset is exclusive on base offsets: a batch starting at it is excluded, one
    // that merely contains it is included.
    assert_eq!(count(&log.read(0, 1 << 20, 6, false).unwrap()), 2);
    assert_eq!(count(&log.read(0, 1 << 20, 7, false).unwrap()), 3);
    assert_eq!(count(&log.read(3, 1 << 20, 3, true).unwrap()), 0);
    assert_eq!(count(&log.read(4, 1 << 20, 4, true).unwrap()), 1);
}

#[test]
fn rolls_by_size_and_lookups_work_across_many_segments() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small_config());
    let mut expected = Vec::new();
    for i in 0..200 {
        let n = 1 + i % 4;
        let info = log.append(batch(&format!("r{i}"), n, i as i64), 0, 0).unwrap();
        for (j, offset) in (info.first_offset..=info.last_offset).enumerate() {
            expected.push((offset, Bytes::from(format!("r{i}-{j}"))));
        }
    }
    assert!(log.num_segments() >= 8, "only {} segments", log.num_segments());
    for segment_base in log.segment_base_offsets() {
        let name = format!("orders.v1-eu-3/{segment_base:020}.log");
        let len = std::fs::metadata(dir.path().join(name)).unwrap().len();
        assert!(len <= 2048, "segment over segment.bytes: {len}");
    }
    // A read from any offset starts with the batch holding it and stays in one segment.
    for &(offset, ref value) in &expected {
        let read = log.read(offset, 1 << 20, i64::MAX, false).unwrap();
        let recs = records_of(&read);
        let first = batches_of(&read)[0].clone();
        assert!(first.base_offset() <= offset && offset <= first.last_offset());
        let rec = recs.iter().find(|r| r.offset == offset).unwrap();
        assert_eq!(&rec.value, value);
        assert!(read.records.len() <= 2048);
    }
    assert_eq!(read_all(&log).len(), expected.len());
}

#[test]
fn rolls_by_time_measured_from_the_first_batch() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), LogConfig { segment_ms: 1000, ..small_config() });
    log.append(batch("a", 1, 5_000), 0, 5_000).unwrap();
    log.append(batch("b", 1, 5_900), 0, 5_900).unwrap();
    assert_eq!(log.num_segments(), 1);
    log.append(batch("c", 1, 6_001), 0, 6_001).unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0, 2]);
}

#[test]
fn rolls_when_the_index_is_full() {
    let dir = tempfile::tempdir().unwrap();
    // 48-byte indexes: 6 offset entries, 4 time entries (one kept for the final entry).
    let config = LogConfig {
        segment_index_bytes: 48,
        index_interval_bytes: 0,
        segment_bytes: 1 << 20,
        ..small_config()
    };
    let log = open(dir.path(), config);
    for i in 0..40 {
        log.append(batch("x", 1, i), 0, 0).unwrap();
    }
    assert!(log.num_segments() >= 5, "{} segments", log.num_segments());
    assert_eq!(read_all(&log).len(), 40);
}

#[test]
fn explicit_roll_and_empty_roll() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small_config());
    log.roll().unwrap();
    assert_eq!(log.num_segments(), 1, "rolling an empty segment is a no-op");
    log.append(batch("a", 2, 1), 0, 0).unwrap();
    log.roll().unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0, 2]);
    // The rolled segment's indexes are trimmed to their entries.
    let index = std::fs::metadata(dir.path().join("orders.v1-eu-3/00000000000000000000.index")).unwrap();
    assert!(index.len().is_multiple_of(8));
    assert!(index.len() < 4096);
    log.append(batch("b", 1, 1), 0, 0).unwrap();
    assert_eq!(read_all(&log).len(), 3);
}

/// Brute force: first record with offset >= start and timestamp >= ts.
fn brute_offset_for_timestamp(all: &[Rec], ts: i64) -> Option<TimestampAndOffset> {
    all.iter()
        .find(|r| r.timestamp >= ts)
        .map(|r| TimestampAndOffset { timestamp: r.timestamp, offset: r.offset })
}

#[test]
fn offset_for_timestamp_and_max_timestamp_match_brute_force() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small_config());
    let codecs = [Compression::None, Compression::Lz4, Compression::Zstd];
    let mut state = 7u64;
    for i in 0..120 {
        let n = 1 + i % 5;
        let ts: Vec<i64> = (0..n)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                1_000 + i as i64 * 10 + (state >> 60) as i64 * 7 - 40
            })
            .collect();
        log.append(batch_with("t", &ts, codecs[i % 3]), 0, 0).unwrap();
    }
    assert!(log.num_segments() > 3);
    let all = read_all(&log);
    for ts in (900..2_400).step_by(13) {
        assert_eq!(log.offset_for_timestamp(ts).unwrap(), brute_offset_for_timestamp(&all, ts), "ts {ts}");
    }
    assert_eq!(log.offset_for_timestamp(i64::MAX).unwrap(), None);
    let max = all.iter().map(|r| r.timestamp).max().unwrap();
    let first_max = all.iter().find(|r| r.timestamp == max).unwrap().offset;
    let expected = Some(TimestampAndOffset { timestamp: max, offset: first_max });
    assert_eq!(log.max_timestamp().unwrap(), expected);

    // Both survive a clean restart (the time index keeps each segment's max).
    log.close().unwrap();
    drop(log);
    let log = open(dir.path(), small_config());
    assert_eq!(log.max_timestamp().unwrap(), expected);
    for ts in (900..2_400).step_by(29) {
        assert_eq!(log.offset_for_timestamp(ts).unwrap(), brute_offset_for_timestamp(&all, ts), "ts {ts}");
    }
}

#[test]
fn log_append_time_stamps_batches_and_fixes_crc() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { message_timestamp_type: TimestampType::LogAppendTime, ..small_config() };
    let log = open(dir.path(), config);
    let info = log.append(batch_with("x", &[1, 2, 3], Compression::Gzip), 0, 777).unwrap();
    assert_eq!((info.log_append_time, info.max_timestamp), (777, 777));
    let read = log.read(0, 1 << 20, i64::MAX, false).unwrap();
    let b = &batches_of(&read)[0];
    assert_eq!((b.timestamp_type(), b.max_timestamp()), (TimestampType::LogAppendTime, 777));
    assert!(records_of(&read).iter().all(|r| r.timestamp == 777));
    assert_eq!(
        log.offset_for_timestamp(700).unwrap(),
        Some(TimestampAndOffset { timestamp: 777, offset: 0 })
    );
    assert_eq!(log.max_timestamp().unwrap(), Some(TimestampAndOffset { timestamp: 777, offset: 0 }));
}

#[test]
fn compression_type_recompresses_client_batches_and_keeps_markers_plain() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { compression: Some(Compression::Zstd), ..small_config() };
    let log = open(dir.path(), config);
    let sent = concat(&[
        batch_with("g", &[1, 2, 3], Compression::Gzip),
        batch_with("n", &[4, 5], Compression::None),
        batch_with("z", &[6], Compression::Zstd),
    ]);
    let info = log.append(sent.clone(), 0, 100).unwrap();
    assert_eq!((info.first_offset, info.last_offset, info.max_timestamp), (0, 5, 6));
    // An idempotent producer's retry of a recompressed batch is still a duplicate.
    let first = log.append(idempotent(7, 0, 0, 2), 0, 100).unwrap();
    let retry = log.append(idempotent(7, 0, 0, 2), 0, 100).unwrap();
    assert_eq!((retry.first_offset, retry.duplicate), (first.first_offset, true));
    log.append(transactional(8, 0, 0, 1), 0, 100).unwrap();
    end_txn(&log, 8, 0, true);

    let read = log.read(0, 1 << 20, i64::MAX, false).unwrap();
    let codecs: Vec<Compression> = batches_of(&read).iter().map(|b| b.compression().unwrap()).collect();
    use Compression::{None as Plain, Zstd};
    assert_eq!(
        codecs,
        vec![Zstd, Zstd, Zstd, Zstd, Zstd, Plain],
        "every data batch in zstd, the marker plain"
    );
    let b = &batches_of(&read)[3];
    assert_eq!((b.producer_id(), b.producer_epoch(), b.base_sequence()), (7, 0, 0));
    let values: Vec<Bytes> = records_of(&read).iter().map(|r| r.value.clone()).take(6).collect();
    let sent_values: Vec<Bytes> = {
        let mut all = Vec::new();
        for b in strata_protocol::records::RecordBatches::new(sent) {
            for r in b.unwrap().records(1 << 20).unwrap().collect_all().unwrap() {
                all.push(r.value.unwrap());
            }
        }
        all
    };
    assert_eq!(values, sent_values);

    // `uncompressed` decompresses; `producer` (None) keeps what was sent.
    log.update_config(LogConfig { compression: Some(Compression::None), ..small_config() }).unwrap();
    let at = log.append(batch_with("u", &[7], Compression::Lz4), 0, 100).unwrap().first_offset;
    log.update_config(small_config()).unwrap();
    log.append(batch_with("p", &[8], Compression::Snappy), 0, 100).unwrap();
    let read = log.read(at, 1 << 20, i64::MAX, false).unwrap();
    let codecs: Vec<Compression> = batches_of(&read).iter().map(|b| b.compression().unwrap()).collect();
    assert_eq!(codecs, vec![Compression::None, Compression::Snappy]);
}

#[test]
fn a_batch_recompressed_past_max_message_bytes_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config =
        LogConfig { compression: Some(Compression::None), max_message_bytes: 2_000, ..small_config() };
    let log = open(dir.path(), config);
    let mut b = strata_protocol::records::RecordBatchBuilder::new(0).compression(Compression::Gzip);
    b.append(&strata_protocol::records::NewRecord::new(1, None, Some(Bytes::from(vec![b'a'; 10_000]))))
        .unwrap();
    let small = b.build().unwrap();
    assert!(small.len() < 2_000);
    let err = log.append(small, 0, 0).unwrap_err();
    assert!(matches!(err, StorageError::RecordTooLarge { .. }), "{err:?}");
    assert_eq!(log.log_end_offset(), 0, "nothing written");
}

#[test]
fn create_time_max_timestamp_is_corrected_from_records() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small_config());
    let mut lying = BytesMut::from(&batch_with("x", &[5, 50, 7], Compression::None)[..]);
    RecordBatchMut::new(&mut lying).unwrap().set_max_timestamp(TimestampType::CreateTime, 9_999);
    let info = log.append(lying.freeze(), 0, 0).unwrap();
    assert_eq!(info.max_timestamp, 50);
    let read = log.read(0, 1 << 20, i64::MAX, false).unwrap();
    assert_eq!(batches_of(&read)[0].max_timestamp(), 50);
}

#[test]
fn invalid_appends_are_rejected_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), LogConfig { max_message_bytes: 300, ..small_config() });
    log.append(batch("ok", 1, 1), 0, 0).unwrap();
    let good = batch("g", 2, 1);

    let mut bad_crc = good.to_vec();
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 0xff;
    let err = log.append(concat(&[good.clone(), Bytes::from(bad_crc)]), 0, 0).unwrap_err();
    assert!(matches!(err, StorageError::CorruptRecord { batch_index: 1, .. }), "{err:?}");

    let torn = good.slice(..good.len() - 3);
    assert!(matches!(log.append(torn, 0, 0), Err(StorageError::CorruptRecord { .. })));

    let mut old_magic = good.to_vec();
    old_magic[16] = 1;
    assert!(matches!(log.append(Bytes::from(old_magic), 0, 0), Err(StorageError::InvalidRecord { .. })));

    let big = batch_with("big", &[1; 40], Compression::None);
    assert!(matches!(log.append(big, 0, 0), Err(StorageError::RecordTooLarge { max: 300, .. })));

    // A count that disagrees with the offsets (CRC fixed so only the count is wrong).
    let mut wrong_count = BytesMut::from(&good[..]);
    wrong_count[57..61].copy_from_slice(&5i32.to_be_bytes());
    RecordBatchMut::new(&mut wrong_count).unwrap().recompute_crc();
    assert!(matches!(log.append(wrong_count.freeze(), 0, 0), Err(StorageError::InvalidRecord { .. })));

    assert_eq!(log.log_end_offset(), 1);
    assert_eq!(read_all(&log).len(), 1);
    let info = log.append(Bytes::new(), 0, 0).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (-1, -1));
}

#[test]
fn follower_append_keeps_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let leader_dir = tempfile::tempdir().unwrap();
    let leader = open(leader_dir.path(), small_config());
    leader.append(batch("a", 3, 1), 4, 0).unwrap();
    leader.append(batch("b", 2, 1), 5, 0).unwrap();
    let data = leader.read(0, 1 << 20, i64::MAX, false).unwrap().records.read_bytes().unwrap();

    let follower = open(dir.path(), small_config());
    let info = follower.append_as_follower(data.clone()).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (0, 4));
    assert_eq!(read_all(&follower), read_all(&leader));
    let read = follower.read(0, 1 << 20, i64::MAX, false).unwrap();
    assert_eq!(batches_of(&read)[1].partition_leader_epoch(), 5);
    // Going backwards is refused.
    assert!(matches!(follower.append_as_follower(data), Err(StorageError::UnexpectedAppendOffset { .. })));
    // A gap (compacted leader) is accepted.
    let mut gapped = BytesMut::from(&batch("c", 2, 1)[..]);
    RecordBatchMut::new(&mut gapped).unwrap().set_base_offset(10);
    follower.append_as_follower(gapped.freeze()).unwrap();
    assert_eq!(follower.log_end_offset(), 12);
    let read = follower.read(6, 1 << 20, i64::MAX, false).unwrap();
    assert_eq!(batches_of(&read)[0].base_offset(), 10);
}

#[test]
fn retention_by_time_deletes_old_segments_and_rolls_an_expired_active_one() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), LogConfig { retention_ms: 1_000, ..small_config() });
    for i in 0..60 {
        log.append(batch("old", 2, 10_000 + i), 0, 10_000).unwrap();
    }
    log.roll().unwrap();
    for i in 0..10 {
        log.append(batch("new", 2, 20_000 + i), 0, 20_000).unwrap();
    }
    let segments = log.num_segments();
    // Nothing at or above the high watermark may go: with it at 0, nothing is deleted.
    assert_eq!(log.apply_retention_up_to(20_500, 0).unwrap(), 0);
    let deleted = log.apply_retention(20_500).unwrap();
    assert!(deleted > 0 && log.num_segments() == segments - deleted);
    assert_eq!(log.log_start_offset(), 120);
    assert!(read_all(&log).iter().all(|r| r.value.starts_with(b"new")));
    assert!(matches!(log.read(0, 100, i64::MAX, true), Err(StorageError::OffsetOutOfRange { .. })));

    // Everything expired: the active segment is rolled and deleted, one empty remains.
    log.apply_retention(1_000_000).unwrap();
    assert_eq!(log.num_segments(), 1);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (140, 140));
    assert_eq!(log.size_in_bytes(), 0);
    log.append(batch("after", 1, 1_000_000), 0, 1_000_000).unwrap();
    assert_eq!(read_all(&log)[0].offset, 140);
}

#[test]
fn retention_by_bytes_keeps_the_log_under_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), LogConfig { retention_bytes: 5_000, ..small_config() });
    for i in 0..100 {
        log.append(batch("x", 3, i), 0, 0).unwrap();
    }
    let before = log.size_in_bytes();
    let deleted = log.apply_retention(0).unwrap();
    assert!(deleted > 0);
    // Kafka's rule: delete oldest segments only while the log stays at or above the
    // limit without them, so the result is the smallest suffix of segments >= the limit.
    let after = log.size_in_bytes();
    let first = log.segment_base_offsets()[0];
    let first_size =
        std::fs::metadata(dir.path().join(format!("orders.v1-eu-3/{first:020}.log"))).unwrap().len();
    assert!(after >= 5_000 && after - first_size < 5_000, "{before} -> {after}");
    assert_eq!(log.log_start_offset(), log.segment_base_offsets()[0]);
    assert_eq!(read_all(&log).last().unwrap().offset, 299);
}

#[test]
fn file_slice_outlives_segment_deletion() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), LogConfig { retention_bytes: 0, ..small_config() });
    log.append(batch("keep", 3, 1), 0, 0).unwrap();
    let read = log.read(0, 1 << 20, i64::MAX, false).unwrap();
    log.apply_retention(0).unwrap();
    assert_eq!(log.log_start_offset(), 3);
    assert_eq!(records_of(&read).len(), 3, "slice still readable after deletion");
}

#[test]
fn delete_records_before_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small_config());
    for i in 0..80 {
        log.append(batch("x", 2, i), 0, 0).unwrap();
    }
    let segments = log.num_segments();
    assert_eq!(log.delete_records_before(101).unwrap(), 101);
    assert!(log.num_segments() < segments);
    assert!(log.segment_base_offsets()[0] <= 101);
    assert_eq!(log.delete_records_before(50).unwrap(), 101, "never goes backwards");
    assert!(matches!(log.delete_records_before(1_000), Err(StorageError::OffsetOutOfRange { .. })));
    assert!(matches!(log.read(100, 100, i64::MAX, true), Err(StorageError::OffsetOutOfRange { .. })));
    assert_eq!(read_all(&log)[0].offset, 101);
    assert_eq!(log.offset_for_timestamp(0).unwrap().map(|t| t.offset), Some(101));

    // Unclean restart, then clean restart.
    drop(log);
    let log = Log::open(dir.path(), "orders.v1-eu", 3, small_config(), false, 0).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (101, 160));
    log.close().unwrap();
    drop(log);
    let log = open(dir.path(), small_config());
    assert_eq!(log.log_start_offset(), 101);
    // Up to the log end is allowed: the log becomes empty but keeps its offsets.
    assert_eq!(log.delete_records_before(160).unwrap(), 160);
    assert!(read_all(&log).is_empty());
    log.append(batch("y", 1, 1), 0, 0).unwrap();
    assert_eq!(read_all(&log)[0].offset, 160);
}

#[test]
fn truncate_to_removes_the_tail_and_appends_continue() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small_config());
    for i in 0..60 {
        log.append(batch(&format!("b{i}"), 2, i), 0, 0).unwrap(); // batch i at 2i
    }
    let segments = log.num_segments();
    log.truncate_to(30).unwrap();
    assert_eq!(log.log_end_offset(), 30);
    assert!(log.num_segments() < segments);
    let all = read_all(&log);
    assert_eq!(all.len(), 30);
    assert_eq!(log.offset_for_timestamp(40).unwrap(), None);
    assert_eq!(log.max_timestamp().unwrap().map(|t| t.timestamp), Some(14));
    log.append(batch("new", 3, 100), 0, 0).unwrap();
    let all = read_all(&log);
    assert_eq!(all.len(), 33);
    assert_eq!(all[30].value, Bytes::from("new-0"));
    assert_eq!(all[30].offset, 30);

    // Mid-batch: cut at the start of the containing batch.
    log.truncate_to(31).unwrap();
    assert_eq!(log.log_end_offset(), 30);
    // At or above the end: no-op.
    log.truncate_to(1_000).unwrap();
    assert_eq!(log.log_end_offset(), 30);
    // Below the start: the log restarts empty at that offset.
    log.delete_records_before(20).unwrap();
    log.truncate_to(10).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset(), log.num_segments()), (10, 10, 1));
    log.append(batch("z", 1, 1), 0, 0).unwrap();
    assert_eq!(read_all(&log)[0].offset, 10);
    log.close().unwrap();
    drop(log);
    let log = open(dir.path(), small_config());
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (10, 11));
}

#[test]
fn closed_and_deleted_logs_refuse_calls() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small_config());
    log.append(batch("x", 1, 1), 0, 0).unwrap();
    log.flush().unwrap();
    log.maybe_flush(10).unwrap();
    log.close().unwrap();
    assert!(matches!(log.append(batch("x", 1, 1), 0, 0), Err(StorageError::LogClosed { .. })));
    assert!(matches!(log.read(0, 10, i64::MAX, true), Err(StorageError::LogClosed { .. })));
    let log = open(dir.path(), small_config());
    log.delete().unwrap();
    assert!(!dir.path().join("orders.v1-eu-3").exists());
}

#[test]
fn invalid_config_and_names_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let bad = LogConfig { segment_bytes: 1 << 40, ..LogConfig::default() };
    assert!(matches!(
        Log::open(dir.path(), "t", 0, bad, true, 0),
        Err(StorageError::InvalidConfig { key: "segment.bytes", .. })
    ));
    for (topic, partition) in [("", 0), ("..", 0), ("a/b", 0), ("t", -1)] {
        assert!(matches!(
            Log::open(dir.path(), topic, partition, LogConfig::default(), true, 0),
            Err(StorageError::InvalidTopicPartition { .. })
        ));
    }
    let log = open(dir.path(), small_config());
    assert!(log.update_config(LogConfig { segment_index_bytes: 3, ..small_config() }).is_err());
    log.update_config(LogConfig { segment_bytes: 100_000, ..small_config() }).unwrap();
    assert_eq!(log.config().segment_bytes, 100_000);
}

#[test]
fn default_config_matches_kafka() {
    let c = LogConfig::default();
    assert_eq!(c.segment_bytes, 1_073_741_824);
    assert_eq!(c.segment_ms, 604_800_000);
    assert_eq!(c.retention_ms, 604_800_000);
    assert_eq!(c.retention_bytes, -1);
    assert_eq!(c.index_interval_bytes, 4096);
    assert_eq!(c.segment_index_bytes, 10_485_760);
    assert_eq!(c.max_message_bytes, 1_048_588);
    assert_eq!(c.file_delete_delay_ms, 60_000);
    assert_eq!(c.message_timestamp_type, TimestampType::CreateTime);
    c.validate().unwrap();
}

#[test]
fn deleted_files_linger_for_the_delete_delay() {
    let dir = tempfile::tempdir().unwrap();
    let log =
        open(dir.path(), LogConfig { file_delete_delay_ms: 1_000, retention_bytes: 0, ..small_config() });
    log.append(batch("x", 1, 1), 0, 5_000).unwrap();
    log.apply_retention(5_000).unwrap();
    let part = dir.path().join("orders.v1-eu-3");
    let deleted = part.join("00000000000000000000.log.deleted");
    assert!(deleted.exists());
    log.maybe_flush(5_500).unwrap();
    assert!(deleted.exists());
    log.maybe_flush(6_000).unwrap();
    assert!(!deleted.exists());
    let _ = RecordBatch::parse(&batch("x", 1, 1)).unwrap();
}

#[test]
fn retention_removes_segments_below_the_log_start_offset() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small_config());
    log.append(batch("a", 4, 1), 0, 0).unwrap();
    log.delete_records_before(4).unwrap();
    assert_eq!(log.num_segments(), 1, "the active segment cannot go yet");
    log.roll().unwrap();
    log.append(batch("b", 2, 1), 0, 0).unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0, 4]);
    assert_eq!(log.apply_retention(0).unwrap(), 1);
    assert_eq!(log.segment_base_offsets(), vec![4]);
    assert_eq!((log.log_start_offset(), read_all(&log).len()), (4, 2));
}

#[test]
fn concurrent_appends_and_reads_keep_offsets_dense() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Log>();
    assert_send_sync::<strata_storage::LogManager>();

    let dir = tempfile::tempdir().unwrap();
    let log = std::sync::Arc::new(open(dir.path(), small_config()));
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let log = log.clone();
            std::thread::spawn(move || {
                for i in 0..100 {
                    let info = log.append(batch(&format!("w{w}-{i}"), 1 + i % 3, i as i64), 0, 0).unwrap();
                    assert_eq!(info.last_offset - info.first_offset, (i % 3) as i64);
                }
            })
        })
        .collect();
    let reader = {
        let log = log.clone();
        std::thread::spawn(move || {
            for _ in 0..200 {
                let end = log.log_end_offset();
                if end > 0 {
                    let read = log.read(end / 2, 4096, i64::MAX, true).unwrap();
                    assert!(!batches_of(&read).is_empty());
                }
            }
        })
    };
    for w in writers {
        w.join().unwrap();
    }
    reader.join().unwrap();
    let all = read_all(&log);
    assert_eq!(all.len(), 3 * (34 + 33 * 2 + 33 * 3));
    assert!(all.windows(2).all(|w| w[1].offset == w[0].offset + 1));
}
