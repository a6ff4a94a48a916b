//! The client crate's producer against the real broker: records read back as sent with
//! every codec and acks setting, keyed records on murmur2's partitions, an idempotent
//! producer that survives a SIGKILL of the broker with no duplicate and no gap,
//! transactions committed, aborted and fenced, and offsets committed in a transaction
//! (`client_producer/transactions.rs`); borrowed records (`send_borrowed`) read back and partitioned as owned ones.
//! Records are read back with raw Fetch requests through the client's `Connection`,
//! so these tests do not depend on the consumer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata_client::producer::partitioner::partition_for_key;
use strata_client::producer::{BorrowedRecord, DeliveryFuture, Producer, ProducerConfig, ProducerRecord};
use strata_client::{Client, ClientConfig, ErrorCode, Header};
use strata_protocol::messages::fetch::{AbortedTransaction, FetchPartition, FetchRequest, FetchTopic};
use strata_protocol::records::{Record, RecordBatches};
use strata_protocol::{ApiKey, RequestBody, ResponseBody};
use strata_tests::{create_topic, BrokerProcess};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[path = "client_producer/transactions.rs"]
mod transactions;

fn config(broker: &BrokerProcess, settings: &[(&str, &str)]) -> ProducerConfig {
    config_at(&broker.addr().to_string(), settings)
}

fn config_at(bootstrap: &str, settings: &[(&str, &str)]) -> ProducerConfig {
    let mut c = ProducerConfig::new(bootstrap);
    for (k, v) in settings {
        c.set(k, v).expect("setting");
    }
    c
}

/// What a partition holds, read with Fetch from offset 0 to the high watermark
/// (`isolation_level=0`) or the last stable offset (`1`, records of aborted
/// transactions then dropped as a read_committed consumer drops them).
struct Partition {
    /// Data records (control batches skipped).
    records: Vec<Record>,
    /// Producer id and transactional flag of each data record's batch.
    batch_of: Vec<(i64, bool)>,
    /// The aborted transactions the broker listed.
    aborted: Vec<AbortedTransaction>,
}

