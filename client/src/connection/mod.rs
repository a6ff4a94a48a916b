//! One pipelined connection per broker.
//!
//! Requests leave in the order they are queued: the caller writes its request to the
//! socket itself when nothing is queued ahead of it and the socket takes it at once
//! (the common case: no task hand-off, and the bytes go out from the core that just
//! built them); otherwise the rest waits in a queue that a writer task drains as the
//! socket becomes writable. A reader task takes the responses, which Kafka returns per connection in request order; each response is
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
use tokio::io::AsyncReadExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Notify, OwnedSemaphorePermit, Semaphore};
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

/// Who takes a response.
enum Reply {
    /// A caller awaiting it ([`Connection::submit`]).
    Channel(oneshot::Sender<Result<Response>>),
    /// A function the reader task calls ([`Connection::submit_with`]).
    Call(Box<dyn FnOnce(Result<Response>) + Send>),
}

impl Reply {
    fn deliver(self, result: Result<Response>) {
        match self {
            Reply::Channel(tx) => {
                let _ = tx.send(result);
            }
            Reply::Call(f) => f(result),
        }
    }
}

/// A request awaiting its response.
struct Expect {
    correlation_id: i32,
    api: ApiKey,
    version: i16,
    reply: Reply,
    /// When the reader gives up on it and closes the connection; `None` when the
    /// caller awaiting it keeps its own timeout.
    deadline: Option<tokio::time::Instant>,
    _permit: Option<OwnedSemaphorePermit>,
}

/// A request queued for the writer.
struct Outgoing {
    chunks: Vec<Bytes>,
    expect: Option<Expect>,
    written: Option<oneshot::Sender<Result<()>>>,
}

/// What the writer side holds under its lock: the requests waiting for the socket,
/// the first of which may be partly written.
struct WriteQueue {
    /// The socket's write half; taken away when the connection closes, so the socket
    /// closes then even while handles remain.
    stream: Option<Arc<OwnedWriteHalf>>,
    waiting: VecDeque<Outgoing>,
    /// Chunk index and offset already written of `waiting`'s front.
    front_written: (usize, usize),
    /// Every [`Connection`] handle is gone: the writer ends once `waiting` is empty.
    handles_gone: bool,
}

struct Shared {
    addr: String,
    writes: Mutex<WriteQueue>,
    writer_wake: Notify,
    client_id: String,
    request_timeout: Duration,
    next_correlation_id: AtomicI32,
    versions: Mutex<HashMap<i16, (i16, i16)>>,
    pending: Mutex<VecDeque<Expect>>,
    closed: AtomicBool,
    close_reason: Mutex<Option<Error>>,
    tasks: Mutex<Vec<AbortHandle>>,
    in_flight: Arc<Semaphore>,
    /// Wakes the reader: the connection closed (it fails what awaits a response), or a
    /// request with a deadline came while it had none to wait for.
    reader_wake: Notify,
    /// Whether the reader waits with a deadline; set under the `pending` lock.
    deadline_armed: AtomicBool,
}

/// A connection to one broker. Cloning shares it; it closes when every clone is dropped
/// or on the first failure.
#[derive(Clone)]
pub struct Connection {
    shared: Arc<Shared>,
    _handle: Arc<Handle>,
}

/// Dropped with the last [`Connection`] clone: tells the writer to close the socket
/// once what is queued is written (the tasks hold `Shared` themselves).
struct Handle(Arc<Shared>);

