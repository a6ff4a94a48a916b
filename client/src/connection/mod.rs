//! One pipelined connection per broker.
//!
//! A writer task sends requests in the order they are queued and a reader task takes
//! the responses, which Kafka returns per connection in request order; each response is
//! matched to its request by correlation id (a mismatch is a protocol error that closes
//! the connection). The number of requests awaiting a response is bounded
//! (`max.in.flight.requests.per.connection` for a producer). On connect the client asks
//! the broker's ApiVersions and then speaks, per API, the highest version both sides
//! know. Record batches travel as their own chunks in vectored writes: never copied into
//! a request buffer.
//!
//! A request that gets no answer within `request.timeout.ms` closes the connection, as
//! Kafka's clients do: every request on it fails with a retriable error and the next
//! call makes a new connection ([`pool::Pool`]).

pub mod pool;

use crate::config::ClientConfig;
use crate::error::{Error, Result};
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};
use std::io::IoSlice;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use strata_protocol::codec::Writer;
use strata_protocol::frame::FrameDecoder;
use strata_protocol::header::decode_response;
use strata_protocol::messages::api_versions::{ApiVersionsRequest, ApiVersionsResponse};
use strata_protocol::{ApiKey, ErrorCode, RequestBody, RequestHeader, ResponseBody};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::task::AbortHandle;

/// Read buffer growth step: big enough that a large fetch response takes few reads.
const READ_CHUNK: usize = 256 * 1024;

/// A response with the size of its frame (length prefix included), for byte counters.
#[derive(Debug)]
pub struct Response {
    /// The decoded body.
    pub body: ResponseBody,
    /// Bytes of the response frame.
    pub frame_bytes: usize,
}

/// A request awaiting its response.
struct Expect {
    correlation_id: i32,
    api: ApiKey,
    version: i16,
    reply: oneshot::Sender<Result<Response>>,
    _permit: OwnedSemaphorePermit,
}

/// A request queued for the writer.
struct Outgoing {
    chunks: Vec<Bytes>,
    expect: Option<Expect>,
    written: Option<oneshot::Sender<Result<()>>>,
}

struct Shared {
    addr: String,
    client_id: String,
    request_timeout: Duration,
    next_correlation_id: AtomicI32,
    versions: Mutex<HashMap<i16, (i16, i16)>>,
    pending: Mutex<VecDeque<Expect>>,
    closed: AtomicBool,
    close_reason: Mutex<Option<Error>>,
    tasks: Mutex<Vec<AbortHandle>>,
    in_flight: Arc<Semaphore>,
}

