//! The `__consumer_offsets` record formats: golden bytes hand-assembled from Kafka's
//! message definitions, every value version, round trips and hostile input.

use super::*;
use crate::coordinator::group::records::*;

fn key_of(record: &Record) -> Vec<u8> {
    record.key_bytes().to_vec()
}

#[test]
fn offset_commit_golden_bytes() {
    let record = Record::OffsetCommit {
        key: OffsetCommitKey { group: "g".into(), topic: "t".into(), partition: 2 },
        value: Some(OffsetCommitValue {
            offset: 5,
            leader_epoch: 7,
            metadata: "m".into(),
            commit_timestamp: 100,
            expire_timestamp: -1,
        }),
    };
    assert_eq!(key_of(&record), [0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 2]);
    let value = [
        0, 3, // version 3
        0, 0, 0, 0, 0, 0, 0, 5, // offset
        0, 0, 0, 7, // leader epoch
        0, 1, b'm', // metadata
        0, 0, 0, 0, 0, 0, 0, 100, // commit timestamp
    ];
    assert_eq!(record.value_bytes().unwrap().to_vec(), value);
    let decoded = Record::decode(record.key_bytes(), record.value_bytes()).unwrap();
    assert_eq!(decoded, Some(record.clone()));

    // With an explicit expiry (OffsetCommit v2-v4 retention) Kafka writes value v1.
    let Record::OffsetCommit { key, value: Some(mut v) } = record else { unreachable!() };
    v.expire_timestamp = 200;
    v.leader_epoch = -1;
    let with_expiry = Record::OffsetCommit { key, value: Some(v) };
    let bytes = with_expiry.value_bytes().unwrap();
    assert_eq!(&bytes[..2], [0, 1]);
    assert_eq!(&bytes[bytes.len() - 8..], [0, 0, 0, 0, 0, 0, 0, 200]);
    assert_eq!(bytes.len(), 2 + 8 + 3 + 8 + 8);
    assert_eq!(Record::decode(with_expiry.key_bytes(), Some(bytes)).unwrap(), Some(with_expiry));
}

fn sample_group_value() -> GroupMetadataValue {
    GroupMetadataValue {
        protocol_type: "consumer".into(),
        generation: 1,
        protocol: Some("range".into()),
        leader: Some("m".into()),
        current_state_timestamp: 1000,
        members: vec![MemberMetadata {
            member_id: "m".into(),
            group_instance_id: None,
            client_id: "c".into(),
            client_host: "/h".into(),
            rebalance_timeout: 300_000,
            session_timeout: 10_000,
            subscription: Bytes::from_static(&[1, 2]),
            assignment: Bytes::from_static(&[3]),
        }],
    }
}

#[test]
fn group_metadata_golden_bytes() {
    let record = Record::GroupMetadata {
        key: GroupMetadataKey { group: "g".into() },
        value: Some(sample_group_value()),
    };
    assert_eq!(key_of(&record), [0, 2, 0, 1, b'g']);
    let mut expected = vec![0, 3];
    expected.extend_from_slice(&[0, 8]);
    expected.extend_from_slice(b"consumer");
    expected.extend_from_slice(&[0, 0, 0, 1]); // generation
    expected.extend_from_slice(&[0, 5]);
    expected.extend_from_slice(b"range");
    expected.extend_from_slice(&[0, 1, b'm']); // leader
    expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0x03, 0xe8]); // state timestamp
    expected.extend_from_slice(&[0, 0, 0, 1]); // one member
    expected.extend_from_slice(&[0, 1, b'm']); // member id
    expected.extend_from_slice(&[0xff, 0xff]); // null group instance id
    expected.extend_from_slice(&[0, 1, b'c', 0, 2, b'/', b'h']);
    expected.extend_from_slice(&[0x00, 0x04, 0x93, 0xe0]); // rebalance timeout
    expected.extend_from_slice(&[0x00, 0x00, 0x27, 0x10]); // session timeout
    expected.extend_from_slice(&[0, 0, 0, 2, 1, 2, 0, 0, 0, 1, 3]);
    assert_eq!(record.value_bytes().unwrap().to_vec(), expected);
    assert_eq!(Record::decode(record.key_bytes(), record.value_bytes()).unwrap(), Some(record));
}

