//! Unit tests of the record batch view, builder, codecs and hostile-input handling.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;

use super::*;

const ALL_CODECS: [Compression; 5] =
    [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];

const LIMIT: usize = 16 << 20;

fn sample_records(n: usize) -> Vec<NewRecord> {
    (0..n)
        .map(|i| {
            let key = (i % 3 != 0).then(|| Bytes::from(format!("key-{i}")));
            let value = (i % 5 != 4).then(|| Bytes::from(format!("value-{i}-").repeat(i % 7 + 1)));
            let mut r = NewRecord::new(1_700_000_000_000 + (i as i64 * 37) % 11 - 5, key, value);
            if i % 2 == 0 {
                r = r.with_header("h1", Some(Bytes::from_static(b"v1"))).with_header("h2", None);
            }
            r
        })
        .collect()
}

fn build(base_offset: i64, codec: Compression, records: &[NewRecord]) -> Bytes {
    let mut b =
        RecordBatchBuilder::new(base_offset).producer(42, 3, 17).compression(codec).partition_leader_epoch(9);
    for r in records {
        b.append(r).unwrap();
    }
    b.build().unwrap()
}

fn assert_records_match(batch: &RecordBatch, expected: &[NewRecord]) {
    let got = batch.records(LIMIT).unwrap().collect_all().unwrap();
    assert_eq!(got.len(), expected.len());
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        assert_eq!(g.offset, batch.base_offset() + i as i64);
        assert_eq!(g.offset_delta, i as i32);
        assert_eq!(g.timestamp, e.timestamp);
        assert_eq!(g.key, e.key);
        assert_eq!(g.value, e.value);
        assert_eq!(g.headers, e.headers);
    }
}

#[test]
fn round_trip_every_codec() {
    let records = sample_records(50);
    for codec in ALL_CODECS {
        let bytes = build(100, codec, &records);
        let batch = RecordBatch::parse(&bytes).unwrap();
        batch.validate_crc().unwrap();
        assert_eq!(batch.size_in_bytes(), bytes.len());
        assert_eq!(batch.batch_length() as usize, bytes.len() - LOG_OVERHEAD);
        assert_eq!(batch.compression().unwrap(), codec);
        assert_eq!(batch.magic(), 2);
        assert_eq!(batch.base_offset(), 100);
        assert_eq!(batch.last_offset_delta(), 49);
        assert_eq!(batch.last_offset(), 149);
        assert_eq!(batch.next_offset(), 150);
        assert_eq!(batch.records_count(), 50);
        assert_eq!(batch.producer_id(), 42);
        assert_eq!(batch.producer_epoch(), 3);
        assert_eq!(batch.base_sequence(), 17);
        assert_eq!(batch.last_sequence(), 66);
        assert_eq!(batch.partition_leader_epoch(), 9);
        assert_eq!(batch.base_timestamp(), records[0].timestamp);
        assert_eq!(batch.max_timestamp(), records.iter().map(|r| r.timestamp).max().unwrap());
        assert_eq!(batch.timestamp_type(), TimestampType::CreateTime);
        assert!(!batch.is_transactional() && !batch.is_control() && !batch.has_delete_horizon());
        assert_records_match(&batch, &records);
        let header = RecordBatchHeader::parse(&bytes[..BATCH_HEADER_SIZE]).unwrap();
        assert_eq!(header, batch.header());
        assert_eq!(header.size_in_bytes(), bytes.len());
        assert_eq!((header.last_offset(), header.next_offset()), (149, 150));
        assert!(RecordBatchHeader::parse(&bytes[..BATCH_HEADER_SIZE - 1]).is_err());
    }
}

/// Headers held as plain slices: what a producer's own header type looks like to the builder.
struct SliceHeader<'a>(&'a [u8], Option<&'a [u8]>);

impl HeaderParts for SliceHeader<'_> {
    fn key(&self) -> &[u8] {
        self.0
    }

    fn value(&self) -> Option<&[u8]> {
        self.1
    }
}

