//! Clients that would exhaust the broker (issue 14, part 5), against the real binary:
//! hundreds of connections that each announce a 100 MiB request and send 4 MiB of it,
//! a thousand idle connections, and too many connections from one address. The broker's
//! resident memory stays under its bound (`queued.max.request.bytes` plus a little per
//! connection), half-sent requests and idle connections are closed at their timeouts,
//! per-address and total connection limits hold, and a well-behaved client is served
//! throughout.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata_client::consumer::{Consumer, ConsumerConfig, NoopListener};
use strata_client::producer::{Producer, ProducerConfig, ProducerRecord};
use strata_tests::{BrokerProcess, RawConn};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BUDGET: u64 = 64 << 20;
const HOSTILE: usize = 200;
const IDLE: usize = 1000;

/// Resident set of `pid`, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("broker status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    let kib: u64 = line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("VmRSS value");
    kib * 1024
}

/// Room for the connections this test opens, whatever the soft limit it was given.
fn raise_open_files_limit() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit read and write the struct we own.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        limit.rlim_cur = limit.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
    }
    assert!(limit.rlim_cur >= (HOSTILE + IDLE + 200) as u64, "open files hard limit {}", limit.rlim_max);
}

/// Produces `n` records with the Rust client and reads them back in a group: what a
/// well-behaved client does, each step bounded in time.
async fn served(broker: &BrokerProcess, topic: &str, n: usize) {
    let mut config = ProducerConfig::new(&broker.addr().to_string());
    config.set("delivery.timeout.ms", "20000").expect("timeout");
    let producer = Producer::new(config).await.expect("producer");
    let mut acks = Vec::new();
    for i in 0..n {
        acks.push(producer.send(ProducerRecord::new(topic).value(format!("v{i}"))).await.expect("send"));
    }
    for a in acks {
        a.await.expect("acknowledged while hostile clients hold connections");
    }
    producer.close().await.expect("close");
    let mut config = ConsumerConfig::new(&broker.addr().to_string());
    for (k, v) in [
        ("group.id", &format!("g-{topic}")[..]),
        ("auto.offset.reset", "earliest"),
        ("fetch.max.wait.ms", "100"),
    ] {
        config.set(k, v).expect(k);
    }
    let mut consumer = Consumer::new(config).await.expect("consumer");
    consumer.subscribe(&[topic], Box::new(NoopListener)).expect("subscribe");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut read = 0;
    while read < n {
        assert!(Instant::now() < deadline, "read {read} of {n} records");
        read += consumer.poll(Duration::from_millis(200)).await.expect("poll").len();
    }
    consumer.close().await.expect("close consumer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_large_requests_and_idle_connections_neither_grow_the_broker_nor_starve_a_client() {
    raise_open_files_limit();
    let broker = BrokerProcess::start(&[
        &format!("queued.max.request.bytes={BUDGET}"),
        "socket.request.receive.timeout.ms=3000",
        "connections.max.idle.ms=6000",
        "group.initial.rebalance.delay.ms=0",
    ])
    .expect("broker");
    let pid = broker.pid().expect("pid");
    served(&broker, "warm-up", 10).await;
    let baseline = rss(pid);

    // Connections that never send anything.
    let mut idle = Vec::new();
    for _ in 0..IDLE {
        idle.push(tokio::net::TcpStream::connect(broker.addr()).await.expect("idle connection"));
    }
    // Connections that announce a 100 MiB request and send 4 MiB of it, then stall.
    let sent = Arc::new(AtomicU64::new(0));
    let closed = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut hostile = Vec::new();
    for _ in 0..HOSTILE {
        let (addr, sent, closed, stop) = (broker.addr(), sent.clone(), closed.clone(), stop.clone());
        hostile.push(tokio::spawn(async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.expect("hostile connection");
            let mut frame = (100i32 << 20).to_be_bytes().to_vec();
            frame.extend_from_slice(&[0u8; 64 * 1024]);
            let chunk = vec![0u8; 64 * 1024];
            let mut first = true;
            for _ in 0..64 {
                let buf = if first { &frame[..] } else { &chunk[..] };
                first = false;
                if s.write_all(buf).await.is_err() {
                    closed.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                sent.fetch_add(buf.len() as u64, Ordering::Relaxed);
            }
            // Stalled: wait for the broker to close the connection, or the test to end.
            let mut byte = [0u8; 1];
            loop {
                tokio::select! {
                    r = s.read(&mut byte) => {
                        if matches!(r, Ok(0) | Err(_)) {
                            closed.fetch_add(1, Ordering::Relaxed);
                        }
                        return;
                    }
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                    }
                }
            }
        }));
    }

    // Memory is sampled while the hostile connections push and the good client works.
    let peak = Arc::new(AtomicU64::new(0));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (peak, sampling) = (peak.clone(), sampling.clone());
        tokio::spawn(async move {
            while sampling.load(Ordering::Relaxed) {
                peak.fetch_max(rss(pid), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    served(&broker, "served-under-attack", 200).await;
    // Half-sent requests are closed at socket.request.receive.timeout.ms: at least a few
    // have been by now or soon (they get memory one after another).
    let deadline = Instant::now() + Duration::from_secs(30);
    while closed.load(Ordering::Relaxed) < 3 {
        assert!(Instant::now() < deadline, "no half-sent request was closed by the broker");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Idle connections are closed at connections.max.idle.ms.
    let deadline = Instant::now() + Duration::from_secs(30);
    for mut s in idle {
        let mut byte = [0u8; 1];
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut byte)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {}
            Ok(Ok(_)) => panic!("the broker sent bytes to a connection that asked nothing"),
            Err(_) => panic!("an idle connection was still open after connections.max.idle.ms"),
        }
    }
    sampling.store(false, Ordering::Relaxed);
    sampler.await.expect("sampler");
    let peak = peak.load(Ordering::Relaxed);
    let per_connection = 64 * 1024;
    let bound = baseline + BUDGET + ((IDLE + HOSTILE) as u64) * per_connection + (32 << 20);
    let hostile_bytes = sent.load(Ordering::Relaxed);
    eprintln!(
        "peak {} MiB baseline {} MiB bound {} MiB sent {} MiB",
        peak >> 20,
        baseline >> 20,
        bound >> 20,
        hostile_bytes >> 20
    );
    assert!(
        peak <= bound,
        "broker RSS peaked at {} MiB (baseline {} MiB, bound {} MiB) with {} MiB sent by hostile clients",
        peak >> 20,
        baseline >> 20,
        bound >> 20,
        hostile_bytes >> 20
    );
    assert!(
        broker.log_contents().contains("socket.request.receive.timeout.ms"),
        "the broker says why it closed half-sent requests"
    );
    stop.store(true, Ordering::Relaxed);
    for h in hostile {
        h.await.expect("hostile task");
    }
    // And a client is served once they are gone.
    served(&broker, "served-after", 10).await;
}

/// A connection from `ip` (a loopback address) to the broker.
async fn connect_from(ip: Ipv4Addr, broker: SocketAddr) -> RawConn {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.bind(SocketAddr::from((ip, 0))).expect("bind local address");
    let stream = socket.connect(broker).await.expect("connect");
    RawConn::from_stream(stream.into_std().expect("std stream")).expect("raw connection")
}

/// The broker's count of open client connections, from its metrics endpoint.
fn open_connections(metrics: SocketAddr) -> Option<u64> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(metrics).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET /metrics HTTP/1.1\r\nHost: {metrics}\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let line = text.lines().find(|l| l.starts_with("kafka_server_socket_server_metrics_connections "))?;
    line.rsplit(' ').next()?.parse::<f64>().ok().map(|v| v as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_per_address_and_total_limits_wait_or_are_closed() {
    let broker = broker_counting_connections(&[
        "max.connections.per.ip=3",
        "max.connections.per.ip.overrides=127.0.0.2:5",
        "max.connections=9",
    ])
    .await;
    let addr = broker.addr();
    let mut open = BTreeMap::new();
    for (ip, allowed) in [(Ipv4Addr::new(127, 0, 0, 1), 3), (Ipv4Addr::new(127, 0, 0, 2), 5)] {
        let mut conns = Vec::new();
        for _ in 0..allowed {
            let mut c = connect_from(ip, addr).await;
            tokio::task::block_in_place(|| c.api_versions(3)).expect("served within the address's limit");
            conns.push(c);
        }
        let mut over = connect_from(ip, addr).await;
        assert!(
            tokio::task::block_in_place(|| over.closed_by_peer()),
            "{ip}: one more than its limit is closed"
        );
        open.insert(ip, conns);
    }
    // 9 connections are open with this one: the next is accepted only when one closes.
    let mut ninth = connect_from(Ipv4Addr::new(127, 0, 0, 3), addr).await;
    tokio::task::block_in_place(|| ninth.api_versions(3)).expect("the ninth connection is served");
    let waiting = connect_from(Ipv4Addr::new(127, 0, 0, 3), addr).await;
    let one = open.get_mut(&Ipv4Addr::new(127, 0, 0, 1)).expect("conns").pop().expect("a connection");
    waits_until_one_closes(waiting, one, "max.connections");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_at_its_own_max_connections_accepts_again_when_one_closes() {
    let broker = broker_counting_connections(&["listener.name.plaintext.max.connections=2"]).await;
    let addr = broker.addr();
    let mut conns = Vec::new();
    for _ in 0..2 {
        let mut c = connect_from(Ipv4Addr::LOCALHOST, addr).await;
        tokio::task::block_in_place(|| c.api_versions(3)).expect("served within the listener's limit");
        conns.push(c);
    }
    let waiting = connect_from(Ipv4Addr::new(127, 0, 0, 2), addr).await;
    waits_until_one_closes(waiting, conns.pop().expect("a connection"), "the listener's max.connections");
}

/// A broker with `overrides` and a metrics endpoint, once it counts no open client
/// connection (the start-up probe's is gone), so a test counts only its own.
async fn broker_counting_connections(overrides: &[&str]) -> BrokerProcess {
    let port = strata_tests::free_port().expect("port");
    let metrics = SocketAddr::from(([127, 0, 0, 1], port));
    let metrics_listener = format!("metrics.listener=http://{metrics}");
    let mut all = overrides.to_vec();
    all.push(&metrics_listener);
    let broker = BrokerProcess::start(&all).expect("broker");
    let deadline = Instant::now() + Duration::from_secs(10);
    while tokio::task::block_in_place(|| open_connections(metrics)) != Some(0) {
        assert!(Instant::now() < deadline, "connections still open: {:?}", open_connections(metrics));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    broker
}

/// `waiting` connected past a limit: its request is not answered while `open` stays
/// open, and is once `open` closes (the request stays in the socket: it timed out on our
/// side only, so the answer is read afterwards).
fn waits_until_one_closes(mut waiting: RawConn, open: RawConn, limit: &str) {
    waiting.set_read_timeout(Duration::from_millis(1500)).expect("timeout");
    let early = tokio::task::block_in_place(|| waiting.api_versions(3));
    assert!(early.is_err(), "served past {limit}");
    drop(open);
    waiting.set_read_timeout(Duration::from_secs(10)).expect("timeout");
    let answer = tokio::task::block_in_place(|| waiting.read_frame());
    assert!(answer.is_ok(), "accepted once below {limit}: {answer:?}");
}
