//! The open files limit (issue 14, part 4), with the broker started under
//! `prlimit --nofile=N:N` so it cannot raise its own: topics are created until one is
//! refused with POLICY_VIOLATION naming the limit; after kill -9 the broker starts again
//! (one descriptor per segment, indexes mapped) with every partition readable; under a
//! limit too low for its segments it refuses to start, in one line saying how far to
//! raise it.

use std::time::Duration;
use strata_client::admin::NewTopic;
use strata_client::consumer::{Consumer, ConsumerConfig};
use strata_client::producer::{Producer, ProducerConfig, ProducerRecord};
use strata_client::{Client, ClientConfig, ErrorCode, TopicPartition};
use strata_tests::BrokerProcess;

const LIMIT: &str = "--nofile=400:400";
const PARTITIONS: i32 = 25;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_beyond_the_open_files_limit_are_refused_and_the_broker_restarts_with_all_of_them() {
    let mut broker = BrokerProcess::start_wrapped(&["prlimit", LIMIT], &[]).expect("broker under prlimit");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("client");
    let admin = client.admin();
    let mut created = Vec::new();
    let refusal = loop {
        assert!(created.len() < 40, "never refused: {} topics of {PARTITIONS} partitions", created.len());
        let name = format!("many-{}", created.len());
        let result = admin.create_topics(&[NewTopic::new(&name, PARTITIONS)], false).await;
        match &result[0].1 {
            Ok(()) => created.push(name),
            Err(e) => break e.clone(),
        }
    };
    assert_eq!(refusal.code(), Some(ErrorCode::PolicyViolation), "{refusal}");
    assert!(refusal.to_string().contains("open files limit of 400"), "{refusal}");
    assert!(created.len() >= 5, "only {} topics fit", created.len());

    // A record in every partition, then a crash.
    let producer = Producer::new(ProducerConfig::new(&broker.addr().to_string())).await.expect("producer");
    let mut acks = Vec::new();
    for t in &created {
        for p in 0..PARTITIONS {
            let record = ProducerRecord::new(t.as_str()).partition(p).value(format!("{t}/{p}"));
            acks.push(producer.send(record).await.expect("send"));
        }
    }
    for a in acks {
        a.await.expect("acknowledged");
    }
    drop(producer);
    drop(admin);
    drop(client);
    broker.kill().expect("kill -9");
    broker.restart().expect("the broker starts again under the same limit");

    let mut config = ConsumerConfig::new(&broker.addr().to_string());
    config.set("fetch.max.wait.ms", "50").expect("wait");
    let mut consumer = Consumer::new(config).await.expect("consumer");
    let all: Vec<TopicPartition> = created
        .iter()
        .flat_map(|t| (0..PARTITIONS).map(move |p| TopicPartition::new(t.as_str(), p)))
        .collect();
    consumer.assign(&all).expect("assign");
    for tp in &all {
        consumer.seek(tp, 0).expect("seek");
    }
    let mut seen = std::collections::BTreeSet::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while seen.len() < all.len() {
        assert!(std::time::Instant::now() < deadline, "{} of {} partitions read back", seen.len(), all.len());
        for r in consumer.poll(Duration::from_millis(200)).await.expect("poll") {
            seen.insert((r.topic.to_string(), r.partition));
        }
    }
    drop(consumer);

    // Under a limit its segments do not fit, it refuses to start and says how to fix it.
    broker.stop().expect("stop");
    broker.set_wrapper(&["prlimit", "--nofile=200:200"]);
    let status = broker.restart_expecting_exit(Duration::from_secs(20)).expect("restart").expect("it exits");
    assert!(!status.success(), "{status}");
    let log = broker.log_contents();
    let line = log
        .lines()
        .find(|l| l.contains("raise it to at least"))
        .unwrap_or_else(|| panic!("no line about the limit:\n{log}"));
    assert!(line.contains("limit is 200") && line.contains("raise it to at least"), "{line}");
}
