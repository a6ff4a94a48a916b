//! Strata's own APIs, StrataRaft (1000) and StrataMetadataFetch (1001), which Kafka and
//! so the kafka-protocol oracle do not know: their wire format is pinned here by bytes
//! laid out by hand, bodies and whole frames round-trip, and they stay apart from
//! Kafka's keys. Hostile input against them (truncations, huge length prefixes, random
//! bodies) is in `hostile.rs`, with every other API.

use bytes::Bytes;
use strata_protocol::codec::{Ctx, Reader, Wire, Writer};
use strata_protocol::header::{decode_response, encode_request};
use strata_protocol::messages::strata_metadata_fetch::{
    StrataMetadataFetchRequest, StrataMetadataFetchResponse,
};
use strata_protocol::messages::strata_raft::{RaftRpcKind, StrataRaftRequest, StrataRaftResponse};
use strata_protocol::messages::STRATA_KEYS_FROM;
use strata_protocol::{
    decode_request, encode_response, ApiKey, RequestBody, RequestError, RequestHeader, ResponseBody,
};

fn encode<T: Wire>(x: &T, ctx: Ctx) -> Bytes {
    let mut w = Writer::new();
    x.write(&mut w, ctx);
    w.into_memory_bytes()
}

/// Decodes all of `b`: bytes left over would mean a field we did not expect.
fn decode<T: Wire>(b: &Bytes, ctx: Ctx) -> T {
    let mut r = Reader::new(b.clone());
    let x = T::read(&mut r, ctx).expect("decodes");
    assert_eq!(r.remaining(), 0, "bytes left unread");
    x
}

/// `bytes` decode to `value` and `value` encodes to `bytes`.
fn assert_wire<T: Wire + PartialEq + std::fmt::Debug>(api: ApiKey, bytes: &[u8], value: &T) {
    let ctx = api.ctx(0);
    let bytes = Bytes::copy_from_slice(bytes);
    assert_eq!(&decode::<T>(&bytes, ctx), value, "{api:?} decode");
    assert_eq!(encode(value, ctx), bytes, "{api:?} encode");
}

fn raft_request() -> StrataRaftRequest {
    StrataRaftRequest { kind: RaftRpcKind::Vote.into(), payload: Bytes::from_static(b"vote") }
}

fn metadata_response() -> StrataMetadataFetchResponse {
    StrataMetadataFetchResponse {
        error_code: 0,
        leader_id: 3,
        applied_index: 42,
        snapshot: None,
        records: Some(Bytes::from_static(&[1, 2, 3])),
    }
}

#[test]
fn keys_are_strata_s_own_and_apart_from_kafka_s() {
    assert_eq!(ApiKey::from_i16(1000), Some(ApiKey::StrataRaft));
    assert_eq!(ApiKey::from_i16(1001), Some(ApiKey::StrataMetadataFetch));
    assert_eq!(ApiKey::STRATA, &[ApiKey::StrataRaft, ApiKey::StrataMetadataFetch]);
    assert_eq!(ApiKey::StrataRaft.name(), "StrataRaft");
    for &api in ApiKey::ALL {
        let private = ApiKey::STRATA.contains(&api);
        assert_eq!(api.is_strata_private(), private, "{api:?}");
        assert_eq!(ApiKey::KAFKA.contains(&api), !private, "{api:?} is in exactly one list");
        assert_eq!(api as i16 >= STRATA_KEYS_FROM, private, "{api:?} key {}", api as i16);
    }
    assert_eq!(ApiKey::KAFKA.len() + ApiKey::STRATA.len(), ApiKey::ALL.len());
    for api in [ApiKey::StrataRaft, ApiKey::StrataMetadataFetch] {
        assert_eq!(api.codec_versions(), (0, 0), "{api:?}");
        assert_eq!(api.flexible_from(), 0, "{api:?}");
    }
}

#[test]
fn raft_rpc_kinds_are_0_1_2() {
    for (byte, kind) in
        [(0, RaftRpcKind::AppendEntries), (1, RaftRpcKind::Vote), (2, RaftRpcKind::InstallSnapshot)]
    {
        assert_eq!(RaftRpcKind::from_i8(byte), Some(kind));
        assert_eq!(i8::from(kind), byte);
    }
    for byte in [3, -1, i8::MIN, i8::MAX] {
        assert_eq!(RaftRpcKind::from_i8(byte), None, "{byte}");
    }
}

#[test]
fn strata_raft_wire_format() {
    // Kind, compact bytes (length + 1), no tagged fields.
    assert_wire(ApiKey::StrataRaft, &[1, 5, b'v', b'o', b't', b'e', 0], &raft_request());
    assert_wire(ApiKey::StrataRaft, &[0, 1, 0], &StrataRaftRequest::default());
    let response = StrataRaftResponse { error_code: 0, payload: Bytes::from_static(b"ok") };
    assert_wire(ApiKey::StrataRaft, &[0, 0, 3, b'o', b'k', 0], &response);
    let refused = StrataRaftResponse { error_code: 41, payload: Bytes::new() }; // NOT_CONTROLLER
    assert_wire(ApiKey::StrataRaft, &[0, 41, 1, 0], &refused);
    // A null payload is refused: the field is not nullable.
    let ctx = ApiKey::StrataRaft.ctx(0);
    assert!(StrataRaftRequest::read(&mut Reader::new(Bytes::from_static(&[0, 0, 0])), ctx).is_err());
}

