//! Hostile input: what a malicious or broken client can send must cost an error, not a
//! panic, a long loop or a large allocation.
//!
//! A counting global allocator records the largest single allocation made on the test
//! thread while a decode runs; every decode here must stay within [`SLACK`] bytes of the
//! input's size. Covered: counts of 2^31-1 in tiny frames for every API and version,
//! counts that fit the frame but not memory, strings longer than the frame, negative
//! lengths, every truncation of valid requests, random and mutated frames (proptest),
//! random response bytes, and the frame decoder's reservation for a claimed length.
//! Strata's own APIs (StrataRaft, StrataMetadataFetch) go through all of it too, and
//! their opaque payloads must be refused when they claim more than the frame and be
//! sliced from it, not copied, when they fit.

use bytes::Bytes;
use proptest::prelude::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::{Duration, Instant};
use strata_protocol::codec::{DecodeError, Uuid};
use strata_protocol::frame::{FrameDecoder, RESERVE_STEP};
use strata_protocol::header::{decode_response, encode_request};
use strata_protocol::messages::*;
use strata_protocol::records::{NewRecord, RecordBatchBuilder};
use strata_protocol::{decode_request, ApiKey, RequestBody, RequestError, RequestHeader};

/// How much more than its input one decode may allocate in a single allocation.
const SLACK: usize = 8 * 1024;
/// Generous for a debug build; a decode is linear in its input, which here is small.
const MAX_DECODE_TIME: Duration = Duration::from_millis(500);

struct Counting;

thread_local! {
    static WATCHING: Cell<bool> = const { Cell::new(false) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    // `try_with`: the allocator also runs while thread-locals are torn down.
    let _ = WATCHING.try_with(|w| {
        if w.get() {
            let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
        }
    });
}

// SAFETY: defers every operation to `System`; only records sizes on the side.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f`, returning its result and the largest single allocation it made.
fn largest_allocation<R>(f: impl FnOnce() -> R) -> (R, usize) {
    LARGEST.with(|l| l.set(0));
    WATCHING.with(|w| w.set(true));
    let r = f();
    WATCHING.with(|w| w.set(false));
    (r, LARGEST.with(Cell::get))
}

/// Decodes `frame` as a request, checking time and allocation bounds.
fn decode_bounded(frame: &[u8]) -> Result<strata_protocol::Request, RequestError> {
    let input = Bytes::copy_from_slice(frame);
    let start = Instant::now();
    let (result, largest) = largest_allocation(|| decode_request(input));
    let took = start.elapsed();
    assert!(
        largest <= frame.len() + SLACK,
        "decoding {} bytes made a {largest}-byte allocation: {:02x?}",
        frame.len(),
        &frame[..frame.len().min(64)]
    );
    assert!(took < MAX_DECODE_TIME, "decoding {} bytes took {took:?}", frame.len());
    result
}

fn header(api: ApiKey, version: i16) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&(api as i16).to_be_bytes());
    h.extend_from_slice(&version.to_be_bytes());
    h.extend_from_slice(&7i32.to_be_bytes());
    h.extend_from_slice(&(-1i16).to_be_bytes()); // null client id
    if version >= api.flexible_from() {
        h.push(0); // no header tags
    }
    h
}

fn all_versions() -> impl Iterator<Item = (ApiKey, i16)> {
    ApiKey::ALL.iter().flat_map(|&api| {
        let (lo, hi) = api.codec_versions();
        (lo..=hi).map(move |v| (api, v))
    })
}

/// Every length the body holds claims the maximum: int32 0x7fffffff in classic
/// versions, uvarint 2^32-1 in flexible ones.
#[test]
fn maximal_counts_in_tiny_frames_are_refused_for_every_api_and_version() {
    for (api, version) in all_versions() {
        let mut frame = header(api, version);
        let pattern: &[u8] = if version >= api.flexible_from() {
            &[0xff, 0xff, 0xff, 0xff, 0x0f]
        } else {
            &[0x7f, 0xff, 0xff, 0xff]
        };
        while frame.len() < 40 {
            frame.extend_from_slice(pattern);
        }
        // Refused, unless the body has no field at all (ListGroups v0 ...): trailing
        // bytes are ignored, as Kafka ignores them.
        match decode_bounded(&frame) {
            Err(RequestError::Body(..)) => {}
            Ok(req) => {
                let mut w = strata_protocol::codec::Writer::new();
                req.body.encode(&mut w, version);
                assert!(w.is_empty(), "{api:?} v{version} decoded {req:?}");
            }
            Err(e) => panic!("{api:?} v{version}: {e:?}"),
        }
    }
}