/// A connection to one broker. Cloning shares it; it closes when every clone is dropped
/// or on the first failure.
#[derive(Clone)]
pub struct Connection {
    shared: Arc<Shared>,
    tx: mpsc::UnboundedSender<Outgoing>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("addr", &self.shared.addr)
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl Connection {
    /// Connects to `addr` (host:port) with TCP_NODELAY and learns the broker's API
    /// versions. At most `max_in_flight` requests await a response at once.
    pub async fn connect(addr: &str, config: &ClientConfig, max_in_flight: usize) -> Result<Connection> {
        let stream = tokio::time::timeout(config.connect_timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| Error::connection(addr, "connect timed out"))?
            .map_err(|e| Error::connection(addr, e))?;
        stream.set_nodelay(true).map_err(|e| Error::connection(addr, e))?;
        let (read, write) = stream.into_split();
        let shared = Arc::new(Shared {
            addr: addr.to_string(),
            client_id: config.client_id.clone(),
            request_timeout: config.request_timeout,
            next_correlation_id: AtomicI32::new(1),
            versions: Mutex::new(HashMap::new()),
            pending: Mutex::new(VecDeque::new()),
            closed: AtomicBool::new(false),
            close_reason: Mutex::new(None),
            tasks: Mutex::new(Vec::new()),
            in_flight: Arc::new(Semaphore::new(max_in_flight.max(1))),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let writer = tokio::spawn(write_loop(shared.clone(), write, rx));
        let reader = tokio::spawn(read_loop(
            shared.clone(),
            read,
            FrameDecoder::new(config.max_response_bytes.max(1024)),
        ));
        lock(&shared.tasks).extend([writer.abort_handle(), reader.abort_handle()]);
        let conn = Connection { shared, tx };
        conn.negotiate_versions().await?;
        Ok(conn)
    }

    /// The broker's host:port.
    pub fn addr(&self) -> &str {
        &self.shared.addr
    }

    /// True once the connection failed or was closed: make a new one.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    /// The highest version of `api` both the broker and this client speak.
    pub fn version(&self, api: ApiKey) -> Result<i16> {
        self.version_at_most(api, i16::MAX)
    }

    /// The highest common version of `api` that is at most `max` (for APIs whose newer
    /// versions change semantics the caller has not opted into).
    pub fn version_at_most(&self, api: ApiKey, max: i16) -> Result<i16> {
        let (ours_min, ours_max) = api.codec_versions();
        let theirs = lock(&self.shared.versions).get(&(api as i16)).copied();
        let (theirs_min, theirs_max) = theirs.ok_or(Error::UnsupportedVersion { api })?;
        let top = ours_max.min(theirs_max).min(max);
        if top < ours_min.max(theirs_min) {
            return Err(Error::UnsupportedVersion { api });
        }
        Ok(top)
    }

    /// Sends `body` at the highest common version and waits for its response.
    pub async fn call(&self, body: RequestBody) -> Result<ResponseBody> {
        let version = self.version(body.api_key())?;
        Ok(self.call_at(version, body).await?.body)
    }

    /// Sends `body` at `version` and waits for its response (with its frame size).
    pub async fn call_at(&self, version: i16, body: RequestBody) -> Result<Response> {
        let rx = self.submit(version, &body).await?;
        self.await_reply(rx).await
    }

    /// Queues `body` at `version` and returns the receiver of its response without
    /// waiting for it: a caller pipelines by submitting several before awaiting any.
    /// Waits while `max_in_flight` requests are outstanding.
    pub async fn submit(
        &self,
        version: i16,
        body: &RequestBody,
    ) -> Result<oneshot::Receiver<Result<Response>>> {
        let permit = self.shared.in_flight.clone().acquire_owned().await.map_err(|_| self.failure())?;
        if self.is_closed() {
            return Err(self.failure());
        }
        let api = body.api_key();
        let correlation_id = self.shared.next_correlation_id.fetch_add(1, Ordering::Relaxed);
        let chunks = self.encode(correlation_id, version, body);
        let (reply, rx) = oneshot::channel();
        let expect = Expect { correlation_id, api, version, reply, _permit: permit };
        self.tx.send(Outgoing { chunks, expect: Some(expect), written: None }).map_err(|_| self.failure())?;
        Ok(rx)
    }

    /// Waits for a submitted request's response, at most `request.timeout.ms`; a
    /// timeout closes the connection.
    pub async fn await_reply(&self, rx: oneshot::Receiver<Result<Response>>) -> Result<Response> {
        self.await_reply_within(rx, self.shared.request_timeout).await
    }

    /// Like [`Connection::await_reply`] with another timeout, for requests the broker
    /// may rightly hold longer than `request.timeout.ms` (JoinGroup waits up to the
    /// group's rebalance timeout).
    pub async fn await_reply_within(
        &self,
        rx: oneshot::Receiver<Result<Response>>,
        timeout: Duration,
    ) -> Result<Response> {
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(self.failure()),
            Err(_) => {
                let e = Error::timeout(format!(
                    "no response from {} within {} ms",
                    self.shared.addr,
                    timeout.as_millis()
                ));
                close(&self.shared, e.clone());
                Err(e)
            }
        }
    }

    /// Sends a request that gets no response (Produce with `acks=0`); resolves once it is
    /// written to the socket.
    pub async fn send_without_response(&self, version: i16, body: &RequestBody) -> Result<()> {
        if self.is_closed() {
            return Err(self.failure());
        }
        let correlation_id = self.shared.next_correlation_id.fetch_add(1, Ordering::Relaxed);
        let chunks = self.encode(correlation_id, version, body);
        let (written, rx) = oneshot::channel();
        self.tx
            .send(Outgoing { chunks, expect: None, written: Some(written) })
            .map_err(|_| self.failure())?;
        rx.await.map_err(|_| self.failure())?
    }

    /// Closes the connection; requests awaiting a response fail.
    pub fn close(&self) {
        close(&self.shared, Error::Closed);
    }

    fn encode(&self, correlation_id: i32, version: i16, body: &RequestBody) -> Vec<Bytes> {
        let api = body.api_key();
        let header = RequestHeader {
            api_key: api as i16,
            api_version: version,
            correlation_id,
            client_id: Some(self.shared.client_id.clone()),
        };
        let mut w = Writer::with_capacity(256);
        w.i32(0);
        header.write(&mut w, version >= api.flexible_from());
        body.encode(&mut w, version);
        let len = w.len() - 4;
        w.patch_prefix_i32(i32::try_from(len).unwrap_or(i32::MAX));
        w.into_memory_chunks()
    }

    /// Why the connection is unusable.
    fn failure(&self) -> Error {
        lock(&self.shared.close_reason)
            .clone()
            .unwrap_or_else(|| Error::connection(&self.shared.addr, "connection closed"))
    }

    /// ApiVersions v3 (KIP-511); a broker that does not know v3 answers
    /// UNSUPPORTED_VERSION in the v0 format with its versions, which is used instead.
    async fn negotiate_versions(&self) -> Result<()> {
        let (_, ours) = ApiKey::ApiVersions.codec_versions();
        let mut version = ours.min(3);
        for _ in 0..2 {
            let request = RequestBody::ApiVersions(ApiVersionsRequest {
                client_software_name: "strata-client".into(),
                client_software_version: env!("CARGO_PKG_VERSION").into(),
            });
            let response = self.call_at(version, request).await?;
            let ResponseBody::ApiVersions(r) = response.body else {
                return Err(Error::protocol(self.addr(), "ApiVersions answered with another API"));
            };
            if r.error_code == ErrorCode::UnsupportedVersion.code() && version > 0 {
                version = supported_api_versions(&r).unwrap_or(0);
                continue;
            }
            if let Some(e) = Error::from_code(r.error_code, None) {
                return Err(e);
            }
            let map = r.api_keys.iter().map(|k| (k.api_key, (k.min_version, k.max_version))).collect();
            *lock(&self.shared.versions) = map;
            return Ok(());
        }
        Err(Error::UnsupportedVersion { api: ApiKey::ApiVersions })
    }
}

/// The broker's highest ApiVersions version, from an UNSUPPORTED_VERSION answer.
fn supported_api_versions(r: &ApiVersionsResponse) -> Option<i16> {
    r.api_keys.iter().find(|k| k.api_key == ApiKey::ApiVersions as i16).map(|k| k.max_version.min(3))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Marks the connection closed with `reason`, stops its tasks and fails every request
/// awaiting a response. Idempotent: the first reason wins.
fn close(shared: &Shared, reason: Error) {
    if shared.closed.swap(true, Ordering::AcqRel) {
        return;
    }
    *lock(&shared.close_reason) = Some(reason.clone());
    shared.in_flight.close();
    for task in lock(&shared.tasks).drain(..) {
        task.abort();
    }
    let pending: Vec<Expect> = lock(&shared.pending).drain(..).collect();
    for e in pending {
        let _ = e.reply.send(Err(reason.clone()));
    }
}

async fn write_loop(
    shared: Arc<Shared>,
    mut stream: OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Outgoing>,
) {
    while let Some(out) = rx.recv().await {
        if let Some(expect) = out.expect {
            // Registered before the bytes leave, so the response cannot beat it.
            lock(&shared.pending).push_back(expect);
        }
        let result = write_chunks(&mut stream, &out.chunks).await;
        let failed = result.as_ref().err().map(|e| Error::connection(&shared.addr, e));
        if let Some(written) = out.written {
            let _ = written.send(result.map_err(|e| Error::connection(&shared.addr, e)));
        }
        if let Some(e) = failed {
            close(&shared, e);
            return;
        }
    }
    // Every handle is gone: close the socket; the reader ends on EOF or abort.
    let _ = stream.shutdown().await;
    close(&shared, Error::Closed);
}

async fn write_chunks(stream: &mut OwnedWriteHalf, chunks: &[Bytes]) -> std::io::Result<()> {
    let (mut index, mut offset) = advance(chunks, 0, 0, 0);
    while index < chunks.len() {
        let slices: Vec<IoSlice<'_>> = std::iter::once(&chunks[index][offset..])
            .chain(chunks[index + 1..].iter().map(|c| &c[..]))
            .take(64)
            .map(IoSlice::new)
            .collect();
        let n = stream.write_vectored(&slices).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        (index, offset) = advance(chunks, index, offset, n);
    }
    Ok(())
}

/// Where a partially written list of chunks resumes: skips `written` bytes from chunk
/// `index` at `offset`, and any empty chunks after.
fn advance(chunks: &[Bytes], mut index: usize, mut offset: usize, mut written: usize) -> (usize, usize) {
    while written > 0 && index < chunks.len() {
        let left = chunks[index].len() - offset;
        if written < left {
            return (index, offset + written);
        }
        written -= left;
        index += 1;
        offset = 0;
    }
    while index < chunks.len() && offset == chunks[index].len() {
        index += 1;
        offset = 0;
    }
    (index, offset)
}

async fn read_loop(shared: Arc<Shared>, mut stream: OwnedReadHalf, mut frames: FrameDecoder) {
    let reason = loop {
        let frame = match frames.next_frame() {
            Ok(Some(frame)) => frame,
            Ok(None) => {
                let buf = frames.buffer();
                if buf.capacity() - buf.len() < READ_CHUNK / 4 {
                    buf.reserve(READ_CHUNK);
                }
                match stream.read_buf(buf).await {
                    Ok(0) => break Error::connection(&shared.addr, "closed by the broker"),
                    Ok(_) => continue,
                    Err(e) => break Error::connection(&shared.addr, e),
                }
            }
            Err(e) => break Error::protocol(&shared.addr, e),
        };
        let Some(expect) = lock(&shared.pending).pop_front() else {
            break Error::protocol(&shared.addr, "a response to no request");
        };
        let frame_bytes = frame.len() + 4;
        let decoded = decode_response(frame.clone(), expect.api, expect.version).or_else(|e| {
            // A broker refusing our ApiVersions version answers in the v0 format.
            if expect.api == ApiKey::ApiVersions && expect.version > 0 {
                decode_response(frame, expect.api, 0)
            } else {
                Err(e)
            }
        });
        match decoded {
            Ok((correlation_id, body)) if correlation_id == expect.correlation_id => {
                let _ = expect.reply.send(Ok(Response { body, frame_bytes }));
            }
            Ok((correlation_id, _)) => {
                let e = Error::protocol(
                    &shared.addr,
                    format!(
                        "correlation id {correlation_id} answers request {} ({})",
                        expect.correlation_id,
                        expect.api.name()
                    ),
                );
                let _ = expect.reply.send(Err(e.clone()));
                break e;
            }
            Err(e) => {
                let e = Error::protocol(
                    &shared.addr,
                    format!("{} v{} response: {e}", expect.api.name(), expect.version),
                );
                let _ = expect.reply.send(Err(e.clone()));
                break e;
            }
        }
    };
    close(&shared, reason);
}

#[cfg(test)]
mod tests;
