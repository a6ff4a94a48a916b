//! Cross-checks against an independent implementation, the `kafka-protocol` crate, in
//! both directions: batches it encodes must decode here, and batches built here must
//! decode there, for every codec.

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records as kp;

use super::*;

const CODECS: [(Compression, kp::Compression); 5] = [
    (Compression::None, kp::Compression::None),
    (Compression::Gzip, kp::Compression::Gzip),
    (Compression::Snappy, kp::Compression::Snappy),
    (Compression::Lz4, kp::Compression::Lz4),
    (Compression::Zstd, kp::Compression::Zstd),
];

fn oracle_records(n: i64, transactional: bool) -> Vec<kp::Record> {
    (0..n)
        .map(|i| {
            let mut headers = IndexMap::new();
            if i % 2 == 0 {
                headers.insert(StrBytes::from_static_str("trace"), Some(Bytes::from(format!("t{i}"))));
                headers.insert(StrBytes::from_static_str("empty"), None);
            }
            kp::Record {
                transactional,
                control: false,
                partition_leader_epoch: 6,
                producer_id: 777,
                producer_epoch: 1,
                timestamp_type: kp::TimestampType::Creation,
                offset: 500 + i,
                sequence: 10 + i as i32,
                timestamp: 1_600_000_000_000 + i * 3,
                key: (i % 3 != 0).then(|| Bytes::from(format!("k{i}"))),
                value: (i % 4 != 3).then(|| Bytes::from(format!("value number {i}").repeat(3))),
                headers,
            }
        })
        .collect()
}

#[test]
fn decodes_batches_encoded_by_kafka_protocol() {
    for (ours, theirs) in CODECS {
        for transactional in [false, true] {
            let input = oracle_records(20, transactional);
            let mut buf = BytesMut::new();
            let options = kp::RecordEncodeOptions { version: 2, compression: theirs };
            kp::RecordBatchEncoder::encode(&mut buf, &input, &options).unwrap();
            let bytes = buf.freeze();

            let batches: Vec<RecordBatch> = RecordBatches::new(bytes.clone()).map(Result::unwrap).collect();
            assert_eq!(batches.len(), 1, "{ours:?}");
            let batch = &batches[0];
            batch.validate_crc().unwrap();
            assert_eq!(batch.compression().unwrap(), ours);
            assert_eq!(batch.base_offset(), 500);
            assert_eq!(batch.last_offset(), 519);
            assert_eq!(batch.partition_leader_epoch(), 6);
            assert_eq!((batch.producer_id(), batch.producer_epoch(), batch.base_sequence()), (777, 1, 10));
            assert_eq!(batch.is_transactional(), transactional);
            assert_eq!(batch.max_timestamp(), 1_600_000_000_000 + 19 * 3);
            assert_eq!(valid_batches_len(&bytes), bytes.len());

            let decoded = batch.records(1 << 20).unwrap().collect_all().unwrap();
            assert_eq!(decoded.len(), input.len());
            for (d, e) in decoded.iter().zip(&input) {
                assert_eq!(d.offset, e.offset);
                assert_eq!(d.timestamp, e.timestamp);
                assert_eq!(d.key, e.key);
                assert_eq!(d.value, e.value);
                let headers: Vec<(Bytes, Option<Bytes>)> =
                    e.headers.iter().map(|(k, v)| (Bytes::from(k.to_string()), v.clone())).collect();
                let got: Vec<(Bytes, Option<Bytes>)> =
                    d.headers.iter().map(|h| (h.key.clone(), h.value.clone())).collect();
                assert_eq!(got, headers);
            }
        }
    }
}

#[test]
fn kafka_protocol_decodes_batches_built_here() {
    for (ours, theirs) in CODECS {
        let mut builder = RecordBatchBuilder::new(1_000)
            .producer(55, 2, 100)
            .transactional(true)
            .compression(ours)
            .snappy_format(SnappyFormat::Raw) // the oracle reads raw snappy only
            .partition_leader_epoch(3);
        let mut expected = Vec::new();
        for i in 0..30i64 {
            let record = NewRecord::new(
                10_000 + i,
                Some(Bytes::from(format!("key{i}"))),
                (i % 5 != 0).then(|| Bytes::from(vec![i as u8; (i * 7) as usize])),
            )
            .with_header("h", Some(Bytes::from_static(b"x")));
            builder.append(&record).unwrap();
            expected.push(record);
        }
        let mut bytes = builder.build().unwrap();
        let set = kp::RecordBatchDecoder::decode(&mut bytes).unwrap();
        assert_eq!(set.compression, kp::RecordCompression::RecordBatch(theirs));
        assert_eq!(set.records.len(), expected.len());
        for (i, (got, want)) in set.records.iter().zip(&expected).enumerate() {
            assert_eq!(got.offset, 1_000 + i as i64);
            assert_eq!(got.sequence, 100 + i as i32);
            assert_eq!((got.producer_id, got.producer_epoch), (55, 2));
            assert!(got.transactional && !got.control);
            assert_eq!(got.partition_leader_epoch, 3);
            assert_eq!(got.timestamp, want.timestamp);
            assert_eq!(got.key, want.key);
            assert_eq!(got.value, want.value);
            assert_eq!(got.headers.len(), 1);
        }
    }
}

#[test]
fn kafka_protocol_decodes_control_batches_built_here() {
    let spec = EndTxnMarkerBatch {
        producer_id: 9,
        producer_epoch: 4,
        partition_leader_epoch: 2,
        timestamp: 77,
        marker: EndTxnMarker::commit(12),
    };
    let mut bytes = spec.build(40).unwrap();
    let set = kp::RecordBatchDecoder::decode(&mut bytes).unwrap();
    assert_eq!(set.records.len(), 1);
    let record = &set.records[0];
    assert!(record.control && record.transactional);
    assert_eq!(record.offset, 40);
    assert_eq!(record.key.as_deref(), Some(&[0u8, 0, 0, 1][..]));
    assert_eq!(record.value.as_deref(), Some(&[0u8, 0, 0, 0, 0, 12][..]));
}
