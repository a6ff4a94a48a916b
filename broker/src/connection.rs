//! One client connection: frames in, requests decoded, handled one at a time in arrival
//! order, responses out in the same order. Reading runs ahead of handling (pipelining)
//! up to `queued.max.requests`, and writing runs in its own task so a slow reader does
//! not stall request handling until that queue fills.
//!
//! A frame that cannot be a request (bad length, malformed header, unknown API key,
//! undecodable body) closes this connection only; the broker is unaffected.

use crate::broker::Broker;
use crate::handlers;
use bytes::Bytes;
use std::net::SocketAddr;
use std::sync::Arc;
use strata_protocol::frame::FrameDecoder;
use strata_protocol::{decode_request, RequestError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tracing::Instrument;

/// Serves `stream` until the client closes it, a protocol error occurs, or shutdown.
pub async fn serve(
    broker: Arc<Broker>,
    stream: TcpStream,
    peer: SocketAddr,
    mut shutdown: watch::Receiver<bool>,
) {
    let span = tracing::debug_span!("connection", %peer);
    async move {
        let (mut rd, wr) = stream.into_split();
        let (tx, rx) = mpsc::channel::<Vec<Bytes>>(broker.config.queued_max_requests);
        let writer = tokio::spawn(write_loop(wr, rx));
        let mut frames = FrameDecoder::new(broker.config.socket_request_max_bytes as usize);
        'conn: loop {
            loop {
                match frames.next_frame() {
                    Ok(Some(frame)) => {
                        if !handle_frame(&broker, frame, &tx, peer).await {
                            break 'conn;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::info!(error = %e, "closing connection: bad frame");
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
                    Ok(_) => {}
                    Err(e) => {
                        tracing::debug!(error = %e, "read failed");
                        break;
                    }
                }
            }
        }
        drop(tx);
        let _ = writer.await;
    }
    .instrument(span)
    .await
}

/// Decodes and handles one frame; false means the connection must close.
async fn handle_frame(
    broker: &Arc<Broker>,
    frame: Bytes,
    tx: &mpsc::Sender<Vec<Bytes>>,
    peer: SocketAddr,
) -> bool {
    let request = match decode_request(frame) {
        Ok(r) => r,
        Err(RequestError::UnsupportedVersion(header)) => {
            return match handlers::unsupported_version(&header) {
                Some(chunks) => tx.send(chunks).await.is_ok(),
                None => {
                    tracing::info!(
                        api_key = header.api_key,
                        api_version = header.api_version,
                        "closing connection: unsupported version"
                    );
                    false
                }
            };
        }
        Err(e) => {
            tracing::info!(error = %e, "closing connection: malformed request");
            return false;
        }
    };
    let span = tracing::debug_span!(
        "request",
        api = request.api.name(),
        version = request.header.api_version,
        correlation_id = request.header.correlation_id,
        client_id = request.header.client_id.as_deref().unwrap_or(""),
    );
    match handlers::dispatch(broker, request, peer).instrument(span).await {
        handlers::Outcome::Respond(chunks) => tx.send(chunks).await.is_ok(),
        handlers::Outcome::NoResponse => true,
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

async fn write_loop(mut wr: OwnedWriteHalf, mut rx: mpsc::Receiver<Vec<Bytes>>) {
    while let Some(chunks) = rx.recv().await {
        for chunk in chunks {
            if wr.write_all(&chunk).await.is_err() {
                return;
            }
        }
    }
    let _ = wr.shutdown().await;
}
