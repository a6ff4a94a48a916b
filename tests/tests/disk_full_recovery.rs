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
//! metadata one once, and each on a 3-node cluster once (the active controller's
//! metadata disk fills: another voter takes over, and it rejoins once freed); the
//! ignored soak runs 20 rounds of each.

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

/// The tests of this file run one at a time: each starts brokers (three for the cluster
/// ones) that fill disks as fast as they can, and the machines running CI have two cores.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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

/// Deleted files the broker still maps (`/proc/<pid>/maps`): index pages a dropped
/// mapping would give back.
fn deleted_mapped_files(pid: u32) -> Vec<String> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let mut files: Vec<String> = maps
        .lines()
        .filter(|l| l.ends_with(" (deleted)"))
        .filter_map(|l| l.split_whitespace().nth(5))
        .map(String::from)
        .collect();
    files.dedup();
    files
}

/// Every file under `dir` with its allocated size, largest first, for a failure message.
fn files_with_sizes(dir: &Path) -> Vec<(String, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                todo.push(e.path());
            } else {
                out.push((e.path().display().to_string(), meta.blocks() * 512));
            }
        }
    }
    out.sort_by_key(|f| std::cmp::Reverse(f.1));
    out
}

/// A node whose data directory is on a tmpfs of its own.
struct Node<'a> {
    broker: &'a BrokerProcess,
    fs: &'a Tmpfs,
    data: &'a Path,
}

