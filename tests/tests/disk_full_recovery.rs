//! A full disk never wedges a node (issue 37, item 1), on small tmpfs mounts made for the
//! test (the tests run as root; elsewhere they say so and do nothing).
//!
//! The operator's scenario: the data directory (and with it the metadata log, which
//! defaults to the first of `log.dirs`) fills up; deleting the topic that filled it frees
//! the space, and writes to another topic resume within seconds, with every acknowledged
//! record readable. Then the metadata log on a tmpfs of its own fills up: the node keeps
//! answering (errors within the requests' timeouts), says why once, and metadata writes
//! resume once space is freed. Every wait has a deadline, and every request must be
//! answered: a broker that stops answering fails the test with what it was waiting for.
//!
//! CI runs the data-dir scenario `STRATA_DISK_FULL_ROUNDS` times (2 by default) and the
//! metadata one once; the ignored soak runs 20 rounds of each.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};
use strata_client::admin::Admin;
use strata_client::consumer::{Consumer, ConsumerConfig};
use strata_client::producer::{Producer, ProducerConfig, ProducerRecord};
use strata_client::{Client, ClientConfig, TopicPartition};
use strata_tests::{BrokerProcess, Tmpfs};

const BIG: &str = "big";
const OTHER: &str = "other";
/// Bytes of each filler record: large, so a small tmpfs fills in a few hundred sends.
const FILLER_RECORD: usize = 16 << 10;

type Outcome = Result<(), String>;

async fn producer(addr: &str) -> Producer {
    let mut config = ProducerConfig::new(addr);
    for (k, v) in [
        ("delivery.timeout.ms", "4000"),
        ("request.timeout.ms", "2000"),
        ("linger.ms", "2"),
        ("retry.backoff.ms", "50"),
    ] {
        config.set(k, v).expect(k);
    }
    Producer::new(config).await.expect("producer")
}

/// Awaits `fut` for at most `limit`, turning a hang into an error naming `what`.
async fn within<T>(
    limit: Duration,
    what: &str,
    fut: impl std::future::Future<Output = T>,
) -> Result<T, String> {
    tokio::time::timeout(limit, fut).await.map_err(|_| format!("{what}: no answer within {limit:?}"))
}

/// Sends filler records to `BIG` until a send fails (the disk is full).
async fn fill(addr: &str) -> Outcome {
    let p = producer(addr).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let value = vec![b'x'; FILLER_RECORD];
    loop {
        if Instant::now() > deadline {
            return Err("the disk never filled".into());
        }
        let mut round = Vec::new();
        for _ in 0..32 {
            let d = p.send(ProducerRecord::new(BIG).value(value.clone())).await.map_err(|e| e.to_string())?;
            round.push(d);
        }
        let mut failed = false;
        for d in round {
            // delivery.timeout.ms bounds every delivery; the outer limit catches a client bug.
            failed |= within(Duration::from_secs(15), "a filler delivery", d).await?.is_err();
        }
        if failed {
            return Ok(());
        }
    }
}

/// Deleted files the broker still holds open (`/proc/<pid>/fd` links ending in
/// " (deleted)"): space the file system cannot give back yet.
fn deleted_open_files(pid: u32) -> Vec<String> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return Vec::new() };
    fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .map(|target| target.display().to_string())
        .filter(|t| t.ends_with(" (deleted)"))
        .collect()
}

