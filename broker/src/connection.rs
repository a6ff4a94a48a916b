//! One client connection: frames in, requests decoded and handled one at a time in
//! arrival order (Kafka's ordering guarantee per connection), responses out in the same
//! order from a writer task of their own (`send.rs`), so a slow reader does not stall
//! handling until `queued.max.requests` responses wait. A request whose answer waits
//! (an `acks=all` produce waiting for replication) holds back the next one until it is
//! answered, as Kafka's muted channel does; see `handle`.
//!
//! Handling stays inline in the reading task. A separate handler task, so that the
//! socket read of the next produce request overlaps the append of this one, measured
//! 0.8x the produce throughput on the 2-core development machine: the hand-offs cost
//! more than the overlap gains when the client needs the other core.
//!
//! A frame that cannot be a request (bad length, malformed header, unknown API key,
//! undecodable body) closes this connection only, after the responses to the requests
//! before it; the broker is unaffected.

pub mod limits;
mod send;

use crate::broker::Broker;
use crate::handlers;
use crate::handlers::context::{ListenerKind, RequestContext};
use std::net::SocketAddr;
use std::sync::Arc;
use strata_protocol::codec::Chunk;
use strata_protocol::frame::FrameDecoder;
use strata_protocol::{decode_request, Request, RequestError};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tracing::Instrument;

/// A decoded frame: a request to handle, or a response the codec made itself
/// (UNSUPPORTED_VERSION for ApiVersions).
enum Work {
    Request(Request),
    Respond(Vec<Chunk>),
}

