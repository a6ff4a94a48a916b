//! The `/metrics` listener: a minimal HTTP/1.1 server on its own socket (never the
//! Kafka listener) that answers `GET /metrics` and closes each connection after one
//! response. Requests are bounded (8 KiB of head, 5 s to send it), so a stray client
//! cannot hold memory or a task for long.

use crate::broker::Broker;
use crate::controller::raft::MetadataQuorum;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

const MAX_HEAD_BYTES: usize = 8 * 1024;
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// Scrapes served at once; more wait in the accept backlog.
const MAX_CONCURRENT: usize = 8;

/// Binds `addr` for the metrics endpoint. A port already taken is logged and the broker
/// goes on without metrics (several test brokers on one machine share the default).
pub async fn bind(addr: SocketAddr) -> Option<TcpListener> {
    match TcpListener::bind(addr).await {
        Ok(l) => {
            let local = l.local_addr().unwrap_or(addr);
            tracing::info!(address = %local, "serving metrics at http://{local}/metrics");
            Some(l)
        }
        Err(e) => {
            tracing::warn!(address = %addr, error = %e, "cannot bind metrics.listener; metrics are not served");
            None
        }
    }
}

/// Serves scrapes until shutdown.
pub async fn serve(
    listener: TcpListener,
    broker: Arc<Broker>,
    quorum: Option<Arc<MetadataQuorum>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT));
    loop {
        let accepted = tokio::select! {
            _ = shutdown.changed() => return,
            a = listener.accept() => a,
        };
        let (stream, _) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::debug!(error = %e, "metrics accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = permits.clone().acquire_owned().await else { return };
        let broker = broker.clone();
        let quorum = quorum.clone();
        tokio::spawn(async move {
            if let Err(e) = answer(stream, &broker, quorum.as_ref()).await {
                tracing::debug!(error = %e, "metrics request failed");
            }
            drop(permit);
        });
    }
}

async fn answer(
    mut stream: TcpStream,
    broker: &Arc<Broker>,
    quorum: Option<&Arc<MetadataQuorum>>,
) -> std::io::Result<()> {
    let head = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut stream)).await {
        Ok(r) => r?,
        Err(_) => return Ok(()),
    };
    let (status, content_type, body) = match parse_request_line(&head) {
        Some(("GET", "/metrics")) => {
            ("200 OK", "text/plain; version=0.0.4; charset=utf-8", super::render(broker, quorum).await)
        }
        Some(("GET", _)) => ("404 Not Found", "text/plain", "not found; try /metrics\n".to_string()),
        Some(_) => ("405 Method Not Allowed", "text/plain", "only GET is served\n".to_string()),
        None => ("400 Bad Request", "text/plain", "bad request\n".to_string()),
    };
    let header = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(header.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

/// Reads until the blank line ending the request head (or the size limit).
async fn read_head(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < MAX_HEAD_BYTES {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(buf)
}

/// Method and path of the request line, the query string dropped.
fn parse_request_line(head: &[u8]) -> Option<(&str, &str)> {
    let line = std::str::from_utf8(head).ok()?.lines().next()?;
    let mut parts = line.split(' ');
    let method = parts.next()?;
    let target = parts.next()?;
    parts.next()?.starts_with("HTTP/").then_some(())?;
    Some((method, target.split('?').next().unwrap_or(target)))
}

#[cfg(test)]
mod tests {
    use super::parse_request_line;

    #[test]
    fn request_lines_are_parsed_and_queries_dropped() {
        assert_eq!(
            parse_request_line(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Some(("GET", "/metrics"))
        );
        assert_eq!(parse_request_line(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n"), Some(("GET", "/metrics")));
        assert_eq!(parse_request_line(b"POST / HTTP/1.1\r\n\r\n"), Some(("POST", "/")));
        assert_eq!(parse_request_line(b"garbage\r\n\r\n"), None);
    }
}
