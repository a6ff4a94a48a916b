//! A full disk (issue 14, part 6), on a small tmpfs mounted for the test (the tests run
//! as root; elsewhere the test says so and does nothing): appends fail with
//! KAFKA_STORAGE_ERROR and the broker logs why (the directory and its free space),
//! reads go on, writes succeed again once space is freed (and the broker says so), and
//! after kill -9 on the full disk every acknowledged record is readable.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use strata_client::consumer::{Consumer, ConsumerConfig};
use strata_client::producer::{Producer, ProducerConfig, ProducerRecord};
use strata_client::TopicPartition;
use strata_tests::{BrokerProcess, Tmpfs};

const TOPIC: &str = "filling";
const FILLER: usize = 3 << 20;

async fn producer(broker: &BrokerProcess) -> Producer {
    let mut config = ProducerConfig::new(&broker.addr().to_string());
    for (k, v) in [("delivery.timeout.ms", "3000"), ("request.timeout.ms", "2000"), ("linger.ms", "5")] {
        config.set(k, v).expect(k);
    }
    Producer::new(config).await.expect("producer")
}

/// Sends 1 KiB records numbered from `*next` in rounds until a round has a failure;
/// returns the numbers acknowledged.
async fn fill(broker: &BrokerProcess, next: &mut u64) -> BTreeSet<u64> {
    let p = producer(broker).await;
    let mut acked = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "the disk never filled");
        let mut round = Vec::new();
        for _ in 0..256 {
            let n = *next;
            *next += 1;
            let value = format!("{n:08}{}", "x".repeat(1016));
            round.push((n, p.send(ProducerRecord::new(TOPIC).value(value)).await.expect("queued")));
        }
        let mut failed = false;
        for (n, d) in round {
            match d.await {
                Ok(_) => {
                    acked.insert(n);
                }
                Err(_) => failed = true,
            }
        }
        if failed {
            drop(p);
            return acked;
        }
    }
}

/// Every record number in the partition, read from offset 0 to the high watermark.
async fn read_all(broker: &BrokerProcess) -> BTreeSet<u64> {
    let mut config = ConsumerConfig::new(&broker.addr().to_string());
    config.set("fetch.max.wait.ms", "50").expect("wait");
    let mut consumer = Consumer::new(config).await.expect("consumer");
    let tp = TopicPartition::new(TOPIC, 0);
    consumer.assign(std::slice::from_ref(&tp)).expect("assign");
    consumer.seek(&tp, 0).expect("seek");
    let mut seen = BTreeSet::new();
    let mut quiet = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    // The end is reached when polls come back empty at the partition's end.
    while quiet < 5 {
        assert!(Instant::now() < deadline, "reading back did not finish");
        let records = consumer.poll(Duration::from_millis(200)).await.expect("poll while the disk is full");
        if records.is_empty() {
            quiet += 1;
            continue;
        }
        quiet = 0;
        for r in records {
            let v = r.value.expect("value");
            seen.insert(std::str::from_utf8(&v[..8]).expect("utf8").parse().expect("number"));
        }
    }
    seen
}

fn await_log(broker: &BrokerProcess, needle: &str, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while broker.log_contents().matches(needle).count() < count {
        assert!(Instant::now() < deadline, "the broker never logged {needle:?} ({count} times)");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_writes_visibly_keeps_reads_and_recovers_after_kill_9() {
    let Some(fs) = Tmpfs::mount("24m") else { return };
    let data: PathBuf = fs.path().join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    let filler = fs.path().join("filler");
    std::fs::write(&filler, vec![1u8; FILLER]).expect("filler");
    let log_dirs = format!("log.dirs={}", data.display());
    let mut broker =
        BrokerProcess::start(&[&log_dirs, "log.segment.bytes=1048576", "num.partitions=1"]).expect("broker");

    let mut next = 0;
    let mut acked = fill(&broker, &mut next).await;
    assert!(acked.len() > 1000, "{} records fit before the disk filled", acked.len());
    await_log(&broker, "cannot write to the log", 1);
    let log = broker.log_contents();
    let line = log.lines().find(|l| l.contains("cannot write to the log")).expect("the line");
    assert!(line.contains(&data.display().to_string()) && line.contains("free_bytes"), "{line}");

    // Reads go on while the disk is full.
    let seen = read_all(&broker).await;
    assert!(acked.is_subset(&seen), "acknowledged records missing: {:?}", acked.difference(&seen).next());

    // Space comes back: writes succeed again, and the broker says so.
    std::fs::remove_file(&filler).expect("free space");
    let p = producer(&broker).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let n = next;
        next += 1;
        let d = p.send(ProducerRecord::new(TOPIC).value(format!("{n:08}after"))).await.expect("queued");
        if d.await.is_ok() {
            acked.insert(n);
            break;
        }
        assert!(Instant::now() < deadline, "writes never resumed after space was freed");
    }
    drop(p);
    await_log(&broker, "writes to the log succeed again", 1);

    // Full again, then killed: every acknowledged record survives the restart.
    acked.extend(fill(&broker, &mut next).await);
    broker.kill().expect("kill -9");
    broker.restart().expect("restart on a full disk");
    let seen = read_all(&broker).await;
    let missing: Vec<_> = acked.difference(&seen).take(5).collect();
    assert!(missing.is_empty(), "acknowledged records lost after kill -9 on a full disk: {missing:?}");
}
