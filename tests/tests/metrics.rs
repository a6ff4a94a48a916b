//! The broker's Prometheus endpoint (`metrics.listener`) scraped over HTTP after a
//! produce and a group consume: bytes and messages in grow by what was produced, the
//! log gauges show the partition's end offset, the group's lag follows its commits down
//! to 0, and the exposition passes `promtool check metrics` (Debian's `prometheus`
//! package; required under CI, skipped with a note elsewhere if it is not installed).
//! Also the log settings: `log.format=json` writes one JSON object per line, and plain
//! text to a file carries no colour codes.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};
use strata_client::consumer::{Consumer, ConsumerConfig, NoopListener};
use strata_client::producer::{Producer, ProducerConfig, ProducerRecord};
use strata_client::{OffsetAndMetadata, TopicPartition};
use strata_tests::{free_port, http_get, BrokerProcess};

const TOPIC: &str = "metered";
const GROUP: &str = "g-metered";
const RECORDS: usize = 20;

/// A broker serving metrics on a port of its own; returns it and the metrics address.
fn broker() -> (BrokerProcess, String) {
    let port = free_port().expect("port");
    let listener = format!("metrics.listener=http://127.0.0.1:{port}");
    let broker = BrokerProcess::start(&[&listener, "group.initial.rebalance.delay.ms=0"]).expect("broker");
    (broker, format!("127.0.0.1:{port}"))
}

/// The samples of an exposition: `name{labels}` (labels as written) → value. Checks
/// every non-comment line is `series value`.
fn parse(exposition: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in exposition.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("malformed line {line:?}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("bad value in {line:?}")),
        };
        out.insert(series.to_string(), value);
    }
    out
}