#[test]
fn records_appended_as_borrowed_parts_build_the_same_bytes() {
    let records = sample_records(40);
    for codec in ALL_CODECS {
        let mut b =
            RecordBatchBuilder::new(7).producer(42, 3, 17).compression(codec).partition_leader_epoch(9);
        for r in &records {
            let headers: Vec<SliceHeader<'_>> =
                r.headers.iter().map(|h| SliceHeader(&h.key, h.value.as_deref())).collect();
            b.append_parts(r.timestamp, r.key.as_deref(), r.value.as_deref(), &headers).unwrap();
        }
        assert_eq!(b.build().unwrap(), build(7, codec, &records), "{codec:?}");
    }
}

#[test]
fn snappy_raw_and_xerial_both_decode() {
    let records = sample_records(2000); // > 32 KiB so xerial has several blocks
    for format in [SnappyFormat::Raw, SnappyFormat::Xerial] {
        let mut b = RecordBatchBuilder::new(0).compression(Compression::Snappy).snappy_format(format);
        for r in &records {
            b.append(r).unwrap();
        }
        let bytes = b.build().unwrap();
        let batch = RecordBatch::parse(&bytes).unwrap();
        let payload = batch.records_payload();
        assert_eq!(payload.starts_with(b"\x82SNAPPY\0"), format == SnappyFormat::Xerial);
        assert_records_match(&batch, &records);
    }
}

#[test]
fn header_patches_do_not_break_crc() {
    let bytes = build(0, Compression::Lz4, &sample_records(5));
    let crc_before = RecordBatch::parse(&bytes).unwrap().crc();
    let mut buf = BytesMut::from(&bytes[..]);
    let mut m = RecordBatchMut::new(&mut buf).unwrap();
    m.set_base_offset(1_000);
    m.set_partition_leader_epoch(77);
    let batch = RecordBatch::parse(&buf.freeze()).unwrap();
    batch.validate_crc().unwrap();
    assert_eq!(batch.crc(), crc_before);
    assert_eq!((batch.base_offset(), batch.partition_leader_epoch()), (1_000, 77));
    assert_eq!(batch.records(LIMIT).unwrap().next().unwrap().unwrap().offset, 1_000);
}

#[test]
fn log_append_time_sets_bit_max_timestamp_and_crc() {
    for codec in [Compression::None, Compression::Zstd] {
        let records = sample_records(4);
        let bytes = build(0, codec, &records);
        let mut buf = BytesMut::from(&bytes[..]);
        RecordBatchMut::new(&mut buf).unwrap().set_max_timestamp_and_log_append_time(123_456);
        let batch = RecordBatch::parse(&buf.freeze()).unwrap();
        batch.validate_crc().unwrap();
        assert_eq!(batch.timestamp_type(), TimestampType::LogAppendTime);
        assert_eq!(batch.max_timestamp(), 123_456);
        assert_eq!(batch.compression().unwrap(), codec);
        for r in batch.records(LIMIT).unwrap() {
            assert_eq!(r.unwrap().timestamp, 123_456);
        }
    }
    // Built directly as LogAppendTime.
    let mut b = RecordBatchBuilder::new(0).log_append_time(99);
    b.append(&NewRecord::new(5, None, None)).unwrap();
    let batch = RecordBatch::parse(&b.build().unwrap()).unwrap();
    batch.validate_crc().unwrap();
    assert_eq!((batch.timestamp_type(), batch.max_timestamp()), (TimestampType::LogAppendTime, 99));
}

#[test]
fn crc_detects_any_flipped_covered_byte() {
    let bytes = build(0, Compression::None, &sample_records(3));
    for i in CRC_START..bytes.len() {
        let mut copy = bytes.to_vec();
        copy[i] ^= 0x01;
        let batch = RecordBatch::parse(&Bytes::from(copy)).unwrap();
        assert!(matches!(batch.validate_crc(), Err(RecordsError::CrcMismatch { .. })), "byte {i}");
    }
}

