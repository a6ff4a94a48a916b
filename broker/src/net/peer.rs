//! A pipelined Kafka-protocol connection from this broker to another node: requests go
//! out with increasing correlation ids, answers are matched back by id, and a broken
//! connection fails every request in flight and is re-opened by the next call.
//!
//! Each purpose gets its own [`PeerClient`] (one per replica fetcher, one for the
//! controller channel, one for transaction markers ...): the serving broker handles the
//! requests of a connection one at a time, so a long-polling fetch would otherwise hold
//! up a marker or a heartbeat behind it.

use bytes::Bytes;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use strata_protocol::frame::FrameDecoder;
use strata_protocol::header::{decode_response, encode_request};
use strata_protocol::{ApiKey, RequestBody, RequestHeader, ResponseBody};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

/// Largest response frame accepted from a peer.
const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;
/// Requests queued for a connection's writer.
const QUEUE: usize = 256;

/// Why a call to a peer failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum NetError {
    /// The TCP connection could not be made.
    #[error("cannot connect to {addr}: {reason}")]
    Connect {
        /// The peer.
        addr: String,
        /// What failed.
        reason: String,
    },
    /// The connection broke before the answer came.
    #[error("connection to {addr} lost: {reason}")]
    Disconnected {
        /// The peer.
        addr: String,
        /// What failed.
        reason: String,
    },
    /// No answer within the timeout (the connection is dropped: answers must not be
    /// matched to later requests).
    #[error("request to {addr} timed out after {after_ms} ms")]
    Timeout {
        /// The peer.
        addr: String,
        /// The timeout.
        after_ms: u64,
    },
    /// The answer could not be decoded.
    #[error("undecodable answer from {addr}: {reason}")]
    Decode {
        /// The peer.
        addr: String,
        /// What failed.
        reason: String,
    },
}

type Reply = oneshot::Sender<Result<ResponseBody, NetError>>;

struct Outgoing {
    frame: Bytes,
    correlation_id: i32,
    api: ApiKey,
    version: i16,
    reply: Reply,
}

/// A live connection: its writer's queue.
struct Conn {
    tx: mpsc::Sender<Outgoing>,
}

/// A lazily (re)connected client to one peer address.
pub struct PeerClient {
    addr: String,
    client_id: String,
    conn: Mutex<Option<Arc<Conn>>>,
    next_correlation_id: std::sync::atomic::AtomicI32,
}

impl std::fmt::Debug for PeerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerClient").field("addr", &self.addr).field("client_id", &self.client_id).finish()
    }
}

impl PeerClient {
    /// A client for `addr` ("host:port"); `client_id` names this broker and purpose in
    /// the peer's logs.
    pub fn new(addr: impl Into<String>, client_id: impl Into<String>) -> PeerClient {
        PeerClient {
            addr: addr.into(),
            client_id: client_id.into(),
            conn: Mutex::new(None),
            next_correlation_id: std::sync::atomic::AtomicI32::new(1),
        }
    }

    /// The peer's address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Drops the connection (the next call reconnects).
    pub fn reset(&self) {
        *self.conn.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Sends `body` at `version` and waits for the answer, at most `timeout`.
    pub async fn call(
        &self,
        body: RequestBody,
        version: i16,
        timeout: Duration,
    ) -> Result<ResponseBody, NetError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let conn = match tokio::time::timeout_at(deadline, self.connection()).await {
            Ok(c) => c?,
            Err(_) => return Err(self.timed_out(timeout)),
        };
        let api = body.api_key();
        let correlation_id =
            self.next_correlation_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed) & i32::MAX;
        let header = RequestHeader {
            api_key: api as i16,
            api_version: version,
            correlation_id,
            client_id: Some(self.client_id.clone()),
        };
        let frame = encode_request(&header, &body);
        let (reply, rx) = oneshot::channel();
        let outgoing = Outgoing { frame, correlation_id, api, version, reply };
        // The queue is bounded: a writer stuck behind a peer that stopped reading must not
        // hold this call past its deadline.
        match tokio::time::timeout_at(deadline, conn.tx.send(outgoing)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => {
                self.forget(&conn);
                return Err(NetError::Disconnected {
                    addr: self.addr.clone(),
                    reason: "writer stopped".into(),
                });
            }
            Err(_) => {
                self.forget(&conn);
                return Err(self.timed_out(timeout));
            }
        }
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(result)) => {
                if result.is_err() {
                    self.forget(&conn);
                }
                result
            }
            Ok(Err(_)) => {
                self.forget(&conn);
                Err(NetError::Disconnected { addr: self.addr.clone(), reason: "connection closed".into() })
            }
            Err(_) => {
                self.forget(&conn);
                Err(self.timed_out(timeout))
            }
        }
    }

    fn timed_out(&self, timeout: Duration) -> NetError {
        NetError::Timeout { addr: self.addr.clone(), after_ms: timeout.as_millis() as u64 }
    }

    /// Drops `conn` if it is still the current connection.
    fn forget(&self, conn: &Arc<Conn>) {
        let mut current = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn)) {
            *current = None;
        }
    }

    async fn connection(&self) -> Result<Arc<Conn>, NetError> {
        if let Some(c) = self.conn.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            if !c.tx.is_closed() {
                return Ok(c);
            }
        }
        let stream = TcpStream::connect(&self.addr)
            .await
            .map_err(|e| NetError::Connect { addr: self.addr.clone(), reason: e.to_string() })?;
        let _ = stream.set_nodelay(true);
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(run_connection(stream, rx, self.addr.clone()));
        let conn = Arc::new(Conn { tx });
        let mut current = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        // Another call may have connected meanwhile; keep one.
        if let Some(c) = current.as_ref().filter(|c| !c.tx.is_closed()) {
            return Ok(c.clone());
        }
        *current = Some(conn.clone());
        Ok(conn)
    }
}

