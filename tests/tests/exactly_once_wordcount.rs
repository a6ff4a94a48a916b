//! Exactly-once end to end: the `wordcount` example (checkpointed Kafka source, barrier
//! checkpoints, two-phase-commit Kafka sink on KIP-939) is SIGKILLed at many random points
//! while input keeps arriving, and the broker is SIGKILLed and restarted at some of them.
//! A `read_committed` reader of the output must then see, for every word, exactly the
//! values 1, 2, ..., n in order, each once, where n is how often the word was produced.
//!
//! `STRATA_EOS_KILLS` sets the number of kill points (default 100); the seed of the
//! random points is printed, and `STRATA_EOS_SEED` replays one. The example binary is
//! `STRATA_WORDCOUNT`, else the workspace's release or debug build of
//! `cargo build -p strata-client --features fault-injection --example wordcount`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use strata_client::consumer::{Consumer, ConsumerConfig};
use strata_client::producer::{Producer, ProducerConfig, ProducerRecord};
use strata_client::{Client, ClientConfig, TopicPartition};
use strata_protocol::messages::create_topics::{CreatableTopic, CreateTopicsRequest};
use strata_protocol::{RequestBody, ResponseBody};
use strata_tests::BrokerProcess;

const PARTITIONS: i32 = 3;
const WORDS: usize = 24;

fn wordcount_bin() -> PathBuf {
    if let Ok(p) = std::env::var("STRATA_WORDCOUNT") {
        return PathBuf::from(p);
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("target"));
    for profile in ["release", "debug"] {
        let p = target.join(profile).join("examples").join("wordcount");
        if p.is_file() {
            return p;
        }
    }
    panic!("the wordcount example is not built: cargo build --release -p strata-client --features fault-injection --example wordcount");
}

/// A small deterministic generator (xorshift), so a failing run can be replayed by seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

async fn create_topics(client: &Client, names: &[&str]) {
    let request = CreateTopicsRequest {
        topics: names
            .iter()
            .map(|n| CreatableTopic {
                name: n.to_string(),
                num_partitions: PARTITIONS,
                replication_factor: -1,
                ..Default::default()
            })
            .collect(),
        timeout_ms: 10_000,
        ..Default::default()
    };
    let ResponseBody::CreateTopics(r) =
        client.controller().await.unwrap().call(RequestBody::CreateTopics(request)).await.unwrap()
    else {
        panic!("wrong response")
    };
    assert!(r.topics.iter().all(|t| t.error_code == 0), "{r:?}");
}

struct App {
    child: Child,
}

impl App {
    fn start(bootstrap: &str, dir: &std::path::Path, log: &std::path::Path) -> App {
        App::start_with(bootstrap, dir, log, &[])
    }

    fn start_with(bootstrap: &str, dir: &std::path::Path, log: &std::path::Path, extra: &[&str]) -> App {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
        let child = Command::new(wordcount_bin())
            .args(["--bootstrap-server", bootstrap, "--input", "eos-in", "--output", "eos-out"])
            .args(["--group", "eos-wc", "--checkpoint-interval-ms", "200", "--checkpoint-dir"])
            .arg(dir)
            .args(extra)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start wordcount");
        App { child }
    }

