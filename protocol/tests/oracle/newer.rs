//! Versions newer than kafka-protocol 0.15 knows (it follows Kafka 3.9), checked against
//! bytes laid out by hand from the Kafka 4.x message specs:
//! ListOffsets v10 (KIP-1075, adds `TimeoutMs`), EndTxn v5 (KIP-890, the response
//! returns the bumped producer id and epoch), Fetch v18 (KIP-1166, the follower's high
//! watermark as a tagged field), WriteTxnMarkers v2 (KIP-1228, `TransactionVersion`)
//! AlterPartitionReassignments v1 (KIP-860, `AllowReplicationFactorChange`),
//! InitProducerId v6 (KIP-939, the two-phase-commit flags and the kept transaction) and
//! DescribeLogDirs v5 (KIP-1066, `IsCordoned`).

use crate::messages::{decode_ours, diff, encode_ours};
use bytes::Bytes;
use strata_protocol::codec::Uuid;
use strata_protocol::messages::{
    alter_partition_reassignments, describe_log_dirs, end_txn, fetch, init_producer_id, list_offsets,
    write_txn_markers,
};
use strata_protocol::ApiKey;

/// Appends big-endian fields and compact (uvarint length + 1) strings.
#[derive(Default)]
struct Raw(Vec<u8>);