#[test]
fn iterate_batches_with_torn_and_garbage_tails() {
    let a = build(0, Compression::None, &sample_records(3));
    let b = build(3, Compression::Gzip, &sample_records(4));
    let c = build(7, Compression::None, &sample_records(2));
    let mut all = BytesMut::new();
    for x in [&a, &b, &c] {
        all.extend_from_slice(x);
    }
    let all = all.freeze();
    let offsets: Vec<i64> = RecordBatches::new(all.clone()).map(|b| b.unwrap().base_offset()).collect();
    assert_eq!(offsets, [0, 3, 7]);
    assert_eq!(valid_batches_len(&all), all.len());

    // Torn inside the last batch, at every possible cut.
    for cut in a.len() + b.len()..all.len() {
        let torn = all.slice(..cut);
        let mut it = RecordBatches::new(torn.clone());
        assert!(it.next().unwrap().is_ok());
        assert!(it.next().unwrap().is_ok());
        if cut > a.len() + b.len() {
            assert!(matches!(it.next(), Some(Err(RecordsError::Truncated { .. }))), "cut {cut}");
        }
        assert!(it.next().is_none());
        assert_eq!(it.position(), a.len() + b.len());
        assert_eq!(valid_batches_len(&torn), a.len() + b.len());
    }

    // Garbage after whole batches.
    let mut garbage = all.to_vec();
    garbage.extend_from_slice(&[0xAB; 100]);
    assert_eq!(valid_batches_len(&Bytes::from(garbage)), all.len());

    // A corrupt CRC in the middle stops the valid prefix there.
    let mut bad = all.to_vec();
    bad[a.len() + BATCH_HEADER_SIZE + 2] ^= 0xff;
    assert_eq!(valid_batches_len(&Bytes::from(bad)), a.len());
}

#[test]
fn parse_rejects_bad_headers() {
    let good = build(0, Compression::None, &sample_records(1));
    // Too short to hold the magic.
    assert!(matches!(RecordBatch::parse(&good.slice(..10)), Err(RecordsError::Truncated { .. })));
    // Wrong magic.
    let mut m = good.to_vec();
    m[16] = 1;
    assert!(matches!(RecordBatch::parse(&Bytes::from(m)), Err(RecordsError::InvalidMagic(1))));
    // Negative, too small and too large batch lengths.
    for len in [-1i32, 0, 48, i32::MAX] {
        let mut m = good.to_vec();
        m[8..12].copy_from_slice(&len.to_be_bytes());
        let err = RecordBatch::parse(&Bytes::from(m)).unwrap_err();
        assert!(
            matches!(err, RecordsError::InvalidBatchLength(_) | RecordsError::Truncated { .. }),
            "{len}: {err:?}"
        );
    }
    // Unknown compression codec.
    let mut m = good.to_vec();
    m[22] |= 0x07;
    let batch = RecordBatch::parse(&Bytes::from(m)).unwrap();
    assert!(matches!(batch.compression(), Err(RecordsError::UnknownCompression(7))));
    assert!(batch.records(LIMIT).is_err());
}

/// Writes `records_count` and fixes the CRC so only the hostile field is wrong.
fn with_count(bytes: &Bytes, count: i32) -> Bytes {
    let mut m = BytesMut::from(&bytes[..]);
    m[57..61].copy_from_slice(&count.to_be_bytes());
    RecordBatchMut::new(&mut m).unwrap().recompute_crc();
    m.freeze()
}

/// Replaces the records section with `payload`, fixing length and CRC.
fn with_payload(bytes: &Bytes, payload: &[u8]) -> Bytes {
    let mut m = BytesMut::from(&bytes[..BATCH_HEADER_SIZE]);
    m.extend_from_slice(payload);
    let len = (m.len() - LOG_OVERHEAD) as i32;
    m[8..12].copy_from_slice(&len.to_be_bytes());
    RecordBatchMut::new(&mut m).unwrap().recompute_crc();
    m.freeze()
}