/// The brief's example: 21 bytes claiming 2^31-1 topics.
#[test]
fn metadata_claiming_two_billion_topics_in_21_bytes() {
    let mut frame = header(ApiKey::Metadata, 1);
    frame.extend_from_slice(&i32::MAX.to_be_bytes());
    frame.extend_from_slice(&[0; 7]);
    assert_eq!(frame.len(), 21);
    match decode_bounded(&frame) {
        Err(RequestError::Body(_, DecodeError::InvalidLength { length, .. })) => {
            assert_eq!(length, i64::from(i32::MAX));
        }
        other => panic!("{other:?}"),
    }
}

/// A count that the frame could hold as bytes but not as structs: before the codec
/// capped its up-front reservation, 64 KiB of input reserved 64 Ki topic structs
/// (about 4.5 MiB) before reading a single one.
#[test]
fn counts_that_fit_the_frame_but_not_memory_do_not_reserve_memory() {
    for (api, version) in [(ApiKey::Fetch, 12), (ApiKey::Fetch, 4), (ApiKey::Metadata, 12)] {
        let mut frame = header(api, version);
        let body_len = 64 * 1024;
        // Fields before the topic array: Fetch v4 has replica id, max wait, min bytes,
        // max bytes and isolation level (17 bytes); v12 adds session id and epoch.
        let before_topics = match (api, version) {
            (ApiKey::Fetch, 4) => 17,
            (ApiKey::Fetch, _) => 25,
            _ => 0,
        };
        frame.resize(frame.len() + before_topics, 0);
        if version >= api.flexible_from() {
            // uvarint of body_len + 1
            let mut n = body_len as u32 + 1;
            while n >= 0x80 {
                frame.push((n as u8) | 0x80);
                n >>= 7;
            }
            frame.push(n as u8);
        } else {
            frame.extend_from_slice(&(body_len as i32).to_be_bytes());
        }
        // 0xff: the first element's name already has an impossible length.
        frame.resize(frame.len() + body_len, 0xff);
        assert!(decode_bounded(&frame).is_err(), "{api:?} v{version}");
    }
}

/// Elements that do decode cost memory in proportion to the input, but more of it than
/// the input: a 3-byte empty topic of Fetch v12 becomes a 64-byte struct, and a vector
/// grows by doubling. This pins that ratio so a change that worsens it is noticed; a
/// broker's `socket.request.max.bytes` bounds it (as in Apache Kafka, whose objects are
/// larger still).
#[test]
fn decoded_elements_cost_a_bounded_multiple_of_their_bytes() {
    for (version, before_topics) in [(4, 17), (12, 25)] {
        let mut frame = header(ApiKey::Fetch, version);
        frame.resize(frame.len() + before_topics, 0);
        let body_len = 64 * 1024;
        if version >= 12 {
            frame.extend_from_slice(&[0x81, 0x80, 0x04]); // uvarint 65537
        } else {
            frame.extend_from_slice(&(body_len as i32).to_be_bytes());
        }
        // Zeros: empty name, empty partition list (and no tags): the smallest topic.
        frame.resize(frame.len() + body_len, 0);
        let input = Bytes::from(frame);
        let len = input.len();
        let (r, largest) = largest_allocation(|| decode_request(input));
        assert!(r.is_err());
        assert!(largest <= 48 * len, "Fetch v{version}: {largest} bytes for {len} of input");
    }
}

#[test]
fn strings_longer_than_the_frame_are_refused() {
    // Client id claims 32767 bytes.
    let mut frame = header(ApiKey::ApiVersions, 0);
    frame.truncate(8);
    frame.extend_from_slice(&i16::MAX.to_be_bytes());
    frame.extend_from_slice(b"short");
    assert!(matches!(decode_bounded(&frame), Err(RequestError::Header(DecodeError::InvalidLength { .. }))));
    // A topic name claiming 1000 bytes in a 30-byte frame (Metadata v1: topics[name]).
    let mut frame = header(ApiKey::Metadata, 1);
    frame.extend_from_slice(&1i32.to_be_bytes());
    frame.extend_from_slice(&1000i16.to_be_bytes());
    frame.extend_from_slice(b"abc");
    assert!(matches!(
        decode_bounded(&frame),
        Err(RequestError::Body(_, DecodeError::InvalidLength { length: 1000, .. }))
    ));
    // A compact string claiming 2^32-2 bytes (ApiVersions v3 client_software_name).
    let mut frame = header(ApiKey::ApiVersions, 3);
    frame.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f, b'x']);
    assert!(decode_bounded(&frame).is_err());
}