impl Drop for Handle {
    fn drop(&mut self) {
        lock(&self.0.writes).handles_gone = true;
        self.0.writer_wake.notify_one();
    }
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
            writes: Mutex::new(WriteQueue {
                stream: Some(Arc::new(write)),
                waiting: VecDeque::new(),
                front_written: (0, 0),
                handles_gone: false,
            }),
            writer_wake: Notify::new(),
            client_id: config.client_id.clone(),
            request_timeout: config.request_timeout,
            next_correlation_id: AtomicI32::new(1),
            versions: Mutex::new(HashMap::new()),
            pending: Mutex::new(VecDeque::new()),
            closed: AtomicBool::new(false),
            close_reason: Mutex::new(None),
            tasks: Mutex::new(Vec::new()),
            in_flight: Arc::new(Semaphore::new(max_in_flight.max(1))),
            reader_wake: Notify::new(),
            deadline_armed: AtomicBool::new(false),
        });
        let writer = tokio::spawn(write_loop(shared.clone()));
        let reader = tokio::spawn(read_loop(
            shared.clone(),
            read,
            FrameDecoder::new(config.max_response_bytes.max(1024)),
        ));
        lock(&shared.tasks).push(writer.abort_handle());
        drop(reader);
        let conn = Connection { _handle: Arc::new(Handle(shared.clone())), shared };
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
        let expect = Expect {
            correlation_id,
            api,
            version,
            reply: Reply::Channel(reply),
            deadline: None,
            _permit: Some(permit),
        };
        self.enqueue(Outgoing { chunks, expect: Some(expect), written: None })?;
        Ok(rx)
    }

    /// Queues `body` at `version` without waiting for anything: written at once when
    /// the socket takes it, and `on_reply` is called on the connection's reader task
    /// with the response, or with the failure once the connection closes (also when
    /// no response comes within `request.timeout.ms`). Not bounded by the connection's
    /// in-flight limit: the caller keeps its own (the producer's sender does).
    ///
    /// `on_reply` runs on the reader task and so must not block; it may submit more.
    /// An `Err` from this call means the request was not queued and `on_reply` is
    /// dropped uncalled.
    pub fn submit_with(
        &self,
        version: i16,
        body: &RequestBody,
        on_reply: impl FnOnce(Result<Response>) + Send + 'static,
    ) -> Result<()> {
        if self.is_closed() {
            return Err(self.failure());
        }
        let api = body.api_key();
        let correlation_id = self.shared.next_correlation_id.fetch_add(1, Ordering::Relaxed);
        let chunks = self.encode(correlation_id, version, body);
        let expect = Expect {
            correlation_id,
            api,
            version,
            reply: Reply::Call(Box::new(on_reply)),
            deadline: Some(tokio::time::Instant::now() + self.shared.request_timeout),
            _permit: None,
        };
        self.enqueue(Outgoing { chunks, expect: Some(expect), written: None })
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
        self.enqueue(Outgoing { chunks, expect: None, written: Some(written) })?;
        rx.await.map_err(|_| self.failure())?
    }

    /// Writes `out` now if nothing waits ahead of it, as far as the socket takes it
    /// without blocking, and leaves the rest to the writer task. Once its response is
    /// registered, the outcome reaches it (a write failure included) and this is `Ok`.
    fn enqueue(&self, mut out: Outgoing) -> Result<()> {
        let shared = &self.shared;
        let mut writes = lock(&shared.writes);
        let Some(stream) = writes.stream.clone() else {
            return Err(self.failure());
        };
        let registered = out.expect.is_some();
        {
            // Checked under the lock the reader fails pending requests under, so a
            // request is either refused here or failed there, never left behind.
            let mut pending = lock(&shared.pending);
            if self.is_closed() {
                return Err(self.failure());
            }
            if let Some(expect) = out.expect.take() {
                if expect.deadline.is_some() && !shared.deadline_armed.swap(true, Ordering::AcqRel) {
                    shared.reader_wake.notify_one();
                }
                // Registered before the bytes leave, so the response cannot beat it.
                pending.push_back(expect);
            }
        }
        if !writes.waiting.is_empty() {
            writes.waiting.push_back(out);
            return Ok(());
        }
        match write_now(&stream, &out.chunks, (0, 0)) {
            Ok(Progress::Done) => {
                drop(writes);
                if let Some(written) = out.written {
                    let _ = written.send(Ok(()));
                }
                Ok(())
            }
            Ok(Progress::Blocked(at)) => {
                writes.front_written = at;
                writes.waiting.push_back(out);
                drop(writes);
                shared.writer_wake.notify_one();
                Ok(())
            }
            Err(e) => {
                drop(writes);
                let e = Error::connection(&shared.addr, e);
                close(shared, e.clone());
                if let Some(written) = out.written {
                    let _ = written.send(Err(e.clone()));
                }
                if registered {
                    Ok(())
                } else {
                    Err(e)
                }
            }
        }
    }

    /// Queues a request that gets no response without waiting: written at once when
    /// the socket takes it, else by the writer task.
    pub fn send_now(&self, version: i16, body: &RequestBody) -> Result<()> {
        if self.is_closed() {
            return Err(self.failure());
        }
        let correlation_id = self.shared.next_correlation_id.fetch_add(1, Ordering::Relaxed);
        let chunks = self.encode(correlation_id, version, body);
        self.enqueue(Outgoing { chunks, expect: None, written: None })
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

/// Marks the connection closed with `reason` and stops its writer; the reader task
/// then fails every request awaiting a response (never the caller of `close`, which may
/// hold locks a response's function takes). Idempotent: the first reason wins.
fn close(shared: &Shared, reason: Error) {
    if shared.closed.swap(true, Ordering::AcqRel) {
        return;
    }
    *lock(&shared.close_reason) = Some(reason.clone());
    // Dropping the write half shuts the socket for writing; the read half goes with the
    // reader task.
    let stream = lock(&shared.writes).stream.take();
    drop(stream);
    shared.in_flight.close();
    for task in lock(&shared.tasks).drain(..) {
        task.abort();
    }
    shared.reader_wake.notify_one();
}

/// How far a non-blocking write got.
#[derive(Debug, PartialEq, Eq)]
enum Progress {
    /// Every chunk is written.
    Done,
    /// The socket is full; the chunk index and offset written so far.
    Blocked((usize, usize)),
}

/// Writes `chunks` from `from` (chunk index, offset) until done or the socket would
/// block, without waiting.
fn write_now(stream: &OwnedWriteHalf, chunks: &[Bytes], from: (usize, usize)) -> std::io::Result<Progress> {
    let (mut index, mut offset) = advance(chunks, from.0, from.1, 0);
    while index < chunks.len() {
        let slices: Vec<IoSlice<'_>> = std::iter::once(&chunks[index][offset..])
            .chain(chunks[index + 1..].iter().map(|c| &c[..]))
            .take(64)
            .map(IoSlice::new)
            .collect();
        match stream.try_write_vectored(&slices) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => (index, offset) = advance(chunks, index, offset, n),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                return Ok(Progress::Blocked((index, offset)))
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Progress::Done)
}

/// Drains the requests a caller could not write at once, waiting for the socket to
/// become writable; closes the connection once every handle is gone and nothing waits.
async fn write_loop(shared: Arc<Shared>) {
    enum Next {
        Sleep,
        AwaitWritable(Arc<OwnedWriteHalf>),
        Fail(std::io::Error),
        Close,
    }
    loop {
        let next = {
            let mut writes = lock(&shared.writes);
            let from = writes.front_written;
            let Some(stream) = writes.stream.clone() else { return };
            match writes.waiting.front() {
                None if writes.handles_gone => Next::Close,
                None => Next::Sleep,
                Some(front) => match write_now(&stream, &front.chunks, from) {
                    Ok(Progress::Done) => {
                        let done = writes.waiting.pop_front();
                        writes.front_written = (0, 0);
                        drop(writes);
                        if let Some(written) = done.and_then(|o| o.written) {
                            let _ = written.send(Ok(()));
                        }
                        continue;
                    }
                    Ok(Progress::Blocked(at)) => {
                        writes.front_written = at;
                        Next::AwaitWritable(stream)
                    }
                    Err(e) => Next::Fail(e),
                },
            }
        };
        match next {
            // Nothing waits: sleep until a caller queues what the socket did not take.
            Next::Sleep => shared.writer_wake.notified().await,
            Next::AwaitWritable(stream) => {
                if let Err(e) = stream.writable().await {
                    fail_writes(&shared, Error::connection(&shared.addr, e));
                    return;
                }
            }
            Next::Fail(e) => {
                fail_writes(&shared, Error::connection(&shared.addr, e));
                return;
            }
            Next::Close => break,
        }
    }
    // Every handle is gone and everything is written.
    close(&shared, Error::Closed);
}

/// Closes the connection after a write failed and fails the writes waiting for it.
fn fail_writes(shared: &Shared, e: Error) {
    close(shared, e.clone());
    let waiting: Vec<Outgoing> = lock(&shared.writes).waiting.drain(..).collect();
    for out in waiting {
        if let Some(written) = out.written {
            let _ = written.send(Err(e.clone()));
        }
    }
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
        if shared.closed.load(Ordering::Acquire) {
            break None;
        }
        let frame = match frames.next_frame() {
            Ok(Some(frame)) => frame,
            Ok(None) => {
                let buf = frames.buffer();
                if buf.capacity() - buf.len() < READ_CHUNK / 4 {
                    buf.reserve(READ_CHUNK);
                }
                let deadline = {
                    let pending = lock(&shared.pending);
                    let at = pending.iter().filter_map(|e| e.deadline).min();
                    shared.deadline_armed.store(at.is_some(), Ordering::Release);
                    at
                };
                let timeout = async {
                    match deadline {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    read = stream.read_buf(buf) => match read {
                        Ok(0) => break Some(Error::connection(&shared.addr, "closed by the broker")),
                        Ok(_) => continue,
                        Err(e) => break Some(Error::connection(&shared.addr, e)),
                    },
                    () = shared.reader_wake.notified() => continue,
                    () = timeout => break Some(Error::timeout(format!(
                        "no response from {} within {} ms",
                        shared.addr,
                        shared.request_timeout.as_millis()
                    ))),
                }
            }
            Err(e) => break Some(Error::protocol(&shared.addr, e)),
        };
        let Some(expect) = lock(&shared.pending).pop_front() else {
            break Some(Error::protocol(&shared.addr, "a response to no request"));
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
                expect.reply.deliver(Ok(Response { body, frame_bytes }));
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
                close(&shared, e.clone());
                expect.reply.deliver(Err(e));
                break None;
            }
            Err(e) => {
                let e = Error::protocol(
                    &shared.addr,
                    format!("{} v{} response: {e}", expect.api.name(), expect.version),
                );
                close(&shared, e.clone());
                expect.reply.deliver(Err(e));
                break None;
            }
        }
    };
    if let Some(reason) = reason {
        close(&shared, reason);
    }
    // `closed` is set: nothing is registered after this drain (see `enqueue`).
    let reason = lock(&shared.close_reason).clone().unwrap_or(Error::Closed);
    let pending: Vec<Expect> = lock(&shared.pending).drain(..).collect();
    for e in pending {
        e.reply.deliver(Err(reason.clone()));
    }
}

#[cfg(test)]
mod tests;
