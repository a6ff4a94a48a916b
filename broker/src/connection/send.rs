//! The writing side of a connection: responses go out in order, as few system calls as
//! they allow. Responses that are ready together are coalesced into one `writev`, and a
//! fetch's segment file ranges go from the page cache to the socket with `sendfile`
//! (Kafka's `FileRecords.writeTo`), never through user space.

use std::io::{self, IoSlice};
use std::os::fd::AsRawFd;

use crate::metrics::{BrokerMetrics, RequestPhases};
use bytes::Bytes;
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata_protocol::codec::{Chunk, External};
use strata_storage::FileSlice;
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc;

/// Ready responses are gathered into one write up to this many bytes.
const COALESCE_BYTES: usize = 1 << 20;

/// Slices handed to one `writev` (Linux allows 1024; a few dozen cover any batch of
/// responses here).
const MAX_IOVECS: usize = 64;

/// A response to write: ready, or once its future completes (an `acks=all` produce
/// waiting for replication). Later responses wait behind it, so the order holds.
pub(super) enum Reply {
    /// Ready now; with the times of its request, unless it answers a frame no handler
    /// saw (an unsupported version's answer).
    Ready(Vec<Chunk>, Option<Timing>),
    /// Ready when the future completes; that wait is the request's remote time.
    Later(std::pin::Pin<Box<dyn std::future::Future<Output = Vec<Chunk>> + Send>>, Timing),
}

/// A request's times up to its response being ready; the writer adds the rest and
/// records them ([`RequestPhases`]).
pub(super) struct Timing {
    /// The request's API.
    pub api: strata_protocol::ApiKey,
    /// When the request was read.
    pub started: Instant,
    /// In the handler, minus its remote waits.
    pub local: Duration,
    /// The handler's remote waits (a delayed response's wait is added by the writer).
    pub remote: Duration,
    /// When the response was ready (a delayed one: when its wait began).
    pub ready: Instant,
}

impl Timing {
    /// Records the request whose response the writer began writing at `begin` and
    /// finished at `end`.
    fn written(&self, metrics: &BrokerMetrics, begin: Instant, end: Instant) {
        metrics.request_done(
            self.api,
            &RequestPhases {
                local: self.local,
                remote: self.remote,
                response_queue: begin.saturating_duration_since(self.ready),
                response_send: end.saturating_duration_since(begin),
                total: end.saturating_duration_since(self.started),
            },
        );
    }
}

impl Reply {
    async fn chunks(self) -> (Vec<Chunk>, Option<Timing>) {
        match self {
            Reply::Ready(chunks, timing) => (chunks, timing),
            Reply::Later(wait, mut timing) => {
                let chunks = wait.await;
                let now = Instant::now();
                timing.remote += now.saturating_duration_since(timing.ready);
                timing.ready = now;
                (chunks, Some(timing))
            }
        }
    }
}

/// Responses gathered for one write, and the times of their requests.
#[derive(Default)]
struct Pending {
    chunks: Vec<Chunk>,
    timings: Vec<Timing>,
}

impl Pending {
    fn add(&mut self, (chunks, timing): (Vec<Chunk>, Option<Timing>)) -> usize {
        let bytes = chunks.iter().map(Chunk::len).sum();
        self.chunks.extend(chunks);
        self.timings.extend(timing);
        bytes
    }

    /// Writes what is gathered and records its requests' times.
    async fn send(&mut self, wr: &mut OwnedWriteHalf, metrics: &BrokerMetrics) -> io::Result<()> {
        let begin = Instant::now();
        send_chunks(wr, &self.chunks).await?;
        let end = Instant::now();
        for t in self.timings.drain(..) {
            t.written(metrics, begin, end);
        }
        self.chunks.clear();
        Ok(())
    }
}

/// Writes every response from `rx` in order until the queue closes or the peer goes.
pub(super) async fn write_loop(
    mut wr: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Reply>,
    metrics: Arc<BrokerMetrics>,
) {
    let mut pending = Pending::default();
    while let Some(first) = rx.recv().await {
        let mut bytes = pending.add(first.chunks().await);
        while bytes < COALESCE_BYTES {
            let Ok(more) = rx.try_recv() else { break };
            if matches!(more, Reply::Later(..)) {
                // Send what is ready first, then wait for this one.
                if let Err(e) = pending.send(&mut wr, &metrics).await {
                    tracing::debug!(error = %e, "write failed; closing connection");
                    return;
                }
            }
            bytes += pending.add(more.chunks().await);
        }
        if let Err(e) = pending.send(&mut wr, &metrics).await {
            tracing::debug!(error = %e, "write failed; closing connection");
            return;
        }
        tracing::trace!(bytes, "responses written");
    }
    let _ = wr.shutdown().await;
}

/// Sends `chunks` in order: runs of in-memory chunks with `writev`, external ones on
/// their own.
async fn send_chunks(wr: &mut OwnedWriteHalf, chunks: &[Chunk]) -> io::Result<()> {
    let mut i = 0;
    while i < chunks.len() {
        if let Chunk::External(e) = &chunks[i] {
            send_external(wr, e.as_ref()).await?;
            i += 1;
            continue;
        }
        let end =
            chunks[i..].iter().position(|c| matches!(c, Chunk::External(_))).map_or(chunks.len(), |p| i + p);
        let run: Vec<&Bytes> = chunks[i..end]
            .iter()
            .filter_map(|c| match c {
                Chunk::Bytes(b) if !b.is_empty() => Some(b),
                _ => None,
            })
            .collect();
        write_all_vectored(wr, &run).await?;
        i = end;
    }
    Ok(())
}

