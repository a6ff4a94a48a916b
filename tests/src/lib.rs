//! Helpers for end-to-end tests that drive the real `strata` binary.
//!
//! Two pieces:
//! - [`BrokerProcess`]: starts the binary as a child process on a free loopback port with a fresh
//!   data directory, waits (with a deadline) until it answers ApiVersions, and stops it with
//!   SIGTERM (or SIGKILL, to test recovery). Its stderr goes to a file in the temp dir, printed when
//!   a test fails.
//! - [`RawConn`]: a minimal blocking Kafka wire client (length-prefixed frames, request header
//!   v1/v2) and an ApiVersions decoder, so these tests do not depend on the broker's own protocol
//!   crate being correct.
//!
//! The binary is found through `STRATA_BIN`, then `target/release/strata`, then
//! `target/debug/strata`. A missing binary is an error, never a silently skipped test.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

mod tmpfs;
pub use tmpfs::Tmpfs;

/// How long a broker gets to become ready before a test fails.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long SIGTERM gets before the process is killed and the test fails.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(20);
/// Socket read/write timeout for [`RawConn`].
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Kafka API key of ApiVersions.
pub const API_VERSIONS: i16 = 18;

/// Locates the `strata` binary: `STRATA_BIN` if set, else the workspace's release build, else
/// its debug build. Fails with a message saying how to build it.
pub fn strata_bin() -> Result<PathBuf> {
    if let Ok(p) = std::env::var("STRATA_BIN") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        bail!("STRATA_BIN={} does not exist or is not a file", p.display());
    }
    let target = match std::env::var("CARGO_TARGET_DIR") {
        Ok(dir) => PathBuf::from(dir),
        Err(_) => Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("target"),
    };
    let candidates = [target.join("release").join("strata"), target.join("debug").join("strata")];
    for c in &candidates {
        if c.is_file() {
            return Ok(c.clone());
        }
    }
    bail!(
        "strata binary not found (looked at STRATA_BIN, {} and {}); build it with \
         `cargo build --release -p strata-broker --bin strata` or run scripts/test.sh",
        candidates[0].display(),
        candidates[1].display()
    )
}

/// Locates the Python that holds the interop clients (confluent-kafka and friends):
/// `STRATA_PYTHON` if set, else the workspace's `.venv` that `scripts/test.sh` creates.
/// Derived from this crate's location, never from a fixed checkout path, so a clone
/// anywhere (CI builds in its own directory) finds its own venv. Fails with a message
/// saying how to create it: a test that needs librdkafka must not pass without it.
pub fn venv_python() -> Result<PathBuf> {
    let path = match std::env::var("STRATA_PYTHON") {
        Ok(p) => PathBuf::from(p),
        Err(_) => Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(".venv").join("bin").join("python"),
    };
    if !path.exists() {
        bail!(
            "{} does not exist; run scripts/test.sh once (it creates .venv with \
             tests/interop/requirements.txt) or set STRATA_PYTHON",
            path.display()
        );
    }
    Ok(path)
}

/// [`venv_python`], checked to import `module` (`confluent_kafka` for the librdkafka
/// tests), so a test fails up front with what is missing rather than in its script.
pub fn python_with(module: &str) -> Result<PathBuf> {
    let path = venv_python()?;
    let status = std::process::Command::new(&path).args(["-c", &format!("import {module}")]).status()?;
    if !status.success() {
        bail!("{} cannot import {module}; run scripts/test.sh once to install it", path.display());
    }
    Ok(path)
}

/// Returns a loopback port that was free a moment ago (bind port 0, read it, release it)
/// and that this process has not handed out before: tests run in parallel threads, and
/// the kernel may give a just-released port to the next bind.
pub fn free_port() -> Result<u16> {
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let l = TcpListener::bind("127.0.0.1:0").context("binding 127.0.0.1:0")?;
        let port = l.local_addr()?.port();
        let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
        if !handed_out.contains(&port) {
            handed_out.push(port);
            return Ok(port);
        }
    }
}

/// A running `strata` child process with its own data directory and log file.
#[derive(Debug)]
pub struct BrokerProcess {
    child: Option<Child>,
    bin: PathBuf,
    /// Port the broker listens on (127.0.0.1).
    pub port: u16,
    tmp: tempfile::TempDir,
    extra_overrides: Vec<String>,
    starts: u32,
    /// A command the binary is started under (`prlimit --nofile=...`), if any.
    wrapper: Vec<String>,
}