/// Pending answers of one connection, by correlation id.
type InFlight = HashMap<i32, (ApiKey, i16, Reply)>;

/// Writes queued requests and reads answers until either side fails; then fails every
/// request still waiting.
async fn run_connection(stream: TcpStream, mut rx: mpsc::Receiver<Outgoing>, addr: String) {
    let (mut rd, mut wr) = stream.into_split();
    let in_flight: Arc<Mutex<InFlight>> = Arc::new(Mutex::new(HashMap::new()));
    let reader_in_flight = in_flight.clone();
    let reader_addr = addr.clone();
    let mut reader = tokio::spawn(async move {
        let mut frames = FrameDecoder::new(MAX_RESPONSE_BYTES);
        loop {
            loop {
                match frames.next_frame() {
                    Ok(Some(frame)) => deliver(&reader_in_flight, frame, &reader_addr)?,
                    Ok(None) => break,
                    Err(e) => return Err(format!("bad frame: {e}")),
                }
            }
            use bytes::BufMut;
            if frames.buffer().capacity() - frames.buffered() < 4096 {
                frames.buffer().reserve(64 * 1024);
            }
            let limit = frames.read_limit();
            let mut target = frames.buffer().limit(limit);
            match rd.read_buf(&mut target).await {
                Ok(0) => return Err("closed by peer".to_string()),
                Ok(_) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    });
    let reason = loop {
        tokio::select! {
            outgoing = rx.recv() => {
                let Some(o) = outgoing else { break "client dropped".to_string() };
                in_flight.lock().unwrap_or_else(|p| p.into_inner()).insert(o.correlation_id, (o.api, o.version, o.reply));
                if let Err(e) = wr.write_all(&o.frame).await {
                    break e.to_string();
                }
            }
            result = &mut reader => {
                break match result {
                    Ok(Err(reason)) => reason,
                    Ok(Ok(())) => "reader ended".to_string(),
                    Err(e) => e.to_string(),
                };
            }
        }
    };
    reader.abort();
    rx.close();
    let pending: Vec<Reply> =
        in_flight.lock().unwrap_or_else(|p| p.into_inner()).drain().map(|(_, (_, _, r))| r).collect();
    for reply in pending {
        let _ = reply.send(Err(NetError::Disconnected { addr: addr.clone(), reason: reason.clone() }));
    }
    while let Ok(o) = rx.try_recv() {
        let _ = o.reply.send(Err(NetError::Disconnected { addr: addr.clone(), reason: reason.clone() }));
    }
}

fn deliver(in_flight: &Mutex<InFlight>, frame: Bytes, addr: &str) -> Result<(), String> {
    if frame.len() < 4 {
        return Err("response frame shorter than its header".into());
    }
    let correlation_id = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
    let Some((api, version, reply)) =
        in_flight.lock().unwrap_or_else(|p| p.into_inner()).remove(&correlation_id)
    else {
        return Err(format!("answer with unknown correlation id {correlation_id}"));
    };
    let result = decode_response(frame, api, version)
        .map(|(_, body)| body)
        .map_err(|e| NetError::Decode { addr: addr.to_string(), reason: e.to_string() });
    let failed = result.is_err();
    let _ = reply.send(result);
    if failed {
        return Err("undecodable answer".into());
    }
    Ok(())
}
