//! Reading and positions on one consumer: every codec read back in order, positions
//! restored from a checkpoint with seek, pause and commits on a manual assignment,
//! `auto.offset.reset` for out-of-range and missing offsets, auto-commit, and many
//! partitions read through one incremental fetch session (KIP-227). Split out
//! of `client_consumer.rs` to keep each file short.

use crate::{broker, config, poll_until, produce};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use strata_client::consumer::{Consumer, NoopListener};
use strata_client::{Client, ClientConfig, OffsetAndMetadata, TopicPartition};
use strata_protocol::records::Compression;
use strata_tests::{create_topic, free_port, metric, BrokerProcess};

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
async fn many_partitions_are_read_through_one_incremental_fetch_session() {
    const PARTITIONS: i32 = 40;
    let port = free_port().expect("port");
    let metrics = format!("127.0.0.1:{port}");
    let broker = BrokerProcess::start(&[&format!("metrics.listener=http://{metrics}")]).expect("broker");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("client");
    create_topic(&client, "wide", PARTITIONS).await;
    let all: Vec<TopicPartition> = (0..PARTITIONS).map(|p| TopicPartition::new("wide", p)).collect();
    let mut expected = BTreeSet::new();
    let produced = |expected: &mut BTreeSet<_>, p: i32, base: i64, values: &[String]| {
        for (i, v) in values.iter().enumerate() {
            expected.insert((TopicPartition::new("wide", p), base + i as i64, v.clone()));
        }
    };
    for p in 0..PARTITIONS {
        let values: Vec<String> = (0..3).map(|i| format!("first-{p}-{i}")).collect();
        produced(&mut expected, p, produce(&client, "wide", p, &values, Compression::None).await, &values);
    }
    let mut consumer = Consumer::new(config(&broker, None)).await.expect("consumer");
    consumer.assign(&all).expect("assign");
    let mut seen =
        poll_until(&mut consumer, Duration::from_secs(30), |s| s.len() >= 3 * PARTITIONS as usize).await;

    // Idle, the consumer's session holds every partition: its fetches name none.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let extra = consumer.poll(Duration::from_millis(150)).await.expect("poll");
        assert!(extra.is_empty(), "nothing more was produced");
        let m = metrics.clone();
        let (sessions, cached) = tokio::task::spawn_blocking(move || {
            (
                metric(&m, "kafka_server_fetchsessioncache_numincrementalfetchsessions"),
                metric(&m, "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"),
            )
        })
        .await
        .expect("scrape");
        if sessions == Some(1.0) && cached == Some(f64::from(PARTITIONS)) {
            break;
        }
        assert!(Instant::now() < deadline, "no session of {PARTITIONS} partitions: {sessions:?} {cached:?}");
    }

    // Records arriving on a few partitions at a time reach the consumer through it.
    for round in 0..5 {
        for p in [round * 7 % PARTITIONS, (round * 7 + 3) % PARTITIONS] {
            let values: Vec<String> = (0..4).map(|i| format!("round{round}-{p}-{i}")).collect();
            produced(
                &mut expected,
                p,
                produce(&client, "wide", p, &values, Compression::None).await,
                &values,
            );
        }
        let want = expected.len();
        let more = poll_until(&mut consumer, Duration::from_secs(30), |s| seen.len() + s.len() >= want).await;
        seen.extend(more);
    }
    assert_eq!(seen.len(), expected.len(), "nothing twice");
    assert_eq!(seen.iter().cloned().collect::<BTreeSet<_>>(), expected);
    for p in 0..PARTITIONS {
        let offsets: Vec<i64> =
            seen.iter().filter(|(tp, _, _)| tp.partition == p).map(|(_, o, _)| *o).collect();
        assert!(offsets.windows(2).all(|w| w[0] + 1 == w[1]), "partition {p} in order: {offsets:?}");
    }
    consumer.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_with_a_backlog_does_not_wait_for_a_fetch_parked_on_an_idle_one() {
    // One batch of 4 per fetch (a partition gets at least one batch whatever its limit),
    // polled one record at a time so the rest stays buffered while the next fetch could
    // go out with only the idle partition; such a fetch parks for 10 s, and the broker
    // answers one connection's requests in order. Waiting behind it, the 30 fetches the
    // backlog needs would take 5 minutes.
    let broker = broker();
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("client");
    create_topic(&client, "backlog", 2).await;
    for b in 0..30 {
        let values: Vec<String> = (0..4).map(|i| format!("{b}-{i}-{}", "x".repeat(500))).collect();
        produce(&client, "backlog", 0, &values, Compression::None).await;
    }
    let mut config = config(&broker, None);
    config.set("fetch.max.wait.ms", "10000").expect("wait");
    config.set("max.partition.fetch.bytes", "1024").expect("partition bytes");
    config.set("max.poll.records", "1").expect("poll records");
    let mut consumer = Consumer::new(config).await.expect("consumer");
    consumer.assign(&[TopicPartition::new("backlog", 0), TopicPartition::new("backlog", 1)]).expect("assign");
    let seen = poll_until(&mut consumer, Duration::from_secs(60), |s| s.len() >= 120).await;
    assert_eq!(seen.len(), 120);
    assert!(seen.windows(2).all(|w| w[0].1 + 1 == w[1].1), "in order, nothing twice");
    // Caught up, the idle partition's records still arrive.
    let values = vec!["late".to_string()];
    let base = produce(&client, "backlog", 1, &values, Compression::None).await;
    let late = poll_until(&mut consumer, Duration::from_secs(30), |s| !s.is_empty()).await;
    assert_eq!(late, vec![(TopicPartition::new("backlog", 1), base, "late".to_string())]);
    consumer.close().await.expect("close");
}