#[test]
fn negative_and_null_lengths_where_not_allowed_are_refused() {
    // Array of -5 topics.
    let mut frame = header(ApiKey::Metadata, 1);
    frame.extend_from_slice(&(-5i32).to_be_bytes());
    assert!(matches!(
        decode_bounded(&frame),
        Err(RequestError::Body(_, DecodeError::InvalidLength { length: -5, .. }))
    ));
    // String of length -2 (group id of Heartbeat v0).
    let mut frame = header(ApiKey::Heartbeat, 0);
    frame.extend_from_slice(&(-2i16).to_be_bytes());
    assert!(decode_bounded(&frame).is_err());
    // Null (-1) for a non-nullable string and a non-nullable array.
    let mut frame = header(ApiKey::Heartbeat, 0);
    frame.extend_from_slice(&(-1i16).to_be_bytes());
    assert!(decode_bounded(&frame).is_err());
    let mut frame = header(ApiKey::Produce, 3);
    frame.extend_from_slice(&(-1i16).to_be_bytes()); // transactional id: null is fine
    frame.extend_from_slice(&1i16.to_be_bytes());
    frame.extend_from_slice(&1000i32.to_be_bytes());
    frame.extend_from_slice(&(-1i32).to_be_bytes()); // topic_data: null is not
    assert!(decode_bounded(&frame).is_err());
    // Negative bytes length (SaslAuthenticate v0 auth_bytes).
    let mut frame = header(ApiKey::SaslAuthenticate, 0);
    frame.extend_from_slice(&(-7i32).to_be_bytes());
    assert!(decode_bounded(&frame).is_err());
    // Varints that never end, in a tagged-field section.
    let mut frame = header(ApiKey::ApiVersions, 3);
    frame.truncate(frame.len() - 1);
    frame.extend_from_slice(&[0xff; 12]);
    assert!(decode_bounded(&frame).is_err());
}

#[test]
fn unknown_api_keys_and_versions_are_refused_before_the_body() {
    let mut frame = header(ApiKey::Produce, 0);
    frame[0..2].copy_from_slice(&9999i16.to_be_bytes());
    assert!(matches!(decode_bounded(&frame), Err(RequestError::UnknownApi(_))));
    for version in [-1, i16::MIN, 200] {
        let mut frame = header(ApiKey::Fetch, 0);
        frame[2..4].copy_from_slice(&version.to_be_bytes());
        assert!(matches!(decode_bounded(&frame), Err(RequestError::UnsupportedVersion(_))));
    }
}

fn record_batch() -> Bytes {
    let mut b = RecordBatchBuilder::new(0);
    for i in 0..3 {
        let rec = NewRecord::new(
            1_700_000_000_000 + i,
            Some(Bytes::from(format!("k{i}"))),
            Some(Bytes::from_static(b"value")),
        );
        b.append(&rec).expect("append");
    }
    b.build().expect("build")
}

