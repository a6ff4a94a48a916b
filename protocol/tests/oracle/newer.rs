//! Versions newer than kafka-protocol 0.15 knows (it follows Kafka 3.9), checked against
//! bytes laid out by hand from the Kafka 4.0 message specs:
//! ListOffsets v10 (KIP-1075, adds `TimeoutMs`) and EndTxn v5 (KIP-890, the response
//! returns the bumped producer id and epoch).

use crate::messages::{decode_ours, diff, encode_ours};
use bytes::Bytes;
use strata_protocol::messages::{end_txn, list_offsets};
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
