//! This machine's loopback TCP bandwidth: one writer thread and one reader thread per
//! connection stream bytes over 127.0.0.1 as fast as the kernel moves them. No
//! protocol, no parsing: the ceiling a broker on the same machine is compared against.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};

use crate::json::Json;

/// What a loopback run measured.
#[derive(Debug, Clone, Copy)]
pub struct LoopbackResult {
    /// Bytes received.
    pub bytes: u64,
    /// Time from the first write to the end.
    pub elapsed: Duration,
    /// Connections used.
    pub connections: usize,
}

impl LoopbackResult {
    /// Megabytes (10^6 bytes) per second.
    pub fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64().max(1e-9) / 1e6
    }

    /// As a JSON object.
    pub fn to_json(&self) -> Json {
        Json::object()
            .with("mode", "loopback")
            .with("connections", self.connections)
            .with("bytes", self.bytes)
            .with("elapsed_s", self.elapsed.as_secs_f64())
            .with("mb_per_sec", self.mb_per_sec())
    }
}

/// Streams over `connections` loopback connections for `duration` with writes of
/// `block_size` bytes.
pub fn measure(duration: Duration, connections: usize, block_size: usize) -> Result<LoopbackResult> {
    let listener = TcpListener::bind("127.0.0.1:0").context("binding 127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let received = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    let mut readers = Vec::new();
    for _ in 0..connections {
        let client = TcpStream::connect(addr).context("connecting over loopback")?;
        let (server, _) = listener.accept()?;
        client.set_nodelay(true)?;
        let received = received.clone();
        readers.push(thread::spawn(move || drain(server, block_size, &received)));
        let stop = stop.clone();
        threads.push(thread::spawn(move || stream(client, block_size, &stop)));
    }
    let start = Instant::now();
    thread::sleep(duration);
    let bytes = received.load(Ordering::Relaxed);
    let elapsed = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().map_err(|_| anyhow!("writer thread panicked"))??;
    }
    for r in readers {
        r.join().map_err(|_| anyhow!("reader thread panicked"))??;
    }
    Ok(LoopbackResult { bytes, elapsed, connections })
}

fn stream(mut s: TcpStream, block_size: usize, stop: &AtomicBool) -> Result<()> {
    let block = vec![0x5a_u8; block_size];
    while !stop.load(Ordering::Relaxed) {
        s.write_all(&block)?;
    }
    Ok(())
}

fn drain(mut s: TcpStream, block_size: usize, received: &AtomicU64) -> Result<()> {
    let mut buf = vec![0u8; block_size];
    loop {
        match s.read(&mut buf)? {
            0 => return Ok(()),
            n => {
                received.fetch_add(n as u64, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_some_bandwidth() {
        let r = measure(Duration::from_millis(100), 1, 64 * 1024).unwrap();
        assert!(r.bytes > 0);
        assert!(r.mb_per_sec() > 1.0, "{r:?}");
    }
}