#[test]
fn hostile_counts_and_lengths_fail_without_big_allocations() {
    let good = build(0, Compression::None, &sample_records(3));
    // A huge declared count with three real records: error after them, no huge Vec.
    let batch = RecordBatch::parse(&with_count(&good, i32::MAX)).unwrap();
    let records = batch.records(LIMIT).unwrap();
    assert_eq!(records.remaining(), i32::MAX as u32);
    assert!(records.collect_all().is_err());
    // Negative count.
    let batch = RecordBatch::parse(&with_count(&good, -5)).unwrap();
    assert!(matches!(batch.records(LIMIT), Err(RecordsError::InvalidRecordCount(-5))));
    // Fewer declared than present: trailing bytes.
    let batch = RecordBatch::parse(&with_count(&good, 2)).unwrap();
    assert!(matches!(batch.records(LIMIT).unwrap().collect_all(), Err(RecordsError::TrailingBytes(_))));

    let header_only = build(0, Compression::None, &[NewRecord::new(0, None, None)]);
    let mut hostile: Vec<Vec<u8>> = Vec::new();
    // length varint huge / negative
    hostile.push(vec![0xfe, 0xff, 0xff, 0xff, 0x0f]);
    hostile.push(vec![0x01]);
    // body: attrs, ts, offset, key len = 2^30
    let mut v = vec![0x10, 0, 0, 0];
    varint::put_varint(&mut v, 1 << 30);
    v.extend_from_slice(&[0; 11]);
    v[0] = (v.len() as u8 - 1) * 2;
    hostile.push(v);
    // header count = 2^30 in a small record
    let mut body = vec![0u8, 0, 0, 1, 1];
    varint::put_varint(&mut body, 1 << 30);
    body.extend_from_slice(&[0; 4]);
    let mut v = Vec::new();
    varint::put_varint(&mut v, body.len() as i32);
    v.extend_from_slice(&body);
    hostile.push(v);
    // negative key length other than -1
    let body = [0u8, 0, 0, 3, 1, 0];
    let mut v = Vec::new();
    varint::put_varint(&mut v, body.len() as i32);
    v.extend_from_slice(&body);
    hostile.push(v);
    for payload in hostile {
        let bytes = with_payload(&with_count(&header_only, 1), &payload);
        let batch = RecordBatch::parse(&bytes).unwrap();
        batch.validate_crc().unwrap();
        let result = batch.records(LIMIT).unwrap().collect_all();
        assert!(result.is_err(), "payload {payload:?} decoded: {result:?}");
    }
}

#[test]
fn recompressing_keeps_every_header_field_and_record() {
    let records = sample_records(40);
    for from in ALL_CODECS {
        let original = RecordBatch::parse(&build(7, from, &records)).unwrap();
        for to in ALL_CODECS {
            let bytes = original.recompressed(to, SnappyFormat::Xerial, LIMIT).unwrap();
            let batch = RecordBatch::parse(&bytes).unwrap();
            assert_eq!(batch.size_in_bytes(), bytes.len(), "{from:?} -> {to:?}: one whole batch");
            batch.validate_crc().unwrap();
            assert_eq!(batch.compression().unwrap(), to);
            let (a, b) = (original.header(), batch.header());
            assert_eq!(b.attributes & !0x07, a.attributes & !0x07, "only the codec bits change");
            assert_eq!((b.base_offset, b.partition_leader_epoch, b.last_offset_delta), (7, 9, 39));
            assert_eq!((b.base_timestamp, b.max_timestamp), (a.base_timestamp, a.max_timestamp));
            assert_eq!((b.producer_id, b.producer_epoch, b.base_sequence), (42, 3, 17));
            assert_eq!(b.records_count, a.records_count);
            assert_records_match(&batch, &records);
            if from == to {
                assert_eq!(bytes.as_ptr(), original.as_bytes().as_ptr(), "no copy when nothing changes");
            }
        }
    }
}

#[test]
fn recompressing_a_bomb_is_bounded() {
    let big = vec![NewRecord::new(0, None, Some(Bytes::from(vec![0u8; 1 << 20])))];
    let batch = RecordBatch::parse(&build(0, Compression::Gzip, &big)).unwrap();
    let err = batch.recompressed(Compression::Lz4, SnappyFormat::Xerial, 64 << 10).unwrap_err();
    assert!(matches!(err, RecordsError::DecompressedTooLarge { .. }), "{err:?}");
}

