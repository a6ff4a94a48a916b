//! This machine's limits over loopback TCP, the ceilings a broker on the same machine
//! is compared against:
//!
//! - bandwidth: one writer thread and one reader thread per connection stream bytes
//!   over 127.0.0.1 as fast as the kernel moves them (no protocol, no parsing);
//! - latency floor: a null server that acknowledges each message as soon as it has
//!   read it, offered messages at a fixed rate, with latency measured from each
//!   message's scheduled send time like strata-perf's producer. Whatever this shows
//!   (scheduling delays of a busy machine above all) no broker can beat.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};

use crate::json::Json;
use crate::schedule::{latency, Schedule};
use crate::stats::{LatencyHistogram, LatencySummary};

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

/// What a loopback latency run measured.
#[derive(Debug, Clone, Copy)]
pub struct FloorResult {
    /// Messages acknowledged.
    pub messages: u64,
    /// Offered load in MB/s.
    pub offered_mb_per_sec: f64,
    /// Message size in bytes.
    pub message_size: usize,
    /// Latency from scheduled send to acknowledgement.
    pub latency: LatencySummary,
}

impl FloorResult {
    /// As a JSON object.
    pub fn to_json(&self) -> Json {
        Json::object()
            .with("mode", "loopback-latency")
            .with("messages", self.messages)
            .with("message_size", self.message_size)
            .with("offered_mb_per_sec", self.offered_mb_per_sec)
            .with("latency_ms", self.latency.to_json())
    }
}

/// Offers `mb_per_sec` in messages of `message_size` bytes to a null server for
/// `duration` and measures the latency of its acknowledgements.
pub fn measure_floor(duration: Duration, mb_per_sec: f64, message_size: usize) -> Result<FloorResult> {
    let message_size = message_size.max(8);
    let rate = (mb_per_sec * 1e6 / message_size as f64).max(1.0);
    let listener = TcpListener::bind("127.0.0.1:0").context("binding 127.0.0.1:0")?;
    let client = TcpStream::connect(listener.local_addr()?).context("connecting over loopback")?;
    let (server, _) = listener.accept()?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let server = thread::spawn(move || null_server(server, message_size));
    let start = Instant::now() + Duration::from_millis(10);
    let total = (rate * duration.as_secs_f64()).ceil() as u64;
    let mut acks = client.try_clone()?;
    let receiver = thread::spawn(move || -> Result<LatencyHistogram> {
        let schedule = Schedule::new(start, rate);
        let mut hist = LatencyHistogram::new();
        let mut buf = [0u8; 8];
        for _ in 0..total {
            acks.read_exact(&mut buf)?;
            let index = u64::from_be_bytes(buf);
            let due = schedule.due_time(index).ok_or_else(|| anyhow!("unscheduled message"))?;
            hist.record(latency(due, Instant::now()));
        }
        Ok(hist)
    });
    let mut sender = client;
    let mut schedule = Schedule::new(start, rate);
    let mut message = vec![0x5a_u8; message_size];
    while schedule.taken() < total {
        if let Some(due) = schedule.next_due() {
            let now = Instant::now();
            if due > now {
                thread::sleep(due - now);
            }
        }
        let index = schedule.taken();
        schedule.take_due(Instant::now());
        message[..8].copy_from_slice(&index.to_be_bytes());
        sender.write_all(&message)?;
    }
    let hist = receiver.join().map_err(|_| anyhow!("receiver thread panicked"))??;
    sender.shutdown(std::net::Shutdown::Write)?;
    server.join().map_err(|_| anyhow!("null server panicked"))??;
    Ok(FloorResult {
        messages: hist.len(),
        offered_mb_per_sec: mb_per_sec,
        message_size,
        latency: hist.summary(),
    })
}

/// Reads whole messages and acknowledges each with its 8-byte index.
fn null_server(mut s: TcpStream, message_size: usize) -> Result<()> {
    let mut buf = vec![0u8; message_size];
    loop {
        match s.read_exact(&mut buf) {
            Ok(()) => s.write_all(&buf[..8])?,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e.into()),
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

    #[test]
    fn measures_a_latency_floor() {
        let r = measure_floor(Duration::from_millis(200), 10.0, 16 * 1024).unwrap();
        // 10 MB/s of 16 KiB messages for 0.2 s.
        assert_eq!(r.messages, 123);
        assert_eq!(r.latency.count, 123);
        assert!(r.latency.max_ms < 1000.0, "{r:?}");
    }
}