#[test]
fn strata_metadata_fetch_wire_format() {
    let request = StrataMetadataFetchRequest { node_id: 4, from_index: 41, max_wait_ms: 500 };
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&4i32.to_be_bytes());
    bytes.extend_from_slice(&41i64.to_be_bytes());
    bytes.extend_from_slice(&500i32.to_be_bytes());
    bytes.push(0);
    assert_wire(ApiKey::StrataMetadataFetch, &bytes, &request);
    assert_eq!(StrataMetadataFetchRequest::default().from_index, -1, "nothing applied yet");

    let mut bytes = Vec::new();
    bytes.extend_from_slice(&0i16.to_be_bytes());
    bytes.extend_from_slice(&3i32.to_be_bytes());
    bytes.extend_from_slice(&42i64.to_be_bytes());
    bytes.push(0); // snapshot: null
    bytes.extend_from_slice(&[4, 1, 2, 3]); // records: 3 bytes
    bytes.push(0);
    assert_wire(ApiKey::StrataMetadataFetch, &bytes, &metadata_response());

    // Too far behind: a snapshot and no records; a leader unknown to this controller.
    let snapshot = StrataMetadataFetchResponse {
        error_code: 0,
        leader_id: -1,
        applied_index: 7,
        snapshot: Some(Bytes::from_static(b"snap")),
        records: None,
    };
    let ctx = ApiKey::StrataMetadataFetch.ctx(0);
    assert_eq!(decode::<StrataMetadataFetchResponse>(&encode(&snapshot, ctx), ctx), snapshot);
    let default = StrataMetadataFetchResponse::default();
    assert_eq!((default.leader_id, default.applied_index), (-1, -1));
    assert_eq!((&default.snapshot, &default.records), (&None, &None));
}

/// A newer Strata node may add tagged fields; an older one must skip them.
#[test]
fn unknown_tagged_fields_are_skipped() {
    let ctx = ApiKey::StrataRaft.ctx(0);
    let mut bytes = encode(&raft_request(), ctx).to_vec();
    bytes.pop(); // no tags
    bytes.extend_from_slice(&[2, 5, 1, 0xaa, 90, 3, 1, 2, 3]); // tags 5 and 90
    assert_eq!(decode::<StrataRaftRequest>(&Bytes::from(bytes), ctx), raft_request());
}

#[test]
fn whole_frames_round_trip() {
    let header = |api: ApiKey| RequestHeader {
        api_key: api as i16,
        api_version: 0,
        correlation_id: 77,
        client_id: Some("strata-controller-2".into()),
    };
    let requests = [
        RequestBody::StrataRaft(raft_request()),
        RequestBody::StrataRaft(StrataRaftRequest {
            kind: RaftRpcKind::InstallSnapshot.into(),
            payload: Bytes::from(vec![0x5a; 70_000]), // a snapshot chunk, past 2^16
        }),
        RequestBody::StrataMetadataFetch(StrataMetadataFetchRequest {
            node_id: 9,
            from_index: -1,
            max_wait_ms: 1000,
        }),
    ];
    for body in requests {
        let frame = encode_request(&header(body.api_key()), &body);
        let len = i32::from_be_bytes(frame[..4].try_into().expect("4 bytes"));
        assert_eq!(len as usize, frame.len() - 4);
        let request = decode_request(frame.slice(4..)).expect("decodes");
        assert_eq!(request.api, body.api_key());
        assert_eq!(request.header, header(body.api_key()));
        assert_eq!(request.body, body);
    }

    let responses = [
        ResponseBody::StrataRaft(StrataRaftResponse {
            error_code: 0,
            payload: Bytes::from(vec![7; 5000]), // past the writer's zero-copy threshold
        }),
        ResponseBody::StrataMetadataFetch(metadata_response()),
    ];
    for body in responses {
        let chunks = encode_response(77, 0, &body);
        let frame: Vec<u8> = chunks.into_iter().flat_map(|c| c.load().expect("in memory")).collect();
        // Length, correlation id, then response header v1's empty tag buffer.
        assert_eq!(frame[8], 0);
        let (correlation_id, decoded) =
            decode_response(Bytes::from(frame).slice(4..), body.api_key(), 0).expect("decodes");
        assert_eq!(correlation_id, 77);
        assert_eq!(decoded, body);
    }
}

#[test]
fn versions_other_than_0_are_refused() {
    for body in [
        RequestBody::StrataRaft(raft_request()),
        RequestBody::StrataMetadataFetch(StrataMetadataFetchRequest::default()),
    ] {
        let api = body.api_key();
        let h = RequestHeader { api_key: api as i16, api_version: 1, correlation_id: 1, client_id: None };
        let frame = encode_request(&h, &body);
        assert!(
            matches!(decode_request(frame.slice(4..)), Err(RequestError::UnsupportedVersion(_))),
            "{api:?} v1"
        );
    }
}