#[test]
fn decompression_is_bounded() {
    let zeros = vec![0u8; 4 << 20];
    for codec in ALL_CODECS {
        for format in [SnappyFormat::Raw, SnappyFormat::Xerial] {
            let compressed = compress(codec, &zeros, format).unwrap();
            assert!(matches!(
                decompress(codec, &compressed, 1 << 20),
                Err(RecordsError::DecompressedTooLarge { limit, .. }) if limit == 1 << 20
            ));
            assert_eq!(decompress(codec, &compressed, 4 << 20).unwrap().len(), 4 << 20);
        }
    }
    // A raw snappy block that claims 2^31 bytes is refused before allocating.
    let mut claim = Vec::new();
    let mut v: u64 = 1 << 31;
    while v >= 0x80 {
        claim.push((v as u8) | 0x80);
        v >>= 7;
    }
    claim.push(v as u8);
    assert!(decompress(Compression::Snappy, &claim, 1 << 20).is_err());
    // Garbage for each codec is an error, not a panic.
    for codec in [Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd] {
        assert!(decompress(codec, &[0xde, 0xad, 0xbe, 0xef, 1, 2, 3], 1 << 20).is_err());
    }
}

#[test]
fn control_batches_round_trip() {
    for marker in [EndTxnMarker::commit(5), EndTxnMarker::abort(-1)] {
        let spec = EndTxnMarkerBatch {
            producer_id: 1000,
            producer_epoch: 2,
            partition_leader_epoch: 4,
            timestamp: 1_234,
            marker,
        };
        let bytes = spec.build(55).unwrap();
        let batch = RecordBatch::parse(&bytes).unwrap();
        batch.validate_crc().unwrap();
        assert!(batch.is_control() && batch.is_transactional());
        assert_eq!((batch.base_offset(), batch.records_count()), (55, 1));
        assert_eq!((batch.producer_id(), batch.producer_epoch(), batch.base_sequence()), (1000, 2, -1));
        assert_eq!(EndTxnMarker::from_batch(&batch).unwrap(), Some(marker));
        assert_eq!(marker.is_commit(), marker.control_type == ControlRecordType::Commit);
    }
    // Data batches are not markers.
    let data = RecordBatch::parse(&build(0, Compression::None, &sample_records(1))).unwrap();
    assert_eq!(EndTxnMarker::from_batch(&data).unwrap(), None);
    // Keys: future versions are read, unknown types reported, short keys rejected.
    assert_eq!(ControlRecordType::parse_key(&[0, 1, 0, 1, 9, 9]).unwrap(), ControlRecordType::Commit);
    assert_eq!(ControlRecordType::parse_key(&[0, 0, 0, 2]).unwrap(), ControlRecordType::Unknown(2));
    assert!(ControlRecordType::parse_key(&[0, 0, 0]).is_err());
    assert!(ControlRecordType::parse_key(&[0xff, 0xff, 0, 0]).is_err());
    let short_value = Record {
        attributes: 0,
        offset: 0,
        offset_delta: 0,
        timestamp: 0,
        key: Some(ControlRecordType::Abort.encode_key()),
        value: Some(Bytes::from_static(&[0, 0, 0])),
        headers: vec![],
    };
    assert!(EndTxnMarker::from_record(&short_value).is_err());
}

#[test]
fn builder_rejects_empty_and_keeps_transactional_flag() {
    assert!(matches!(RecordBatchBuilder::new(0).build(), Err(RecordsError::EmptyBatch)));
    let mut b = RecordBatchBuilder::new(0).transactional(true).producer(1, 0, 0);
    assert!(b.is_empty());
    b.append(&NewRecord::new(1, None, Some(Bytes::from_static(b"x")))).unwrap();
    assert_eq!(b.len(), 1);
    let batch = RecordBatch::parse(&b.build().unwrap()).unwrap();
    assert!(batch.is_transactional() && !batch.is_control());
}

