//! Group membership and rebalancing of our consumer: members joining and leaving under
//! load (eager and cooperative), static membership across a restart, cooperative-sticky
//! moving only what must move, a broker killed and restarted, added partitions and a
//! member that stops polling, and unsubscribe. Split out of `client_consumer.rs` to keep
//! each file short.

use crate::{broker, config, poll_until, produce};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use strata_client::consumer::{Consumer, NoopListener, Rebalance, RebalanceListener};
use strata_client::{Client, ClientConfig, OffsetAndMetadata, TopicPartition};
use strata_protocol::records::Compression;
use strata_protocol::{RequestBody, ResponseBody};
use strata_tests::{create_topic, BrokerProcess};

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
