//! The `__transaction_state` record formats: golden bytes hand-assembled from Kafka's
//! `TransactionLogKey.json` / `TransactionLogValue.json`, round trips, hostile input.

use bytes::Bytes;

use super::records::{TransactionLogValue, TxnPartitions};
use super::*;

fn value(status: TxnState, partitions: Option<Vec<TxnPartitions>>) -> TransactionLogValue {
    TransactionLogValue {
        producer_id: 1000,
        previous_producer_id: -1,
        next_producer_id: -1,
        producer_epoch: 0,
        transaction_timeout_ms: 60_000,
        transaction_status: status.id(),
        transaction_partitions: partitions,
        transaction_last_update_timestamp_ms: 1_000_000,
        transaction_start_timestamp_ms: -1,
        client_transaction_version: 0,
        kept_txn_producer_epoch: -1,
    }
}

fn record(value: TransactionLogValue, version: i16) -> TxnRecord {
    TxnRecord { transactional_id: "a".into(), value: Some(value), value_version: version }
}

fn t01() -> Option<Vec<TxnPartitions>> {
    Some(vec![TxnPartitions { topic: "t".into(), partition_ids: vec![0, 1] }])
}

#[test]
fn key_golden_bytes() {
    assert_eq!(TxnRecord::tombstone("a").key_bytes().to_vec(), [0, 0, 0, 1, b'a']);
}

#[test]
fn value_v0_empty_golden_bytes() {
    let r = record(value(TxnState::Empty, None), 0);
    let expected = [
        0, 0, // version 0
        0, 0, 0, 0, 0, 0, 0x03, 0xE8, // producer id 1000
        0, 0, // producer epoch 0
        0, 0, 0xEA, 0x60, // timeout 60000
        0,    // status Empty
        0xFF, 0xFF, 0xFF, 0xFF, // partitions: null
        0, 0, 0, 0, 0, 0x0F, 0x42, 0x40, // last update 1000000
        0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, // start -1
    ];
    assert_eq!(r.value_bytes().unwrap().to_vec(), expected);
    assert_eq!(TxnRecord::decode(r.key_bytes(), Some(Bytes::copy_from_slice(&expected))).unwrap(), Some(r));
}

#[test]
fn value_v0_ongoing_golden_bytes() {
    let mut v = value(TxnState::Ongoing, t01());
    v.transaction_start_timestamp_ms = 999_000;
    let r = record(v, 0);
    let expected = [
        0, 0, // version 0
        0, 0, 0, 0, 0, 0, 0x03, 0xE8, // producer id
        0, 0, // epoch
        0, 0, 0xEA, 0x60, // timeout
        1,    // status Ongoing
        0, 0, 0, 1, // one topic
        0, 1, b't', // topic "t"
        0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, // partitions [0, 1]
        0, 0, 0, 0, 0, 0x0F, 0x42, 0x40, // last update
        0, 0, 0, 0, 0, 0x0F, 0x3E, 0x58, // start 999000
    ];
    assert_eq!(r.value_bytes().unwrap().to_vec(), expected);
    let decoded = TxnRecord::decode(r.key_bytes(), r.value_bytes()).unwrap().unwrap();
    assert_eq!(decoded.value.as_ref().unwrap().partitions(), vec![tp("t", 0), tp("t", 1)]);
    assert_eq!(decoded, r);
}

#[test]
fn value_v1_golden_bytes_with_tagged_fields() {
    let mut v = value(TxnState::Ongoing, t01());
    v.previous_producer_id = 999;
    let r = record(v, 1);
    let expected = [
        0, 1, // version 1 (flexible)
        0, 0, 0, 0, 0, 0, 0x03, 0xE8, // producer id
        0, 0, // epoch
        0, 0, 0xEA, 0x60, // timeout
        1,    // status
        2,    // compact array: one topic
        2, b't', // compact string "t"
        3, 0, 0, 0, 0, 0, 0, 0, 1, // compact array [0, 1]
        0, // topic's tagged fields
        0, 0, 0, 0, 0, 0x0F, 0x42, 0x40, // last update
        0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, // start -1
        1,    // one tagged field
        0, 8, 0, 0, 0, 0, 0, 0, 0x03, 0xE7, // tag 0 (previous producer id), 8 bytes: 999
    ];
    assert_eq!(r.value_bytes().unwrap().to_vec(), expected);
    assert_eq!(TxnRecord::decode(r.key_bytes(), r.value_bytes()).unwrap(), Some(r));
}