#[test]
fn last_sequence_wraps_like_kafka() {
    let mut b = RecordBatchBuilder::new(0).producer(1, 0, i32::MAX - 1);
    for _ in 0..4 {
        b.append(&NewRecord::new(0, None, None)).unwrap();
    }
    let batch = RecordBatch::parse(&b.build().unwrap()).unwrap();
    assert_eq!(batch.last_sequence(), 1);
}

fn arb_record() -> impl Strategy<Value = NewRecord> {
    let bytes = proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64).prop_map(Bytes::from));
    let header = (
        proptest::collection::vec(any::<u8>(), 0..8),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8)),
    );
    (any::<i64>(), bytes.clone(), bytes, proptest::collection::vec(header, 0..3)).prop_map(
        |(ts, k, v, hs)| {
            let mut r = NewRecord::new(ts / 4, k, v);
            for (hk, hv) in hs {
                r = r.with_header(hk, hv.map(Bytes::from));
            }
            r
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn prop_round_trip(records in proptest::collection::vec(arb_record(), 1..20), codec_ix in 0usize..5, base in 0i64..1 << 40) {
        let bytes = build(base, ALL_CODECS[codec_ix], &records);
        let batch = RecordBatch::parse(&bytes).unwrap();
        prop_assert!(batch.validate_crc().is_ok());
        assert_records_match(&batch, &records);
    }

    /// The validation scan accepts exactly what decoding accepts, with the same offset
    /// deltas and timestamps, on intact and on damaged record payloads.
    #[test]
    fn prop_summaries_agree_with_decoding(records in proptest::collection::vec(arb_record(), 1..8), flips in proptest::collection::vec((0usize..400, any::<u8>()), 0..4)) {
        let mut bytes = build(0, Compression::None, &records).to_vec();
        for (pos, val) in flips {
            let i = 61 + pos % (bytes.len() - 61);
            bytes[i] = val;
        }
        let batch = RecordBatch::parse(&Bytes::from(bytes)).unwrap();
        let decoded: Vec<_> = batch.records(1 << 16).unwrap().collect();
        let mut scan = batch.records(1 << 16).unwrap();
        let mut scanned = Vec::new();
        while let Some(s) = scan.next_summary() {
            scanned.push(s);
        }
        prop_assert_eq!(decoded.len(), scanned.len());
        for (d, s) in decoded.iter().zip(&scanned) {
            match (d, s) {
                (Ok(d), Ok(s)) => {
                    prop_assert_eq!(d.offset_delta, s.offset_delta);
                    prop_assert_eq!(d.timestamp, s.timestamp);
                }
                (Err(d), Err(s)) => prop_assert_eq!(d.to_string(), s.to_string()),
                (d, s) => prop_assert!(false, "decode {:?} but scan {:?}", d.is_ok(), s.is_ok()),
            }
        }
    }

    #[test]
    fn prop_random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        let data = Bytes::from(data);
        for batch in RecordBatches::new(data.clone()).flatten() {
            let _ = batch.validate_crc();
            if let Ok(records) = batch.records(1 << 16) {
                for r in records {
                    let _ = r;
                }
            }
        }
        let _ = valid_batches_len(&data);
    }

    #[test]
    fn prop_mutated_batches_never_panic(records in proptest::collection::vec(arb_record(), 1..5), flips in proptest::collection::vec((0usize..400, any::<u8>()), 1..6), codec_ix in 0usize..5) {
        let mut bytes = build(0, ALL_CODECS[codec_ix], &records).to_vec();
        for (pos, val) in flips {
            if bytes.len() > 21 {
                let i = 21 + pos % (bytes.len() - 21);
                bytes[i] = val;
            }
        }
        if let Ok(batch) = RecordBatch::parse(&Bytes::from(bytes)) {
            if let Ok(records) = batch.records(1 << 20) {
                let _ = records.collect_all();
            }
        }
    }
}