impl Raw {
    fn i8(mut self, v: i8) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn i16(mut self, v: i16) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn i32(mut self, v: i32) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn i64(mut self, v: i64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    /// A compact length or count below 127 (one varint byte), or no tagged fields (0).
    fn byte(mut self, v: u8) -> Self {
        self.0.push(v);
        self
    }
    fn raw(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(b);
        self
    }
    fn compact_str(self, s: &str) -> Self {
        let mut r = self.byte(s.len() as u8 + 1);
        r.0.extend_from_slice(s.as_bytes());
        r
    }
    fn done(self) -> Bytes {
        Bytes::from(self.0)
    }
}

fn assert_round_trip<O: strata_protocol::codec::Wire + PartialEq + std::fmt::Debug>(
    api: ApiKey,
    version: i16,
    bytes: Bytes,
    expected: O,
) {
    let ctx = api.ctx(version);
    let decoded: O = decode_ours(&bytes, ctx).unwrap_or_else(|e| panic!("{api:?} v{version}: {e}"));
    assert_eq!(decoded, expected, "{api:?} v{version}");
    let ours = encode_ours(&expected, ctx);
    assert!(ours == bytes, "{api:?} v{version}: {}", diff(&bytes, &ours));
}

#[test]
fn list_offsets_v10_carries_timeout_ms() {
    use list_offsets::*;
    let bytes = Raw::default()
        .i32(-1) // ReplicaId
        .i8(1) // IsolationLevel
        .byte(2) // Topics: 1
        .compact_str("t")
        .byte(2) // Partitions: 1
        .i32(3) // PartitionIndex
        .i32(7) // CurrentLeaderEpoch
        .i64(-3) // Timestamp (max timestamp)
        .byte(0) // partition tags
        .byte(0) // topic tags
        .i32(30_000) // TimeoutMs, new in v10
        .byte(0)
        .done();
    let expected = ListOffsetsRequest {
        replica_id: -1,
        isolation_level: 1,
        topics: vec![ListOffsetsTopic {
            name: "t".into(),
            partitions: vec![ListOffsetsPartition {
                partition_index: 3,
                current_leader_epoch: 7,
                timestamp: -3,
                ..Default::default()
            }],
        }],
        timeout_ms: 30_000,
    };
    assert_round_trip(ApiKey::ListOffsets, 10, bytes, expected);

    let bytes = Raw::default()
        .i32(0) // ThrottleTimeMs
        .byte(2)
        .compact_str("t")
        .byte(2)
        .i32(3) // PartitionIndex
        .i16(0) // ErrorCode
        .i64(1_700_000_000_000) // Timestamp
        .i64(42) // Offset
        .i32(7) // LeaderEpoch
        .byte(0)
        .byte(0)
        .byte(0)
        .done();
    let expected = ListOffsetsResponse {
        throttle_time_ms: 0,
        topics: vec![ListOffsetsTopicResponse {
            name: "t".into(),
            partitions: vec![ListOffsetsPartitionResponse {
                partition_index: 3,
                error_code: 0,
                timestamp: 1_700_000_000_000,
                offset: 42,
                leader_epoch: 7,
                ..Default::default()
            }],
        }],
    };
    assert_round_trip(ApiKey::ListOffsets, 10, bytes, expected);
}

#[test]
fn end_txn_v5_response_returns_producer_id_and_epoch() {
    use end_txn::*;
    let bytes = Raw::default()
        .compact_str("tx")
        .i64(1000)
        .i16(4)
        .i8(1) // Committed
        .byte(0)
        .done();
    let expected = EndTxnRequest {
        transactional_id: "tx".into(),
        producer_id: 1000,
        producer_epoch: 4,
        committed: true,
    };
    assert_round_trip(ApiKey::EndTxn, 5, bytes, expected);

    let bytes = Raw::default()
        .i32(5) // ThrottleTimeMs
        .i16(0) // ErrorCode
        .i64(1000) // ProducerId, new in v5
        .i16(5) // ProducerEpoch, new in v5
        .byte(0)
        .done();
    let expected =
        EndTxnResponse { throttle_time_ms: 5, error_code: 0, producer_id: 1000, producer_epoch: 5 };
    assert_round_trip(ApiKey::EndTxn, 5, bytes, expected);
}

/// A follower's fetch at v18: the partition carries the follower's high watermark as
/// tagged field 1 after the directory id (tag 0); at its default (`i64::MAX`, "not
/// tracked") it is not written, and versions before 18 never carry it.
#[test]
fn fetch_v18_carries_the_followers_high_watermark() {
    use fetch::*;
    let topic_id = Uuid([7; 16]);
    let dir_id = Uuid([9; 16]);
    let bytes = Raw::default()
        .i32(500) // MaxWaitMs
        .i32(1) // MinBytes
        .i32(1 << 20) // MaxBytes
        .i8(0) // IsolationLevel
        .i32(0) // SessionId
        .i32(-1) // SessionEpoch
        .byte(2) // Topics: 1
        .raw(&topic_id.0)
        .byte(3) // Partitions: 2
        .i32(0) // Partition
        .i32(5) // CurrentLeaderEpoch
        .i64(100) // FetchOffset
        .i32(4) // LastFetchedEpoch
        .i64(0) // LogStartOffset
        .i32(1 << 20) // PartitionMaxBytes
        .byte(2) // two tagged fields
        .byte(0) // tag 0: ReplicaDirectoryId
        .byte(16)
        .raw(&dir_id.0)
        .byte(1) // tag 1: HighWatermark, new in v18
        .byte(8)
        .i64(90)
        .i32(1) // second partition
        .i32(5)
        .i64(7)
        .i32(-1)
        .i64(0)
        .i32(1 << 20)
        .byte(0) // no tags: high watermark at its default
        .byte(0) // topic tags
        .byte(1) // ForgottenTopicsData: 0
        .byte(1) // RackId: ""
        .byte(1) // one top-level tagged field
        .byte(1) // tag 1: ReplicaState
        .byte(13)
        .i32(2) // ReplicaId
        .i64(11) // ReplicaEpoch
        .byte(0)
        .done();
    let partition = |partition, fetch_offset, last_fetched_epoch| FetchPartition {
        partition,
        current_leader_epoch: 5,
        fetch_offset,
        last_fetched_epoch,
        log_start_offset: 0,
        partition_max_bytes: 1 << 20,
        ..Default::default()
    };
    let expected = FetchRequest {
        replica_state: ReplicaState { replica_id: 2, replica_epoch: 11 },
        max_wait_ms: 500,
        min_bytes: 1,
        max_bytes: 1 << 20,
        topics: vec![FetchTopic {
            topic_id,
            partitions: vec![
                FetchPartition { replica_directory_id: dir_id, high_watermark: 90, ..partition(0, 100, 4) },
                partition(1, 7, -1),
            ],
            ..Default::default()
        }],
        ..Default::default()
    };
    assert_eq!(expected.topics[0].partitions[1].high_watermark, i64::MAX, "Kafka's default");
    assert_round_trip(ApiKey::Fetch, 18, bytes, expected.clone());

    // v17 has no tag 1 in a partition: the field is not written and reads as its default.
    let ctx = ApiKey::Fetch.ctx(17);
    let v17: FetchRequest = decode_ours(&encode_ours(&expected, ctx), ctx).expect("v17");
    assert_eq!(v17.topics[0].partitions[0].high_watermark, i64::MAX);
    assert_eq!(v17.topics[0].partitions[0].replica_directory_id, dir_id);

    // The response of v18 is v17's.
    let bytes = Raw::default()
        .i32(0) // ThrottleTimeMs
        .i16(0) // ErrorCode
        .i32(9) // SessionId
        .byte(2) // Responses: 1
        .raw(&topic_id.0)
        .byte(2) // Partitions: 1
        .i32(0) // PartitionIndex
        .i16(0) // ErrorCode
        .i64(120) // HighWatermark
        .i64(110) // LastStableOffset
        .i64(0) // LogStartOffset
        .byte(1) // AbortedTransactions: 0
        .i32(-1) // PreferredReadReplica
        .byte(1) // Records: empty
        .byte(1) // one tagged field
        .byte(0) // tag 0: DivergingEpoch
        .byte(13)
        .i32(3) // Epoch
        .i64(95) // EndOffset
        .byte(0)
        .byte(0) // topic tags
        .byte(0) // no response tags
        .done();
    let expected = FetchResponse {
        session_id: 9,
        responses: vec![FetchableTopicResponse {
            topic_id,
            partitions: vec![PartitionData {
                high_watermark: 120,
                last_stable_offset: 110,
                log_start_offset: 0,
                diverging_epoch: EpochEndOffset { epoch: 3, end_offset: 95 },
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    assert_round_trip(ApiKey::Fetch, 18, bytes, expected);
}

#[test]
fn write_txn_markers_v2_carries_the_transaction_version() {
    use write_txn_markers::*;
    let bytes = Raw::default()
        .byte(2) // Markers: 1
        .i64(1000) // ProducerId
        .i16(3) // ProducerEpoch
        .i8(1) // TransactionResult: commit
        .byte(2) // Topics: 1
        .compact_str("t")
        .byte(3) // PartitionIndexes: 2
        .i32(0)
        .i32(4)
        .byte(0) // topic tags
        .i32(17) // CoordinatorEpoch
        .i8(2) // TransactionVersion, new in v2
        .byte(0) // marker tags
        .byte(0)
        .done();
    let expected = WriteTxnMarkersRequest {
        markers: vec![WritableTxnMarker {
            producer_id: 1000,
            producer_epoch: 3,
            transaction_result: true,
            topics: vec![WritableTxnMarkerTopic { name: "t".into(), partition_indexes: vec![0, 4] }],
            coordinator_epoch: 17,
            transaction_version: 2,
        }],
    };
    assert_round_trip(ApiKey::WriteTxnMarkers, 2, bytes, expected);

    // The response of v2 is v1's.
    let bytes = Raw::default()
        .byte(2) // Markers: 1
        .i64(1000)
        .byte(2) // Topics: 1
        .compact_str("t")
        .byte(2) // Partitions: 1
        .i32(4)
        .i16(0)
        .byte(0)
        .byte(0)
        .byte(0)
        .byte(0)
        .done();
    let expected = WriteTxnMarkersResponse {
        markers: vec![WritableTxnMarkerResult {
            producer_id: 1000,
            topics: vec![WritableTxnMarkerTopicResult {
                name: "t".into(),
                partitions: vec![WritableTxnMarkerPartitionResult { partition_index: 4, error_code: 0 }],
            }],
        }],
    };
    assert_round_trip(ApiKey::WriteTxnMarkers, 2, bytes, expected);
}

#[test]
fn alter_partition_reassignments_v1_carries_allow_replication_factor_change() {
    use alter_partition_reassignments::*;
    let bytes = Raw::default()
        .i32(30_000) // TimeoutMs
        .i8(0) // AllowReplicationFactorChange: false, new in v1
        .byte(2) // Topics: 1
        .compact_str("t")
        .byte(3) // Partitions: 2
        .i32(0)
        .byte(4) // Replicas: 3
        .i32(1)
        .i32(2)
        .i32(3)
        .byte(0)
        .i32(1)
        .byte(0) // Replicas: null (cancel)
        .byte(0)
        .byte(0)
        .byte(0)
        .done();
    let expected = AlterPartitionReassignmentsRequest {
        timeout_ms: 30_000,
        allow_replication_factor_change: false,
        topics: vec![ReassignableTopic {
            name: "t".into(),
            partitions: vec![
                ReassignablePartition { partition_index: 0, replicas: Some(vec![1, 2, 3]) },
                ReassignablePartition { partition_index: 1, replicas: None },
            ],
        }],
    };
    assert_round_trip(ApiKey::AlterPartitionReassignments, 1, bytes, expected.clone());
    // v0 has no such field: an old client always allows the change.
    let ctx = ApiKey::AlterPartitionReassignments.ctx(0);
    let v0: AlterPartitionReassignmentsRequest = decode_ours(&encode_ours(&expected, ctx), ctx).expect("v0");
    assert!(v0.allow_replication_factor_change);

    let bytes = Raw::default()
        .i32(0) // ThrottleTimeMs
        .i8(0) // AllowReplicationFactorChange, new in v1
        .i16(0) // ErrorCode
        .byte(0) // ErrorMessage: null
        .byte(2) // Responses: 1
        .compact_str("t")
        .byte(2) // Partitions: 1
        .i32(0)
        .i16(38) // INVALID_REPLICATION_FACTOR
        .compact_str("no")
        .byte(0)
        .byte(0)
        .byte(0)
        .done();
    let expected = AlterPartitionReassignmentsResponse {
        throttle_time_ms: 0,
        allow_replication_factor_change: false,
        error_code: 0,
        error_message: None,
        responses: vec![ReassignableTopicResponse {
            name: "t".into(),
            partitions: vec![ReassignablePartitionResponse {
                partition_index: 0,
                error_code: 38,
                error_message: Some("no".into()),
            }],
        }],
    };
    assert_round_trip(ApiKey::AlterPartitionReassignments, 1, bytes, expected);
}

/// InitProducerId v6 (KIP-939): the request ends with `Enable2Pc` and `KeepPreparedTxn`,
/// the response with the kept transaction's producer id and epoch.
#[test]
fn init_producer_id_v6_carries_the_two_phase_commit_fields() {
    use init_producer_id::*;
    let bytes = Raw::default()
        .compact_str("tx")
        .i32(60_000) // TransactionTimeoutMs
        .i64(-1) // ProducerId
        .i16(-1) // ProducerEpoch
        .i8(1) // Enable2Pc
        .i8(1) // KeepPreparedTxn
        .byte(0)
        .done();
    let expected = InitProducerIdRequest {
        transactional_id: Some("tx".into()),
        transaction_timeout_ms: 60_000,
        producer_id: -1,
        producer_epoch: -1,
        enable_2pc: true,
        keep_prepared_txn: true,
    };
    assert_round_trip(ApiKey::InitProducerId, 6, bytes, expected);

    let bytes = Raw::default()
        .i32(0) // ThrottleTimeMs
        .i16(0) // ErrorCode
        .i64(1000) // ProducerId
        .i16(8) // ProducerEpoch
        .i64(1000) // OngoingTxnProducerId
        .i16(7) // OngoingTxnProducerEpoch
        .byte(0)
        .done();
    let expected = InitProducerIdResponse {
        throttle_time_ms: 0,
        error_code: 0,
        producer_id: 1000,
        producer_epoch: 8,
        ongoing_txn_producer_id: 1000,
        ongoing_txn_producer_epoch: 7,
    };
    assert_round_trip(ApiKey::InitProducerId, 6, bytes, expected);
}

#[test]
fn describe_log_dirs_v5_carries_is_cordoned() {
    use describe_log_dirs::*;
    // The request is v2's: null topics (compact array length 0) asks for every partition.
    let bytes = Raw::default().byte(0).byte(0).done();
    assert_round_trip(ApiKey::DescribeLogDirs, 5, bytes, DescribeLogDirsRequest { topics: None });

    let bytes = Raw::default()
        .i32(0) // ThrottleTimeMs
        .i16(0) // ErrorCode
        .byte(2) // Results: 1
        .i16(0) // ErrorCode
        .compact_str("/d")
        .byte(2) // Topics: 1
        .compact_str("t")
        .byte(2) // Partitions: 1
        .i32(3) // PartitionIndex
        .i64(1234) // PartitionSize
        .i64(0) // OffsetLag
        .i8(0) // IsFutureKey
        .byte(0) // partition tags
        .byte(0) // topic tags
        .i64(1 << 40) // TotalBytes
        .i64(1 << 30) // UsableBytes
        .i8(1) // IsCordoned, new in v5
        .byte(0) // result tags
        .byte(0)
        .done();
    let expected = DescribeLogDirsResponse {
        throttle_time_ms: 0,
        error_code: 0,
        results: vec![DescribeLogDirsResult {
            error_code: 0,
            log_dir: "/d".into(),
            topics: vec![DescribeLogDirsTopic {
                name: "t".into(),
                partitions: vec![DescribeLogDirsPartition {
                    partition_index: 3,
                    partition_size: 1234,
                    offset_lag: 0,
                    is_future_key: false,
                }],
            }],
            total_bytes: 1 << 40,
            usable_bytes: 1 << 30,
            is_cordoned: true,
        }],
    };
    assert_round_trip(ApiKey::DescribeLogDirs, 5, bytes, expected);
}
