//! The client crate's consumer against the real broker: every codec read back; three
//! consumers joining and leaving a group under load with nothing lost and nothing
//! processed twice by committed offsets; static membership surviving a restart without
//! a rebalance; `read_committed` skipping an aborted transaction written by
//! librdkafka; positions restored from a checkpoint; and a librdkafka consumer sharing
//! a group with ours. Test data is produced with raw Produce requests.

use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use strata_client::consumer::{Consumer, ConsumerConfig, NoopListener, Rebalance, RebalanceListener};
use strata_client::{Client, ClientConfig, OffsetAndMetadata, TopicPartition};
use strata_protocol::messages::produce::{PartitionProduceData, ProduceRequest, TopicProduceData};
use strata_protocol::records::{Compression, NewRecord, RecordBatchBuilder};
use strata_protocol::{RequestBody, ResponseBody};
use strata_tests::{create_topic, BrokerProcess};

const PYTHON: &str = "/work/main/.venv/bin/python";

fn broker() -> BrokerProcess {
    BrokerProcess::start(&["group.initial.rebalance.delay.ms=0"]).expect("broker")
}

/// Produces one batch of `values` (acks=all); returns its base offset.
async fn produce(client: &Client, topic: &str, partition: i32, values: &[String], codec: Compression) -> i64 {
    let mut builder = RecordBatchBuilder::new(0).compression(codec);
    for (i, v) in values.iter().enumerate() {
        let record = NewRecord::new(
            1_700_000_000_000 + i as i64,
            Some(Bytes::from(format!("k{i}"))),
            Some(Bytes::from(v.clone())),
        )
        .with_header("h", Some(Bytes::from_static(b"hv")));
        builder.append(&record).expect("append");
    }
    let batch = builder.build().expect("build");
    let request = ProduceRequest {
        transactional_id: None,
        acks: -1,
        timeout_ms: 10_000,
        topic_data: vec![TopicProduceData {
            name: topic.to_string(),
            partition_data: vec![PartitionProduceData { index: partition, records: Some(batch) }],
        }],
    };
    let (_, conn) = client.leader(topic, partition).await.expect("leader");
    let ResponseBody::Produce(r) = conn.call(RequestBody::Produce(request)).await.expect("produce") else {
        panic!("wrong api")
    };
    let p = &r.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 0, "produce to {topic}-{partition}");
    p.base_offset
}

fn config(broker: &BrokerProcess, group: Option<&str>) -> ConsumerConfig {
    let mut c = ConsumerConfig::new(&broker.addr().to_string());
    if let Some(g) = group {
        c.set("group.id", g).expect("group.id");
    }
    c.set("auto.offset.reset", "earliest").expect("reset");
    c.set("enable.auto.commit", "false").expect("auto commit");
    c.set("fetch.max.wait.ms", "100").expect("wait");
    c.set("heartbeat.interval.ms", "300").expect("hb");
    c.set("session.timeout.ms", "10000").expect("session");
    c.set("max.poll.interval.ms", "15000").expect("poll interval");
    c
}

