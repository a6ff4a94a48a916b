//! CI smoke test of `strata-perf` against the real `strata` binary: produce a small
//! workload, read it back, run a short end-to-end pass, and produce transactionally
//! and read it back read_committed (all on the default client engine); produce with
//! the wire engine and read it back with a consumer group, twice, and with the wire
//! consumer. Proves the load generator
//! and the broker agree on the wire (every record acknowledged and read back), not
//! that either is fast.
//!
//! The broker binary comes from `STRATA_BIN`, else `target/release/strata`, else
//! `target/debug/strata`; if none exists the test fails and says how to build it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Records produced and read back.
const RECORDS: u64 = 20_000;
/// Longest any single strata-perf run may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

fn strata_bin() -> PathBuf {
    if let Ok(p) = std::env::var("STRATA_BIN") {
        let p = PathBuf::from(p);
        assert!(p.is_file(), "STRATA_BIN={} is not a file", p.display());
        return p;
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("target"));
    let candidates = [target.join("release/strata"), target.join("debug/strata")];
    candidates.iter().find(|c| c.is_file()).cloned().unwrap_or_else(|| {
        panic!(
            "strata binary not found (STRATA_BIN unset, no {} or {}); build it with \
             `cargo build --release -p strata-broker --bin strata`",
            candidates[0].display(),
            candidates[1].display()
        )
    })
}

/// A broker child process on a free loopback port with its own data directory;
/// killed on drop.
struct Broker {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Broker {
    fn start() -> Broker {
        let dir = tempfile::Builder::new().prefix("strata-perf-smoke-").tempdir().expect("temp dir");
        // Not a bare bind-and-release: the tests here run in parallel, and the kernel may
        // hand a just-released port to the next bind.
        let port = strata_tests::free_port().expect("free port");
        let listener = format!("PLAINTEXT://127.0.0.1:{port}");
        let log = std::fs::File::create(dir.path().join("broker.log")).expect("log file");
        let child = Command::new(strata_bin())
            .args(["--override", "node.id=0"])
            .args(["--override", &format!("listeners={listener}")])
            .args(["--override", &format!("advertised.listeners={listener}")])
            .args(["--override", &format!("log.dirs={}", dir.path().join("data").display())])
            // Two brokers run at once here; neither needs the metrics port.
            .args(["--override", "metrics.listener="])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .expect("spawning strata");
        let mut broker = Broker { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(20);
        // Ready once it answers ApiVersions: a bare connect can succeed before the broker
        // listens (another test's free_port probing the same port for a moment, or a
        // loopback connect to a port in the ephemeral range meeting itself), and then
        // strata-perf's first connection was refused.
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let answers = || {
            strata_tests::RawConn::connect(addr)
                .and_then(|mut c| c.api_versions(0))
                .is_ok_and(|r| r.error_code == 0)
        };
        while !answers() {
            if let Ok(Some(status)) = broker.child.try_wait() {
                panic!("strata exited with {status} before listening:\n{}", broker.log());
            }
            assert!(Instant::now() < deadline, "strata did not listen within 20 s:\n{}", broker.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        broker
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("broker.log")).unwrap_or_default()
    }

    /// Runs strata-perf with `args` against this broker and returns its JSON summary.
    fn perf(&self, args: &[&str]) -> Value {
        let mut child = Command::new(env!("CARGO_BIN_EXE_strata-perf"))
            .args(args)
            .args(["--bootstrap", &format!("127.0.0.1:{}", self.port), "--json", "--quiet"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning strata-perf");
        let deadline = Instant::now() + RUN_TIMEOUT;
        while child.try_wait().expect("waiting").is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("strata-perf {args:?} did not finish within {RUN_TIMEOUT:?}:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let Output { status, stdout, stderr } = child.wait_with_output().expect("output");
        let stdout = String::from_utf8_lossy(&stdout);
        let stderr = String::from_utf8_lossy(&stderr);
        assert!(
            status.success(),
            "strata-perf {args:?} failed ({status}):\n{stderr}\n{stdout}\nbroker log:\n{}",
            self.log()
        );
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("bad JSON ({e}): {stdout}"))
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn produce_consume_and_end_to_end_against_strata() {
    let started = Instant::now();
    let broker = Broker::start();
    let records = RECORDS.to_string();

    let produced = broker.perf(&[
        "produce",
        "--topic",
        "smoke",
        "--partitions",
        "3",
        "--records",
        &records,
        "--record-size",
        "200",
        "--key-distribution",
        "sequential",
    ]);
    assert_eq!(produced["records"], RECORDS, "{produced}");
    assert_eq!(produced["errors"], 0, "{produced}");
    assert!(produced["latency_ms"]["count"].as_u64() == Some(RECORDS), "{produced}");

    let consumed = broker.perf(&["consume", "--topic", "smoke", "--consumers", "2"]);
    assert_eq!(consumed["records"], RECORDS, "{consumed}");
    assert_eq!(consumed["bytes"], produced["bytes"], "same key and value bytes read back");

    let e2e = broker.perf(&[
        "end-to-end",
        "--topic",
        "smoke-e2e",
        "--records",
        "2000",
        "--rate",
        "20000",
        "--compression",
        "lz4",
    ]);
    assert_eq!(e2e["produce"]["records"], 2000, "{e2e}");
    assert_eq!(e2e["consume"]["records"], 2000, "{e2e}");
    assert_eq!(e2e["missing"], 0, "{e2e}");

    let txn = broker.perf(&[
        "produce",
        "--topic",
        "smoke-txn",
        "--records",
        "5000",
        "--record-size",
        "100",
        "--acks",
        "-1",
        "--transactions",
        "--transaction-records",
        "1000",
    ]);
    assert_eq!(txn["records"], 5000, "{txn}");
    assert_eq!(txn["transactions"], 5, "{txn}");
    let committed = broker.perf(&["consume", "--topic", "smoke-txn", "--read-committed"]);
    assert_eq!(committed["records"], 5000, "{committed}");

    assert!(started.elapsed() < Duration::from_secs(30), "smoke test took {:?}", started.elapsed());
}

/// The hand-written engine and the client engine interoperate through the broker, and
/// `--group` consumers share the partitions through the group protocol and commit
/// what they read: a second pass of the same group finds nothing left.
#[test]
fn a_consumer_group_reads_what_the_wire_engine_wrote_once() {
    let broker = Broker::start();
    let produced = broker.perf(&[
        "produce",
        "--engine",
        "wire",
        "--topic",
        "grouped",
        "--partitions",
        "4",
        "--records",
        "8000",
        "--record-size",
        "100",
        "--key-distribution",
        "random",
    ]);
    assert_eq!(produced["records"], 8000, "{produced}");
    assert_eq!(produced["engine"], "wire", "{produced}");

    let consumed = broker.perf(&["consume", "--topic", "grouped", "--group", "smoke-g", "--consumers", "3"]);
    assert_eq!(consumed["records"], 8000, "{consumed}");
    assert_eq!(consumed["bytes"], produced["bytes"], "{consumed}");
    assert_eq!(consumed["engine"], "client", "{consumed}");

    let again = broker.perf(&["consume", "--topic", "grouped", "--group", "smoke-g"]);
    assert_eq!(again["records"], 0, "the group committed its offsets: {again}");

    let wire = broker.perf(&["consume", "--engine", "wire", "--topic", "grouped", "--consumers", "2"]);
    assert_eq!(wire["records"], 8000, "{wire}");
}