/// Writes every byte of `bufs` with as few `writev` calls as the socket allows.
async fn write_all_vectored(wr: &mut OwnedWriteHalf, bufs: &[&Bytes]) -> io::Result<()> {
    let (mut index, mut offset) = (0usize, 0usize);
    while index < bufs.len() {
        let slices: Vec<IoSlice<'_>> = std::iter::once(&bufs[index][offset..])
            .chain(bufs[index + 1..].iter().map(|b| &b[..]))
            .take(MAX_IOVECS)
            .map(IoSlice::new)
            .collect();
        let mut written = wr.write_vectored(&slices).await?;
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        while written > 0 {
            let left = bufs[index].len() - offset;
            if written < left {
                offset += written;
                written = 0;
            } else {
                written -= left;
                index += 1;
                offset = 0;
            }
        }
    }
    Ok(())
}

/// Sends an external payload: a segment file range with `sendfile`, anything else
/// loaded into memory first.
async fn send_external(wr: &mut OwnedWriteHalf, e: &dyn External) -> io::Result<()> {
    match e.as_any().downcast_ref::<FileSlice>() {
        Some(slice) => sendfile_all(wr, slice).await,
        None => wr.write_all(&e.load()?).await,
    }
}

/// Copies the whole file range to the socket inside the kernel, waiting for the socket
/// to drain whenever it is full.
async fn sendfile_all(wr: &mut OwnedWriteHalf, slice: &FileSlice) -> io::Result<()> {
    let socket = wr.as_ref();
    let socket_fd = socket.as_raw_fd();
    let file_fd = slice.file().as_raw_fd();
    let mut offset = libc::off_t::try_from(slice.position()).map_err(io::Error::other)?;
    let end = offset + libc::off_t::from(slice.len());
    while offset < end {
        socket.writable().await?;
        let sent = socket.try_io(Interest::WRITABLE, || {
            let count = usize::try_from(end - offset).unwrap_or(usize::MAX);
            // SAFETY: both descriptors are open for the duration of the call (the socket
            // half and the slice's `Arc<File>` are borrowed); `offset` is a valid
            // off_t the kernel advances by the bytes it sent.
            let n = unsafe { libc::sendfile(socket_fd, file_fd, &mut offset, count) };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        });
        match sent {
            // The frame's length promised these bytes: the connection cannot go on.
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "segment file ended before the fetched range (truncated under a reader)",
                ))
            }
            Ok(_) => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use strata_protocol::records::{NewRecord, RecordBatchBuilder};
    use strata_storage::{Log, LogConfig};
    use tokio::io::AsyncReadExt;
    use tokio::net::{TcpListener, TcpStream};

    /// Several megabytes of batches in a real log, read back as one file slice.
    fn log_with_batches(dir: &std::path::Path) -> (Log, Bytes) {
        let log = Log::open(dir, "t", 0, LogConfig::default(), true, 0).expect("open log");
        let mut written = Vec::new();
        for i in 0..60u8 {
            let mut b = RecordBatchBuilder::new(0);
            for j in 0..100u8 {
                b.append(&NewRecord::new(1, None, Some(Bytes::from(vec![i ^ j; 1000])))).expect("append");
            }
            let batch = b.build().expect("build");
            log.append(batch, 0, 1).expect("log append");
        }
        let slice = log.read(0, usize::MAX, i64::MAX, true).expect("read").records;
        written.extend_from_slice(&slice.read_bytes().expect("pread"));
        (log, Bytes::from(written))
    }

    #[tokio::test]
    async fn memory_and_file_chunks_arrive_whole_and_in_order_through_a_full_socket() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (log, file_bytes) = log_with_batches(dir.path());
        assert!(file_bytes.len() > 4 << 20, "larger than any socket buffer");
        let slice = log.read(0, usize::MAX, i64::MAX, true).expect("read").records;
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let client = TcpStream::connect(addr).await.expect("connect");
        let (server, _) = listener.accept().await.expect("accept");
        let (_rd, mut wr) = server.into_split();

        // Many small chunks (one writev), the file, more small chunks, the file again.
        let small: Vec<Bytes> = (0..300u32).map(|i| Bytes::from(i.to_be_bytes().to_vec())).collect();
        let file: Arc<dyn External> = Arc::new(slice);
        let mut chunks: Vec<Chunk> = small.iter().cloned().map(Chunk::Bytes).collect();
        chunks.push(Chunk::External(file.clone()));
        chunks.push(Chunk::Bytes(Bytes::new()));
        chunks.extend(small.iter().cloned().map(Chunk::Bytes));
        chunks.push(Chunk::External(file));
        let mut expected = Vec::new();
        for c in &chunks {
            expected.extend_from_slice(&c.clone().load().expect("load"));
        }

        // The reader drains slowly, so writes stop short and sendfile meets a full socket.
        let reader = tokio::spawn(async move {
            let mut client = client;
            let mut got = Vec::new();
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = client.read(&mut buf).await.expect("read");
                if n == 0 {
                    return got;
                }
                got.extend_from_slice(&buf[..n]);
                if got.len() < 1 << 20 {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
            }
        });
        send_chunks(&mut wr, &chunks).await.expect("send");
        wr.shutdown().await.expect("shutdown");
        let got = reader.await.expect("reader");
        assert_eq!(got.len(), expected.len());
        assert!(got == expected, "bytes differ");
    }
}
