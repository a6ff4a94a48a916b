//! Our consumer alongside librdkafka (through confluent_kafka in the venv):
//! `read_committed` skipping a transaction librdkafka aborted, and a librdkafka consumer
//! sharing a group with ours under either assignor and either leader. Split out of
//! `client_consumer.rs` to keep each file short.

use crate::{broker, config, poll_until};
use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use strata_client::consumer::{Consumer, NoopListener};
use strata_client::{Client, ClientConfig, TopicPartition};
use strata_tests::create_topic;

/// The venv's Python, where confluent_kafka (librdkafka) lives.
fn python() -> std::path::PathBuf {
    strata_tests::python_with("confluent_kafka").expect("python with confluent_kafka")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_committed_skips_an_aborted_transaction() {
    let broker = broker();
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("client");
    create_topic(&client, "txn", 1).await;
    let script = r#"
import sys
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "txn-test"})
p.init_transactions(30)
for name, commit in (("c1", True), ("a", False), ("c2", True)):
    p.begin_transaction()
    for i in range(10):
        p.produce("txn", value=f"{name}-{i}".encode(), partition=0)
    p.flush(30)
    if commit:
        p.commit_transaction(30)
    else:
        p.abort_transaction(30)
plain = Producer({"bootstrap.servers": sys.argv[1]})
plain.produce("txn", value=b"plain", partition=0)
plain.flush(30)
"#;
    let out =
        Command::new(python()).arg("-c").arg(script).arg(broker.addr().to_string()).output().expect("python");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let read = |isolation: &'static str| {
        let mut c = config(&broker, None);
        c.set("isolation.level", isolation).expect("isolation");
        async move {
            let mut consumer = Consumer::new(c).await.expect("consumer");
            consumer.assign(&[TopicPartition::new("txn", 0)]).expect("assign");
            let seen = poll_until(&mut consumer, Duration::from_secs(30), |s| {
                s.last().is_some_and(|(_, _, v)| v == "plain")
            })
            .await;
            let position = consumer.positions()[&TopicPartition::new("txn", 0)];
            (seen.into_iter().map(|(_, _, v)| v).collect::<Vec<_>>(), position)
        }
    };
    let (committed, position) = read("read_committed").await;
    let mut want: Vec<String> = (0..10).map(|i| format!("c1-{i}")).collect();
    want.extend((0..10).map(|i| format!("c2-{i}")));
    want.push("plain".into());
    assert_eq!(committed, want, "aborted records and markers skipped");
    // 30 records, 3 markers and the plain record: the position is past all of it.
    assert_eq!(position, 34);
    let (all, _) = read("read_uncommitted").await;
    assert_eq!(all.len(), 31, "read_uncommitted sees the aborted ones too");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_consumer_and_librdkafka_split_one_group() {
    share_a_group_with_librdkafka("range", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_consumer_leads_a_group_librdkafka_joins() {
    share_a_group_with_librdkafka("range", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn librdkafka_and_our_consumer_rebalance_cooperatively() {
    share_a_group_with_librdkafka("cooperative-sticky", true).await;
}

/// A librdkafka consumer and ours in one group with `strategy`, one of them first (and
/// so the group leader, running the assignor on the other's subscription): they end up
/// splitting the four partitions.
async fn share_a_group_with_librdkafka(strategy: &str, ours_first: bool) {
    let broker = broker();
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("client");
    create_topic(&client, "shared", 4).await;
    let dir = tempfile::tempdir().expect("tmp");
    let stop = dir.path().join("stop");
    let script = r#"
import os, sys, json
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "g-shared", "partition.assignment.strategy": sys.argv[3],
              "session.timeout.ms": 10000, "heartbeat.interval.ms": 300, "auto.offset.reset": "earliest"})
c.subscribe(["shared"])
while not os.path.exists(sys.argv[2]):
    c.poll(0.1)
    print(json.dumps(sorted(p.partition for p in c.assignment())), flush=True)
c.close()
"#;
    let mut c = config(&broker, Some("g-shared"));
    c.set("partition.assignment.strategy", strategy).expect("strategy");
    let mut ours = Consumer::new(c).await.expect("ours");
    ours.subscribe(&["shared"], Box::new(NoopListener)).expect("subscribe");
    if ours_first {
        let end = Instant::now() + Duration::from_secs(30);
        while ours.assignment().len() != 4 {
            assert!(Instant::now() < end, "ours alone: {:?}", ours.assignment());
            ours.poll(Duration::from_millis(50)).await.expect("poll");
        }
    }
    let mut child = Command::new(python())
        .arg("-c")
        .arg(script)
        .arg(broker.addr().to_string())
        .arg(&stop)
        .arg(strategy)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python");
    let latest = Arc::new(Mutex::new(String::new()));
    let reader = {
        let latest = latest.clone();
        let stdout = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines().map_while(|l| l.ok()) {
                *latest.lock().unwrap() = line;
            }
        })
    };
    let theirs = |latest: &Arc<Mutex<String>>| -> BTreeSet<i32> {
        let line = latest.lock().unwrap().clone();
        line.trim_matches(|c| c == '[' || c == ']').split(',').filter_map(|s| s.trim().parse().ok()).collect()
    };
    let end = Instant::now() + Duration::from_secs(45);
    let mut smallest = ours.assignment().len();
    loop {
        ours.poll(Duration::from_millis(100)).await.expect("poll");
        let mine: BTreeSet<i32> = ours.assignment().iter().map(|tp| tp.partition).collect();
        smallest = smallest.min(mine.len());
        let other = theirs(&latest);
        if mine.len() == 2 && other.len() == 2 && mine.is_disjoint(&other) {
            break;
        }
        assert!(Instant::now() < end, "ours {mine:?} librdkafka {other:?}");
    }
    if ours_first && strategy == "cooperative-sticky" {
        assert_eq!(smallest, 2, "incremental: ours never gave up more than what moved");
    }
    std::fs::write(&stop, b"").expect("stop");
    let _ = child.wait();
    let _ = reader.join();
    ours.close().await.expect("close");
}