#[test]
fn every_value_version_decodes() {
    let key = Record::group_tombstone("g").key_bytes();
    let full = sample_group_value();
    for version in 0..=4i16 {
        let bytes = encode_value_at(version, &full);
        let Some(Record::GroupMetadata { value: Some(v), .. }) =
            Record::decode(key.clone(), Some(bytes)).unwrap()
        else {
            panic!("v{version} decodes")
        };
        assert_eq!(v.members[0].assignment, full.members[0].assignment);
        assert_eq!(v.current_state_timestamp, if version >= 2 { 1000 } else { -1 });
        assert_eq!(v.members[0].rebalance_timeout, if version >= 1 { 300_000 } else { -1 });
    }
    // v0: the oldest layout, by hand.
    let mut v0 = vec![0, 0, 0, 8];
    v0.extend_from_slice(b"consumer");
    v0.extend_from_slice(&[0, 0, 0, 3, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
    let Some(Record::GroupMetadata { value: Some(v), .. }) =
        Record::decode(key.clone(), Some(v0.into())).unwrap()
    else {
        panic!()
    };
    assert_eq!((v.generation, v.protocol, v.leader, v.members.len()), (3, None, None, 0));

    let okey = Record::offset_tombstone("g", "t", 0).key_bytes();
    let value = OffsetCommitValue {
        offset: 9,
        leader_epoch: 4,
        metadata: "x".into(),
        commit_timestamp: 5,
        expire_timestamp: 6,
    };
    for version in 0..=4i16 {
        let Some(Record::OffsetCommit { value: Some(v), .. }) =
            Record::decode(okey.clone(), Some(encode_value_at(version, &value))).unwrap()
        else {
            panic!("v{version} decodes")
        };
        assert_eq!((v.offset, v.metadata.as_str(), v.commit_timestamp), (9, "x", 5));
        assert_eq!(v.leader_epoch, if version >= 3 { 4 } else { -1 });
        assert_eq!(v.expire_timestamp, if version == 1 { 6 } else { -1 });
    }
    // v4 is flexible: compact strings and tagged fields; unknown tags are skipped.
    let v4 = encode_value_at(4, &value);
    assert_eq!(
        v4.to_vec(),
        [&[0u8, 4][..], &9i64.to_be_bytes(), &4i32.to_be_bytes(), &[2, b'x'], &5i64.to_be_bytes(), &[0]]
            .concat()
    );
    let mut tagged = v4[..v4.len() - 1].to_vec();
    tagged.extend_from_slice(&[1, 7, 2, 0xaa, 0xbb]);
    assert!(Record::decode(okey.clone(), Some(tagged.into())).unwrap().is_some());
    // The key version 0 layout is the same as 1.
    let mut k0 = okey.to_vec();
    k0[1] = 0;
    assert!(matches!(
        Record::decode(k0.into(), None).unwrap(),
        Some(Record::OffsetCommit { value: None, .. })
    ));
}

#[test]
fn tombstones_and_unknown_record_types() {
    let t = Record::group_tombstone("g");
    assert_eq!(t.value_bytes(), None);
    assert_eq!(Record::decode(t.key_bytes(), None).unwrap(), Some(t));
    // KIP-848 records (key versions 3+) are not for the classic coordinator.
    for version in [3u8, 4, 10, 100] {
        let key = Bytes::from(vec![0, version, 0, 1, b'g']);
        assert_eq!(Record::decode(key, Some(Bytes::from_static(&[0, 0]))).unwrap(), None);
    }
}

#[test]
fn hostile_bytes_are_errors_not_panics() {
    let okey = Record::offset_tombstone("g", "t", 0).key_bytes();
    let gkey = Record::group_tombstone("g").key_bytes();
    let cases: Vec<(Bytes, Option<Bytes>)> = vec![
        (Bytes::new(), None),
        (Bytes::from_static(&[0]), None),
        (Bytes::from_static(&[0xff, 0xff, 0, 1, b'g']), None),
        (Bytes::from_static(&[0, 1, 0, 5, b'g']), None),
        (Bytes::from_static(&[0, 1, 0x7f, 0xff]), None),
        (Bytes::from_static(&[0, 2, 0xff, 0xff]), None),
        (okey.clone(), Some(Bytes::from_static(&[0]))),
        (okey.clone(), Some(Bytes::from_static(&[0, 5, 0, 0]))),
        (okey.clone(), Some(Bytes::from_static(&[0xff, 0xff]))),
        (okey.clone(), Some(Bytes::from_static(&[0, 3, 0, 0, 0]))),
        // Group metadata claiming 2^31-1 members in a few bytes.
        (
            gkey.clone(),
            Some(Bytes::from_static(&[
                0, 3, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff,
                0xff, 0,
            ])),
        ),
        // Flexible value with a compact string length far past the end.
        (
            okey.clone(),
            Some(Bytes::from_static(&[0, 4, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x0f])),
        ),
        // Invalid UTF-8 in the group name.
        (Bytes::from_static(&[0, 2, 0, 2, 0xc3, 0x28]), None),
    ];
    for (key, value) in cases {
        assert!(Record::decode(key.clone(), value.clone()).is_err(), "{key:?} {value:?}");
    }
    assert_eq!(
        Record::decode(okey.clone(), Some(Bytes::from_static(&[0, 5, 0]))),
        Err(RecordError::UnknownValueVersion { what: "offset commit value", version: 5 })
    );
}

#[test]
fn random_and_mutated_bytes_never_panic() {
    let mut rng = crate::sim::SimRng::new(42);
    let valid = Record::GroupMetadata {
        key: GroupMetadataKey { group: "group".into() },
        value: Some(sample_group_value()),
    };
    let (vk, vv) = (valid.key_bytes(), valid.value_bytes().unwrap());
    let mut c = GroupCoordinator::new(config());
    let _ = c.begin_load(0, 0);
    for i in 0..20_000 {
        let (key, value) = if i & 1 == 0 {
            let len = (rng.next_u64() % 40) as usize;
            let mut k: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            if k.len() >= 2 {
                k[0] = 0;
                k[1] %= 4;
            }
            let vlen = (rng.next_u64() % 80) as usize;
            let v: Vec<u8> = (0..vlen).map(|_| rng.next_u64() as u8).collect();
            (Bytes::from(k), Some(Bytes::from(v)))
        } else {
            // Truncate or flip a byte of a valid value.
            let mut v = vv.to_vec();
            let at = (rng.next_u64() as usize) % v.len();
            if rng.next_u64() & 1 == 0 {
                v.truncate(at);
            } else {
                v[at] ^= 1 << (rng.next_u64() % 8);
            }
            (vk.clone(), Some(Bytes::from(v)))
        };
        let _ = Record::decode(key.clone(), value.clone());
        let _ = c.replay(0, key, value);
    }
}
