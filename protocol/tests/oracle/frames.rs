//! Whole frames: request header v1/v2 with and without a client id, response header
//! v0/v1 (ApiVersions always v0), through `decode_request`/`encode_request` and
//! `decode_response`/`encode_response`, which also exercises the API dispatch tables.

use crate::apis::{self, common_versions, Ours, Theirs, Visitor};
use crate::fill::Gen;
use crate::messages::{diff, short};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader as TheirRequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use strata_protocol::header::{decode_response, encode_request, response_header_flexible};
use strata_protocol::{decode_request, encode_response, ApiKey};

fn client_id(seed: u64) -> Option<&'static str> {
    match seed % 3 {
        0 => None,
        1 => Some(""),
        _ => Some("strata-oracle-é"),
    }
}

fn their_request_header(api: ApiKey, version: i16, seed: u64) -> TheirRequestHeader {
    let mut h = TheirRequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id((seed as i32).wrapping_mul(7919) - 3)
        .with_client_id(client_id(seed).map(StrBytes::from_static_str));
    if seed % 4 == 3 {
        // Only written in header v2; a newer client's header tag must be skipped.
        h.unknown_tagged_fields.insert(7, Bytes::from_static(b"tag"));
    }
    h
}

fn check_request<T: Theirs>(api: ApiKey, version: i16, seed: u64) -> Result<(), String> {
    let header_version = T::header_version(version);
    let ours_flexible = version >= api.flexible_from();
    if (header_version == 2) != ours_flexible {
        return Err(format!(
            "request header v{header_version} in kafka-protocol, flexible={ours_flexible} in ours"
        ));
    }
    let header = their_request_header(api, version, seed);
    let body = T::fill(&mut Gen::new(seed, false), version, false);
    let mut buf = BytesMut::new();
    header.encode(&mut buf, header_version).map_err(|e| e.to_string())?;
    body.encode(&mut buf, version).map_err(|e| e.to_string())?;
    let frame = buf.freeze();

    let req = decode_request(frame.clone()).map_err(|e| format!("decode_request: {e}"))?;
    let h = &req.header;
    if req.api != api
        || h.api_key != api as i16
        || h.api_version != version
        || h.correlation_id != header.correlation_id
        || h.client_id.as_deref() != header.client_id.as_deref()
    {
        return Err(format!("header decoded as {h:?} for {header:?}"));
    }

    let ours = encode_request(&req.header, &req.body);
    let mut theirs = BytesMut::new();
    theirs.extend_from_slice(&(frame.len() as i32).to_be_bytes());
    if header.unknown_tagged_fields.is_empty() || header_version < 2 {
        theirs.extend_from_slice(&frame);
    } else {
        // We do not keep unknown header tags, so compare with the frame without them.
        let mut plain = BytesMut::new();
        let mut clean = header.clone();
        clean.unknown_tagged_fields.clear();
        clean.encode(&mut plain, header_version).map_err(|e| e.to_string())?;
        body.encode(&mut plain, version).map_err(|e| e.to_string())?;
        theirs = BytesMut::new();
        theirs.extend_from_slice(&(plain.len() as i32).to_be_bytes());
        theirs.extend_from_slice(&plain);
    }
    if ours[..] != theirs[..] {
        return Err(format!("request frame differs: {}", diff(&theirs, &ours)));
    }

    let mut rest = ours.slice(4..);
    let h2 = TheirRequestHeader::decode(&mut rest, header_version).map_err(|e| e.to_string())?;
    let b2 = T::decode(&mut rest, version).map_err(|e| e.to_string())?;
    if h2.correlation_id != header.correlation_id || h2.client_id != header.client_id {
        return Err(format!("kafka-protocol reads our header as {h2:?}"));
    }
    if b2 != body || !rest.is_empty() {
        return Err(format!("kafka-protocol reads our body as {}", short(&b2)));
    }
    Ok(())
}

fn check_response<T: Theirs>(api: ApiKey, version: i16, seed: u64) -> Result<(), String> {
    let header_version = T::header_version(version);
    if (header_version == 1) != response_header_flexible(api, version) {
        return Err(format!(
            "response header v{header_version} in kafka-protocol, flexible={} in ours",
            response_header_flexible(api, version)
        ));
    }
    let correlation_id = (seed as i32).wrapping_mul(-104_729);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let body = T::fill(&mut Gen::new(seed, false), version, false);
    let mut buf = BytesMut::new();
    header.encode(&mut buf, header_version).map_err(|e| e.to_string())?;
    body.encode(&mut buf, version).map_err(|e| e.to_string())?;
    let frame = buf.freeze();

    let (cid, decoded) =
        decode_response(frame.clone(), api, version).map_err(|e| format!("decode_response: {e}"))?;
    if cid != correlation_id || decoded.api_key() != api {
        return Err(format!("decoded correlation id {cid} for {api:?} as {:?}", decoded.api_key()));
    }
    let chunks = encode_response(cid, version, &decoded);
    let ours: Vec<u8> = chunks.into_iter().flat_map(|c| c.load().expect("in-memory chunk")).collect();
    let mut theirs = (frame.len() as i32).to_be_bytes().to_vec();
    theirs.extend_from_slice(&frame);
    if ours != theirs {
        return Err(format!("response frame differs: {}", diff(&theirs, &ours)));
    }
    Ok(())
}

struct Frames(Vec<String>);

impl Visitor for Frames {
    fn visit<TReq: Theirs, TResp: Theirs, OReq: Ours, OResp: Ours>(&mut self, api: ApiKey) {
        for version in common_versions::<TReq>(api) {
            for seed in 0..crate::seeds().min(8) {
                if let Err(e) = check_request::<TReq>(api, version, seed) {
                    self.0.push(format!("{} v{version} request frame seed {seed}: {e}", api.name()));
                    break;
                }
            }
        }
        for version in common_versions::<TResp>(api) {
            for seed in 0..crate::seeds().min(8) {
                if let Err(e) = check_response::<TResp>(api, version, seed) {
                    self.0.push(format!("{} v{version} response frame seed {seed}: {e}", api.name()));
                    break;
                }
            }
        }
    }
}

#[test]
fn every_frame_round_trips_through_kafka_protocol() {
    let mut v = Frames(Vec::new());
    for &api in ApiKey::KAFKA {
        apis::visit(api, &mut v);
    }
    crate::report("frames", &v.0);
}

/// KIP-511: a client that does not know the broker's versions must be able to read the
/// ApiVersions answer, so it always has response header v0, even in flexible versions.
#[test]
fn api_versions_response_always_uses_header_v0() {
    use strata_protocol::messages::api_versions::ApiVersionsResponse;
    for version in 0..=4 {
        let body = ApiVersionsResponse { error_code: 35, ..Default::default() };
        let chunks = encode_response(42, version, &body.into());
        let frame: Vec<u8> = chunks.into_iter().flat_map(|c| c.load().expect("in-memory chunk")).collect();
        // Length, correlation id, then straight into the body's error code: no tag buffer.
        assert_eq!(&frame[4..8], &42i32.to_be_bytes(), "v{version}");
        assert_eq!(&frame[8..10], &35i16.to_be_bytes(), "v{version}");
    }
}
