//! Body-level round trips: every API, every common version, requests and responses.

use crate::apis::{self, common_versions, Ours, StructVisitor, TheirStruct, Theirs, Visitor};
use crate::fill::Gen;
use bytes::{Bytes, BytesMut};
use strata_protocol::codec::{Ctx, Reader, Wire, Writer};
use strata_protocol::ApiKey;

/// kafka-protocol's encoding of `x` at `version`.
pub fn encode_theirs<T: TheirStruct>(x: &T, version: i16) -> Result<Bytes, String> {
    let mut buf = BytesMut::new();
    x.encode(&mut buf, version).map_err(|e| format!("kafka-protocol refused to encode: {e}"))?;
    Ok(buf.freeze())
}

/// kafka-protocol's decoding of all of `b`.
pub fn decode_theirs<T: TheirStruct>(b: &Bytes, version: i16) -> Result<T, String> {
    let mut rest = b.clone();
    let x =
        T::decode(&mut rest, version).map_err(|e| format!("kafka-protocol cannot decode our bytes: {e}"))?;
    if !rest.is_empty() {
        return Err(format!("kafka-protocol left {} of our {} bytes unread", rest.len(), b.len()));
    }
    Ok(x)
}

/// Our decoding of all of `b`: trailing bytes mean a field we do not know about.
pub fn decode_ours<O: Wire>(b: &Bytes, ctx: Ctx) -> Result<O, String> {
    let mut r = Reader::new(b.clone());
    let o = O::read(&mut r, ctx).map_err(|e| format!("we cannot decode: {e}"))?;
    if r.remaining() != 0 {
        return Err(format!(
            "we left {} of {} bytes unread (from offset {})",
            r.remaining(),
            b.len(),
            r.position()
        ));
    }
    Ok(o)
}

/// Our encoding of `o`.
pub fn encode_ours<O: Wire>(o: &O, ctx: Ctx) -> Bytes {
    let mut w = Writer::new();
    o.write(&mut w, ctx);
    w.into_memory_bytes()
}

/// Where two encodings first differ, with a little context, for failure messages.
pub fn diff(theirs: &[u8], ours: &[u8]) -> String {
    let at = theirs.iter().zip(ours).position(|(a, b)| a != b).unwrap_or(theirs.len().min(ours.len()));
    let window = |b: &[u8]| format!("{:02x?}", &b[at.saturating_sub(4)..(at + 12).min(b.len())]);
    format!(
        "lengths {} (kafka-protocol) vs {} (ours), first difference at byte {at}: \
         theirs {} ours {}",
        theirs.len(),
        ours.len(),
        window(theirs),
        window(ours)
    )
}

/// Debug output cut to a readable size.
pub fn short<T: std::fmt::Debug>(x: &T) -> String {
    let s = format!("{x:?}");
    if s.len() > 1500 {
        let mut end = 1500;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &s[..end])
    } else {
        s
    }
}

/// Both codecs agree on every field's default: kafka-protocol's default decodes to
/// ours, and ours encodes to the same bytes.
fn check_defaults<T: TheirStruct, O: Ours>(ctx: Ctx) -> Result<(), String> {
    let theirs = encode_theirs(&T::default(), ctx.version)?;
    let decoded: O = decode_ours(&theirs, ctx)?;
    if decoded != O::default() {
        return Err(format!(
            "kafka-protocol's default decodes to {} but our default is {}",
            short(&decoded),
            short(&O::default())
        ));
    }
    let ours = encode_ours(&O::default(), ctx);
    if ours != theirs {
        return Err(format!("default values encode differently: {}", diff(&theirs, &ours)));
    }
    Ok(())
}

/// One random value: theirs -> ours -> bytes equal, ours -> theirs -> value equal, and
/// the same value with unknown tagged fields decodes to the same thing.
fn check_random<T: Theirs, O: Ours>(ctx: Ctx, seed: u64) -> Result<(), String> {
    let x = T::fill(&mut Gen::new(seed, false), ctx.version, false);
    let theirs = encode_theirs(&x, ctx.version)?;
    let decoded: O = decode_ours(&theirs, ctx).map_err(|e| format!("{e}; value {}", short(&x)))?;
    let ours = encode_ours(&decoded, ctx);
    if ours != theirs {
        return Err(format!("re-encoding differs: {}; value {}", diff(&theirs, &ours), short(&x)));
    }
    let back: T = decode_theirs(&ours, ctx.version)?;
    if back != x {
        return Err(format!("kafka-protocol reads our bytes as {} instead of {}", short(&back), short(&x)));
    }
    if ctx.flexible {
        let with_unknown = T::fill(&mut Gen::new(seed, true), ctx.version, false);
        let bytes = encode_theirs(&with_unknown, ctx.version)?;
        let skipped: O = decode_ours(&bytes, ctx).map_err(|e| format!("with unknown tagged fields: {e}"))?;
        if skipped != decoded {
            return Err(format!(
                "unknown tagged fields changed the decoded value: {} instead of {}",
                short(&skipped),
                short(&decoded)
            ));
        }
    }
    Ok(())
}