/// Polls until `done` says so or the deadline passes; returns everything polled.
async fn poll_until(
    consumer: &mut Consumer,
    deadline: Duration,
    mut done: impl FnMut(&[(TopicPartition, i64, String)]) -> bool,
) -> Vec<(TopicPartition, i64, String)> {
    let end = Instant::now() + deadline;
    let mut seen = Vec::new();
    while !done(&seen) {
        assert!(Instant::now() < end, "timed out; got {} records", seen.len());
        for r in consumer.poll(Duration::from_millis(200)).await.expect("poll") {
            let value = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
            seen.push((TopicPartition::new(&*r.topic, r.partition), r.offset, value));
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_record_is_read_back_with_every_codec() {
    let broker = broker();
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("client");
    create_topic(&client, "codecs", 2).await;
    let mut expected = BTreeSet::new();
    let codecs =
        [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];
    for (c, codec) in codecs.iter().enumerate() {
        for p in 0..2 {
            let values: Vec<String> = (0..50).map(|i| format!("{codec:?}-{p}-{i}")).collect();
            let base = produce(&client, "codecs", p, &values, *codec).await;
            for (i, v) in values.iter().enumerate() {
                expected.insert((TopicPartition::new("codecs", p), base + i as i64, v.clone()));
            }
            assert_eq!(base, c as i64 * 50);
        }
    }
    let mut consumer = Consumer::new(config(&broker, None)).await.expect("consumer");
    consumer.assign(&[TopicPartition::new("codecs", 0), TopicPartition::new("codecs", 1)]).expect("assign");
    let seen = poll_until(&mut consumer, Duration::from_secs(30), |s| s.len() >= expected.len()).await;
    assert_eq!(seen.len(), expected.len(), "nothing twice");
    assert_eq!(seen.iter().cloned().collect::<BTreeSet<_>>(), expected);
    // Per partition in offset order.
    for p in 0..2 {
        let offsets: Vec<i64> =
            seen.iter().filter(|(tp, _, _)| tp.partition == p).map(|(_, o, _)| *o).collect();
        assert!(offsets.windows(2).all(|w| w[0] + 1 == w[1]), "in order");
    }
    let positions = consumer.positions();
    assert_eq!(positions.values().copied().collect::<Vec<_>>(), vec![250, 250]);
    consumer.close().await.expect("close");
}

/// A consumer in the rebalance test: its processed records, and commits on revocation.
struct Recorder {
    revoked: Arc<AtomicUsize>,
}

impl RebalanceListener for Recorder {
    fn on_partitions_revoked(&mut self, rebalance: &mut Rebalance, _partitions: &[TopicPartition]) {
        self.revoked.fetch_add(1, Ordering::Relaxed);
        rebalance.commit_positions();
    }
}

type Processed = Arc<Mutex<Vec<(TopicPartition, i64)>>>;

/// What the members of the rebalance test saw: every record processed, and the records
/// covered by a successful commit of the member that processed them.
#[derive(Clone, Default)]
struct Ledger {
    processed: Processed,
    committed: Processed,
}

/// Runs a group member until `stop`: processes (records) each poll's records, then
/// commits its positions; a revocation also commits, in the listener. A record counts
/// as committed by this member once a commit of an offset past it succeeded; records
/// whose commit failed (a rebalance under way) may rightly be processed again by the
/// next owner.
fn spawn_member(
    broker: &BrokerProcess,
    group: &str,
    topic: &'static str,
    strategy: &str,
    stop: Arc<AtomicBool>,
    ledger: Ledger,
    progress: Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<(usize, usize)> {
    let mut c = config(broker, Some(group));
    c.set("partition.assignment.strategy", strategy).expect("strategy");
    tokio::spawn(async move {
        let mut consumer = Consumer::new(c).await.expect("consumer");
        let revoked = Arc::new(AtomicUsize::new(0));
        consumer.subscribe(&[topic], Box::new(Recorder { revoked: revoked.clone() })).expect("subscribe");
        let mut mine = 0;
        let mut pending: Vec<(TopicPartition, i64)> = Vec::new();
        while !stop.load(Ordering::Acquire) {
            let records = consumer.poll(Duration::from_millis(100)).await.expect("poll");
            let batch: Vec<(TopicPartition, i64)> =
                records.iter().map(|r| (TopicPartition::new(&*r.topic, r.partition), r.offset)).collect();
            ledger.processed.lock().unwrap().extend(batch.iter().cloned());
            pending.extend(batch);
            if pending.is_empty() {
                continue;
            }
            let positions = consumer.positions();
            let offsets = positions.iter().map(|(tp, o)| (tp.clone(), OffsetAndMetadata::new(*o))).collect();
            if consumer.commit_sync(Some(offsets)).await.is_ok() {
                let (covered, rest): (Vec<_>, Vec<_>) =
                    pending.drain(..).partition(|(tp, o)| positions.get(tp).is_some_and(|p| o < p));
                mine += covered.len();
                progress.store(mine, Ordering::Release);
                ledger.committed.lock().unwrap().extend(covered);
                // Records of partitions gone since are not this member's to commit.
                pending = rest.into_iter().filter(|(tp, _)| consumer.assignment().contains(tp)).collect();
            }
        }
        consumer.close().await.expect("close");
        (mine, revoked.load(Ordering::Relaxed))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_consumers_joining_and_leaving_under_load_lose_nothing_and_commit_nothing_twice() {
    members_joining_and_leaving_under_load("range").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_with_cooperative_sticky_incremental_rebalances() {
    members_joining_and_leaving_under_load("cooperative-sticky").await;
}

/// Three members join and leave while records are produced; each commits what it
/// processed after every poll and on revocation.
async fn members_joining_and_leaving_under_load(strategy: &str) {
    let broker = broker();
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("client");
    create_topic(&client, "rebalance", 6).await;
    let produced = Arc::new(Mutex::new(BTreeSet::new()));
    let producing_stop = Arc::new(AtomicBool::new(false));
    let producing = {
        let (client, produced, stop) = (client.clone(), produced.clone(), producing_stop.clone());
        tokio::spawn(async move {
            let mut round = 0;
            while !stop.load(Ordering::Acquire) {
                for p in 0..6 {
                    let values: Vec<String> = (0..20).map(|i| format!("{round}-{i}")).collect();
                    let base = produce(&client, "rebalance", p, &values, Compression::Lz4).await;
                    let mut set = produced.lock().unwrap();
                    set.extend((0..20).map(|i| (TopicPartition::new("rebalance", p), base + i)));
                }
                round += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let ledger = Ledger::default();
    let committed = ledger.committed.clone();
    let stops: Vec<Arc<AtomicBool>> = (0..3).map(|_| Arc::new(AtomicBool::new(false))).collect();
    let progress: Vec<Arc<AtomicUsize>> = (0..3).map(|_| Arc::new(AtomicUsize::new(0))).collect();
    let member = |i: usize| {
        spawn_member(
            &broker,
            "g-rebalance",
            "rebalance",
            strategy,
            stops[i].clone(),
            ledger.clone(),
            progress[i].clone(),
        )
    };
    // Waits until member `i` has committed `n` records of its own.
    let grown = |i: usize, n: usize| {
        let progress = progress[i].clone();
        async move {
            let end = Instant::now() + Duration::from_secs(60);
            while progress.load(Ordering::Acquire) < n {
                assert!(Instant::now() < end, "member {i} stalled below {n}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    let a = member(0);
    grown(0, 300).await;
    let b = member(1);
    grown(1, 200).await; // b got partitions and works through them under load
    let c = member(2);
    grown(2, 200).await;
    stops[1].store(true, Ordering::Release); // b leaves mid-stream
    let (b_records, b_revocations) = b.await.expect("b");
    assert!(b_revocations >= 1, "b gave its partitions up on leaving");
    let (a_now, c_now) = (progress[0].load(Ordering::Acquire), progress[2].load(Ordering::Acquire));
    grown(0, a_now + 200).await;
    grown(2, c_now + 200).await;
    stops[0].store(true, Ordering::Release); // a leaves too
    let (a_records, a_revocations) = a.await.expect("a");
    // Eager: a gave everything up when b (and c, maybe in the same rebalance) joined,
    // when b left and on leaving. Cooperative: at least when the others joined and on
    // leaving (whether c's arrival takes from a depends on timing).
    let least = if strategy == "range" { 3 } else { 2 };
    assert!(a_revocations >= least, "a: {a_records} records, {a_revocations} revocations");
    grown(2, progress[2].load(Ordering::Acquire) + 200).await; // c alone, still under load
    producing_stop.store(true, Ordering::Release);
    producing.await.expect("producer");
    let total = produced.lock().unwrap().len();
    let _ = b_records;
    // c alone finishes the topic.
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let seen: BTreeSet<(TopicPartition, i64)> =
            ledger.processed.lock().unwrap().iter().cloned().collect();
        if seen.len() >= total {
            break;
        }
        assert!(Instant::now() < end, "only {} of {total} processed", seen.len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stops[2].store(true, Ordering::Release);
    let (c_records, _) = c.await.expect("c");
    assert!(c_records > 0);
    let processed: BTreeSet<(TopicPartition, i64)> =
        ledger.processed.lock().unwrap().iter().cloned().collect();
    assert_eq!(processed, *produced.lock().unwrap(), "no record lost");
    let all = committed.lock().unwrap().clone();
    let unique: BTreeSet<(TopicPartition, i64)> = all.iter().cloned().collect();
    assert_eq!(all.len(), unique.len(), "no record processed twice up to the committed offsets");
    assert!(unique.len() * 10 >= total * 9, "most records are covered by their processor's own commit");
    // The group's committed offsets are the log ends.
    let mut check = Consumer::new(config(&broker, Some("g-rebalance"))).await.expect("checker");
    let parts: Vec<TopicPartition> = (0..6).map(|p| TopicPartition::new("rebalance", p)).collect();
    let offsets = check.committed(&parts).await.expect("committed");
    let ends = produced.lock().unwrap().iter().filter(|(tp, _)| tp.partition == 0).count() as i64;
    for tp in &parts {
        assert_eq!(offsets[tp].as_ref().map(|o| o.offset), Some(ends), "{tp}");
    }
    check.commit_sync(Some(BTreeMap::new())).await.expect("empty commit");
}

/// Counts the callbacks, to see that no rebalance happened.
struct Counting {
    revoked: Arc<AtomicUsize>,
    assigned: Arc<Mutex<Vec<Vec<TopicPartition>>>>,
}

impl RebalanceListener for Counting {
    fn on_partitions_revoked(&mut self, _: &mut Rebalance, _partitions: &[TopicPartition]) {
        self.revoked.fetch_add(1, Ordering::Relaxed);
    }
    fn on_partitions_assigned(&mut self, _: &mut Rebalance, partitions: &[TopicPartition]) {
        self.assigned.lock().unwrap().push(partitions.to_vec());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_member_restarting_keeps_its_assignment_without_a_rebalance() {
    let broker = broker();
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("client");
    create_topic(&client, "static", 4).await;
    let static_config = |id: &str| {
        let mut c = config(&broker, Some("g-static"));
        c.set("group.instance.id", id).expect("instance");
        c.set("session.timeout.ms", "30000").expect("session");
        c
    };
    let mut a = Consumer::new(static_config("a")).await.expect("a");
    a.subscribe(&["static"], Box::new(NoopListener)).expect("subscribe");
    let b_revoked = Arc::new(AtomicUsize::new(0));
    let b_assigned = Arc::new(Mutex::new(Vec::new()));
    let mut b = Consumer::new(static_config("b")).await.expect("b");
    b.subscribe(&["static"], Box::new(Counting { revoked: b_revoked.clone(), assigned: b_assigned.clone() }))
        .expect("subscribe");
    // Both members in one generation, two partitions each.
    let end = Instant::now() + Duration::from_secs(30);
    while a.assignment().len() != 2 || b.assignment().len() != 2 {
        assert!(Instant::now() < end, "a {:?} b {:?}", a.assignment(), b.assignment());
        a.poll(Duration::from_millis(50)).await.expect("poll a");
        b.poll(Duration::from_millis(50)).await.expect("poll b");
    }
    let a_assignment = a.assignment();
    let generation = b.group_metadata().generation_id;
    let revocations = b_revoked.load(Ordering::Relaxed);
    a.close().await.expect("close a (no LeaveGroup for a static member)");
    // The same instance comes back: the coordinator hands it the old assignment.
    let mut a2 = Consumer::new(static_config("a")).await.expect("a again");
    a2.subscribe(&["static"], Box::new(NoopListener)).expect("subscribe");
    let end = Instant::now() + Duration::from_secs(20);
    while a2.assignment().is_empty() {
        assert!(Instant::now() < end, "the restarted member got nothing");
        a2.poll(Duration::from_millis(50)).await.expect("poll a2");
        b.poll(Duration::from_millis(50)).await.expect("poll b");
    }
    assert_eq!(a2.assignment(), a_assignment, "same partitions");
    // b keeps heartbeating through several intervals: no rebalance reaches it.
    for _ in 0..10 {
        b.poll(Duration::from_millis(100)).await.expect("poll b");
    }
    assert_eq!(b.group_metadata().generation_id, generation, "no new generation");
    assert_eq!(b_revoked.load(Ordering::Relaxed), revocations, "b revoked nothing");
    a2.close().await.expect("close");
    b.close().await.expect("close");
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
        Command::new(PYTHON).arg("-c").arg(script).arg(broker.addr().to_string()).output().expect("python");
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
async fn restored_positions_make_the_next_poll_start_exactly_there() {
    let broker = broker();
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("client");
    create_topic(&client, "checkpoint", 2).await;
    for p in 0..2 {
        for round in 0..4 {
            let values: Vec<String> = (0..25).map(|i| format!("{p}-{round}-{i}")).collect();
            produce(&client, "checkpoint", p, &values, Compression::Snappy).await;
        }
    }
    let mut c = config(&broker, Some("g-checkpoint"));
    c.set("max.poll.records", "30").expect("max poll");
    let mut consumer = Consumer::new(c).await.expect("consumer");
    let parts = [TopicPartition::new("checkpoint", 0), TopicPartition::new("checkpoint", 1)];
    consumer.assign(&parts).expect("assign");
    let first = poll_until(&mut consumer, Duration::from_secs(30), |s| s.len() >= 60).await;
    assert!(first.len() <= 60 + 30, "max.poll.records bounds each poll");
    let checkpoint = consumer.positions();
    assert_eq!(checkpoint.len(), 2);
    let after_checkpoint: BTreeSet<(TopicPartition, i64)> =
        poll_until(&mut consumer, Duration::from_secs(30), |s| s.len() >= 200 - first.len())
            .await
            .into_iter()
            .map(|(tp, o, _)| (tp, o))
            .collect();
    // "Failure": restore the checkpoint; the records after it come again, exactly.
    consumer.restore_positions(&checkpoint).expect("restore");
    assert_eq!(consumer.positions(), checkpoint);
    let replay: BTreeSet<(TopicPartition, i64)> =
        poll_until(&mut consumer, Duration::from_secs(30), |s| s.len() >= after_checkpoint.len())
            .await
            .into_iter()
            .map(|(tp, o, _)| (tp, o))
            .collect();
    assert_eq!(replay, after_checkpoint);
    assert!(consumer.restore_positions(&BTreeMap::from([(TopicPartition::new("other", 0), 0)])).is_err());
    // Seek, pause and commits work on a manual assignment.
    consumer.seek(&parts[0], 10).expect("seek");
    consumer.pause(&parts[1..]);
    let after_seek = poll_until(&mut consumer, Duration::from_secs(30), |s| !s.is_empty()).await;
    assert!(after_seek.iter().all(|(tp, _, _)| *tp == parts[0]), "paused partition returns nothing");
    assert_eq!(after_seek[0].1, 10);
    consumer.resume(&parts[1..]);
    consumer.commit_sync(None).await.expect("commit");
    let committed = consumer.committed(&parts).await.expect("committed");
    assert_eq!(committed[&parts[1]].as_ref().map(|o| o.offset), Some(100));
    // Asynchronous commits land in the order they were made.
    let handles: Vec<_> = (1..=5)
        .map(|o| consumer.commit_async(Some(BTreeMap::from([(parts[0].clone(), OffsetAndMetadata::new(o))]))))
        .collect::<Result<_, _>>()
        .expect("commit_async");
    for h in handles {
        h.await.expect("task").expect("commit");
    }
    let committed = consumer.committed(&parts).await.expect("committed");
    assert_eq!(committed[&parts[0]].as_ref().map(|o| o.offset), Some(5));
    consumer.seek_to_end(&[]);
    assert!(consumer.poll(Duration::from_millis(300)).await.expect("poll").is_empty(), "at the end");
    assert_eq!(consumer.positions().values().copied().collect::<Vec<_>>(), vec![100, 100]);
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
    let mut child = Command::new(PYTHON)
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

/// Records what a cooperative member revokes and is assigned.
struct Moves {
    revoked: Arc<Mutex<Vec<TopicPartition>>>,
}

impl RebalanceListener for Moves {
    fn on_partitions_revoked(&mut self, rebalance: &mut Rebalance, partitions: &[TopicPartition]) {
        self.revoked.lock().unwrap().extend(partitions.iter().cloned());
        rebalance.commit_positions();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cooperative_sticky_moves_only_what_must_move() {
    let broker = broker();
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("client");
    create_topic(&client, "coop", 4).await;
    let cooperative = || {
        let mut c = config(&broker, Some("g-coop"));
        c.set("partition.assignment.strategy", "cooperative-sticky").expect("strategy");
        c
    };
    let a_revoked = Arc::new(Mutex::new(Vec::new()));
    let mut a = Consumer::new(cooperative()).await.expect("a");
    a.subscribe(&["coop"], Box::new(Moves { revoked: a_revoked.clone() })).expect("subscribe");
    let end = Instant::now() + Duration::from_secs(30);
    while a.assignment().len() != 4 {
        assert!(Instant::now() < end, "a alone: {:?}", a.assignment());
        a.poll(Duration::from_millis(50)).await.expect("poll a");
    }
    let mut b = Consumer::new(cooperative()).await.expect("b");
    b.subscribe(&["coop"], Box::new(NoopListener)).expect("subscribe");
    let end = Instant::now() + Duration::from_secs(30);
    let mut smallest = 4;
    while a.assignment().len() != 2 || b.assignment().len() != 2 {
        assert!(Instant::now() < end, "a {:?} b {:?}", a.assignment(), b.assignment());
        a.poll(Duration::from_millis(50)).await.expect("poll a");
        b.poll(Duration::from_millis(50)).await.expect("poll b");
        smallest = smallest.min(a.assignment().len());
    }
    assert_eq!(smallest, 2, "a never gave up everything (no eager revocation)");
    let revoked: BTreeSet<TopicPartition> = a_revoked.lock().unwrap().iter().cloned().collect();
    assert_eq!(revoked.len(), 2, "only the two moving partitions were revoked: {revoked:?}");
    assert!(revoked.is_disjoint(&a.assignment()));
    assert_eq!(revoked, b.assignment(), "and they went to b");
    a.close().await.expect("close a");
    b.close().await.expect("close b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_consumer_rides_out_a_broker_killed_and_restarted() {
    let mut broker = broker();
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("client");
    create_topic(&client, "fault", 3).await;
    let mut produced = BTreeSet::new();
    for p in 0..3 {
        let values: Vec<String> = (0..100).map(|i| format!("before-{i}")).collect();
        let base = produce(&client, "fault", p, &values, Compression::Zstd).await;
        produced.extend((0..100).map(|i| (TopicPartition::new("fault", p), base + i)));
    }
    let mut consumer = Consumer::new(config(&broker, Some("g-fault"))).await.expect("consumer");
    consumer.subscribe(&["fault"], Box::new(NoopListener)).expect("subscribe");
    let mut committed: Vec<(TopicPartition, i64)> = Vec::new();
    let end = Instant::now() + Duration::from_secs(30);
    while committed.len() < 300 {
        assert!(Instant::now() < end, "{} before the kill", committed.len());
        let records = consumer.poll(Duration::from_millis(100)).await.expect("poll");
        let batch: Vec<_> =
            records.iter().map(|r| (TopicPartition::new(&*r.topic, r.partition), r.offset)).collect();
        if !batch.is_empty() && consumer.commit_sync(None).await.is_ok() {
            committed.extend(batch);
        }
    }
    broker.kill().expect("kill");
    broker.restart().expect("restart");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("client again");
    for p in 0..3 {
        let values: Vec<String> = (0..100).map(|i| format!("after-{i}")).collect();
        let base = produce(&client, "fault", p, &values, Compression::Zstd).await;
        produced.extend((0..100).map(|i| (TopicPartition::new("fault", p), base + i)));
    }
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let unique: BTreeSet<_> = committed.iter().cloned().collect();
        if unique.len() >= produced.len() {
            break;
        }
        assert!(Instant::now() < end, "{} of {} after the restart", unique.len(), produced.len());
        // Failures while the broker is away surface as empty polls, not errors.
        let records = consumer.poll(Duration::from_millis(100)).await.expect("poll after the restart");
        let batch: Vec<_> =
            records.iter().map(|r| (TopicPartition::new(&*r.topic, r.partition), r.offset)).collect();
        if !batch.is_empty() && consumer.commit_sync(None).await.is_ok() {
            committed.extend(batch);
        }
    }
    let unique: BTreeSet<_> = committed.iter().cloned().collect();
    assert_eq!(unique, produced);
    assert_eq!(committed.len(), unique.len(), "resumed from the committed offsets: nothing twice");
    consumer.close().await.expect("close");
}

/// Counts partitions lost.
struct LostCounter {
    lost: Arc<AtomicUsize>,
}

impl RebalanceListener for LostCounter {
    fn on_partitions_lost(&mut self, _: &mut Rebalance, partitions: &[TopicPartition]) {
        self.lost.fetch_add(partitions.len(), Ordering::Relaxed);
    }
}

fn partitions_of(c: &Consumer) -> BTreeSet<i32> {
    c.assignment().iter().map(|tp| tp.partition).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_group_rebalances_for_added_partitions_and_for_a_member_that_stops_polling() {
    use strata_protocol::messages::create_partitions::{CreatePartitionsRequest, CreatePartitionsTopic};
    let broker = broker();
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("client");
    create_topic(&client, "grow", 2).await;
    let member = |max_poll_ms: &str| {
        let mut c = config(&broker, Some("g-grow"));
        c.set("metadata.max.age.ms", "300").expect("age");
        c.set("max.poll.interval.ms", max_poll_ms).expect("poll interval");
        c
    };
    let mut a = Consumer::new(member("15000")).await.expect("a");
    a.subscribe(&["grow"], Box::new(NoopListener)).expect("subscribe");
    let b_lost = Arc::new(AtomicUsize::new(0));
    let mut b = Consumer::new(member("2000")).await.expect("b");
    b.subscribe(&["grow"], Box::new(LostCounter { lost: b_lost.clone() })).expect("subscribe");
    let both = |a: &Consumer, b: &Consumer, n: usize| {
        let (x, y) = (partitions_of(a), partitions_of(b));
        !x.is_empty() && !y.is_empty() && x.is_disjoint(&y) && x.len() + y.len() == n
    };
    let end = Instant::now() + Duration::from_secs(30);
    while !both(&a, &b, 2) {
        assert!(Instant::now() < end, "a {:?} b {:?}", a.assignment(), b.assignment());
        a.poll(Duration::from_millis(50)).await.expect("poll a");
        b.poll(Duration::from_millis(50)).await.expect("poll b");
    }
    let request = CreatePartitionsRequest {
        topics: vec![CreatePartitionsTopic { name: "grow".into(), count: 4, assignments: None }],
        timeout_ms: 10_000,
        validate_only: false,
    };
    let conn = client.controller().await.expect("controller");
    let ResponseBody::CreatePartitions(r) =
        conn.call(RequestBody::CreatePartitions(request)).await.expect("grow")
    else {
        panic!("wrong api")
    };
    assert_eq!(r.results[0].error_code, 0);
    let end = Instant::now() + Duration::from_secs(30);
    while !both(&a, &b, 4) {
        assert!(Instant::now() < end, "after growing: a {:?} b {:?}", a.assignment(), b.assignment());
        a.poll(Duration::from_millis(50)).await.expect("poll a");
        b.poll(Duration::from_millis(50)).await.expect("poll b");
    }
    // b stops polling: after max.poll.interval.ms it leaves and a takes everything.
    let end = Instant::now() + Duration::from_secs(30);
    while partitions_of(&a).len() != 4 {
        assert!(Instant::now() < end, "a {:?}", a.assignment());
        a.poll(Duration::from_millis(50)).await.expect("poll a");
    }
    // b polls again: its partitions were lost (no commit possible), and it rejoins.
    let end = Instant::now() + Duration::from_secs(30);
    while !both(&a, &b, 4) {
        assert!(Instant::now() < end, "after b's return: a {:?} b {:?}", a.assignment(), b.assignment());
        a.poll(Duration::from_millis(50)).await.expect("poll a");
        b.poll(Duration::from_millis(50)).await.expect("poll b");
    }
    assert_eq!(b_lost.load(Ordering::Relaxed), 2, "b lost its two partitions");
    a.close().await.expect("close a");
    b.close().await.expect("close b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_out_of_range_and_missing_are_resolved_by_auto_offset_reset() {
    let broker = broker();
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("client");
    create_topic(&client, "reset", 1).await;
    let values: Vec<String> = (0..10).map(|i| format!("r{i}")).collect();
    produce(&client, "reset", 0, &values, Compression::Gzip).await;
    let tp = TopicPartition::new("reset", 0);
    // earliest: a position past the log end is out of range and goes back to the start.
    let mut earliest = Consumer::new(config(&broker, None)).await.expect("earliest");
    assert!(earliest.poll(Duration::from_millis(10)).await.is_err(), "poll before assign");
    earliest.assign(std::slice::from_ref(&tp)).expect("assign");
    let first = poll_until(&mut earliest, Duration::from_secs(30), |s| s.len() >= 10).await;
    assert_eq!(first[0].1, 0);
    earliest.seek(&tp, 1_000).expect("seek");
    let again = poll_until(&mut earliest, Duration::from_secs(30), |s| !s.is_empty()).await;
    assert_eq!(again[0].1, 0, "reset to the log start");
    // latest: starts at the end and sees only what comes next.
    let mut c = config(&broker, None);
    c.set("auto.offset.reset", "latest").expect("latest");
    let mut latest = Consumer::new(c).await.expect("latest");
    latest.assign(std::slice::from_ref(&tp)).expect("assign");
    let end = Instant::now() + Duration::from_secs(30);
    while latest.positions().get(&tp) != Some(&10) {
        assert!(Instant::now() < end, "no position at the end");
        assert!(latest.poll(Duration::from_millis(50)).await.expect("poll").is_empty());
    }
    produce(&client, "reset", 0, &["new".to_string()], Compression::None).await;
    let next = poll_until(&mut latest, Duration::from_secs(30), |s| !s.is_empty()).await;
    assert_eq!((next[0].1, next[0].2.as_str()), (10, "new"));
    // none: no committed offset is an error for the application to handle.
    let mut c = config(&broker, Some("g-none"));
    c.set("auto.offset.reset", "none").expect("none");
    let mut none = Consumer::new(c).await.expect("none");
    none.assign(std::slice::from_ref(&tp)).expect("assign");
    let e = none.poll(Duration::from_secs(5)).await.expect_err("no offset");
    assert!(e.to_string().contains("auto.offset.reset=none"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_commit_commits_while_polling_and_on_close() {
    let broker = broker();
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("client");
    create_topic(&client, "auto", 2).await;
    for p in 0..2 {
        let values: Vec<String> = (0..40).map(|i| format!("{p}-{i}")).collect();
        produce(&client, "auto", p, &values, Compression::Lz4).await;
    }
    let parts = [TopicPartition::new("auto", 0), TopicPartition::new("auto", 1)];
    let auto = |interval: &str| {
        let mut c = config(&broker, Some("g-auto"));
        c.set("enable.auto.commit", "true").expect("auto");
        c.set("auto.commit.interval.ms", interval).expect("interval");
        c
    };
    let mut a = Consumer::new(auto("100")).await.expect("a");
    a.subscribe(&["auto"], Box::new(NoopListener)).expect("subscribe");
    poll_until(&mut a, Duration::from_secs(30), |s| s.len() >= 80).await;
    // The interval passes while polling: the positions are committed without a call.
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let committed = a.committed(&parts).await.expect("committed");
        if parts.iter().all(|tp| committed[tp].as_ref().map(|o| o.offset) == Some(40)) {
            break;
        }
        assert!(Instant::now() < end, "not auto-committed: {committed:?}");
        a.poll(Duration::from_millis(50)).await.expect("poll");
    }
    produce(&client, "auto", 0, &["late".to_string()], Compression::None).await;
    poll_until(&mut a, Duration::from_secs(30), |s| !s.is_empty()).await;
    a.close().await.expect("close commits");
    let mut check = Consumer::new(config(&broker, Some("g-auto"))).await.expect("check");
    let committed = check.committed(&parts).await.expect("committed");
    assert_eq!(committed[&parts[0]].as_ref().map(|o| o.offset), Some(41), "committed on close");
    // A new member resumes there: nothing before the committed offsets comes again.
    check.subscribe(&["auto"], Box::new(NoopListener)).expect("subscribe");
    produce(&client, "auto", 1, &["later".to_string()], Compression::None).await;
    let next = poll_until(&mut check, Duration::from_secs(30), |s| !s.is_empty()).await;
    assert_eq!((next[0].0.partition, next[0].1, next[0].2.as_str()), (1, 40, "later"));
    check.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsubscribe_hands_the_partitions_to_the_others_and_allows_a_manual_assignment() {
    let broker = broker();
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("client");
    create_topic(&client, "unsub", 2).await;
    let mut a = Consumer::new(config(&broker, Some("g-unsub"))).await.expect("a");
    a.subscribe(&["unsub"], Box::new(NoopListener)).expect("subscribe");
    let mut b = Consumer::new(config(&broker, Some("g-unsub"))).await.expect("b");
    b.subscribe(&["unsub"], Box::new(NoopListener)).expect("subscribe");
    let end = Instant::now() + Duration::from_secs(30);
    while a.assignment().len() != 1 || b.assignment().len() != 1 {
        assert!(Instant::now() < end, "a {:?} b {:?}", a.assignment(), b.assignment());
        a.poll(Duration::from_millis(50)).await.expect("poll a");
        b.poll(Duration::from_millis(50)).await.expect("poll b");
    }
    a.unsubscribe().await.expect("unsubscribe");
    assert!(a.assignment().is_empty());
    let end = Instant::now() + Duration::from_secs(30);
    while b.assignment().len() != 2 {
        assert!(Instant::now() < end, "b {:?}", b.assignment());
        b.poll(Duration::from_millis(50)).await.expect("poll b");
    }
    a.assign(&[TopicPartition::new("unsub", 0)]).expect("manual after unsubscribe");
    produce(&client, "unsub", 0, &["x".to_string()], Compression::None).await;
    let seen = poll_until(&mut a, Duration::from_secs(30), |s| !s.is_empty()).await;
    assert_eq!(seen[0].2, "x");
    a.close().await.expect("close a");
    b.close().await.expect("close b");
}