/// Deletes `BIG` (retrying while the broker answers with an error), then waits until its
/// directory is gone from every node, its space is back, and no node holds a deleted
/// file of it open.
async fn delete_big(admin: &Admin, nodes: &[Node<'_>]) -> Outcome {
    // The space each node must get back: what its copy of BIG holds, up to 4 MiB (a
    // follower that lagged while the disks filled may hold little of it), less what the
    // metadata log may write meanwhile.
    let wanted: Vec<u64> = nodes
        .iter()
        .map(|n| {
            let held: u64 = files_with_sizes(&n.data.join(format!("{BIG}-0"))).iter().map(|f| f.1).sum();
            held.min(4 << 20).saturating_sub(256 << 10)
        })
        .collect();
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
    let deadline = Instant::now() + Duration::from_secs(10);
    for (node, wanted) in nodes.iter().zip(wanted) {
        let big_dir = node.data.join(format!("{BIG}-0"));
        loop {
            let held: Vec<String> = node
                .broker
                .pid()
                .map(deleted_open_files)
                .unwrap_or_default()
                .into_iter()
                .filter(|f| f.starts_with(&node.fs.path().display().to_string()))
                .collect();
            if !big_dir.exists() && node.fs.free_bytes() >= wanted && held.is_empty() {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "space not freed after the delete: {} exists: {}, {} bytes free (wanted {wanted}), deleted files held open: \
                     {held:?}, deleted files mapped: {:?}, files on the disk: {:?}",
                    big_dir.display(),
                    big_dir.exists(),
                    node.fs.free_bytes(),
                    node.broker.pid().map(deleted_mapped_files).unwrap_or_default(),
                    files_with_sizes(node.fs.path()).into_iter().take(20).collect::<Vec<_>>(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
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
        delete_big(&Admin::new(client), &[Node { broker: &broker, fs: &fs, data: &data }]).await?;
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
    let conn = within(Duration::from_secs(5), "finding the controller", client.controller())
        .await?
        .map_err(|e| e.to_string())?;
    create_on(&conn, topic).await
}

/// [`try_create`] through the broker `conn` is connected to.
async fn create_on(conn: &strata_client::connection::Connection, topic: &str) -> Result<bool, String> {
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
    let _serial = SERIAL.lock().await;
    if let Err(e) = metadata_dir_full_then_freed().await {
        panic!("{e}");
    }
}

/// Shortened cluster timings (as `tests/interop/cluster.py`), so an election takes about a
/// second.
const FAST: &[&str] = &[
    "broker.heartbeat.interval.ms=300",
    "broker.session.timeout.ms=2500",
    "replica.lag.time.max.ms=2500",
    "replica.fetch.wait.max.ms=200",
    "replica.fetch.backoff.ms=100",
    "controller.quorum.election.timeout.ms=600",
    "controller.quorum.fetch.timeout.ms=1200",
    "controller.quorum.request.timeout.ms=1500",
];

/// Three nodes, each broker and controller, each with its data directory (and its
/// metadata log, unless `meta_size` gives that a tmpfs of its own) on a tmpfs of
/// `data_size`. `None` when tmpfs cannot be mounted (not root).
struct Cluster {
    nodes: Vec<BrokerProcess>,
    data_fs: Vec<Tmpfs>,
    meta_fs: Vec<Tmpfs>,
}

impl Cluster {
    fn start(data_size: &str, meta_size: Option<&str>) -> Result<Option<Cluster>, String> {
        let mut data_fs = Vec::new();
        let mut meta_fs = Vec::new();
        for _ in 0..3 {
            let Some(fs) = Tmpfs::mount(data_size) else { return Ok(None) };
            std::fs::create_dir_all(fs.path().join("data")).expect("data dir");
            data_fs.push(fs);
            if let Some(size) = meta_size {
                let Some(fs) = Tmpfs::mount(size) else { return Ok(None) };
                meta_fs.push(fs);
            }
        }
        let port = |_| strata_tests::free_port().expect("port");
        let (client, internal, controller): (Vec<u16>, Vec<u16>, Vec<u16>) =
            ((0..3).map(port).collect(), (0..3).map(port).collect(), (0..3).map(port).collect());
        let voters: Vec<String> = (0..3).map(|i| format!("{i}@127.0.0.1:{}", controller[i])).collect();
        let mut nodes = Vec::new();
        for i in 0..3 {
            let mut overrides: Vec<String> = FAST.iter().map(|s| s.to_string()).collect();
            overrides.extend([
                format!("node.id={i}"),
                "process.roles=broker,controller".into(),
                format!("controller.quorum.voters={}", voters.join(",")),
                "controller.listener.names=CONTROLLER".into(),
                "inter.broker.listener.name=INTERNAL".into(),
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"
                    .into(),
                format!(
                    "listeners=PLAINTEXT://127.0.0.1:{},INTERNAL://127.0.0.1:{},CONTROLLER://127.0.0.1:{}",
                    client[i], internal[i], controller[i]
                ),
                format!(
                    "advertised.listeners=PLAINTEXT://127.0.0.1:{},INTERNAL://127.0.0.1:{}",
                    client[i], internal[i]
                ),
                format!("log.dirs={}", data_fs[i].path().join("data").display()),
                "log.segment.bytes=1048576".into(),
                "num.partitions=1".into(),
                "default.replication.factor=3".into(),
            ]);
            if let Some(fs) = meta_fs.get(i) {
                overrides.push(format!("metadata.log.dir={}", fs.path().join("meta").display()));
            }
            let refs: Vec<&str> = overrides.iter().map(String::as_str).collect();
            nodes.push(BrokerProcess::launch_on(client[i], &refs).map_err(|e| format!("launch: {e:#}"))?);
        }
        for node in &mut nodes {
            node.wait_ready(Duration::from_secs(60)).map_err(|e| format!("node not ready: {e:#}"))?;
        }
        Ok(Some(Cluster { nodes, data_fs, meta_fs }))
    }

    fn bootstrap(&self) -> String {
        self.nodes.iter().map(|n| n.addr().to_string()).collect::<Vec<_>>().join(",")
    }

    async fn admin(&self) -> Result<(Client, Admin), String> {
        let mut config = ClientConfig::new(&self.bootstrap());
        config.set("request.timeout.ms", "10000").expect("timeout");
        let client = within(Duration::from_secs(10), "connect", Client::connect(config))
            .await?
            .map_err(|e| e.to_string())?;
        Ok((client.clone(), Admin::new(client)))
    }

    /// Every node's log, to explain a failure.
    fn logs(&self) -> String {
        let mut out = String::new();
        for (i, n) in self.nodes.iter().enumerate() {
            out.push_str(&format!("---- node {i} log ----\n{}\n", n.log_contents()));
        }
        out
    }
}

/// The operator's scenario on three nodes: a topic replicated three times fills every
/// node's data disk, is deleted, and writes to another topic resume on all of them.
async fn cluster_data_dirs_full_then_freed() -> Outcome {
    let Some(cluster) = Cluster::start("12m", None)? else { return Ok(()) };
    let addr = cluster.bootstrap();
    let result = async {
        fill(&addr).await?;
        for fs in &cluster.data_fs {
            fill_with_file(fs.path());
        }
        let (_, admin) = cluster.admin().await?;
        let data: Vec<std::path::PathBuf> = cluster.data_fs.iter().map(|fs| fs.path().join("data")).collect();
        let nodes: Vec<Node<'_>> = (0..3)
            .map(|i| Node { broker: &cluster.nodes[i], fs: &cluster.data_fs[i], data: &data[i] })
            .collect();
        delete_big(&admin, &nodes).await?;
        let acked = produce_other(&addr, 100, Instant::now() + Duration::from_secs(30)).await?;
        let seen = read_other(&addr).await?;
        match acked.difference(&seen).next() {
            Some(n) => Err(format!("acknowledged record {n} is not readable")),
            None => Ok(()),
        }
    }
    .await;
    result.map_err(|e| format!("{e}\n{}", cluster.logs()))
}

/// The active controller's metadata disk fills up: another voter takes over within
/// seconds (a topic can be created through any node), the full one answers meanwhile,
/// and once freed it writes its metadata log again and follows the new leader.
async fn cluster_metadata_dir_full_then_freed() -> Outcome {
    let Some(cluster) = Cluster::start("64m", Some("1m"))? else { return Ok(()) };
    let addr = cluster.bootstrap();
    let result = async {
        let active = (0..3)
            .find(|&i| cluster.nodes[i].log_contents().contains("became the active controller"))
            .ok_or("no node became the active controller")?;
        let (client, _) = cluster.admin().await?;
        produce_other(&addr, 10, Instant::now() + Duration::from_secs(20)).await?;
        let filler = fill_with_file(cluster.meta_fs[active].path());
        // Metadata writes use up the full node's page slack and reserve, then stall it.
        let mut n = 0;
        let deadline = Instant::now() + Duration::from_secs(120);
        while !cluster.nodes[active].log_contents().contains("cannot write the metadata log") {
            if Instant::now() > deadline || n > 600 {
                return Err(format!("node {active}'s metadata writes never failed ({n} topics created)"));
            }
            // Errors are fine here (the controller may be moving); answers are not optional.
            try_create(&client, &format!("while-full-{n}")).await?;
            n += 1;
        }
        eprintln!("node {active}'s metadata log stalled after {n} topics were created");
        let stalled = Instant::now();
        // Another voter becomes the active controller: creating a topic works again.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !try_create(&client, "elsewhere").await? {
            if Instant::now() > deadline {
                return Err("no other voter took over while the controller's metadata disk was full".into());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        eprintln!("another voter created a topic {:?} after the stall", stalled.elapsed());
        let acked = produce_other(&addr, 20, Instant::now() + Duration::from_secs(20)).await?;
        std::fs::remove_file(&filler).expect("free the metadata disk");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !cluster.nodes[active].log_contents().contains("writes to the metadata log succeed again") {
            if Instant::now() > deadline {
                return Err(format!(
                    "node {active} did not write its metadata log again after space was freed"
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        while !try_create(&client, "after").await? {
            if Instant::now() > deadline {
                return Err("metadata writes did not resume after space was freed".into());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let seen = read_other(&addr).await?;
        match acked.difference(&seen).next() {
            Some(n) => Err(format!("acknowledged record {n} is not readable")),
            None => Ok(()),
        }
    }
    .await;
    result.map_err(|e| format!("{e}\n{}", cluster.logs()))
}

/// A broker whose metadata log cannot be written (its own metadata disk full) while
/// another voter is the active controller: CreateTopics sent to it are still answered
/// within their `timeout_ms`. The controller creates the topic; this broker, which cannot
/// apply it, stops waiting for it at the request's deadline (it waited 5 s more before,
/// so a 3 s request was answered after 6-8 s, which is how the controller test below
/// failed now and then in CI). Once space is freed it applies what it missed.
async fn follower_metadata_dir_full_answers_in_time() -> Outcome {
    let Some(cluster) = Cluster::start("64m", Some("1m"))? else { return Ok(()) };
    let result = async {
        let active = (0..3)
            .find(|&i| cluster.nodes[i].log_contents().contains("became the active controller"))
            .ok_or("no node became the active controller")?;
        let stuck = (active + 1) % 3;
        let (client, _) = cluster.admin().await?;
        let conn = within(
            Duration::from_secs(5),
            "connecting to the stuck node",
            client.connection(&cluster.nodes[stuck].addr().to_string()),
        )
        .await?
        .map_err(|e| e.to_string())?;
        let filler = fill_with_file(cluster.meta_fs[stuck].path());
        // The request's 3 s and a second for the trip and a loaded machine.
        let in_time = Duration::from_millis(4000);
        let mut n = 0;
        let deadline = Instant::now() + Duration::from_secs(120);
        while !cluster.nodes[stuck].log_contents().contains("cannot write the metadata log") {
            if Instant::now() > deadline || n > 600 {
                return Err(format!("node {stuck}'s metadata writes never failed ({n} topics created)"));
            }
            let started = Instant::now();
            create_on(&conn, &format!("filling-{n}")).await?;
            if started.elapsed() > in_time {
                return Err(format!("a CreateTopics of 3 s was answered after {:?}", started.elapsed()));
            }
            n += 1;
        }
        eprintln!("node {stuck}'s metadata log stalled after {n} topics were created");
        for i in 0..3 {
            let started = Instant::now();
            let created = create_on(&conn, &format!("stalled-{i}")).await?;
            let took = started.elapsed();
            eprintln!("stalled-{i}: created {created} in {took:?}");
            if took > in_time {
                return Err(format!("node {stuck}, stalled, answered a CreateTopics of 3 s after {took:?}"));
            }
            if !created {
                return Err(format!(
                    "the active controller did not create stalled-{i} asked through node {stuck}"
                ));
            }
        }
        std::fs::remove_file(&filler).expect("free the metadata disk");
        // Once it can write again, the node applies the topics it missed.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if shows_topics(&conn, &["stalled-0", "stalled-1", "stalled-2"]).await? {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("node {stuck} does not show the topics created while it was stalled"));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    .await;
    result.map_err(|e| format!("{e}\n{}", cluster.logs()))
}

/// Whether the broker `conn` is connected to shows every topic of `names` in its metadata.
async fn shows_topics(conn: &strata_client::connection::Connection, names: &[&str]) -> Result<bool, String> {
    use strata_protocol::messages::metadata::{MetadataRequest, MetadataRequestTopic};
    use strata_protocol::{RequestBody, ResponseBody};
    let request = MetadataRequest {
        topics: Some(
            names
                .iter()
                .map(|n| MetadataRequestTopic { name: Some(n.to_string()), ..Default::default() })
                .collect(),
        ),
        allow_auto_topic_creation: false,
        ..Default::default()
    };
    match within(Duration::from_secs(5), "Metadata", conn.call(RequestBody::Metadata(request)))
        .await?
        .map_err(|e| e.to_string())?
    {
        ResponseBody::Metadata(r) => {
            Ok(r.topics.len() == names.len() && r.topics.iter().all(|t| t.error_code == 0))
        }
        other => Err(format!("Metadata answered with {other:?}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_a_broker_with_a_full_metadata_disk_answers_create_topics_in_time() {
    let _serial = SERIAL.lock().await;
    if let Err(e) = follower_metadata_dir_full_answers_in_time().await {
        panic!("{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_whose_data_dirs_fill_resume_writes_once_the_topic_is_deleted() {
    let _serial = SERIAL.lock().await;
    if let Err(e) = cluster_data_dirs_full_then_freed().await {
        panic!("{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_move_the_controller_off_a_full_metadata_disk_and_it_rejoins_when_freed() {
    let _serial = SERIAL.lock().await;
    if let Err(e) = cluster_metadata_dir_full_then_freed().await {
        panic!("{e}");
    }
}

fn rounds() -> usize {
    std::env::var("STRATA_DISK_FULL_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(2)
}

/// 20 rounds of every scenario in a row (about nine minutes): `cargo test -p strata-tests
/// --test disk_full_recovery -- --ignored`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a soak of about nine minutes; CI runs the short versions"]
async fn soak_twenty_rounds_of_each_disk_filling_up_and_being_freed() {
    let _serial = SERIAL.lock().await;
    for round in 0..20 {
        if let Err(e) = data_dir_full_then_freed(round).await {
            panic!("{e}");
        }
        if let Err(e) = metadata_dir_full_then_freed().await {
            panic!("round {round}: {e}");
        }
        if let Err(e) = cluster_data_dirs_full_then_freed().await {
            panic!("round {round}: {e}");
        }
        if let Err(e) = cluster_metadata_dir_full_then_freed().await {
            panic!("round {round}: {e}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_topic_that_filled_the_data_dir_lets_writes_resume() {
    let _serial = SERIAL.lock().await;
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