impl BrokerProcess {
    /// Starts a broker with a fresh data directory and waits until it answers ApiVersions.
    /// `extra_overrides` are `key=value` strings passed as `--override key=value`.
    pub fn start(extra_overrides: &[&str]) -> Result<Self> {
        BrokerProcess::start_wrapped(&[], extra_overrides)
    }

    /// As [`BrokerProcess::start`], with the binary started under `wrapper` (a command
    /// and its arguments, such as `prlimit --nofile=400:400`).
    pub fn start_wrapped(wrapper: &[&str], extra_overrides: &[&str]) -> Result<Self> {
        let bin = strata_bin()?;
        let tmp = tempfile::Builder::new().prefix("strata-e2e-").tempdir().context("creating temp dir")?;
        std::fs::create_dir_all(tmp.path().join("data"))?;
        let mut b = BrokerProcess {
            child: None,
            bin,
            port: free_port()?,
            tmp,
            extra_overrides: extra_overrides.iter().map(|s| s.to_string()).collect(),
            starts: 0,
            wrapper: wrapper.iter().map(|s| s.to_string()).collect(),
        };
        b.spawn()?;
        Ok(b)
    }

    /// Spawns a broker listening for clients on `port` without waiting for it to be ready:
    /// the nodes of a cluster become ready only together, once a quorum of them runs.
    /// Call [`BrokerProcess::wait_ready`] on each afterwards.
    pub fn launch_on(port: u16, extra_overrides: &[&str]) -> Result<Self> {
        let tmp = tempfile::Builder::new().prefix("strata-e2e-").tempdir().context("creating temp dir")?;
        std::fs::create_dir_all(tmp.path().join("data"))?;
        let mut b = BrokerProcess {
            child: None,
            bin: strata_bin()?,
            port,
            tmp,
            extra_overrides: extra_overrides.iter().map(|s| s.to_string()).collect(),
            starts: 0,
            wrapper: Vec::new(),
        };
        let mut cmd = b.command()?;
        b.child = Some(cmd.spawn().with_context(|| format!("spawning {}", b.bin.display()))?);
        Ok(b)
    }

    /// Changes the command later starts run under (see [`BrokerProcess::start_wrapped`]).
    pub fn set_wrapper(&mut self, wrapper: &[&str]) {
        self.wrapper = wrapper.iter().map(|s| s.to_string()).collect();
    }

    /// Starts the binary again (as [`BrokerProcess::restart`]) without waiting for it to
    /// be ready, and waits up to `timeout` for it to exit: its status, or `None` if it
    /// is still running (for tests of refusals to start).
    pub fn restart_expecting_exit(&mut self, timeout: Duration) -> Result<Option<ExitStatus>> {
        if self.child.is_some() {
            bail!("restart while the broker is still running");
        }
        let mut cmd = self.command()?;
        self.child = Some(cmd.spawn().with_context(|| format!("spawning {}", self.bin.display()))?);
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(status) = self.try_wait()? {
                self.child = None;
                return Ok(Some(status));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(None)
    }

    /// The broker's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The broker's `log.dirs`.
    pub fn data_dir(&self) -> PathBuf {
        self.tmp.path().join("data")
    }

    /// Total bytes of the segment files (`.log`) of `<topic>-<partition>` in the data
    /// directory: what compaction and retention are judged by.
    pub fn segment_bytes(&self, topic: &str, partition: i32) -> Result<u64> {
        let dir = self.data_dir().join(format!("{topic}-{partition}"));
        let mut total = 0;
        for entry in std::fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))? {
            let entry = entry?;
            if entry.file_name().to_string_lossy().ends_with(".log") {
                // The cleaner or retention may delete a segment between listing and stat.
                match entry.metadata() {
                    Ok(m) => total += m.len(),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(total)
    }

    /// Waits up to `timeout` for the segment files of `<topic>-<partition>` to shrink to
    /// `limit` bytes (compaction, retention), polling every 100 ms; fails with the size
    /// reached and the broker's log otherwise.
    pub fn await_segment_bytes_at_most(
        &self,
        topic: &str,
        partition: i32,
        limit: u64,
        timeout: Duration,
    ) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let size = self.segment_bytes(topic, partition)?;
            if size <= limit {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "{topic}-{partition} holds {size} bytes after {timeout:?}, more than {limit}\n{}",
                    self.log_contents()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Path of the current stderr log file.
    pub fn log_path(&self) -> PathBuf {
        self.tmp.path().join(format!("broker-{}.log", self.starts))
    }

    /// Everything the broker wrote to stderr in its current run.
    pub fn log_contents(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_else(|e| format!("<no log: {e}>"))
    }

    fn spawn(&mut self) -> Result<()> {
        let mut cmd = self.command()?;
        let child = cmd.spawn().with_context(|| format!("spawning {}", self.bin.display()))?;
        self.child = Some(child);
        self.wait_ready(READY_TIMEOUT)
    }

    /// The command of the next start, its output going to a new log file.
    fn command(&mut self) -> Result<Command> {
        self.starts += 1;
        let log = File::create(self.log_path()).context("creating broker log file")?;
        let listener = format!("PLAINTEXT://127.0.0.1:{}", self.port);
        let mut cmd = match self.wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(&self.bin);
                c
            }
            None => Command::new(&self.bin),
        };
        cmd.arg("--override")
            .arg("node.id=0")
            .arg("--override")
            .arg(format!("listeners={listener}"))
            .arg("--override")
            .arg(format!("advertised.listeners={listener}"))
            .arg("--override")
            .arg(format!("log.dirs={}", self.data_dir().display()))
            // No metrics endpoint unless a test asks for one on a port of its own: many
            // brokers run at once and the default port is shared.
            .arg("--override")
            .arg("metrics.listener=");
        for o in &self.extra_overrides {
            cmd.arg("--override").arg(o);
        }
        cmd.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log).current_dir(self.tmp.path());
        Ok(cmd)
    }