/// Valid, non-trivial requests of several APIs in classic and flexible versions.
fn valid_requests() -> Vec<(RequestBody, i16)> {
    let produce = produce::ProduceRequest {
        transactional_id: Some("tx".into()),
        acks: -1,
        timeout_ms: 30_000,
        topic_data: vec![produce::TopicProduceData {
            name: "orders".into(),
            partition_data: vec![produce::PartitionProduceData { index: 2, records: Some(record_batch()) }],
        }],
    };
    let fetch = fetch::FetchRequest {
        max_wait_ms: 500,
        min_bytes: 1,
        session_epoch: 3,
        topics: vec![fetch::FetchTopic {
            topic: "orders".into(),
            topic_id: Uuid([9; 16]),
            partitions: vec![
                fetch::FetchPartition {
                    partition: 0,
                    fetch_offset: 100,
                    partition_max_bytes: 1 << 20,
                    ..Default::default()
                },
                fetch::FetchPartition { partition: 1, fetch_offset: 7, ..Default::default() },
            ],
        }],
        forgotten_topics_data: vec![fetch::ForgottenTopic {
            topic: "old".into(),
            topic_id: Uuid([1; 16]),
            partitions: vec![4, 5],
        }],
        rack_id: "r1".into(),
        ..Default::default()
    };
    let metadata = metadata::MetadataRequest {
        topics: Some(vec![metadata::MetadataRequestTopic {
            name: Some("orders".into()),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let create = create_topics::CreateTopicsRequest {
        topics: vec![create_topics::CreatableTopic {
            name: "t".into(),
            num_partitions: -1,
            replication_factor: -1,
            assignments: vec![create_topics::CreatableReplicaAssignment {
                partition_index: 0,
                broker_ids: vec![1, 2],
            }],
            configs: vec![create_topics::CreatableTopicConfig {
                name: "retention.ms".into(),
                value: Some("1000".into()),
            }],
        }],
        ..Default::default()
    };
    let join = join_group::JoinGroupRequest {
        group_id: "g".into(),
        session_timeout_ms: 10_000,
        member_id: "m".into(),
        protocol_type: "consumer".into(),
        protocols: vec![join_group::JoinGroupRequestProtocol {
            name: "range".into(),
            metadata: Bytes::from_static(&[0, 1, 0, 0, 0, 1, 0, 1, b't']),
        }],
        reason: Some("why".into()),
        ..Default::default()
    };
    let commit = offset_commit::OffsetCommitRequest {
        group_id: "g".into(),
        member_id: "m".into(),
        topics: vec![offset_commit::OffsetCommitRequestTopic {
            name: "t".into(),
            partitions: vec![offset_commit::OffsetCommitRequestPartition {
                partition_index: 0,
                committed_offset: 42,
                committed_metadata: None,
                ..Default::default()
            }],
        }],
        ..Default::default()
    };
    let versions = api_versions::ApiVersionsRequest {
        client_software_name: "strata-test".into(),
        client_software_version: "0.1".into(),
    };
    // Strata's own APIs, between controllers and brokers.
    let raft = strata_raft::StrataRaftRequest {
        kind: strata_raft::RaftRpcKind::AppendEntries.into(),
        payload: Bytes::from_static(b"entries"),
    };
    let metadata_fetch =
        strata_metadata_fetch::StrataMetadataFetchRequest { node_id: 3, from_index: 41, max_wait_ms: 500 };
    vec![
        (RequestBody::Produce(produce.clone()), 3),
        (RequestBody::Produce(produce), 9),
        (RequestBody::Fetch(fetch.clone()), 4),
        (RequestBody::Fetch(fetch.clone()), 12),
        (RequestBody::Fetch(fetch), 13),
        (RequestBody::Metadata(metadata.clone()), 1),
        (RequestBody::Metadata(metadata), 12),
        (RequestBody::CreateTopics(create.clone()), 4),
        (RequestBody::CreateTopics(create), 7),
        (RequestBody::JoinGroup(join.clone()), 5),
        (RequestBody::JoinGroup(join), 9),
        (RequestBody::OffsetCommit(commit.clone()), 2),
        (RequestBody::OffsetCommit(commit), 9),
        (RequestBody::ApiVersions(versions), 3),
        (RequestBody::StrataRaft(raft), 0),
        (RequestBody::StrataMetadataFetch(metadata_fetch), 0),
    ]
}

fn encode(body: &RequestBody, version: i16) -> Bytes {
    let h = RequestHeader {
        api_key: body.api_key() as i16,
        api_version: version,
        correlation_id: 99,
        client_id: Some("hostile-test".into()),
    };
    encode_request(&h, body).slice(4..)
}

#[test]
fn every_truncation_of_valid_requests_is_refused() {
    for (body, version) in valid_requests() {
        let frame = encode(&body, version);
        let decoded = decode_bounded(&frame).expect("the whole frame decodes");
        assert_eq!(encode(&decoded.body, version), frame);
        for len in 0..frame.len() {
            assert!(
                decode_bounded(&frame[..len]).is_err(),
                "{:?} v{version} decoded from {len} of {} bytes",
                body.api_key(),
                frame.len()
            );
        }
    }
}

/// The opaque payloads of Strata's own APIs (Raft messages, metadata snapshots) claim
/// lengths like any bytes field: a claim beyond the frame is refused before anything is
/// reserved, in every position a length can be.
#[test]
fn strata_payloads_claiming_more_than_the_frame_are_refused() {
    // uvarint 2^32-1, i.e. a compact length of 2^32-2 bytes, then a little data.
    let huge: &[u8] = &[0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2, 3];
    // StrataRaft: kind, then the payload.
    let mut frame = header(ApiKey::StrataRaft, 0);
    frame.push(0);
    frame.extend_from_slice(huge);
    assert!(matches!(decode_bounded(&frame), Err(RequestError::Body(_, DecodeError::InvalidLength { .. }))));
    // A length that fits the varint but not the frame (1 MiB claimed, 3 bytes sent).
    let mut frame = header(ApiKey::StrataRaft, 0);
    frame.extend_from_slice(&[2, 0x81, 0x80, 0x40, 1, 2, 3]);
    assert!(matches!(decode_bounded(&frame), Err(RequestError::Body(_, DecodeError::InvalidLength { .. }))));

    // Responses are decoded by the fetching broker: snapshot and records lengths.
    let mut prefix = Vec::new();
    prefix.extend_from_slice(&5i32.to_be_bytes()); // correlation id
    prefix.push(0); // response header tags
    prefix.extend_from_slice(&0i16.to_be_bytes()); // error code
    prefix.extend_from_slice(&1i32.to_be_bytes()); // leader id
    prefix.extend_from_slice(&9i64.to_be_bytes()); // applied index
    for records_too in [false, true] {
        let mut frame = prefix.clone();
        if records_too {
            frame.push(0); // snapshot: null, so records' length is the huge one
        }
        frame.extend_from_slice(huge);
        let input = Bytes::from(frame);
        let len = input.len();
        let (r, largest) = largest_allocation(|| decode_response(input, ApiKey::StrataMetadataFetch, 0));
        assert!(matches!(r, Err(DecodeError::InvalidLength { .. })), "{r:?}");
        assert!(largest <= len + SLACK, "{largest}-byte allocation");
    }
    let mut frame = prefix.clone();
    frame.truncate(5); // StrataRaft response: error code, then the payload
    frame.extend_from_slice(&0i16.to_be_bytes());
    frame.extend_from_slice(huge);
    let (r, _) = largest_allocation(|| decode_response(Bytes::from(frame), ApiKey::StrataRaft, 0));
    assert!(matches!(r, Err(DecodeError::InvalidLength { .. })), "{r:?}");
}

/// A payload is a slice of the frame, not a copy: a 1 MiB Raft message or snapshot
/// decodes without a large allocation.
#[test]
fn strata_payloads_are_not_copied() {
    let body = RequestBody::StrataRaft(strata_raft::StrataRaftRequest {
        kind: strata_raft::RaftRpcKind::InstallSnapshot.into(),
        payload: Bytes::from(vec![0x5a; 1 << 20]),
    });
    let frame = encode(&body, 0);
    let input = frame.clone();
    let (r, largest) = largest_allocation(|| decode_request(input));
    assert_eq!(r.expect("decodes").body, body);
    assert!(largest <= SLACK, "a {largest}-byte allocation for a {}-byte frame", frame.len());
}

#[test]
fn a_claimed_frame_length_reserves_only_what_arrives() {
    let mut d = FrameDecoder::new(100 << 20);
    let (_, largest) = largest_allocation(|| {
        d.buffer().extend_from_slice(&(100i32 << 20).to_be_bytes());
        d.next_frame()
    });
    assert!(largest <= 2 * RESERVE_STEP, "reserved {largest} bytes");
}

fn api_and_version() -> impl Strategy<Value = (ApiKey, i16)> {
    (0..ApiKey::ALL.len()).prop_flat_map(|i| {
        let api = ApiKey::ALL[i];
        let (lo, hi) = api.codec_versions();
        (Just(api), lo..=hi)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_frames_never_panic(frame in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_bounded(&frame);
    }

    /// A valid header gets random bytes past the header checks, into every body decoder.
    #[test]
    fn random_bodies_never_panic(
        (api, version) in api_and_version(),
        body in proptest::collection::vec(any::<u8>(), 0..512),
    ) {
        let mut frame = header(api, version);
        frame.extend_from_slice(&body);
        let _ = decode_bounded(&frame);
    }

    /// Valid requests with a few bytes changed: the inputs most likely to get deep.
    #[test]
    fn mutated_valid_requests_never_panic(
        which in any::<prop::sample::Index>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut requests = valid_requests();
        let (body, version) = requests.swap_remove(which.index(requests.len()));
        let mut frame = encode(&body, version).to_vec();
        for (at, byte) in edits {
            let i = at.index(frame.len());
            frame[i] = byte;
        }
        let _ = decode_bounded(&frame);
    }

    /// Clients and tests decode responses; random ones must not panic either.
    #[test]
    fn random_responses_never_panic(
        (api, version) in api_and_version(),
        body in proptest::collection::vec(any::<u8>(), 0..512),
    ) {
        let input = Bytes::from(body);
        let len = input.len();
        let (_, largest) = largest_allocation(|| decode_response(input, api, version));
        prop_assert!(largest <= len + SLACK, "{largest}-byte allocation");
    }
}
