//! One Kafka connection over tokio TCP, encoded and decoded with `strata-protocol`.
//!
//! A connection splits into a [`FrameWriter`] and a [`FrameReader`] so requests can be
//! pipelined: the writer sends while the reader takes responses in order (Kafka
//! answers each connection's requests in the order they were sent). Request frames go
//! out with vectored writes, so record batches are not copied into one buffer first.

use std::io::IoSlice;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use strata_protocol::codec::Writer;
use strata_protocol::frame::FrameDecoder;
use strata_protocol::header::decode_response;
use strata_protocol::{ApiKey, RequestBody, RequestHeader, ResponseBody};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// Largest response frame accepted (a fetch of 50 MiB plus headers fits).
pub const MAX_RESPONSE_BYTES: usize = 256 << 20;
/// How long connecting may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Read buffer growth step: big enough that a large fetch response takes few reads.
const READ_CHUNK: usize = 256 * 1024;

/// A request on the wire, awaiting its response.
#[derive(Debug, Clone, Copy)]
pub struct Sent {
    /// Correlation id of the request.
    pub correlation_id: i32,
    /// API of the request.
    pub api: ApiKey,
    /// Version it was sent at.
    pub version: i16,
    /// Size of the request frame in bytes, length prefix included.
    pub frame_bytes: usize,
}

/// Encodes a request frame (length prefix, header, body) as chunks to write in order;
/// byte fields such as record batches stay separate chunks rather than being copied.
pub fn encode_request_chunks(header: &RequestHeader, body: &RequestBody) -> Vec<Bytes> {
    let api = body.api_key();
    let mut w = Writer::with_capacity(256);
    w.i32(0);
    header.write(&mut w, header.api_version >= api.flexible_from());
    body.encode(&mut w, header.api_version);
    let len = w.len() - 4;
    w.patch_prefix_i32(i32::try_from(len).unwrap_or(i32::MAX));
    w.into_memory_chunks()
}

/// Where a partially written list of chunks resumes: skips `written` bytes from chunk
/// `index` at `offset`.
pub fn advance(chunks: &[Bytes], mut index: usize, mut offset: usize, mut written: usize) -> (usize, usize) {
    while written > 0 && index < chunks.len() {
        let left = chunks[index].len() - offset;
        if written < left {
            return (index, offset + written);
        }
        written -= left;
        index += 1;
        offset = 0;
    }
    // Skip empty chunks so the caller's loop ends exactly at the end.
    while index < chunks.len() && offset == chunks[index].len() {
        index += 1;
        offset = 0;
    }
    (index, offset)
}

/// The sending half of a connection.
#[derive(Debug)]
pub struct FrameWriter {
    stream: OwnedWriteHalf,
    client_id: Option<String>,
    next_correlation_id: i32,
}

impl FrameWriter {
    /// Sends one request at `version` and returns what the reader needs to match the
    /// response.
    pub async fn send(&mut self, version: i16, body: &RequestBody) -> Result<Sent> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let api = body.api_key();
        let header = RequestHeader {
            api_key: api as i16,
            api_version: version,
            correlation_id,
            client_id: self.client_id.clone(),
        };
        let chunks = encode_request_chunks(&header, body);
        let frame_bytes = chunks.iter().map(Bytes::len).sum();
        self.write_chunks(&chunks).await.with_context(|| format!("sending {} v{version}", api.name()))?;
        Ok(Sent { correlation_id, api, version, frame_bytes })
    }

    /// Closes the sending direction (TCP FIN) once everything written is sent.
    pub async fn shutdown(&mut self) -> Result<()> {
        self.stream.shutdown().await.context("closing the connection")
    }

    async fn write_chunks(&mut self, chunks: &[Bytes]) -> std::io::Result<()> {
        let (mut index, mut offset) = advance(chunks, 0, 0, 0);
        while index < chunks.len() {
            let slices: Vec<IoSlice<'_>> = std::iter::once(&chunks[index][offset..])
                .chain(chunks[index + 1..].iter().map(|c| &c[..]))
                .take(64)
                .map(IoSlice::new)
                .collect();
            let n = self.stream.write_vectored(&slices).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            (index, offset) = advance(chunks, index, offset, n);
        }
        Ok(())
    }
}

/// The receiving half of a connection.
#[derive(Debug)]
pub struct FrameReader {
    stream: OwnedReadHalf,
    frames: FrameDecoder,
}