    /// Polls until a fresh connection gets a well-formed ApiVersions v0 answer, or fails with the
    /// broker's log if the deadline passes or the process exits.
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let mut last_err = anyhow!("never tried");
        while Instant::now() < deadline {
            if let Some(status) = self.try_wait()? {
                bail!("strata exited during start-up with {status}; log:\n{}", self.log_contents());
            }
            match RawConn::connect(self.addr()).and_then(|mut c| c.api_versions(0)) {
                Ok(r) if r.error_code == 0 => return Ok(()),
                Ok(r) => last_err = anyhow!("ApiVersions error_code {}", r.error_code),
                Err(e) => last_err = e,
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!("strata not ready within {timeout:?} (last error: {last_err:#}); log:\n{}", self.log_contents())
    }

    fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        match self.child.as_mut() {
            Some(c) => Ok(c.try_wait()?),
            None => bail!("broker is not running"),
        }
    }

    fn signal(&self, sig: &str) -> Result<()> {
        let pid = self.child.as_ref().ok_or_else(|| anyhow!("broker is not running"))?.id();
        let st = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(pid.to_string())
            .status()
            .context("running kill")?;
        if !st.success() {
            bail!("kill -{sig} {pid} failed: {st}");
        }
        Ok(())
    }

    /// Sends SIGTERM and waits for a clean exit (status 0) within [`SHUTDOWN_TIMEOUT`].
    pub fn stop(&mut self) -> Result<ExitStatus> {
        self.signal("TERM")?;
        let deadline = Instant::now() + SHUTDOWN_TIMEOUT;
        loop {
            if let Some(st) = self.try_wait()? {
                self.child = None;
                if !st.success() {
                    bail!("strata exited with {st} after SIGTERM; log:\n{}", self.log_contents());
                }
                return Ok(st);
            }
            if Instant::now() >= deadline {
                self.kill()?;
                bail!(
                    "strata did not exit within {SHUTDOWN_TIMEOUT:?} of SIGTERM; log:\n{}",
                    self.log_contents()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILLs the process and reaps it (simulates a crash; the data dir is kept).
    pub fn kill(&mut self) -> Result<()> {
        if let Some(mut c) = self.child.take() {
            c.kill().context("SIGKILL")?;
            c.wait()?;
        }
        Ok(())
    }

    /// Starts the binary again on the same port and data directory (after [`stop`] or [`kill`]).
    ///
    /// [`stop`]: BrokerProcess::stop
    /// [`kill`]: BrokerProcess::kill
    pub fn restart(&mut self) -> Result<()> {
        if self.child.is_some() {
            bail!("restart() while the broker is still running");
        }
        self.spawn()
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "---- strata log ({}) ----\n{}\n---- end of strata log ----",
                self.log_path().display(),
                self.log_contents()
            );
        }
        let _ = self.kill();
    }
}

/// Request header `client_id` used by [`RawConn`].
pub const CLIENT_ID: &str = "strata-e2e";

/// A blocking connection speaking raw Kafka frames.
#[derive(Debug)]
pub struct RawConn {
    stream: TcpStream,
    next_correlation_id: i32,
}

impl RawConn {
    /// Connects with [`IO_TIMEOUT`] on connect, reads and writes.
    pub fn connect(addr: SocketAddr) -> Result<Self> {
        let stream =
            TcpStream::connect_timeout(&addr, IO_TIMEOUT).with_context(|| format!("connecting to {addr}"))?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(RawConn { stream, next_correlation_id: 1 })
    }

    /// Wraps a connected stream (one bound to a chosen local address, say), with the
    /// same timeouts as [`RawConn::connect`].
    pub fn from_stream(stream: TcpStream) -> Result<Self> {
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(RawConn { stream, next_correlation_id: 1 })
    }

    /// Sets the read timeout (for tests that wait for an answer that must not come yet).
    pub fn set_read_timeout(&mut self, timeout: Duration) -> Result<()> {
        self.stream.set_read_timeout(Some(timeout))?;
        Ok(())
    }

    /// True once the broker has closed the connection: a read returns end of file or a
    /// reset (waits up to the read timeout; false if it expires with the connection open).
    pub fn closed_by_peer(&mut self) -> bool {
        let mut byte = [0u8; 1];
        match self.stream.read(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
        }
    }

    /// Writes raw bytes as they are (for malformed-input tests).
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.stream.write_all(bytes)?;
        Ok(())
    }

    /// Sends one request and returns the response after its correlation id (the rest of the
    /// response header, if any, is left to the caller). `flexible` selects request header v2
    /// (with an empty tagged-field section) instead of v1.
    pub fn request(
        &mut self,
        api_key: i16,
        api_version: i16,
        flexible: bool,
        body: &[u8],
    ) -> Result<Vec<u8>> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let mut frame = Vec::with_capacity(body.len() + 32);
        frame.extend_from_slice(&api_key.to_be_bytes());
        frame.extend_from_slice(&api_version.to_be_bytes());
        frame.extend_from_slice(&correlation_id.to_be_bytes());
        frame.extend_from_slice(&(CLIENT_ID.len() as i16).to_be_bytes());
        frame.extend_from_slice(CLIENT_ID.as_bytes());
        if flexible {
            frame.push(0); // no tagged fields
        }
        frame.extend_from_slice(body);
        let mut out = (frame.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(&frame);
        self.stream.write_all(&out).context("writing request")?;

        let resp = self.read_frame()?;
        let mut d = Decoder::new(&resp);
        let got = d.i32()?;
        if got != correlation_id {
            bail!("correlation id mismatch: sent {correlation_id}, got {got}");
        }
        Ok(d.rest().to_vec())
    }

    /// Reads one length-prefixed frame (capped at 64 MiB).
    pub fn read_frame(&mut self) -> Result<Vec<u8>> {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).context("reading response length")?;
        let len = i32::from_be_bytes(len);
        if !(4..=64 << 20).contains(&len) {
            bail!("implausible response length {len}");
        }
        let mut buf = vec![0u8; len as usize];
        self.stream.read_exact(&mut buf).context("reading response body")?;
        Ok(buf)
    }

