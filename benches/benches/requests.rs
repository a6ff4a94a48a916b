//! Request decoding as the broker does it for every frame: Produce carrying a 16 KiB
//! batch, Fetch for one and for 100 partitions, Metadata for one topic and for all.

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use strata_protocol::header::{decode_request, encode_request};
use strata_protocol::messages::fetch::{FetchPartition, FetchRequest, FetchTopic};
use strata_protocol::messages::metadata::{MetadataRequest, MetadataRequestTopic};
use strata_protocol::messages::produce::{PartitionProduceData, ProduceRequest, TopicProduceData};
use strata_protocol::records::{NewRecord, RecordBatchBuilder};
use strata_protocol::{ApiKey, RequestBody, RequestHeader};

/// A request frame without its length prefix, as the broker's framing hands it over.
fn frame(api: ApiKey, version: i16, body: RequestBody) -> Bytes {
    let header = RequestHeader {
        api_key: api as i16,
        api_version: version,
        correlation_id: 42,
        client_id: Some("bench-client".into()),
    };
    encode_request(&header, &body).slice(4..)
}

fn produce_frame() -> Bytes {
    let mut b = RecordBatchBuilder::new(0);
    for i in 0..15 {
        b.append(&NewRecord::new(i, None, Some(Bytes::from(vec![b'v'; 1024])))).expect("fits");
    }
    let batch = b.build().expect("builds");
    let body = RequestBody::Produce(ProduceRequest {
        transactional_id: None,
        acks: 1,
        timeout_ms: 30_000,
        topic_data: vec![TopicProduceData {
            name: "bench-topic".into(),
            partition_data: vec![PartitionProduceData { index: 0, records: Some(batch) }],
        }],
    });
    frame(ApiKey::Produce, 9, body)
}

fn fetch_frame(partitions: i32) -> Bytes {
    let body = RequestBody::Fetch(FetchRequest {
        replica_id: -1,
        max_wait_ms: 500,
        min_bytes: 1,
        max_bytes: 50 << 20,
        session_epoch: -1,
        topics: vec![FetchTopic {
            topic: "bench-topic".into(),
            partitions: (0..partitions)
                .map(|p| FetchPartition {
                    partition: p,
                    fetch_offset: 1_000_000 + i64::from(p),
                    partition_max_bytes: 1 << 20,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    });
    frame(ApiKey::Fetch, 12, body)
}

fn metadata_frame(all: bool) -> Bytes {
    let topics =
        (!all).then(|| vec![MetadataRequestTopic { name: Some("bench-topic".into()), ..Default::default() }]);
    let body = RequestBody::Metadata(MetadataRequest { topics, ..Default::default() });
    frame(ApiKey::Metadata, 12, body)
}

fn decode(c: &mut Criterion) {
    let mut g = c.benchmark_group("decode_request");
    let produce = produce_frame();
    g.throughput(Throughput::Bytes(produce.len() as u64));
    g.bench_function("produce_v9_16k_batch", |b| {
        b.iter(|| decode_request(black_box(produce.clone())).expect("decodes"))
    });
    for partitions in [1, 100] {
        let fetch = fetch_frame(partitions);
        g.throughput(Throughput::Elements(1));
        g.bench_function(format!("fetch_v12_{partitions}_partitions"), |b| {
            b.iter(|| decode_request(black_box(fetch.clone())).expect("decodes"))
        });
    }
    for (name, all) in [("one_topic", false), ("all_topics", true)] {
        let metadata = metadata_frame(all);
        g.bench_function(format!("metadata_v12_{name}"), |b| {
            b.iter(|| decode_request(black_box(metadata.clone())).expect("decodes"))
        });
    }
    g.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