#[test]
fn batches_checksummed_as_built_carry_the_crc_of_their_bytes() {
    // Around and across the builder's CRC steps (16 KiB), with every header field set,
    // in both timestamp types: the stored CRC is the one computed over the whole batch.
    let value = Bytes::from(vec![0xa5u8; 997]);
    for n in [1, 15, 16, 17, 33, 200] {
        for append_time in [None, Some(42)] {
            let mut b = RecordBatchBuilder::new(7).producer(9, 2, 100).transactional(true);
            if let Some(t) = append_time {
                b = b.log_append_time(t);
            }
            for i in 0..n {
                b.append(&NewRecord::new(
                    1_000 + i as i64,
                    Some(Bytes::from(format!("k{i}"))),
                    Some(value.clone()),
                ))
                .unwrap();
            }
            let bytes = b.build().unwrap();
            let batch = RecordBatch::parse(&bytes).unwrap();
            batch.validate_crc().unwrap();
            assert_eq!(batch.crc(), crc32c(&bytes[21..]), "{n} records, append time {append_time:?}");
            assert_eq!(batch.records(LIMIT).unwrap().count(), n);
            let expected_max = append_time.unwrap_or(1_000 + n as i64 - 1);
            assert_eq!(batch.max_timestamp(), expected_max);
            assert!(batch.is_transactional());
        }
    }
}

#[test]
fn codec_levels_change_the_size_and_read_back_the_same() {
    // Words drawn from a small vocabulary by a fixed pseudo-random sequence: text a
    // codec compresses better the harder it tries.
    const WORDS: [&str; 12] = [
        "alpha", "broker", "commit", "delta", "epoch", "fetch", "group", "high", "index", "join", "kafka",
        "log",
    ];
    let mut x = 12345u64;
    let text: Vec<u8> = (0..12_000)
        .flat_map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            format!("{} ", WORDS[(x >> 33) as usize % WORDS.len()]).into_bytes()
        })
        .collect();
    for (codec, low, high) in [(Compression::Zstd, 1, 19), (Compression::Gzip, 1, 9)] {
        let fast = compress_at(codec, &text, SnappyFormat::Xerial, Some(low)).unwrap();
        let small = compress_at(codec, &text, SnappyFormat::Xerial, Some(high)).unwrap();
        assert!(
            small.len() < fast.len(),
            "{codec:?}: level {high} {} vs level {low} {}",
            small.len(),
            fast.len()
        );
        for c in [&fast, &small] {
            assert_eq!(decompress(codec, c, LIMIT).unwrap(), text, "{codec:?}");
        }
    }
    // A builder's level reaches its batch.
    let build_at = |level| {
        let mut b = RecordBatchBuilder::new(0).compression(Compression::Zstd).compression_level(Some(level));
        b.append(&NewRecord::new(0, None, Some(Bytes::from(text.clone())))).unwrap();
        b.build().unwrap()
    };
    let (high, low) = (build_at(19).len(), build_at(1).len());
    assert!(high < low, "{high} vs {low}");
}

#[test]
fn a_batch_built_in_a_reused_buffer_is_the_batch_built_in_a_new_one() {
    // Large enough that the records are checksummed in several steps as they come.
    let value = Bytes::from(vec![b'x'; 1000]);
    let records: Vec<NewRecord> =
        (0..100).map(|i| NewRecord::new(1_000 + i, None, Some(value.clone()))).collect();
    let fresh = {
        let mut b = RecordBatchBuilder::new(0).producer(7, 1, 5);
        for r in &records {
            b.append(r).unwrap();
        }
        b.build().unwrap()
    };
    for codec in ALL_CODECS {
        let dirty = vec![0xA5u8; 256 << 10];
        let mut reused = RecordBatchBuilder::new(0).producer(7, 1, 5).compression(codec).with_buffer(dirty);
        let mut plain = RecordBatchBuilder::new(0).producer(7, 1, 5).compression(codec);
        for r in &records {
            reused.append(r).unwrap();
            plain.append(r).unwrap();
        }
        let (reused, plain) = (reused.build().unwrap(), plain.build().unwrap());
        assert_eq!(reused, plain, "{codec:?}");
        RecordBatch::parse(&reused).unwrap().validate_crc().unwrap();
        if codec == Compression::None {
            assert_eq!(reused, fresh);
        }
    }
}