    /// Sends ApiVersions at `version` and decodes the answer. The response header is always v0
    /// (KIP-511). A v3+ request carries client_software_name/version.
    pub fn api_versions(&mut self, version: i16) -> Result<ApiVersionsResponse> {
        let flexible = version >= 3;
        let mut body = Vec::new();
        if flexible {
            put_compact_string(&mut body, "strata-tests");
            put_compact_string(&mut body, env!("CARGO_PKG_VERSION"));
            body.push(0); // tagged fields
        }
        let resp = self.request(API_VERSIONS, version, flexible, &body)?;
        ApiVersionsResponse::decode(&resp, version)
    }
}

fn put_compact_string(buf: &mut Vec<u8>, s: &str) {
    put_uvarint(buf, s.len() as u64 + 1);
    buf.extend_from_slice(s.as_bytes());
}

/// Appends an unsigned LEB128 varint.
pub fn put_uvarint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// One entry of an ApiVersions answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiVersionRange {
    pub api_key: i16,
    pub min_version: i16,
    pub max_version: i16,
}

/// A decoded ApiVersions response body (any version 0-4).
#[derive(Debug, Clone)]
pub struct ApiVersionsResponse {
    pub error_code: i16,
    pub api_keys: Vec<ApiVersionRange>,
    /// Present from v1.
    pub throttle_time_ms: Option<i32>,
}