impl FrameReader {
    /// The next whole response frame (without its length prefix).
    pub async fn next_frame(&mut self) -> Result<Bytes> {
        loop {
            if let Some(frame) = self.frames.next_frame()? {
                return Ok(frame);
            }
            let buf = self.frames.buffer();
            if buf.capacity() - buf.len() < READ_CHUNK / 4 {
                buf.reserve(READ_CHUNK);
            }
            let n = self.stream.read_buf(buf).await.context("reading a response")?;
            if n == 0 {
                bail!("the broker closed the connection");
            }
        }
    }

    /// Waits until the peer closes the connection (reading and dropping anything it
    /// sends), for at most `timeout`; false on timeout.
    pub async fn wait_closed(&mut self, timeout: Duration) -> bool {
        let drain = async {
            let mut buf = vec![0u8; 4096];
            while let Ok(n) = self.stream.read(&mut buf).await {
                if n == 0 {
                    break;
                }
            }
        };
        tokio::time::timeout(timeout, drain).await.is_ok()
    }

    /// Reads and decodes the response to `sent`, checking its correlation id.
    /// Returns the body and the frame size in bytes (length prefix included).
    pub async fn receive(&mut self, sent: &Sent) -> Result<(ResponseBody, usize)> {
        let frame = self.next_frame().await?;
        let frame_bytes = frame.len() + 4;
        let (correlation_id, body) = decode_response(frame, sent.api, sent.version)
            .map_err(|e| anyhow!("malformed {} v{} response: {e}", sent.api.name(), sent.version))?;
        if correlation_id != sent.correlation_id {
            bail!(
                "response correlation id {correlation_id} does not match request {} ({})",
                sent.correlation_id,
                sent.api.name()
            );
        }
        Ok((body, frame_bytes))
    }
}

/// A connection used one request at a time (metadata, admin, fetch).
#[derive(Debug)]
pub struct Connection {
    /// Sending half.
    pub writer: FrameWriter,
    /// Receiving half.
    pub reader: FrameReader,
    /// The address connected to.
    pub addr: String,
}

impl Connection {
    /// Connects to `addr` (host:port) with TCP_NODELAY, as Kafka clients do.
    pub async fn connect(addr: &str, client_id: &str) -> Result<Connection> {
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| anyhow!("connecting to {addr} timed out"))?
            .with_context(|| format!("connecting to {addr}"))?;
        stream.set_nodelay(true)?;
        let (read, write) = stream.into_split();
        Ok(Connection {
            writer: FrameWriter {
                stream: write,
                client_id: Some(client_id.to_string()),
                next_correlation_id: 1,
            },
            reader: FrameReader { stream: read, frames: FrameDecoder::new(MAX_RESPONSE_BYTES) },
            addr: addr.to_string(),
        })
    }

    /// Sends one request and waits for its response.
    pub async fn call(&mut self, version: i16, body: RequestBody) -> Result<ResponseBody> {
        Ok(self.call_sized(version, body).await?.0)
    }

    /// Like [`Connection::call`], also returning the response frame size.
    pub async fn call_sized(&mut self, version: i16, body: RequestBody) -> Result<(ResponseBody, usize)> {
        let sent = self.writer.send(version, &body).await?;
        self.reader.receive(&sent).await
    }

    /// Splits into halves for pipelining.
    pub fn into_split(self) -> (FrameWriter, FrameReader) {
        (self.writer, self.reader)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_protocol::messages::metadata::MetadataRequest;

    #[test]
    fn advance_skips_written_bytes_across_chunks() {
        let chunks = vec![Bytes::from_static(b"abc"), Bytes::new(), Bytes::from_static(b"defg")];
        assert_eq!(advance(&chunks, 0, 0, 0), (0, 0));
        assert_eq!(advance(&chunks, 0, 0, 2), (0, 2));
        assert_eq!(advance(&chunks, 0, 0, 3), (2, 0), "empty chunk skipped");
        assert_eq!(advance(&chunks, 0, 2, 3), (2, 2));
        assert_eq!(advance(&chunks, 2, 2, 2), (3, 0));
        assert_eq!(advance(&[Bytes::new()], 0, 0, 0), (1, 0));
    }

    #[test]
    fn chunks_match_the_protocol_crate_encoding() {
        let header = RequestHeader {
            api_key: ApiKey::Metadata as i16,
            api_version: 12,
            correlation_id: 9,
            client_id: Some("x".into()),
        };
        let body = RequestBody::Metadata(MetadataRequest::default());
        let joined: Vec<u8> =
            encode_request_chunks(&header, &body).iter().flat_map(|c| c.iter().copied()).collect();
        let reference = strata_protocol::header::encode_request(&header, &body);
        assert_eq!(joined, reference.to_vec());
    }
}
