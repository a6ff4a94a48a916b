//! Incremental fetch sessions (KIP-227) against the real binary, at Fetch v12 (names) and
//! v16 (topic ids): an initial fetch opens a session and answers every partition; an
//! empty incremental fetch answers only partitions with something new (records after a
//! produce, a moved high watermark), honours forgotten partitions and positions moved by
//! the client; a wrong epoch or an unknown session is refused with Kafka's codes, and
//! epoch -1 closes the session.

use strata_client::producer::{Producer, ProducerConfig, ProducerRecord};
use strata_client::{Client, ClientConfig};
use strata_protocol::codec::Uuid;
use strata_protocol::messages::fetch::{
    FetchPartition, FetchRequest, FetchResponse, FetchTopic, ForgottenTopic,
};
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};
use strata_tests::BrokerProcess;

const TOPIC: &str = "sessions";
const PARTITIONS: i32 = 8;

fn fp(partition: i32, offset: i64) -> FetchPartition {
    FetchPartition { partition, fetch_offset: offset, partition_max_bytes: 1 << 20, ..Default::default() }
}

fn request(id: i32, epoch: i32, topic_id: Uuid, partitions: Vec<FetchPartition>) -> FetchRequest {
    FetchRequest {
        max_wait_ms: 0,
        min_bytes: 0,
        session_id: id,
        session_epoch: epoch,
        topics: if partitions.is_empty() {
            Vec::new()
        } else {
            vec![FetchTopic { topic: TOPIC.into(), topic_id, partitions }]
        },
        ..Default::default()
    }
}

/// (partition, high watermark, record bytes) of every partition answered.
fn answered(r: &FetchResponse) -> Vec<(i32, i64, usize)> {
    let mut out: Vec<_> = r
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| (p.partition_index, p.high_watermark, p.records.as_ref().map_or(0, |r| r.len())))
        .collect();
    out.sort();
    out
}

async fn produce(broker: &BrokerProcess, partition: i32, n: usize) {
    let producer = Producer::new(ProducerConfig::new(&broker.addr().to_string())).await.expect("producer");
    for i in 0..n {
        let r = ProducerRecord::new(TOPIC).partition(partition).value(format!("v{i}"));
        producer.send(r).await.expect("send").await.expect("acked");
    }
    producer.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incremental_fetches_answer_only_what_changed() {
    let broker = BrokerProcess::start(&[&format!("num.partitions={PARTITIONS}")]).expect("broker");
    produce(&broker, 0, 1).await;
    let client = Client::connect(ClientConfig::new(&broker.addr().to_string())).await.expect("client");
    let cluster = client.refresh_metadata(&[TOPIC.to_string()]).await.expect("metadata");
    let topic_id = cluster.topic(TOPIC).expect("topic").id;
    let (_, conn) = client.leader(TOPIC, 0).await.expect("leader");
    for version in [12i16, 16] {
        let call = |req: FetchRequest| {
            let conn = conn.clone();
            async move {
                match conn.call_at(version, RequestBody::Fetch(req)).await.expect("fetch").body {
                    ResponseBody::Fetch(r) => r,
                    other => panic!("{other:?}"),
                }
            }
        };
        // Open: every partition, positions at their ends (learnt without a session) except
        // partition 0, read from 0.
        let ends =
            answered(&call(request(0, -1, topic_id, (0..PARTITIONS).map(|p| fp(p, 0)).collect())).await);
        let all: Vec<_> = ends.iter().map(|&(p, hw, _)| fp(p, if p == 0 { 0 } else { hw })).collect();
        let first = call(request(0, 0, topic_id, all)).await;
        assert_eq!(first.error_code, 0);
        let id = first.session_id;
        assert_ne!(id, 0, "v{version}: a session is opened");
        assert_eq!(answered(&first).len(), PARTITIONS as usize, "the first answer is full");

        // The client moves partition 0 past what it read; nothing else changed.
        let hw0 = answered(&first)[0].1;
        let next = call(request(id, 1, topic_id, vec![fp(0, hw0)])).await;
        assert_eq!(next.session_id, id);
        assert_eq!(answered(&next), vec![], "v{version}: nothing new anywhere");

        // New records on partition 3 and only there.
        produce(&broker, 3, 2).await;
        let next = call(request(id, 2, topic_id, vec![])).await;
        let got = answered(&next);
        assert_eq!(got.len(), 1, "v{version}: {got:?}");
        assert_eq!(got[0].0, 3);
        assert!(got[0].2 > 0, "with its records");

        // Partition 3 forgotten: more records there are not answered.
        let mut forget = request(id, 3, topic_id, vec![]);
        forget.forgotten_topics_data =
            vec![ForgottenTopic { topic: TOPIC.into(), topic_id, partitions: vec![3] }];
        assert_eq!(answered(&call(forget).await), vec![], "v{version}");
        produce(&broker, 3, 1).await;
        assert_eq!(answered(&call(request(id, 4, topic_id, vec![])).await), vec![], "v{version}: forgotten");

        // Refusals, then closing.
        let stale = call(request(id, 4, topic_id, vec![])).await;
        assert_eq!(
            stale.error_code,
            ErrorCode::InvalidFetchSessionEpoch.code(),
            "v{version}: an epoch is used once"
        );
        let unknown = call(request(id.wrapping_add(1).max(1), 1, topic_id, vec![])).await;
        assert_eq!(unknown.error_code, ErrorCode::FetchSessionIdNotFound.code());
        let closed = call(request(id, -1, topic_id, vec![fp(0, 0)])).await;
        assert_eq!(closed.session_id, 0, "v{version}: closing answers without a session");
        assert_eq!(answered(&closed).len(), 1, "and as a full fetch of what it names");
        let after = call(request(id, 5, topic_id, vec![])).await;
        assert_eq!(after.error_code, ErrorCode::FetchSessionIdNotFound.code(), "v{version}: closed");
    }
}