fn check_message<T: Theirs, O: Ours>(api: ApiKey, kind: &str, failures: &mut Vec<String>) {
    for version in common_versions::<T>(api) {
        let ctx = api.ctx(version);
        let name = api.name();
        if let Err(e) = check_defaults::<T, O>(ctx) {
            failures.push(format!("{name} v{version} {kind} defaults: {e}"));
        }
        for seed in 0..crate::seeds() {
            if let Err(e) = check_random::<T, O>(ctx, seed) {
                failures.push(format!("{name} v{version} {kind} seed {seed}: {e}"));
                break;
            }
        }
    }
}

struct Bodies {
    requests: bool,
    failures: Vec<String>,
}

impl Visitor for Bodies {
    fn visit<TReq: Theirs, TResp: Theirs, OReq: Ours, OResp: Ours>(&mut self, api: ApiKey) {
        if self.requests {
            check_message::<TReq, OReq>(api, "request", &mut self.failures);
        } else {
            check_message::<TResp, OResp>(api, "response", &mut self.failures);
        }
    }
}

fn run(requests: bool) -> Vec<String> {
    let mut v = Bodies { requests, failures: Vec::new() };
    for &api in ApiKey::KAFKA {
        apis::visit(api, &mut v);
    }
    v.failures
}

#[test]
fn every_request_round_trips_through_kafka_protocol() {
    crate::report("requests", &run(true));
}

#[test]
fn every_response_round_trips_through_kafka_protocol() {
    crate::report("responses", &run(false));
}

/// Every struct, nested ones included, has the same defaults in both codecs at every
/// version: what a field holds when an older version does not carry it, and what a
/// handler gets from `..Default::default()`.
#[test]
fn every_struct_has_kafkas_defaults() {
    struct Defaults(Vec<String>);
    impl StructVisitor for Defaults {
        fn visit<T: TheirStruct, O: Ours>(&mut self, api: ApiKey, name: &str) {
            for version in common_versions::<T>(api) {
                if let Err(e) = check_defaults::<T, O>(api.ctx(version)) {
                    self.0.push(format!("{} v{version} {name}: {e}", api.name()));
                }
            }
        }
    }
    let mut v = Defaults(Vec::new());
    crate::spec_requests::visit_structs(&mut v);
    crate::spec_responses::visit_structs(&mut v);
    crate::report("struct defaults", &v.0);
}

/// The oracle covers every version we decode except those newer than kafka-protocol
/// 0.15 (Kafka 3.9); `newer.rs` covers those. If this fails after a kafka-protocol
/// upgrade, shrink the list; if after a codec change, the new versions need an oracle.
#[test]
fn oracle_covers_every_codec_version_but_the_known_newer_ones() {
    struct Gaps(Vec<(ApiKey, i16)>);
    impl Visitor for Gaps {
        fn visit<TReq: Theirs, TResp: Theirs, OReq: Ours, OResp: Ours>(&mut self, api: ApiKey) {
            let (lo, hi) = api.codec_versions();
            for v in lo..=hi {
                let covered =
                    common_versions::<TReq>(api).contains(&v) && common_versions::<TResp>(api).contains(&v);
                if !covered {
                    self.0.push((api, v));
                }
            }
        }
    }
    let mut gaps = Gaps(Vec::new());
    for &api in ApiKey::KAFKA {
        apis::visit(api, &mut gaps);
    }
    assert_eq!(
        gaps.0,
        vec![
            (ApiKey::Fetch, 18),
            (ApiKey::ListOffsets, 10),
            (ApiKey::InitProducerId, 6),
            (ApiKey::EndTxn, 5),
            (ApiKey::WriteTxnMarkers, 2),
            (ApiKey::DescribeLogDirs, 5),
            (ApiKey::AlterPartitionReassignments, 1),
        ],
        "versions the oracle does not cover"
    );
}