fn scrape(addr: &str) -> (String, BTreeMap<String, f64>) {
    let (status, body) = http_get(addr, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    let samples = parse(&body);
    (body, samples)
}

fn value(samples: &BTreeMap<String, f64>, series: &str) -> Option<f64> {
    samples.get(series).copied()
}

/// Scrapes until `series` has `want`, or fails with the last value after 15 s.
fn await_value(addr: &str, series: &str, want: f64) -> BTreeMap<String, f64> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (_, samples) = scrape(addr);
        let got = value(&samples, series);
        if got == Some(want) {
            return samples;
        }
        assert!(Instant::now() < deadline, "{series} is {got:?}, want {want}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn consumer_config(broker: &BrokerProcess) -> ConsumerConfig {
    let mut c = ConsumerConfig::new(&broker.addr().to_string());
    for (k, v) in [
        ("group.id", GROUP),
        ("auto.offset.reset", "earliest"),
        ("enable.auto.commit", "false"),
        ("fetch.max.wait.ms", "100"),
        ("heartbeat.interval.ms", "300"),
    ] {
        c.set(k, v).expect(k);
    }
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_and_group_consume_show_in_metrics_and_lag_falls_to_zero_with_commits() {
    let (broker, metrics) = broker();
    let before = tokio::task::block_in_place(|| scrape(&metrics).1);
    let bytes_in = format!("kafka_server_brokertopicmetrics_bytesin_total{{topic=\"{TOPIC}\"}}");
    assert_eq!(value(&before, &bytes_in), None, "no counters for a topic that does not exist");

    let producer = Producer::new(ProducerConfig::new(&broker.addr().to_string())).await.expect("producer");
    let mut acks = Vec::new();
    for i in 0..RECORDS {
        acks.push(
            producer.send(ProducerRecord::new(TOPIC).value(format!("value-{i:04}"))).await.expect("send"),
        );
    }
    for a in acks {
        let m = a.await.expect("delivered");
        assert_eq!(m.partition, 0, "one partition");
    }
    producer.close().await.expect("close producer");

    let after = tokio::task::block_in_place(|| {
        await_value(
            &metrics,
            &format!("kafka_server_brokertopicmetrics_messagesin_total{{topic=\"{TOPIC}\"}}"),
            RECORDS as f64,
        )
    });
    let grown = value(&after, &bytes_in).expect("bytes in of the topic");
    assert!(grown >= (RECORDS * 10) as f64, "bytes in grew by at least the values: {grown}");
    let all = value(&after, "kafka_server_brokertopicmetrics_bytesin_total").expect("broker-wide bytes in");
    assert!(all >= grown, "broker-wide bytes in covers every topic");
    let partition = format!("{{topic=\"{TOPIC}\",partition=\"0\"}}");
    assert_eq!(value(&after, &format!("kafka_log_log_logendoffset{partition}")), Some(RECORDS as f64));
    assert_eq!(value(&after, &format!("kafka_log_log_logstartoffset{partition}")), Some(0.0));
    assert!(value(&after, &format!("kafka_log_log_size{partition}")).unwrap_or(0.0) >= grown);
    assert_eq!(value(&after, &format!("kafka_log_log_numlogsegments{partition}")), Some(1.0));
    assert!(
        value(&after, "kafka_network_requestmetrics_totaltimems_count{request=\"Produce\"}").unwrap_or(0.0)
            >= 1.0,
        "produce latency recorded"
    );

    // A group member reads everything, commits half way, then all of it.
    let mut consumer = Consumer::new(consumer_config(&broker)).await.expect("consumer");
    consumer.subscribe(&[TOPIC], Box::new(NoopListener)).expect("subscribe");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut read = 0;
    while read < RECORDS {
        assert!(Instant::now() < deadline, "read {read} of {RECORDS}");
        read += consumer.poll(Duration::from_millis(200)).await.expect("poll").len();
    }
    let tp = TopicPartition::new(TOPIC, 0);
    let half = (RECORDS / 2) as i64;
    consumer
        .commit_sync(Some(BTreeMap::from([(tp.clone(), OffsetAndMetadata::new(half))])))
        .await
        .expect("commit");
    let lag =
        format!("kafka_consumergroup_lag{{consumergroup=\"{GROUP}\",topic=\"{TOPIC}\",partition=\"0\"}}");
    let mid = tokio::task::block_in_place(|| await_value(&metrics, &lag, (RECORDS as i64 - half) as f64));
    assert_eq!(
        value(&mid, &format!("kafka_consumergroup_current_offset{{consumergroup=\"{GROUP}\",topic=\"{TOPIC}\",partition=\"0\"}}")),
        Some(half as f64)
    );
    assert!(
        value(&mid, "kafka_coordinator_group_groupmetadatamanager_numgroupsstable").unwrap_or(0.0) >= 1.0
    );
    assert!(
        value(&mid, "kafka_server_group_coordinator_metrics_group_rebalance_total").unwrap_or(0.0) >= 1.0,
        "the member's join started a rebalance"
    );
    consumer.commit_sync(None).await.expect("commit positions");
    let done = tokio::task::block_in_place(|| await_value(&metrics, &lag, 0.0));
    let out = format!("kafka_server_brokertopicmetrics_bytesout_total{{topic=\"{TOPIC}\"}}");
    assert!(value(&done, &out).unwrap_or(0.0) >= grown, "the records went out to the consumer");
    assert!(value(&done, "kafka_server_socket_server_metrics_connections").unwrap_or(0.0) >= 1.0);
    consumer.close().await.expect("close consumer");

    let (body, _) = tokio::task::block_in_place(|| scrape(&metrics));
    promtool_check(&body);
    let (status, _) = tokio::task::block_in_place(|| http_get(&metrics, "/nope"));
    assert_eq!(status, "HTTP/1.1 404 Not Found");
}

/// Where a request's time went (Kafka's `RequestMetrics` phases): a consumer's fetches of
/// an empty partition park for `fetch.max.wait.ms` each, which is remote time, not local;
/// every phase counts each request once, and the total covers the phases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_fetch_counts_its_wait_as_remote_time() {
    const WAIT_MS: u64 = 300;
    let (broker, metrics) = broker();
    let producer = Producer::new(ProducerConfig::new(&broker.addr().to_string())).await.expect("producer");
    producer.send(ProducerRecord::new("phased").value("v")).await.expect("send").await.expect("delivered");
    producer.close().await.expect("close producer");

    let mut c = ConsumerConfig::new(&broker.addr().to_string());
    c.set("fetch.max.wait.ms", &WAIT_MS.to_string()).expect("fetch.max.wait.ms");
    let mut consumer = Consumer::new(c).await.expect("consumer");
    let tp = TopicPartition::new("phased", 0);
    consumer.assign(std::slice::from_ref(&tp)).expect("assign");
    consumer.seek(&tp, 1).expect("seek to the end");
    // Nothing more arrives: every fetch waits out fetch.max.wait.ms on the broker.
    let deadline = Instant::now() + Duration::from_secs(20);
    let fetch = |name: &str| format!("kafka_network_requestmetrics_{name}_sum{{request=\"Fetch\"}}");
    let samples = loop {
        let records = consumer.poll(Duration::from_millis(WAIT_MS)).await.expect("poll");
        assert!(records.is_empty(), "nothing was produced past offset 1");
        let (_, samples) = tokio::task::block_in_place(|| scrape(&metrics));
        if value(&samples, &fetch("remotetimems")).unwrap_or(0.0) >= (3 * WAIT_MS) as f64 * 0.9 {
            break samples;
        }
        assert!(Instant::now() < deadline, "fetches did not count {WAIT_MS} ms waits as remote time");
    };
    consumer.close().await.expect("close consumer");
    let count = |phase: &str, api: &str| {
        value(&samples, &format!("kafka_network_requestmetrics_{phase}_count{{request=\"{api}\"}}"))
    };
    for api in ["Fetch", "Produce", "Metadata"] {
        let total = count("totaltimems", api).expect("requests of the API were timed");
        assert!(total >= 1.0, "{api}: {total}");
        for phase in ["localtimems", "remotetimems", "responsequeuetimems", "responsesendtimems"] {
            assert_eq!(count(phase, api), Some(total), "{api} {phase}: each request once");
        }
    }
    let (local, remote) = (value(&samples, &fetch("localtimems")), value(&samples, &fetch("remotetimems")));
    let (local, remote) = (local.expect("local"), remote.expect("remote"));
    let total = value(&samples, &fetch("totaltimems")).expect("total");
    assert!(local < remote / 10.0, "a parked fetch's time is remote, not local: {local} vs {remote}");
    assert!(total >= local + remote - 1.0, "the total covers the phases: {total} < {local} + {remote}");
    // Metadata has no remote wait.
    let metadata_remote =
        value(&samples, "kafka_network_requestmetrics_remotetimems_sum{request=\"Metadata\"}");
    assert_eq!(metadata_remote, Some(0.0));
}

/// `promtool check metrics` on the exposition (lint and parse).
fn promtool_check(exposition: &str) {
    use std::process::{Command, Stdio};
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if std::env::var("CI").as_deref() != Ok("true") => {
            eprintln!("promtool not available ({e}); skipping its check (scripts/test.sh installs it)");
            return;
        }
        Err(e) => panic!("promtool is required under CI (scripts/test.sh installs prometheus): {e}"),
    };
    child.stdin.take().expect("stdin").write_all(exposition.as_bytes()).expect("feed promtool");
    let out = child.wait_with_output().expect("promtool");
    assert!(
        out.status.success(),
        "promtool check metrics failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn log_format_json_writes_one_json_object_per_line_and_text_has_no_colour_codes() {
    let mut json = BrokerProcess::start(&["log.format=json"]).expect("broker");
    json.stop().expect("clean stop");
    let log = json.log_contents();
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() >= 3, "a start and a stop are logged:\n{log}");
    for line in &lines {
        assert!(line.starts_with('{') && line.ends_with('}'), "not a JSON object: {line}");
        assert!(line.contains("\"level\":\"") && line.contains("\"timestamp\":\""), "{line}");
    }
    assert!(log.contains("\"message\":\"shut down cleanly\""), "{log}");

    let mut text = BrokerProcess::start(&[]).expect("broker");
    text.stop().expect("clean stop");
    let log = text.log_contents();
    assert!(log.contains("shut down cleanly"), "{log}");
    assert!(!log.contains('\u{1b}'), "no ANSI escapes in a log file:\n{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_cleaner_runs_and_bytes_show_in_metrics() {
    let port = free_port().expect("port");
    let listener = format!("metrics.listener=http://127.0.0.1:{port}");
    let broker = BrokerProcess::start(&[
        &listener,
        "log.cleanup.policy=compact",
        "log.segment.bytes=1024",
        "log.cleaner.backoff.ms=50",
        "log.cleaner.min.cleanable.ratio=0.01",
    ])
    .expect("broker");
    let metrics = format!("127.0.0.1:{port}");
    let mut config = ProducerConfig::new(&broker.addr().to_string());
    config.set("linger.ms", "0").expect("linger");
    let producer = Producer::new(config).await.expect("producer");
    // Every record its own request, so segments roll under the same few keys.
    for i in 0..200 {
        let record = ProducerRecord::new("compacted").key(format!("k{}", i % 4)).value(format!("v{i:06}"));
        producer.send(record).await.expect("send").await.expect("delivered");
    }
    producer.close().await.expect("close");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, s) = tokio::task::block_in_place(|| scrape(&metrics));
        let runs = value(&s, "kafka_log_logcleaner_cleaner_runs_total").unwrap_or(0.0);
        let bytes = value(&s, "kafka_log_logcleaner_cleaned_bytes_total").unwrap_or(0.0);
        let recopy = value(&s, "kafka_log_logcleaner_cleaner_recopy_percent").unwrap_or(0.0);
        if runs >= 1.0 {
            assert!(bytes > 0.0, "a cleaning read segments");
            assert!(recopy > 0.0 && recopy < 100.0, "duplicate keys were dropped: {recopy}%");
            break;
        }
        assert!(Instant::now() < deadline, "the cleaner never ran");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_and_timed_out_transactions_show_in_metrics() {
    let port = free_port().expect("port");
    let listener = format!("metrics.listener=http://127.0.0.1:{port}");
    let broker =
        BrokerProcess::start(&[&listener, "transaction.abort.timed.out.transaction.cleanup.interval.ms=100"])
            .expect("broker");
    let metrics = format!("127.0.0.1:{port}");
    let ongoing = "kafka_coordinator_transaction_transactionstatemanager_numtransactions{state=\"Ongoing\"}";
    let aborts = "kafka_coordinator_transaction_transactioncoordinator_timedoutaborts_total";
    let mut config = ProducerConfig::new(&broker.addr().to_string());
    for (k, v) in
        [("transactional.id", "metered-txn"), ("transaction.timeout.ms", "1000"), ("linger.ms", "0")]
    {
        config.set(k, v).expect(k);
    }
    let producer = Producer::new(config).await.expect("producer");
    producer.init_transactions().await.expect("init");
    let s = tokio::task::block_in_place(|| await_value(&metrics, ongoing, 0.0));
    assert_eq!(value(&s, aborts), Some(0.0), "no transaction timed out yet");
    let empty = "kafka_coordinator_transaction_transactionstatemanager_numtransactions{state=\"Empty\"}";
    assert_eq!(value(&s, empty), Some(1.0), "the id is known and has no transaction");
    // Two committed records, and a group that has read none of them.
    let plain = Producer::new(ProducerConfig::new(&broker.addr().to_string())).await.expect("producer");
    for v in ["a", "b"] {
        plain.send(ProducerRecord::new("txn-metered").value(v)).await.expect("send").await.expect("acked");
    }
    plain.close().await.expect("close");
    let client = strata_client::Client::connect(strata_client::ClientConfig::new(&broker.addr().to_string()))
        .await
        .expect("client");
    let at_zero = BTreeMap::from([(TopicPartition::new("txn-metered", 0), OffsetAndMetadata::new(0))]);
    client.admin().alter_group_offsets("g-stable", &at_zero).await.expect("commit offset 0");
    producer.begin_transaction().expect("begin");
    let delivery = producer.send(ProducerRecord::new("txn-metered").value("v")).await.expect("send");
    delivery.await.expect("delivered");
    let s = tokio::task::block_in_place(|| await_value(&metrics, ongoing, 1.0));
    // The open transaction's record counts in the lag, not in the stable lag.
    let labels = "{consumergroup=\"g-stable\",topic=\"txn-metered\",partition=\"0\"}";
    assert_eq!(value(&s, &format!("kafka_consumergroup_lag{labels}")), Some(3.0), "{s:?}");
    assert_eq!(value(&s, &format!("kafka_consumergroup_lag_stable{labels}")), Some(2.0), "{s:?}");
    // Left open, the transaction outlives its 1 s timeout and the coordinator aborts it.
    let s = tokio::task::block_in_place(|| await_value(&metrics, aborts, 1.0));
    assert_eq!(value(&s, ongoing), Some(0.0), "{s:?}");
    drop(producer);
}