impl ApiVersionsResponse {
    /// Decodes the body as encoded for `version`; the whole body must be consumed.
    pub fn decode(body: &[u8], version: i16) -> Result<Self> {
        let mut d = Decoder::new(body);
        let flexible = version >= 3;
        let error_code = d.i16()?;
        let n = if flexible {
            let n = d.uvarint()?;
            if n == 0 {
                bail!("null api_keys array");
            }
            (n - 1) as usize
        } else {
            let n = d.i32()?;
            if n < 0 {
                bail!("negative api_keys length {n}");
            }
            n as usize
        };
        if n > body.len() / 6 {
            bail!("api_keys length {n} larger than the body allows");
        }
        let mut api_keys = Vec::with_capacity(n);
        for _ in 0..n {
            api_keys.push(ApiVersionRange {
                api_key: d.i16()?,
                min_version: d.i16()?,
                max_version: d.i16()?,
            });
            if flexible {
                d.skip_tagged_fields()?;
            }
        }
        let throttle_time_ms = if version >= 1 { Some(d.i32()?) } else { None };
        if flexible {
            d.skip_tagged_fields()?;
        }
        if !d.rest().is_empty() {
            bail!("{} trailing bytes after ApiVersions v{version} body", d.rest().len());
        }
        Ok(ApiVersionsResponse { error_code, api_keys, throttle_time_ms })
    }

    /// The advertised range for `api_key`, if any.
    pub fn find(&self, api_key: i16) -> Option<ApiVersionRange> {
        self.api_keys.iter().copied().find(|r| r.api_key == api_key)
    }
}

/// A bounds-checked big-endian reader.
#[derive(Debug)]
pub struct Decoder<'a> {
    buf: &'a [u8],
}

impl<'a> Decoder<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Decoder { buf }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.buf.len() < n {
            bail!("truncated: wanted {n} bytes, {} left", self.buf.len());
        }
        let (a, b) = self.buf.split_at(n);
        self.buf = b;
        Ok(a)
    }

    pub fn i16(&mut self) -> Result<i16> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into()?))
    }

    pub fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into()?))
    }

    pub fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into()?))
    }

    pub fn uvarint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        bail!("varint longer than 10 bytes")
    }

    /// Skips a tagged-field section (count, then tag/size/bytes for each).
    pub fn skip_tagged_fields(&mut self) -> Result<()> {
        let n = self.uvarint()?;
        for _ in 0..n {
            let _tag = self.uvarint()?;
            let size = self.uvarint()?;
            self.take(usize::try_from(size)?)?;
        }
        Ok(())
    }

    pub fn rest(&self) -> &'a [u8] {
        self.buf
    }
}

/// Creates `name` with `partitions` partitions (the broker's default replication factor)
/// through the controller, with a raw CreateTopics on the Rust client's connection;
/// fails the test unless it was created.
pub async fn create_topic(client: &strata_client::Client, name: &str, partitions: i32) {
    use strata_protocol::messages::create_topics::{CreatableTopic, CreateTopicsRequest};
    use strata_protocol::{RequestBody, ResponseBody};
    let request = CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: name.to_string(),
            num_partitions: partitions,
            replication_factor: -1,
            ..Default::default()
        }],
        ..Default::default()
    };
    let conn = client.controller().await.expect("controller");
    let ResponseBody::CreateTopics(r) = conn.call(RequestBody::CreateTopics(request)).await.expect("create")
    else {
        panic!("wrong api")
    };
    assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0].error_message);
}

/// `GET path` over HTTP/1.1 from `addr` (a broker's `metrics.listener`); returns the
/// status line and the body.
pub fn http_get(addr: &str, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).expect("connect to metrics listener");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/plain\r\n\r\n").expect("send");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read response");
    let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    (head.lines().next().unwrap_or_default().to_string(), body.to_string())
}

/// The value of an unlabelled metric in a broker's exposition at `addr`, if present.
pub fn metric(addr: &str, name: &str) -> Option<f64> {
    let (_, body) = http_get(addr, "/metrics");
    body.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_api_versions_v0_and_v3() {
        // v0: error 0, one key (18, 0..4).
        let v0 = [0, 0, 0, 0, 0, 1, 0, 18, 0, 0, 0, 4];
        let r = ApiVersionsResponse::decode(&v0, 0).unwrap();
        assert_eq!(r.error_code, 0);
        assert_eq!(r.find(API_VERSIONS).unwrap().max_version, 4);

        // v3: error 0, compact array of 1, tags, throttle 0, tags.
        let v3 = [0, 0, 2, 0, 18, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0];
        let r = ApiVersionsResponse::decode(&v3, 3).unwrap();
        assert_eq!(r.throttle_time_ms, Some(0));
        assert_eq!(r.api_keys.len(), 1);

        assert!(ApiVersionsResponse::decode(&v3[..8], 3).is_err());
    }

    #[test]
    fn uvarint_round_trip() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut b = Vec::new();
            put_uvarint(&mut b, v);
            assert_eq!(Decoder::new(&b).uvarint().unwrap(), v);
        }
    }
}