async fn read_partition(client: &Client, topic: &str, partition: i32, isolation: i8) -> Partition {
    let (_, conn) = client.leader(topic, partition).await.expect("leader");
    let version = conn.version_at_most(ApiKey::Fetch, 12).expect("fetch version");
    let mut out = Partition { records: Vec::new(), batch_of: Vec::new(), aborted: Vec::new() };
    let mut offset = 0i64;
    let mut pending_aborts: Vec<AbortedTransaction> = Vec::new();
    let mut aborting: Vec<i64> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "reading {topic}-{partition} took too long");
        let request = FetchRequest {
            max_wait_ms: 10,
            min_bytes: 1,
            max_bytes: 8 << 20,
            isolation_level: isolation,
            topics: vec![FetchTopic {
                topic: topic.to_string(),
                partitions: vec![FetchPartition {
                    partition,
                    fetch_offset: offset,
                    partition_max_bytes: 4 << 20,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let ResponseBody::Fetch(r) =
            conn.call_at(version, RequestBody::Fetch(request)).await.expect("fetch").body
        else {
            panic!("wrong api")
        };
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "fetch {topic}-{partition}");
        let listed = p.aborted_transactions.clone().unwrap_or_default();
        for a in listed {
            if !out.aborted.iter().any(|b| b.producer_id == a.producer_id && b.first_offset == a.first_offset)
            {
                out.aborted.push(a.clone());
                pending_aborts.push(a);
            }
        }
        pending_aborts.sort_by_key(|a| a.first_offset);
        let end =
            if isolation == 1 && p.last_stable_offset >= 0 { p.last_stable_offset } else { p.high_watermark };
        let bytes = p.records.as_ref().and_then(|s| s.memory()).unwrap_or_default();
        for batch in RecordBatches::new(bytes) {
            let batch = batch.expect("batch");
            if batch.next_offset() <= offset {
                continue;
            }
            if isolation == 1 {
                while pending_aborts.first().is_some_and(|a| a.first_offset <= batch.last_offset()) {
                    aborting.push(pending_aborts.remove(0).producer_id);
                }
            }
            let pid = batch.producer_id();
            if batch.is_control() {
                aborting.retain(|id| *id != pid);
            } else if !(batch.is_transactional() && aborting.contains(&pid)) {
                for rec in batch.records(64 << 20).expect("records") {
                    let rec = rec.expect("record");
                    if rec.offset >= offset {
                        out.batch_of.push((pid, batch.is_transactional()));
                        out.records.push(rec);
                    }
                }
            }
            offset = batch.next_offset();
        }
        if offset >= end {
            // read_committed: wait (with the deadline above) until no transaction is
            // open, as the commit markers are written after EndTxn returns.
            if isolation == 0 || end >= p.high_watermark {
                return out;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// The partition's high watermark, from a Fetch that asks for next to no data.
async fn high_watermark(client: &Client, topic: &str, partition: i32) -> i64 {
    let (_, conn) = client.leader(topic, partition).await.expect("leader");
    let version = conn.version_at_most(ApiKey::Fetch, 12).expect("fetch version");
    let request = FetchRequest {
        max_wait_ms: 0,
        min_bytes: 0,
        max_bytes: 1,
        topics: vec![FetchTopic {
            topic: topic.to_string(),
            partitions: vec![FetchPartition {
                partition,
                fetch_offset: 0,
                partition_max_bytes: 1,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let ResponseBody::Fetch(r) =
        conn.call_at(version, RequestBody::Fetch(request)).await.expect("fetch").body
    else {
        panic!("wrong api")
    };
    r.responses[0].partitions[0].high_watermark
}

fn values(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .map(|r| String::from_utf8(r.value.clone().unwrap_or_default().to_vec()).expect("utf8"))
        .collect()
}

async fn await_all(futures: Vec<DeliveryFuture>) -> Vec<strata_client::producer::RecordMetadata> {
    let mut out = Vec::with_capacity(futures.len());
    for f in futures {
        out.push(f.await.expect("delivered"));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_are_read_back_as_sent_with_every_codec_and_keys_on_murmur2_partitions() {
    let broker = BrokerProcess::start(&[]).expect("broker");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("connect");
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
        let topic = format!("codec-{codec}");
        create_topic(&client, &topic, 3).await;
        let producer = Producer::new(config(&broker, &[("compression.type", codec), ("linger.ms", "20")]))
            .await
            .expect("producer");
        let mut futures = Vec::new();
        for i in 0..600 {
            let record = ProducerRecord::new(topic.as_str())
                .key(format!("key-{}", i % 37))
                .value(format!("{codec}-{i}"))
                .header("i", Some(i.to_string()))
                .timestamp(1_700_000_000_000 + i);
            futures.push(producer.send(record).await.expect("send"));
        }
        let acks = await_all(futures).await;
        for (i, m) in acks.iter().enumerate() {
            assert_eq!(m.partition, partition_for_key(format!("key-{}", i % 37).as_bytes(), 3), "murmur2");
            assert_eq!(m.timestamp, 1_700_000_000_000 + i as i64);
            assert_eq!(&*m.topic, topic.as_str());
        }
        let mut sent: HashMap<i32, Vec<(i64, String)>> = HashMap::new();
        for (i, m) in acks.iter().enumerate() {
            sent.entry(m.partition).or_default().push((m.offset, format!("{codec}-{i}")));
        }
        for p in 0..3 {
            let read = read_partition(&client, &topic, p, 0).await;
            let want = sent.remove(&p).unwrap_or_default();
            let got: Vec<(i64, String)> =
                read.records.iter().map(|r| r.offset).zip(values(&read.records)).collect();
            assert_eq!(got, want, "{codec}: partition {p} holds what was acknowledged, in order");
            for r in &read.records {
                assert_eq!(r.headers.len(), 1);
                assert_eq!(&r.headers[0].key[..], b"i");
            }
            assert!(read.batch_of.iter().all(|(pid, txn)| *pid >= 0 && !txn), "idempotent by default");
        }
        producer.close().await.expect("close");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_zero_one_and_all_all_deliver() {
    let broker = BrokerProcess::start(&[]).expect("broker");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("connect");
    for acks in ["0", "1", "all"] {
        let topic = format!("acks-{acks}");
        create_topic(&client, &topic, 1).await;
        let producer = Producer::new(config(&broker, &[("acks", acks)])).await.expect("producer");
        let idempotent = producer.producer_id_and_epoch().is_set();
        assert_eq!(idempotent, acks == "all", "idempotence only with acks=all unless asked for");
        let mut futures = Vec::new();
        for i in 0..300 {
            futures.push(
                producer.send(ProducerRecord::new(topic.as_str()).value(format!("{i}"))).await.expect("send"),
            );
        }
        let acked = await_all(futures).await;
        if acks == "0" {
            assert!(acked.iter().all(|m| m.offset == -1), "acks=0 has no offsets");
        } else {
            assert_eq!(acked.iter().map(|m| m.offset).collect::<Vec<_>>(), (0..300).collect::<Vec<_>>());
        }
        producer.close().await.expect("close");
        // acks=0 gives no answer to wait for: the records arrive shortly after.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let read = read_partition(&client, &topic, 0, 0).await;
            if read.records.len() == 300 || Instant::now() > deadline {
                assert_eq!(
                    values(&read.records),
                    (0..300).map(|i| i.to_string()).collect::<Vec<_>>(),
                    "acks={acks}"
                );
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unkeyed_records_fill_a_batch_on_one_partition_before_moving_on() {
    let broker = BrokerProcess::start(&[]).expect("broker");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("connect");
    create_topic(&client, "sticky", 3).await;
    let producer = Producer::new(config(&broker, &[("batch.size", "1000"), ("linger.ms", "200")]))
        .await
        .expect("producer");
    let mut futures = Vec::new();
    for i in 0..1000 {
        futures.push(
            producer.send(ProducerRecord::new("sticky").value(format!("{i:0>40}"))).await.expect("send"),
        );
    }
    let partitions: Vec<i32> = await_all(futures).await.iter().map(|m| m.partition).collect();
    let switches = partitions.windows(2).filter(|w| w[0] != w[1]).count();
    // About 16 records of 61 bytes fill a 1000-byte batch: one switch per batch.
    assert!((40..=80).contains(&switches), "{switches} partition switches");
    for p in 0..3 {
        assert!(partitions.contains(&p), "partition {p} got records");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_to_a_missing_partition_or_too_large_a_record_fails_at_once() {
    let broker = BrokerProcess::start(&[]).expect("broker");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("connect");
    create_topic(&client, "limits", 2).await;
    let producer = Producer::new(config(&broker, &[("max.request.size", "1000")])).await.expect("producer");
    let e = producer.send(ProducerRecord::new("limits").partition(5).value("x")).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::UnknownTopicOrPartition));
    let e = producer.send(ProducerRecord::new("limits").value(vec![0u8; 2000])).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::MessageTooLarge));
    // A topic the broker creates on first use.
    let m = producer
        .send(ProducerRecord::new("auto-created").value("x"))
        .await
        .expect("send")
        .await
        .expect("ack");
    assert_eq!(m.offset, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn borrowed_records_are_read_back_as_sent_on_the_partitions_owned_ones_get() {
    let broker = BrokerProcess::start(&[]).expect("broker");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("connect");
    create_topic(&client, "lent", 3).await;
    // A small buffer.memory: the call reserves it chunk by chunk and waits for acks between.
    let producer = Producer::new(config(&broker, &[("buffer.memory", "65536"), ("batch.size", "16384")]))
        .await
        .expect("producer");
    // One block of bytes, as an application's buffer: every key and value is a slice of it.
    let text: String = (0..2000).map(|i| format!("key-{}|value-{i:0>90};", i % 41)).collect();
    let headers = [Header { key: "h".into(), value: Some(bytes::Bytes::from_static(b"x")) }];
    let records: Vec<BorrowedRecord<'_>> = text
        .split_terminator(';')
        .enumerate()
        .map(|(i, line)| {
            let (key, value) = line.split_once('|').expect("separator");
            let r = BorrowedRecord::new(value.as_bytes()).timestamp(1_700_000_000_000 + i as i64);
            match i % 3 {
                0 => r.key(key.as_bytes()).headers(&headers),
                1 => r.partition(2),
                _ => r,
            }
        })
        .collect();
    let mut deliveries = producer.send_borrowed("lent", &records).await.expect("send");
    let mut sent: HashMap<i32, Vec<(i64, &[u8])>> = HashMap::new();
    for (i, r) in records.iter().enumerate() {
        let m = deliveries.next().await.expect("one result per record").expect("delivered");
        match (r.partition, r.key) {
            (Some(p), _) => assert_eq!(m.partition, p, "record {i}: its explicit partition"),
            (None, Some(k)) => assert_eq!(m.partition, partition_for_key(k, 3), "record {i}: murmur2"),
            (None, None) => {}
        }
        assert_eq!(m.timestamp, 1_700_000_000_000 + i as i64);
        sent.entry(m.partition).or_default().push((m.offset, r.value.expect("value")));
    }
    assert!(deliveries.next().await.is_none());
    for p in 0..3 {
        let read = read_partition(&client, "lent", p, 0).await;
        let want = sent.remove(&p).unwrap_or_default();
        let got: Vec<(i64, &[u8])> =
            read.records.iter().map(|r| (r.offset, r.value.as_deref().expect("value"))).collect();
        assert_eq!(got, want, "partition {p} holds what was acknowledged, in order");
        for r in &read.records {
            let keyed = r.key.is_some();
            assert_eq!(r.headers.len(), usize::from(keyed), "headers go with the keyed records");
            if keyed {
                assert_eq!(
                    (&r.headers[0].key[..], r.headers[0].value.as_deref()),
                    (&b"h"[..], Some(&b"x"[..]))
                );
            }
        }
        assert!(read.batch_of.iter().all(|(pid, _)| *pid >= 0), "idempotent by default");
    }
    // As send_all: a record no request could hold fails the call, the ones before it are sent.
    let big = vec![b'x'; 2 << 20];
    let calls = [BorrowedRecord::new(b"before"), BorrowedRecord::new(&big), BorrowedRecord::new(b"after")];
    let e = producer.send_borrowed("lent-limits", &calls).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::MessageTooLarge));
    let e = producer.send_borrowed("lent", &[BorrowedRecord::new(b"x").partition(7)]).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::UnknownTopicOrPartition));
    producer.flush().await.expect("flush");
    let read = read_partition(&client, "lent-limits", 0, 0).await;
    assert_eq!(
        values(&read.records),
        ["before"],
        "the topic was created on first use and got the first record"
    );
    producer.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_the_broker_refuses_fails_alone_and_the_epoch_bump_lets_later_ones_through() {
    let broker = BrokerProcess::start(&["message.max.bytes=2000"]).expect("broker");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("connect");
    create_topic(&client, "refused", 1).await;
    let producer = Producer::new(config(&broker, &[("linger.ms", "50")])).await.expect("producer");
    let before = producer.producer_id_and_epoch();
    // Ten records of 500 bytes make one batch of about 5 KB: over message.max.bytes.
    let mut big = Vec::new();
    for i in 0..10 {
        let value = format!("{i:0>500}");
        big.push(producer.send(ProducerRecord::new("refused").value(value)).await.expect("send"));
    }
    for f in big {
        let e = f.await.unwrap_err();
        assert!(!e.is_retriable(), "{e}");
        assert!(matches!(e.code(), Some(ErrorCode::MessageTooLarge | ErrorCode::RecordListTooLarge)), "{e}");
    }
    // The refused batch's sequences never reached the log: without a new epoch every later
    // batch would be out of order.
    let mut small = Vec::new();
    for i in 0..3 {
        small.push(
            producer.send(ProducerRecord::new("refused").value(format!("small-{i}"))).await.expect("send"),
        );
    }
    let offsets: Vec<i64> = await_all(small).await.iter().map(|m| m.offset).collect();
    assert_eq!(offsets, vec![0, 1, 2]);
    assert_eq!(producer.metrics().epoch_bumps, 1);
    let after = producer.producer_id_and_epoch();
    assert!(after != before, "{before:?} -> {after:?}");
    let read = read_partition(&client, "refused", 0, 0).await;
    assert_eq!(values(&read.records), vec!["small-0", "small-1", "small-2"]);
}

/// Produces `total` unique values to 2 partitions in `kills + 1` waves; once a wave is
/// being queued and partly written, the broker is SIGKILLed and restarted, so requests are in
/// flight at each kill. Returns, per partition, the acknowledged values in send order and
/// the values the partition holds; and how many batches were sent again.
async fn produce_through_kills(
    settings: &[(&str, &str)],
    total: u32,
    kills: u32,
) -> (Vec<(Vec<u32>, Vec<u32>)>, u64) {
    let mut broker = BrokerProcess::start(&[]).expect("broker");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("connect");
    create_topic(&client, "idem", 2).await;
    let mut all = vec![("linger.ms", "1"), ("batch.size", "1000"), ("request.timeout.ms", "3000")];
    all.extend_from_slice(settings);
    let producer = Arc::new(Producer::new(config(&broker, &all)).await.expect("producer"));
    let wave = total / (kills + 1);
    let (queued_tx, mut queued) = tokio::sync::mpsc::unbounded_channel::<u32>();
    let (resume, mut resumed) = tokio::sync::mpsc::unbounded_channel::<()>();
    let sender = {
        let producer = producer.clone();
        tokio::spawn(async move {
            let mut futures = Vec::new();
            for w in 0..=kills {
                for i in w * wave..(w + 1) * wave {
                    let record = ProducerRecord::new("idem").partition((i % 2) as i32).value(format!("{i}"));
                    futures.push((i, producer.send(record).await.expect("send")));
                    // Tell the killer as soon as the wave has begun, not once it is all
                    // queued: on a slow machine the producer writes a whole wave while a
                    // debug build is still queuing it.
                    if i == w * wave + 200 {
                        queued_tx.send(w).expect("queued");
                    }
                }
                if w < kills {
                    resumed.recv().await.expect("resume");
                }
            }
            futures
        })
    };
    let mut mid_wave = 0;
    for k in 0..kills {
        assert_eq!(queued.recv().await, Some(k));
        // Kill once some of this wave is written: the rest is queued or in flight.
        let mark = (k * wave / 2) as usize + 50;
        let deadline = Instant::now() + Duration::from_secs(30);
        let written = loop {
            let hw = high_watermark(&client, "idem", 0).await as usize;
            if hw > mark {
                break hw;
            }
            assert!(Instant::now() < deadline, "no progress before kill {k}");
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        if written < ((k + 1) * wave / 2) as usize {
            mid_wave += 1;
        } else {
            eprintln!("kill {k} came after its wave was written (high watermark {written})");
        }
        tokio::task::block_in_place(|| {
            broker.kill().expect("kill");
            broker.restart().expect("restart");
        });
        resume.send(()).expect("resume");
    }
    let futures = sender.await.expect("sender task");
    assert!(kills == 0 || mid_wave > 0, "no kill came while a wave was being written");
    let mut acked: Vec<Vec<u32>> = vec![Vec::new(), Vec::new()];
    let mut failed = 0;
    for (i, f) in futures {
        match f.await {
            Ok(m) => acked[m.partition as usize].push(i),
            Err(e) => {
                failed += 1;
                eprintln!("record {i} failed: {e}");
            }
        }
    }
    assert_eq!(failed, 0, "delivery.timeout.ms is far longer than the restarts");
    let mut out = Vec::new();
    for (p, acked) in acked.into_iter().enumerate() {
        let read = read_partition(&client, "idem", p as i32, 0).await;
        let got: Vec<u32> = values(&read.records).iter().map(|v| v.parse().expect("number")).collect();
        out.push((acked, got));
    }
    (out, producer.metrics().batches_retried)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_producer_survives_broker_kills_without_duplicates_or_gaps() {
    let (results, retried) = produce_through_kills(&[], 90_000, 3).await;
    assert!(retried > 0, "the kills hit no request in flight");
    for (p, (acked, got)) in results.into_iter().enumerate() {
        assert_eq!(acked.len(), 45_000, "partition {p}: every record acknowledged");
        assert_eq!(got.len(), acked.len(), "partition {p}: every record exactly once");
        assert_eq!(got, acked, "partition {p}: in send order, no duplicate, no gap");
    }
}

/// Requests that time out on the client after the broker wrote them are sent again:
/// only sequence numbers keep those retries from writing records twice. Without
/// idempotence this test finds hundreds of duplicates.
/// A TCP proxy in front of `broker` that holds every fifth Produce response (up to ten of
/// them) for 600 ms before passing it on, counting the held ones in `held`. Requests
/// go through untouched, so the broker has written what the client then times out on.
async fn delaying_proxy(
    listener: tokio::net::TcpListener,
    broker: std::net::SocketAddr,
    held: Arc<AtomicU32>,
) {
    let produces = Arc::new(AtomicU32::new(0));
    loop {
        let Ok((client, _)) = listener.accept().await else { return };
        let Ok(server) = tokio::net::TcpStream::connect(broker).await else { return };
        let (mut client_rd, mut client_wr) = client.into_split();
        let (mut server_rd, mut server_wr) = server.into_split();
        // Correlation ids of the Produce requests sent on this connection, each with
        // whether its response is to be held.
        let pending: Arc<std::sync::Mutex<HashMap<i32, bool>>> = Arc::default();
        let (pending_in, produces, held) = (pending.clone(), produces.clone(), held.clone());
        tokio::spawn(async move {
            while let Ok(frame) = read_frame(&mut client_rd).await {
                // Request header: size, api_key (i16), api_version (i16), correlation_id (i32).
                let api_key = i16::from_be_bytes([frame[4], frame[5]]);
                if api_key == ApiKey::Produce as i16 {
                    let correlation = i32::from_be_bytes(frame[8..12].try_into().expect("4 bytes"));
                    let n = produces.fetch_add(1, Ordering::Relaxed);
                    pending_in.lock().expect("lock").insert(correlation, n % 5 == 4 && n < 50);
                }
                if server_wr.write_all(&frame).await.is_err() {
                    return;
                }
            }
        });
        tokio::spawn(async move {
            while let Ok(frame) = read_frame(&mut server_rd).await {
                let correlation = i32::from_be_bytes(frame[4..8].try_into().expect("4 bytes"));
                if pending.lock().expect("lock").remove(&correlation) == Some(true) {
                    held.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(600)).await;
                }
                if client_wr.write_all(&frame).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// One size-prefixed Kafka frame, its 4-byte size included.
async fn read_frame(from: &mut tokio::net::tcp::OwnedReadHalf) -> std::io::Result<Vec<u8>> {
    let mut size = [0u8; 4];
    from.read_exact(&mut size).await?;
    let len = i32::from_be_bytes(size);
    if !(8..=256 << 20).contains(&len) {
        return Err(std::io::Error::other(format!("frame of {len} bytes")));
    }
    let mut frame = vec![0u8; 4 + len as usize];
    frame[..4].copy_from_slice(&size);
    from.read_exact(&mut frame[4..]).await?;
    Ok(frame)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_after_request_timeouts_write_each_record_once() {
    // The broker advertises a proxy that holds some Produce responses past the producer's
    // request timeout: those requests time out after the broker wrote them, every time.
    let proxy_port = strata_tests::free_port().expect("port");
    let advertised = format!("advertised.listeners=PLAINTEXT://127.0.0.1:{proxy_port}");
    let broker = BrokerProcess::start(&[&advertised]).expect("broker");
    let proxy = tokio::net::TcpListener::bind(("127.0.0.1", proxy_port)).await.expect("proxy");
    let held = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    tokio::spawn(delaying_proxy(proxy, broker.addr(), held.clone()));
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("connect");
    create_topic(&client, "retried", 2).await;
    let settings = [
        ("linger.ms", "1"),
        ("batch.size", "1000"),
        ("retry.backoff.ms", "1"),
        ("request.timeout.ms", "200"),
        ("delivery.timeout.ms", "30000"),
    ];
    let producer =
        Producer::new(config_at(&format!("127.0.0.1:{proxy_port}"), &settings)).await.expect("producer");
    let total = 20_000u32;
    let mut futures = Vec::new();
    for i in 0..total {
        let record = ProducerRecord::new("retried").partition((i % 2) as i32).value(format!("{i}"));
        futures.push((i, producer.send(record).await.expect("send")));
    }
    let mut acked: Vec<Vec<u32>> = vec![Vec::new(), Vec::new()];
    let mut timed_out = 0;
    for (i, f) in futures {
        match f.await {
            Ok(m) => acked[m.partition as usize].push(i),
            // On a machine too loaded for 2 ms round trips a record may run out of
            // delivery time: it is then written at most once, which is checked below.
            Err(e) if e.is_retriable() => timed_out += 1,
            Err(e) => panic!("record {i}: {e}"),
        }
    }
    assert!(held.load(Ordering::Relaxed) > 0, "the proxy held no response: the test proves nothing");
    assert!(producer.metrics().batches_retried > 0, "no request was retried");
    assert!(timed_out < total / 2, "{timed_out} of {total} records ran out of time");
    for (p, acked) in acked.into_iter().enumerate() {
        let read = read_partition(&client, "retried", p as i32, 0).await;
        let got: Vec<u32> = values(&read.records).iter().map(|v| v.parse().expect("number")).collect();
        assert!(got.windows(2).all(|w| w[0] < w[1]), "partition {p}: in send order, no duplicate");
        let mut missing = acked.iter().filter(|v| got.binary_search(v).is_err());
        assert!(missing.next().is_none(), "partition {p}: an acknowledged record is missing");
        if timed_out == 0 {
            assert_eq!(got, acked, "partition {p}: exactly the acknowledged records");
        }
    }
}

/// With its broker gone for good, a producer fails what it holds at `delivery.timeout.ms`
/// (the sender keeps trying to connect and expires the batches) and `flush` returns: no
/// record waits forever, whether it was in flight at the kill or appended after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_for_a_broker_gone_for_good_fail_at_the_delivery_timeout_and_flush_returns() {
    let mut broker = BrokerProcess::start(&[]).expect("broker");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("connect");
    create_topic(&client, "gone", 1).await;
    let settings = [
        ("linger.ms", "5"),
        ("delivery.timeout.ms", "2000"),
        ("request.timeout.ms", "1000"),
        ("retry.backoff.ms", "50"),
        ("max.block.ms", "1000"),
    ];
    let producer = Producer::new(config(&broker, &settings)).await.expect("producer");
    producer.send(ProducerRecord::new("gone").value("before")).await.expect("send").await.expect("acked");
    tokio::task::block_in_place(|| broker.kill().expect("kill"));
    let mut futures = Vec::new();
    for i in 0..200 {
        futures
            .push(producer.send(ProducerRecord::new("gone").value(format!("v{i}"))).await.expect("queued"));
    }
    let started = Instant::now();
    let flushed = tokio::time::timeout(Duration::from_secs(20), producer.flush()).await;
    assert!(flushed.is_ok(), "flush returned ({:?})", started.elapsed());
    for f in futures {
        let e =
            tokio::time::timeout(Duration::from_secs(5), f).await.expect("resolved").expect_err("no broker");
        assert!(e.is_retriable() || matches!(e, strata_client::Error::Timeout(_)), "{e}");
    }
    assert!(started.elapsed() >= Duration::from_millis(1500), "not before the delivery timeout");
}