    /// The exit status if the process ended.
    fn try_exit(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap()
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn stop(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().expect("kill -TERM");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "wordcount did not stop within 60 s of SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Waits until the output holds `total` words, read_committed.
async fn await_output(bootstrap: &str, total: u64) {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let got: u64 = read_output(bootstrap).await.values().map(|v| v.len() as u64).sum();
        if got >= total {
            return;
        }
        assert!(Instant::now() < deadline, "the output holds {got} of {total} words");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Every word's output values are exactly 1..=n, in order, once.
fn assert_exactly_once(output: &BTreeMap<String, Vec<u64>>, expected: &BTreeMap<String, u64>, what: &str) {
    for (word, n) in expected {
        let got = output.get(word).cloned().unwrap_or_default();
        let want: Vec<u64> = (1..=*n).collect();
        assert_eq!(got, want, "values of {word} ({what})");
    }
    assert_eq!(output.len(), expected.len(), "words never produced in the output ({what})");
}

/// Reads the output with read_committed up to its end: (word, values in order).
async fn read_output(bootstrap: &str) -> BTreeMap<String, Vec<u64>> {
    let mut config = ConsumerConfig::new(bootstrap);
    config.set("isolation.level", "read_committed").unwrap();
    config.set("auto.offset.reset", "earliest").unwrap();
    config.set("enable.auto.commit", "false").unwrap();
    let mut consumer = Consumer::new(config).await.unwrap();
    let partitions: Vec<_> = (0..PARTITIONS).map(|p| TopicPartition::new("eos-out", p)).collect();
    consumer.assign(&partitions).unwrap();
    // The end: ListOffsets under read_committed (the last stable offset).
    let admin = consumer.client().admin();
    let specs: Vec<_> =
        partitions.iter().map(|tp| (tp.clone(), strata_client::admin::OffsetSpec::Latest)).collect();
    let ends: BTreeMap<TopicPartition, i64> = admin
        .list_offsets(&specs, strata_client::IsolationLevel::ReadCommitted)
        .await
        .into_iter()
        .map(|(tp, r)| (tp, r.expect("list offsets").offset))
        .collect();
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let positions = consumer.positions();
        if ends.iter().all(|(tp, end)| positions.get(tp).is_some_and(|p| p >= end)) {
            break;
        }
        assert!(Instant::now() < deadline, "output not read to its end: at {positions:?}, ends {ends:?}");
        for r in consumer.poll(Duration::from_millis(200)).await.unwrap() {
            let word = String::from_utf8(r.key.unwrap().to_vec()).unwrap();
            let n: u64 = std::str::from_utf8(&r.value.unwrap()).unwrap().parse().unwrap();
            out.entry(word).or_default().push(n);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wordcount_is_exactly_once_through_kill_9_of_the_job_and_the_broker() {
    let kills: u64 = std::env::var("STRATA_EOS_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    let seed: u64 = std::env::var("STRATA_EOS_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
    });
    eprintln!("STRATA_EOS_SEED={seed} STRATA_EOS_KILLS={kills}");
    let mut rng = Rng(seed);

    let mut broker = BrokerProcess::start(&[
        "transaction.two.phase.commit.enable=true",
        "offsets.topic.num.partitions=2",
        "transaction.state.log.num.partitions=2",
    ])
    .expect("broker");
    let bootstrap = broker.addr().to_string();
    let client = Client::connect(ClientConfig::new(&bootstrap)).await.expect("connect");
    create_topics(&client, &["eos-in", "eos-out"]).await;
    let work = tempfile::tempdir().unwrap();
    let (checkpoints, log) = (work.path().join("checkpoints"), work.path().join("wordcount.log"));

    // Input arrives all along: lines of 1-6 words, acknowledged (acks=all, idempotent)
    // before they count.
    let produced: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let feeder = {
        let (produced, done, bootstrap) = (produced.clone(), done.clone(), bootstrap.clone());
        let mut rng = Rng(seed.rotate_left(17) | 1);
        tokio::spawn(async move {
            let mut config = ProducerConfig::new(&bootstrap);
            config.set("linger.ms", "2").unwrap();
            config.set("delivery.timeout.ms", "120000").unwrap();
            let producer = Producer::new(config).await.unwrap();
            while !done.load(Ordering::Relaxed) {
                let mut pending = Vec::new();
                for _ in 0..20 {
                    let words: Vec<String> =
                        (0..1 + rng.below(6)).map(|_| format!("w{}", rng.below(WORDS as u64))).collect();
                    let record = ProducerRecord::new("eos-in").value(words.join(" "));
                    pending.push((words, producer.send(record).await.unwrap()));
                }
                for (words, delivery) in pending {
                    delivery.await.expect("input acknowledged");
                    let mut p = produced.lock().unwrap();
                    for w in words {
                        *p.entry(w).or_default() += 1;
                    }
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            producer.close().await.unwrap();
        })
    };

    for i in 0..kills {
        let app = App::start(&bootstrap, &checkpoints, &log);
        let wait = 150 + rng.below(700);
        tokio::time::sleep(Duration::from_millis(wait)).await;
        app.kill();
        if i % 10 == 9 {
            broker.kill().expect("kill the broker");
            broker.restart().expect("restart the broker");
        }
    }
    done.store(true, Ordering::Relaxed);
    feeder.await.unwrap();
    let expected = produced.lock().unwrap().clone();
    let total: u64 = expected.values().sum();
    eprintln!("{total} words produced");

    // A last run catches up, then stops cleanly on SIGTERM (a final checkpoint).
    let app = App::start(&bootstrap, &checkpoints, &log);
    await_output(&bootstrap, total).await;
    let status = app.stop();
    assert!(status.success(), "wordcount exited with {status} after SIGTERM; log:\n{}", tail(&log));
    assert_exactly_once(&read_output(&bootstrap).await, &expected, &format!("seed {seed}"));
}

/// The crash KIP-939 exists for, made deterministic by the sink's fault-injection switch:
/// checkpoint 3 is complete and written, its transaction prepared, and the process dies
/// before committing it. The restarted job keeps that transaction and dies as well before
/// completing it; the job started after that keeps it again and commits it: its records
/// appear once, none lost, none twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_prepare_and_commit_is_committed_by_the_restarted_job() {
    let broker = BrokerProcess::start(&[
        "transaction.two.phase.commit.enable=true",
        "offsets.topic.num.partitions=2",
        "transaction.state.log.num.partitions=2",
    ])
    .expect("broker");
    let bootstrap = broker.addr().to_string();
    let client = Client::connect(ClientConfig::new(&bootstrap)).await.expect("connect");
    create_topics(&client, &["eos-in", "eos-out"]).await;
    let work = tempfile::tempdir().unwrap();
    let (checkpoints, log) = (work.path().join("checkpoints"), work.path().join("wordcount.log"));

    // Input keeps coming while the job runs, so every checkpoint has a transaction.
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    let producer = Producer::new(ProducerConfig::new(&bootstrap)).await.unwrap();
    let send_lines = async |from: u64, count: u64, expected: &mut BTreeMap<String, u64>| {
        let mut pending = Vec::new();
        for i in from..from + count {
            let words: Vec<String> = (0..3).map(|k| format!("w{}", (i * 7 + k) % WORDS as u64)).collect();
            for w in &words {
                *expected.entry(w.clone()).or_default() += 1;
            }
            pending.push(producer.send(ProducerRecord::new("eos-in").value(words.join(" "))).await.unwrap());
        }
        for d in pending {
            d.await.expect("input acknowledged");
        }
    };
    let mut app = App::start_with(&bootstrap, &checkpoints, &log, &["--crash-before-commit", "3"]);
    let mut sent = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        send_lines(sent, 50, &mut expected).await;
        sent += 50;
        tokio::time::sleep(Duration::from_millis(50)).await;
        if let Some(status) = app.try_exit() {
            break status;
        }
        assert!(Instant::now() < deadline, "the fault injection never fired; log:\n{}", tail(&log));
    };
    assert!(!status.success(), "the job was to crash: {status}");
    let latest = strata_client::stream::CheckpointStore::open(&checkpoints).unwrap().latest().unwrap();
    let latest = latest.expect("a complete checkpoint").id;
    assert!(latest >= 3, "crashed after checkpoint {latest}");
    let described = client.admin().describe_transactions(&["eos-wc-sink".to_string()]).await;
    let state = described[0].1.as_ref().expect("described").state.clone();
    assert_eq!(state, "Ongoing", "the prepared transaction waits for its outcome");

    // The next run keeps that transaction and dies too before completing it; the one after
    // must still recognise it as the one checkpoint 3 stored.
    let mut app = App::start_with(&bootstrap, &checkpoints, &log, &["--crash-after-keep"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = app.try_exit() {
            break status;
        }
        assert!(Instant::now() < deadline, "the second fault injection never fired; log:\n{}", tail(&log));
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(!status.success(), "the job was to crash after keeping: {status}");
    assert!(std::fs::read_to_string(&log).unwrap().contains("crashing after keeping"), "{}", tail(&log));

    send_lines(sent, 200, &mut expected).await;
    producer.close().await.unwrap();
    let total: u64 = expected.values().sum();
    let app = App::start(&bootstrap, &checkpoints, &log);
    await_output(&bootstrap, total).await;
    let status = app.stop();
    assert!(status.success(), "wordcount exited with {status} after SIGTERM; log:\n{}", tail(&log));
    assert_exactly_once(&read_output(&bootstrap).await, &expected, "crash between prepare and commit");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("left open by the previous run is complete") && text.contains("committed=true"),
        "the restarted sink did not commit the kept transaction; log:\n{}",
        tail(&log)
    );
}

fn tail(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}