/// Serves `stream` until the client closes it, a protocol error occurs, it stays idle
/// for `connections.max.idle.ms`, a request it started does not arrive within
/// `socket.request.receive.timeout.ms`, or shutdown. `slot` counts it against the
/// connection limits until it ends.
pub async fn serve(
    broker: Arc<Broker>,
    stream: TcpStream,
    peer: SocketAddr,
    kind: ListenerKind,
    listener: Arc<str>,
    slot: Option<limits::ConnectionSlot>,
    mut shutdown: watch::Receiver<bool>,
) {
    let ctx = RequestContext { peer, listener, kind };
    let span = tracing::debug_span!("connection", %peer);
    let _open = broker.metrics.connection_opened();
    let _slot = slot;
    async move {
        let (mut rd, wr) = stream.into_split();
        let (responses, to_write) = mpsc::channel::<send::Reply>(broker.config.queued_max_requests);
        let writer = tokio::spawn(send::write_loop(wr, to_write, broker.metrics.clone()).in_current_span());
        let max_frame = broker.config.socket_request_max_bytes as usize;
        let mut frames = FrameDecoder::new(max_frame);
        let memory = broker.request_memory.clone();
        // The request memory of the frame at the head of the buffer, taken once its
        // length is read.
        let mut held: Option<limits::MemoryPermit> = None;
        let mut watch = Watchdog::new(&broker.config.connections);
        'conn: loop {
            loop {
                if let (None, Some(memory), Some(size)) = (&held, &memory, frames.next_frame_size()) {
                    if size <= max_frame {
                        let permit = match memory.try_take(size) {
                            Some(p) => p,
                            // Not reading until memory is free is the backpressure.
                            None => tokio::select! {
                                _ = shutdown.changed() => break 'conn,
                                p = memory.take(size) => p,
                            },
                        };
                        held = Some(permit);
                    }
                }
                match frames.next_frame() {
                    Ok(Some(frame)) => {
                        let permit = held.take();
                        watch.frames += 1;
                        let Some(work) = decode(frame, peer) else { break 'conn };
                        let go_on = handle(&broker, work, &responses, &ctx).await;
                        drop(permit);
                        if !go_on {
                            break 'conn;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::info!(%peer, error = %e, "closing connection: bad frame");
                        break 'conn;
                    }
                }
            }
            if frames.buffer().capacity() - frames.buffered() < 4096 {
                frames.buffer().reserve(64 * 1024);
            }
            tokio::select! {
                _ = shutdown.changed() => break,
                n = read_some(&mut rd, &mut frames) => match n {
                    Ok(0) => break,
                    Ok(_) => watch.reads += 1,
                    Err(e) => {
                        tracing::debug!(error = %e, "read failed");
                        break;
                    }
                },
                _ = watch.tick.tick() => {
                    match watch.check(frames.buffered() > 0) {
                        Some(Expired::Idle(ms)) => {
                            tracing::debug!(%peer, "closing connection: idle for connections.max.idle.ms ({ms} ms)");
                            break;
                        }
                        Some(Expired::Receive(ms)) => {
                            tracing::info!(%peer, "closing connection: a request was not received whole within socket.request.receive.timeout.ms ({ms} ms)");
                            break;
                        }
                        None => {}
                    }
                }
            }
        }
        // The writer sends what was answered before the end, then closes.
        drop(responses);
        let _ = writer.await;
    }
    .instrument(span)
    .await
}

/// Closes connections that stay idle or leave a request half-sent, checked on a coarse
/// tick (a quarter of the shorter timeout) so the read path reads no clock: each tick
/// looks at whether anything was read and whether a frame completed since the last.
struct Watchdog {
    tick: tokio::time::Interval,
    period: std::time::Duration,
    idle_limit: std::time::Duration,
    receive_limit: std::time::Duration,
    /// Socket reads and frames completed so far, and as seen by the last tick.
    reads: u64,
    frames: u64,
    seen: (u64, u64),
    quiet: std::time::Duration,
    incomplete: std::time::Duration,
}

impl Watchdog {
    fn new(config: &crate::config::connections::ConnectionLimitsConfig) -> Watchdog {
        let shorter = config.connections_max_idle.min(config.request_receive_timeout);
        let period =
            (shorter / 4).clamp(std::time::Duration::from_millis(10), std::time::Duration::from_secs(60));
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Watchdog {
            tick,
            period,
            idle_limit: config.connections_max_idle,
            receive_limit: config.request_receive_timeout,
            reads: 0,
            frames: 0,
            seen: (0, 0),
            quiet: std::time::Duration::ZERO,
            incomplete: std::time::Duration::ZERO,
        }
    }

    /// One tick: why the connection must close, if it must. `partial`: bytes of a
    /// request not yet whole are buffered.
    fn check(&mut self, partial: bool) -> Option<Expired> {
        let (reads, frames) = self.seen;
        self.quiet = if self.reads == reads { self.quiet + self.period } else { std::time::Duration::ZERO };
        self.incomplete = if partial && self.frames == frames {
            self.incomplete + self.period
        } else {
            std::time::Duration::ZERO
        };
        self.seen = (self.reads, self.frames);
        if self.incomplete >= self.receive_limit {
            return Some(Expired::Receive(self.receive_limit.as_millis()));
        }
        if self.quiet >= self.idle_limit {
            return Some(Expired::Idle(self.idle_limit.as_millis()));
        }
        None
    }
}

/// Which of the [`Watchdog`]'s limits a connection reached (the limit, in ms).
enum Expired {
    Idle(u128),
    Receive(u128),
}

/// Decodes one frame; `None` means the connection must close.
fn decode(frame: bytes::Bytes, peer: SocketAddr) -> Option<Work> {
    match decode_request(frame) {
        Ok(r) => Some(Work::Request(r)),
        Err(RequestError::UnsupportedVersion(header)) => match handlers::unsupported_version(&header) {
            Some(chunks) => Some(Work::Respond(chunks)),
            None => {
                tracing::info!(
                    %peer,
                    api_key = header.api_key,
                    api_version = header.api_version,
                    "closing connection: unsupported version"
                );
                None
            }
        },
        Err(e) => {
            tracing::info!(%peer, error = %e, "closing connection: malformed request");
            None
        }
    }
}

/// Handles one decoded frame; false means the connection must close.
async fn handle(
    broker: &Arc<Broker>,
    work: Work,
    responses: &mpsc::Sender<send::Reply>,
    ctx: &RequestContext,
) -> bool {
    let request = match work {
        Work::Respond(chunks) => return responses.send(send::Reply::Ready(chunks, None)).await.is_ok(),
        Work::Request(r) => r,
    };
    let started = std::time::Instant::now();
    let api = request.api;
    let span = tracing::debug_span!(
        "request",
        api = request.api.name(),
        version = request.header.api_version,
        correlation_id = request.header.correlation_id,
        client_id = request.header.client_id.as_deref().unwrap_or(""),
    );
    // Off unless `RUST_LOG=strata_broker::connection=trace`: every request, for debugging
    // what a client sent and in what order.
    span.in_scope(|| tracing::trace!("request received"));
    let handler = async {
        match ctx.kind {
            ListenerKind::Broker => handlers::dispatch(broker, request, ctx).instrument(span).await,
            ListenerKind::Controller => {
                handlers::controller::dispatch(broker.node(), request).instrument(span).await
            }
        }
    };
    let (outcome, remote) = crate::metrics::with_remote_wait(handler).await;
    let ready = std::time::Instant::now();
    let local = ready.saturating_duration_since(started).saturating_sub(remote);
    let timing = send::Timing { api, started, local, remote, ready };
    // The writer records the request's times once its response is written.
    match outcome {
        handlers::Outcome::Respond(chunks) => {
            responses.send(send::Reply::Ready(chunks, Some(timing))).await.is_ok()
        }
        handlers::Outcome::Later(wait) => {
            // The next request is handled only once this one is answered, as Kafka mutes a
            // connection until its response is sent: an `acks=all` produce that waits for
            // replication must not let the produce behind it append meanwhile. Otherwise
            // both are in the log yet both can be refused (the ISR shrinks: NOT_ENOUGH_
            // REPLICAS_AFTER_APPEND, then NOT_ENOUGH_REPLICAS on retry, which a client reads
            // as "not written"), and librdkafka, bumping its epoch once the first one times
            // out, sends the second again under the new epoch: the same records twice
            // (issue 36; tests/interop/test_produce_in_doubt.py).
            let (answered, wait_answered) = tokio::sync::oneshot::channel::<()>();
            let wait = Box::pin(async move {
                let chunks = wait.await;
                let _ = answered.send(());
                chunks
            });
            if responses.send(send::Reply::Later(wait, timing)).await.is_err() {
                return false;
            }
            // An error: the writer is gone (the peer closed), so is the connection.
            wait_answered.await.is_ok()
        }
        handlers::Outcome::NoResponse => {
            let phases =
                crate::metrics::RequestPhases { local, remote, total: local + remote, ..Default::default() };
            broker.metrics.request_done(api, &phases);
            true
        }
        handlers::Outcome::Close => false,
    }
}

/// Reads what the socket has into the frame decoder, never past the end of a large
/// frame being received (see `FrameDecoder::read_limit`).
async fn read_some(
    rd: &mut tokio::net::tcp::OwnedReadHalf,
    frames: &mut FrameDecoder,
) -> std::io::Result<usize> {
    use bytes::BufMut;
    let limit = frames.read_limit();
    let mut target = frames.buffer().limit(limit);
    rd.read_buf(&mut target).await
}