#[test]
fn the_kept_transaction_epoch_is_strata_s_tag_1000_which_kafka_skips() {
    let mut v = value(TxnState::Ongoing, t01());
    v.producer_epoch = 3;
    v.kept_txn_producer_epoch = 2;
    let r = record(v, 1);
    let bytes = r.value_bytes().unwrap().to_vec();
    let tail = [
        1, // one tagged field
        0xE8, 0x07, // tag 1000 (unsigned varint)
        2,    // 2 bytes
        0, 2, // epoch 2
    ];
    assert!(bytes.ends_with(&tail), "{bytes:?}");
    assert_eq!(TxnRecord::decode(r.key_bytes(), r.value_bytes()).unwrap(), Some(r.clone()));
    // A reader that knows only Kafka's tags (as Kafka's own) skips it: the same record with
    // the tag swapped for an unknown one still decodes, with the default.
    let mut unknown = bytes.clone();
    let at = unknown.len() - tail.len() + 1;
    unknown[at..at + 2].copy_from_slice(&[0xE9, 0x07]);
    let decoded = TxnRecord::decode(r.key_bytes(), Some(Bytes::from(unknown))).unwrap().unwrap();
    assert_eq!(decoded.value.unwrap().kept_txn_producer_epoch, -1);
}

#[test]
fn every_state_round_trips_and_tombstones_decode() {
    for state in TxnState::ALL {
        let partitions = if state == TxnState::Empty { None } else { t01() };
        for version in [0, 1] {
            let r = record(value(state, partitions.clone()), version);
            let decoded = TxnRecord::decode(r.key_bytes(), r.value_bytes()).unwrap().unwrap();
            assert_eq!(decoded, r);
            assert_eq!(decoded.value.unwrap().state().unwrap(), state);
            assert_eq!(TxnState::from_name(state.name()), Some(state));
        }
    }
    let tombstone = TxnRecord::decode(TxnRecord::tombstone("x").key_bytes(), None).unwrap();
    assert_eq!(tombstone, Some(TxnRecord::tombstone("x")));
    // Kafka ignores partitions listed with Empty.
    assert!(value(TxnState::Empty, t01()).partitions().is_empty());
}

#[test]
fn truncated_records_are_errors() {
    let mut v = value(TxnState::Ongoing, t01());
    v.previous_producer_id = 5;
    for version in [0, 1] {
        let r = record(v.clone(), version);
        let (key, full) = (r.key_bytes(), r.value_bytes().unwrap());
        for len in 0..full.len() {
            let result = TxnRecord::decode(key.clone(), Some(full.slice(..len)));
            assert!(result.is_err(), "v{version} prefix of {len} bytes decoded: {result:?}");
        }
        for len in 0..key.len() {
            assert!(TxnRecord::decode(key.slice(..len), None).is_err(), "key prefix {len}");
        }
    }
}

#[test]
fn hostile_values() {
    let key = TxnRecord::tombstone("a").key_bytes();
    let decode = |bytes: &[u8]| TxnRecord::decode(key.clone(), Some(Bytes::copy_from_slice(bytes)));
    assert_eq!(decode(&[0, 2]), Err(RecordError::UnknownValueVersion(2)));
    assert_eq!(decode(&[0xFF, 0xFF]), Err(RecordError::UnknownValueVersion(-1)));
    // A partition count of 2^31-1 with no bytes behind it: refused without allocating.
    let mut huge = vec![0, 0]; // version 0
    huge.extend_from_slice(&[0; 8]); // producer id
    huge.extend_from_slice(&[0, 0, 0, 0, 0, 1, 1]); // epoch, timeout, status
    huge.extend_from_slice(&[0x7F, 0xFF, 0xFF, 0xFF]);
    assert!(matches!(decode(&huge), Err(RecordError::Malformed { .. })));
    // A status byte no state has.
    let mut v = value(TxnState::Empty, None);
    v.transaction_status = 9;
    let bytes = record(v, 0).value_bytes().unwrap();
    let decoded = decode(&bytes).unwrap().unwrap();
    assert_eq!(decoded.value.unwrap().state(), Err(RecordError::UnknownState(9)));
    // A negative key string length.
    assert!(TxnRecord::decode(Bytes::from_static(&[0, 0, 0xFF, 0xFE]), None).is_err());
    // Other key versions are skipped, not errors.
    assert_eq!(TxnRecord::decode(Bytes::from_static(&[0, 1, 0, 0]), None), Ok(None));
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = crate::sim::SimRng::new(0);
    let mut next = move || rng.next_u64();
    let valid = record(value(TxnState::Ongoing, t01()), 1).value_bytes().unwrap().to_vec();
    for i in 0..20_000 {
        let mut bytes: Vec<u8> =
            if i % 2 == 0 { (0..next() % 64).map(|_| next() as u8).collect() } else { valid.clone() };
        if !bytes.is_empty() {
            let flips = 1 + next() % 4;
            for _ in 0..flips {
                let at = (next() as usize) % bytes.len();
                bytes[at] = next() as u8;
            }
            if i % 4 == 1 && bytes.len() >= 2 {
                bytes[0] = 0;
                bytes[1] = (next() % 2) as u8;
            }
        }
        let key_len = (next() % 8) as usize;
        let key: Vec<u8> = (0..key_len).map(|_| next() as u8).collect();
        let _ = TxnRecord::decode(Bytes::from(key), Some(Bytes::from(bytes.clone())));
        let _ = TxnRecord::decode(TxnRecord::tombstone("a").key_bytes(), Some(Bytes::from(bytes)));
    }
}