/// Deletes `BIG` (retrying while the broker answers with an error), then waits until
/// its directory is gone and its space is back.
async fn delete_big(admin: &Admin, broker: &BrokerProcess, fs: &Tmpfs, data: &Path) -> Outcome {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let results =
            within(Duration::from_secs(10), "DeleteTopics", admin.delete_topics(&[BIG.to_string()])).await?;
        match &results[0].1 {
            Ok(()) => break,
            Err(e) if e.code() == Some(strata_client::ErrorCode::UnknownTopicOrPartition) => break,
            Err(e) if Instant::now() > deadline => return Err(format!("DeleteTopics kept failing: {e}")),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    let big_dir = data.join(format!("{BIG}-0"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while big_dir.exists() || fs.free_bytes() < 4 << 20 {
        if Instant::now() > deadline {
            let held = broker.pid().map(deleted_open_files).unwrap_or_default();
            return Err(format!(
                "space not freed after the delete: {} exists: {}, {} bytes free, deleted files held open: {held:?}",
                big_dir.display(),
                big_dir.exists(),
                fs.free_bytes()
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Produces `count` records to `OTHER`, retrying failed ones until `deadline`; returns
/// the numbers acknowledged (all of them, or an error saying what did not get through).
async fn produce_other(addr: &str, count: u64, deadline: Instant) -> Result<BTreeSet<u64>, String> {
    let p = producer(addr).await;
    let mut acked = BTreeSet::new();
    let mut last_error = String::new();
    while (acked.len() as u64) < count {
        if Instant::now() > deadline {
            return Err(format!("{} of {count} records acknowledged; last error: {last_error}", acked.len()));
        }
        let mut round = Vec::new();
        for n in (0..count).filter(|n| !acked.contains(n)) {
            let record = ProducerRecord::new(OTHER).value(format!("{n:08}"));
            round.push((n, p.send(record).await.map_err(|e| e.to_string())?));
        }
        for (n, d) in round {
            match within(Duration::from_secs(15), "a delivery to the other topic", d).await? {
                Ok(_) => {
                    acked.insert(n);
                }
                Err(e) => last_error = e.to_string(),
            }
        }
    }
    Ok(acked)
}

/// Every record number in `OTHER`-0 up to its end.
async fn read_other(addr: &str) -> Result<BTreeSet<u64>, String> {
    let mut config = ConsumerConfig::new(addr);
    config.set("fetch.max.wait.ms", "50").expect("wait");
    let mut consumer = Consumer::new(config).await.map_err(|e| e.to_string())?;
    let tp = TopicPartition::new(OTHER, 0);
    consumer.assign(std::slice::from_ref(&tp)).map_err(|e| e.to_string())?;
    consumer.seek(&tp, 0).map_err(|e| e.to_string())?;
    let mut seen = BTreeSet::new();
    let mut quiet = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while quiet < 5 {
        if Instant::now() > deadline {
            return Err("reading back did not finish".into());
        }
        let records = within(Duration::from_secs(10), "a poll", consumer.poll(Duration::from_millis(200)))
            .await?
            .map_err(|e| e.to_string())?;
        if records.is_empty() {
            quiet += 1;
        }
        for r in records {
            quiet = 0;
            let v = r.value.ok_or("a record without a value")?;
            seen.insert(
                std::str::from_utf8(&v).map_err(|e| e.to_string())?.parse().map_err(|_| "not a number")?,
            );
        }
    }
    Ok(seen)
}

/// One run of the operator's scenario on a fresh node whose data directory (and metadata
/// log) is on a small tmpfs.
async fn data_dir_full_then_freed(round: usize) -> Outcome {
    let size = std::env::var("STRATA_DISK_FULL_SIZE").unwrap_or_else(|_| "12m".into());
    let Some(fs) = Tmpfs::mount(&size) else { return Ok(()) };
    let data = fs.path().join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    let broker = BrokerProcess::start(&[
        &format!("log.dirs={}", data.display()),
        &std::env::var("STRATA_DISK_FULL_SEGMENT").unwrap_or_else(|_| "log.segment.bytes=1048576".into()),
        "num.partitions=1",
    ])
    .map_err(|e| format!("start: {e:#}"))?;
    let addr = broker.addr().to_string();
    let result = async {
        fill(&addr).await?;
        // What the records left, a file takes: the disk is full to the last block, so
        // the deletion's metadata record fits only in what the metadata log reserved.
        fill_with_file(fs.path());
        let mut client_config = ClientConfig::new(&addr);
        client_config.set("request.timeout.ms", "5000").expect("timeout");
        let client = within(Duration::from_secs(10), "connect", Client::connect(client_config))
            .await?
            .map_err(|e| e.to_string())?;
        delete_big(&Admin::new(client), &broker, &fs, &data).await?;
        let acked = produce_other(&addr, 100, Instant::now() + Duration::from_secs(20)).await?;
        let seen = read_other(&addr).await?;
        match acked.difference(&seen).next() {
            Some(n) => Err(format!("acknowledged record {n} is not readable")),
            None => Ok(()),
        }
    }
    .await;
    result.map_err(|e| {
        let held = broker.pid().map(deleted_open_files).unwrap_or_default();
        format!(
            "round {round}: {e}\nfree bytes: {}, deleted files held open: {held:?}\n---- broker log ----\n{}",
            fs.free_bytes(),
            broker.log_contents()
        )
    })
}

/// Fills the file system under `dir` with a file `dir/filler`: writes until ENOSPC.
fn fill_with_file(dir: &Path) -> std::path::PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).expect("filler");
    let chunk = vec![1u8; 64 << 10];
    let mut len = chunk.len();
    while len > 0 {
        if f.write_all(&chunk[..len]).is_err() {
            len /= 2;
        }
    }
    path
}

/// Creates `topic` (one partition) with one CreateTopics of `timeout_ms` 3000, sent once
/// (the admin client would retry retriable errors): `Ok(true)` once created, `Ok(false)`
/// when the broker answered with an error, `Err` when it did not answer in time.
async fn try_create(client: &Client, topic: &str) -> Result<bool, String> {
    use strata_protocol::messages::create_topics::{CreatableTopic, CreateTopicsRequest};
    use strata_protocol::{RequestBody, ResponseBody};
    let request = CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: topic.to_string(),
            num_partitions: 1,
            replication_factor: -1,
            ..Default::default()
        }],
        timeout_ms: 3000,
        ..Default::default()
    };
    let conn = within(Duration::from_secs(5), "finding the controller", client.controller())
        .await?
        .map_err(|e| e.to_string())?;
    let call = conn.call(RequestBody::CreateTopics(request));
    // The broker must answer within the request's timeout (and a little for the trip).
    match within(Duration::from_secs(6), "CreateTopics", call).await?.map_err(|e| e.to_string())? {
        ResponseBody::CreateTopics(r) => Ok(r.topics.first().is_some_and(|t| t.error_code == 0)),
        other => Err(format!("CreateTopics answered with {other:?}")),
    }
}

/// The metadata log on a tmpfs of its own fills up: the node keeps answering (errors
/// within the requests' timeouts, produce to existing topics goes on), and once space is
/// freed, metadata writes (a topic creation) succeed again without a restart.
async fn metadata_dir_full_then_freed() -> Outcome {
    let Some(fs) = Tmpfs::mount("1m") else { return Ok(()) };
    let meta = fs.path().join("meta");
    std::fs::create_dir_all(&meta).expect("metadata dir");
    let broker = BrokerProcess::start(&[&format!("metadata.log.dir={}", meta.display()), "num.partitions=1"])
        .map_err(|e| format!("start: {e:#}"))?;
    let addr = broker.addr().to_string();
    let result = async {
        if broker.data_dir().join("__cluster_metadata-0").exists()
            || !meta.join("__cluster_metadata-0").exists()
        {
            return Err("the metadata log is not in metadata.log.dir".to_string());
        }
        let mut client_config = ClientConfig::new(&addr);
        client_config.set("request.timeout.ms", "10000").expect("timeout");
        let client = within(Duration::from_secs(10), "connect", Client::connect(client_config))
            .await?
            .map_err(|e| e.to_string())?;
        produce_other(&addr, 10, Instant::now() + Duration::from_secs(20)).await?;
        let filler = fill_with_file(fs.path());
        // Metadata writes use up what is left in the pages the log already has, then fail.
        let mut created = 0;
        loop {
            if !try_create(&client, &format!("while-full-{created}")).await? {
                break;
            }
            created += 1;
            if created > 400 {
                return Err("metadata writes never failed on a full metadata disk".into());
            }
        }
        eprintln!("{created} topics created on the full metadata disk (page slack and the reserve)");
        // The node answers while it cannot write its metadata log: a further metadata
        // write gets an error, and produce to a topic that exists goes on.
        if try_create(&client, "refused").await? {
            return Err("a topic was created while the metadata disk was full".into());
        }
        let acked = produce_other(&addr, 20, Instant::now() + Duration::from_secs(20)).await?;
        if acked.len() != 20 {
            return Err("produce to an existing topic stopped while the metadata disk was full".into());
        }
        // Space comes back: metadata writes resume without a restart.
        std::fs::remove_file(&filler).expect("free the metadata disk");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !try_create(&client, "after").await? {
            if Instant::now() > deadline {
                return Err("metadata writes did not resume after space was freed".into());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let p = producer(&addr).await;
        let d = p.send(ProducerRecord::new("after").value("x")).await.map_err(|e| e.to_string())?;
        within(Duration::from_secs(15), "produce to the new topic", d).await?.map_err(|e| e.to_string())?;
        // The log said why once, and that it recovered.
        let log = broker.log_contents();
        let why = log.matches("cannot write the metadata log").count();
        if why != 1 || !log.contains("writes to the metadata log succeed again") {
            return Err(format!("the stall was logged {why} times, or its end not at all"));
        }
        Ok(())
    }
    .await;
    result.map_err(|e| {
        format!(
            "{e}
free bytes: {}
---- broker log ----\n{}",
            fs.free_bytes(),
            broker.log_contents()
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_metadata_dir_keeps_the_node_answering_and_writes_resume_when_freed() {
    if let Err(e) = metadata_dir_full_then_freed().await {
        panic!("{e}");
    }
}

fn rounds() -> usize {
    std::env::var("STRATA_DISK_FULL_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(2)
}

/// 20 rounds of both scenarios in a row (about three minutes): `cargo test -p strata-tests
/// --test disk_full_recovery -- --ignored`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a soak of about three minutes; CI runs the short versions"]
async fn soak_twenty_rounds_of_each_disk_filling_up_and_being_freed() {
    for round in 0..20 {
        if let Err(e) = data_dir_full_then_freed(round).await {
            panic!("{e}");
        }
        if let Err(e) = metadata_dir_full_then_freed().await {
            panic!("round {round}: {e}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_topic_that_filled_the_data_dir_lets_writes_resume() {
    for round in 0..rounds() {
        if let Err(e) = data_dir_full_then_freed(round).await {
            panic!("{e}");
        }
    }
}

#[test]
fn a_metadata_log_dir_that_is_a_file_stops_the_start_naming_the_key() {
    let file = tempfile::NamedTempFile::new().expect("a file");
    let err = BrokerProcess::start(&[&format!("metadata.log.dir={}", file.path().display())])
        .expect_err("a file is not a metadata log dir");
    assert!(format!("{err:#}").contains(&format!("metadata.log.dir={}", file.path().display())), "{err:#}");
}
