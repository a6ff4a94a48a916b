//! Request and response headers, and which header version goes with which API version.

use crate::codec::{Chunk, Ctx, DecodeError, Reader, Wire, Writer};
use crate::messages::{ApiKey, RequestBody, ResponseBody};
use bytes::Bytes;

/// A request header (v1 for classic versions, v2 for flexible ones).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestHeader {
    /// The API key as sent; may be unknown to us.
    pub api_key: i16,
    /// The API version as sent.
    pub api_version: i16,
    /// Echoed in the response so the client can match it to the request.
    pub correlation_id: i32,
    /// Free-form client name, used in logs.
    pub client_id: Option<String>,
}

impl RequestHeader {
    /// Reads the fixed part (api key, version, correlation id, client id). The
    /// `client_id` is a classic nullable string even in header v2 (KIP-482 kept it so).
    pub fn read_fixed(r: &mut Reader) -> Result<RequestHeader, DecodeError> {
        let classic = Ctx { version: 0, flexible: false };
        let api_key = i16::read(r, classic)?;
        let api_version = i16::read(r, classic)?;
        let correlation_id = i32::read(r, classic)?;
        let client_id = Option::<String>::read(r, classic)?;
        Ok(RequestHeader { api_key, api_version, correlation_id, client_id })
    }

    /// Writes the header for `api` at this header's version.
    pub fn write(&self, w: &mut Writer, flexible: bool) {
        let classic = Ctx { version: 0, flexible: false };
        self.api_key.write(w, classic);
        self.api_version.write(w, classic);
        self.correlation_id.write(w, classic);
        self.client_id.write(w, classic);
        if flexible {
            w.uvarint(0);
        }
    }
}

/// Skips a tagged-field section (header v2 and response header v1 carry no tag we use).
pub fn skip_tagged_fields(r: &mut Reader) -> Result<(), DecodeError> {
    let n = r.uvarint()?;
    for _ in 0..n {
        r.uvarint()?;
        let size = r.uvarint()? as usize;
        r.take(size, "tagged field")?;
    }
    Ok(())
}

/// Why a request frame could not be turned into a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// Not even the header could be read: the connection is unusable.
    #[error("malformed request header: {0}")]
    Header(DecodeError),
    /// The API key is not one we know.
    #[error("unknown API key {}", .0.api_key)]
    UnknownApi(RequestHeader),
    /// The version is outside what the codec decodes.
    #[error("unsupported version {} of API key {}", .0.api_version, .0.api_key)]
    UnsupportedVersion(RequestHeader),
    /// The header was fine but the body was not.
    #[error("malformed body of API key {key}: {err}", key = .0.api_key, err = .1)]
    Body(RequestHeader, DecodeError),
}

/// A decoded request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The header.
    pub header: RequestHeader,
    /// The API it belongs to.
    pub api: ApiKey,
    /// The body.
    pub body: RequestBody,
}

/// Decodes one request frame (without its length prefix).
pub fn decode_request(frame: Bytes) -> Result<Request, RequestError> {
    let mut r = Reader::new(frame);
    let header = RequestHeader::read_fixed(&mut r).map_err(RequestError::Header)?;
    let Some(api) = ApiKey::from_i16(header.api_key) else {
        return Err(RequestError::UnknownApi(header));
    };
    let (lo, hi) = api.codec_versions();
    if header.api_version < lo || header.api_version > hi {
        return Err(RequestError::UnsupportedVersion(header));
    }
    if header.api_version >= api.flexible_from() {
        if let Err(e) = skip_tagged_fields(&mut r) {
            return Err(RequestError::Body(header, e));
        }
    }
    match RequestBody::decode(api, header.api_version, &mut r) {
        Ok(body) => Ok(Request { header, api, body }),
        Err(e) => Err(RequestError::Body(header, e)),
    }
}

/// True if the response to `api` at `version` uses response header v1 (tagged fields).
/// ApiVersions always answers with header v0 so that a client that does not yet know
/// the broker's versions can parse it (KIP-511).
pub fn response_header_flexible(api: ApiKey, version: i16) -> bool {
    api != ApiKey::ApiVersions && version >= api.flexible_from()
}

/// Encodes a whole response frame: the 4-byte length, the header and the body, as a
/// list of chunks to write in order (large record sets are not copied, and records of
/// a segment file stay there until the connection sends them).
pub fn encode_response(correlation_id: i32, version: i16, body: &ResponseBody) -> Vec<Chunk> {
    let api = body.api_key();
    let mut w = Writer::with_capacity(256);
    w.i32(0); // length, patched below
    w.i32(correlation_id);
    if response_header_flexible(api, version) {
        w.uvarint(0);
    }
    body.encode(&mut w, version);
    finish_frame(&mut w);
    w.into_frame()
}

/// Encodes a request frame (for clients and tests).
pub fn encode_request(header: &RequestHeader, body: &RequestBody) -> Bytes {
    let api = body.api_key();
    let mut w = Writer::with_capacity(256);
    w.i32(0);
    header.write(&mut w, header.api_version >= api.flexible_from());
    body.encode(&mut w, header.api_version);
    finish_frame(&mut w);
    w.into_memory_bytes()
}

fn finish_frame(w: &mut Writer) {
    let total = w.len() - 4;
    w.patch_prefix_i32(total as i32);
}

/// Decodes a response frame body (after the length prefix) for `api` at `version`.
pub fn decode_response(frame: Bytes, api: ApiKey, version: i16) -> Result<(i32, ResponseBody), DecodeError> {
    let mut r = Reader::new(frame);
    let correlation_id = i32::read(&mut r, Ctx { version: 0, flexible: false })?;
    if response_header_flexible(api, version) {
        skip_tagged_fields(&mut r)?;
    }
    Ok((correlation_id, ResponseBody::decode(api, version, &mut r)?))
}
