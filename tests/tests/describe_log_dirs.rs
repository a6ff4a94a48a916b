//! DescribeLogDirs against the real binary: the one log dir is named by its absolute path,
//! each partition's size is the bytes of its segment files and grows as records are
//! produced, offset lags are 0 and no replica is a future one; v4 adds the volume's total
//! and usable bytes (statvfs), earlier versions leave them at Kafka's -1; v5 says the dir is
//! not cordoned; named partitions restrict the answer and unknown ones are left out.

use strata_client::admin::NewTopic;
use strata_client::producer::{Producer, ProducerConfig, ProducerRecord};
use strata_client::{Client, ClientConfig};
use strata_protocol::messages::describe_log_dirs::{
    DescribableLogDirTopic, DescribeLogDirsRequest, DescribeLogDirsResponse,
};
use strata_protocol::{ApiKey, RequestBody, ResponseBody};
use strata_tests::BrokerProcess;

async fn describe(
    conn: &strata_client::connection::Connection,
    version: i16,
    topics: Option<Vec<DescribableLogDirTopic>>,
) -> DescribeLogDirsResponse {
    let response = conn
        .call_at(version, RequestBody::DescribeLogDirs(DescribeLogDirsRequest { topics }))
        .await
        .expect("answer");
    let ResponseBody::DescribeLogDirs(r) = response.body else { panic!("wrong response") };
    r
}

fn sizes(r: &DescribeLogDirsResponse, topic: &str) -> Vec<(i32, i64)> {
    let dir = &r.results[0];
    let t = dir.topics.iter().find(|t| t.name == topic).expect("topic described");
    for p in &t.partitions {
        assert_eq!((p.offset_lag, p.is_future_key), (0, false), "{p:?}");
    }
    t.partitions.iter().map(|p| (p.partition_index, p.partition_size)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_one_log_dir_reports_partition_sizes_and_volume_space() {
    let broker = BrokerProcess::start(&[]).expect("broker");
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("connect");
    let created = client.admin().create_topics(&[NewTopic::new("ld", 2)], false).await;
    assert!(created.iter().all(|(_, r)| r.is_ok()), "{created:?}");
    let conn = client.broker(0).await.expect("connection");
    assert_eq!(conn.version(ApiKey::DescribeLogDirs).expect("advertised"), 5);

    let before = describe(&conn, 5, None).await;
    assert_eq!((before.error_code, before.results.len()), (0, 1));
    let dir = &before.results[0];
    assert_eq!(dir.error_code, 0);
    let data = broker.data_dir().canonicalize().expect("data dir");
    assert_eq!(std::path::Path::new(&dir.log_dir), data, "absolute path of log.dirs");
    assert!(dir.total_bytes > 0 && dir.usable_bytes > 0 && dir.usable_bytes <= dir.total_bytes, "{dir:?}");
    assert!(!dir.is_cordoned);
    assert_eq!(sizes(&before, "ld"), vec![(0, 0), (1, 0)]);

    let producer = Producer::new(ProducerConfig::new(&broker.addr().to_string())).await.expect("producer");
    let mut acks = Vec::new();
    for i in 0..50 {
        let record = ProducerRecord::new("ld").partition(0).value(format!("record-{i:04}"));
        acks.push(producer.send(record).await.expect("send"));
    }
    for ack in acks {
        ack.await.expect("acked");
    }
    producer.close().await.expect("close");

    let after = describe(&conn, 4, None).await;
    assert!(after.results[0].total_bytes > 0, "v4 carries the volume's space");
    let on_disk = broker.segment_bytes("ld", 0).expect("segment bytes") as i64;
    assert!(on_disk > 0);
    assert_eq!(sizes(&after, "ld"), vec![(0, on_disk), (1, 0)], "sizes are the segment files' bytes");

    // Named partitions only; an unknown one is left out. Before v4 the space is not sent.
    let only = vec![
        DescribableLogDirTopic { topic: "ld".into(), partitions: vec![1] },
        DescribableLogDirTopic { topic: "nope".into(), partitions: vec![0] },
    ];
    for version in 1..=3 {
        let r = describe(&conn, version, Some(only.clone())).await;
        let dir = &r.results[0];
        assert_eq!(dir.topics.len(), 1, "v{version}: {dir:?}");
        assert_eq!(sizes(&r, "ld"), vec![(1, 0)], "v{version}");
        assert_eq!((dir.total_bytes, dir.usable_bytes), (-1, -1), "v{version}");
    }
}
