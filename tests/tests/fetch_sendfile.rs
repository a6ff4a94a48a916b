//! Fetch responses assembled from in-memory parts and segment file ranges sent with
//! `sendfile` arrive byte-exact: one response mixing a small partition (copied) with
//! large ones (sent from the page cache), two pipelined fetches whose responses leave
//! together, and a parked fetch woken by an append to its partition.
//!
//! Drives the real `strata` binary over raw Kafka frames encoded with `strata-protocol`.

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use strata_protocol::header::{decode_response, encode_request};
use strata_protocol::messages::create_topics::{CreatableTopic, CreateTopicsRequest};
use strata_protocol::messages::fetch::{FetchPartition, FetchRequest, FetchResponse, FetchTopic};
use strata_protocol::messages::produce::{PartitionProduceData, ProduceRequest, TopicProduceData};
use strata_protocol::records::{NewRecord, RecordBatch, RecordBatchBuilder, RecordBatches};
use strata_protocol::{ApiKey, RequestBody, RequestHeader, ResponseBody};
use strata_tests::BrokerProcess;

const TOPIC: &str = "zero-copy";
const FETCH_VERSION: i16 = 12;

struct Conn {
    stream: TcpStream,
    next_id: i32,
}

impl Conn {
    fn connect(broker: &BrokerProcess) -> Result<Conn> {
        let stream = TcpStream::connect(broker.addr()).context("connecting")?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Conn { stream, next_id: 1 })
    }

    /// Writes one request frame; returns its correlation id.
    fn send(&mut self, api: ApiKey, version: i16, body: &RequestBody) -> Result<i32> {
        let id = self.next_id;
        self.next_id += 1;
        let header =
            RequestHeader { api_key: api as i16, api_version: version, correlation_id: id, client_id: None };
        self.stream.write_all(&encode_request(&header, body))?;
        Ok(id)
    }

    fn receive(&mut self, api: ApiKey, version: i16, id: i32) -> Result<ResponseBody> {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len)?;
        let len = i32::from_be_bytes(len);
        if !(0..256 << 20).contains(&len) {
            bail!("bad response length {len}");
        }
        let mut buf = vec![0u8; len as usize];
        self.stream.read_exact(&mut buf)?;
        let (got, body) = decode_response(Bytes::from(buf), api, version)?;
        if got != id {
            bail!("correlation id {got}, expected {id}");
        }
        Ok(body)
    }

    fn call(&mut self, api: ApiKey, version: i16, body: RequestBody) -> Result<ResponseBody> {
        let id = self.send(api, version, &body)?;
        self.receive(api, version, id)
    }
}

/// `count` batches of `records` records whose values are `value_len` bytes derived from
/// (partition, batch, record), so any misplaced byte shows.
fn batches(partition: i32, count: usize, records: usize, value_len: usize) -> Vec<Bytes> {
    (0..count)
        .map(|b| {
            let mut builder = RecordBatchBuilder::new(0);
            for r in 0..records {
                builder
                    .append(&NewRecord::new(1_000, None, Some(value(partition, b, r, value_len))))
                    .expect("append");
            }
            builder.build().expect("build")
        })
        .collect()
}

fn value(partition: i32, batch: usize, record: usize, len: usize) -> Bytes {
    let seed = (partition as usize * 7919 + batch * 131 + record) as u32;
    (0..len as u32).map(|i| (seed.wrapping_mul(2_654_435_761).wrapping_add(i * 31) >> 7) as u8).collect()
}

fn produce(conn: &mut Conn, partition: i32, batches: &[Bytes]) -> Result<()> {
    for batch in batches {
        let body = RequestBody::Produce(ProduceRequest {
            transactional_id: None,
            acks: 1,
            timeout_ms: 10_000,
            topic_data: vec![TopicProduceData {
                name: TOPIC.into(),
                partition_data: vec![PartitionProduceData { index: partition, records: Some(batch.clone()) }],
            }],
        });
        let ResponseBody::Produce(r) = conn.call(ApiKey::Produce, 9, body)? else {
            bail!("not a produce response")
        };
        let code = r.responses[0].partition_responses[0].error_code;
        if code != 0 {
            bail!("produce to partition {partition} failed with error {code}");
        }
    }
    Ok(())
}

fn fetch_request(partitions: &[i32], min_bytes: i32, max_wait_ms: i32) -> RequestBody {
    RequestBody::Fetch(FetchRequest {
        max_wait_ms,
        min_bytes,
        max_bytes: 64 << 20,
        topics: vec![FetchTopic {
            topic: TOPIC.into(),
            partitions: partitions
                .iter()
                .map(|&partition| FetchPartition {
                    partition,
                    fetch_offset: 0,
                    partition_max_bytes: 16 << 20,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    })
}

/// Every record of `partition` in `response`, checked: CRCs, consecutive offsets from
/// 0, and values as produced.
fn check_partition(
    response: &FetchResponse,
    partition: i32,
    count: usize,
    records: usize,
    len: usize,
) -> Result<()> {
    let pd = response.responses[0]
        .partitions
        .iter()
        .find(|p| p.partition_index == partition)
        .context("partition missing from the response")?;
    if pd.error_code != 0 {
        bail!("partition {partition}: error {}", pd.error_code);
    }
    let data = pd.records.as_ref().and_then(|r| r.memory()).context("no records")?;
    let mut next = 0i64;
    for (b, batch) in RecordBatches::new(data).enumerate() {
        let batch: RecordBatch = batch?;
        batch.validate_crc().with_context(|| format!("partition {partition} batch {b}"))?;
        for (r, record) in batch.records(64 << 20)?.enumerate() {
            let record = record?;
            if record.offset != next {
                bail!("partition {partition}: offset {} where {next} was due", record.offset);
            }
            if record.value.as_deref() != Some(&value(partition, b, r, len)[..]) {
                bail!("partition {partition}: value of batch {b} record {r} differs");
            }
            next += 1;
        }
    }
    if next != (count * records) as i64 {
        bail!("partition {partition}: {next} records, {} produced", count * records);
    }
    Ok(())
}

#[test]
fn mixed_memory_and_sendfile_fetch_responses_arrive_byte_exact() -> Result<()> {
    let broker = BrokerProcess::start(&[])?;
    let mut conn = Conn::connect(&broker)?;
    let create = RequestBody::CreateTopics(CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: TOPIC.into(),
            num_partitions: 4,
            replication_factor: 1,
            ..Default::default()
        }],
        timeout_ms: 10_000,
        validate_only: false,
    });
    let ResponseBody::CreateTopics(created) = conn.call(ApiKey::CreateTopics, 5, create)? else {
        bail!("not a CreateTopics response")
    };
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");

    // Partition 0 is small (copied into the response), 1 and 2 large (sendfile).
    let layout = [(0, 2, 3, 100), (1, 12, 40, 1_000), (2, 3, 20, 1_500)];
    for &(p, count, records, len) in &layout {
        produce(&mut conn, p, &batches(p, count, records, len))?;
    }
    let all: Vec<i32> = layout.iter().map(|l| l.0).collect();
    let ResponseBody::Fetch(response) = conn.call(ApiKey::Fetch, FETCH_VERSION, fetch_request(&all, 1, 0))?
    else {
        bail!("not a fetch response")
    };
    for &(p, count, records, len) in &layout {
        check_partition(&response, p, count, records, len)?;
    }

    // Two fetches sent back to back: their responses may leave in one write.
    let first = conn.send(ApiKey::Fetch, FETCH_VERSION, &fetch_request(&[2, 0, 1], 1, 0))?;
    let second = conn.send(ApiKey::Fetch, FETCH_VERSION, &fetch_request(&[1], 1, 0))?;
    let ResponseBody::Fetch(a) = conn.receive(ApiKey::Fetch, FETCH_VERSION, first)? else {
        bail!("not fetch")
    };
    let ResponseBody::Fetch(b) = conn.receive(ApiKey::Fetch, FETCH_VERSION, second)? else {
        bail!("not fetch")
    };
    for &(p, count, records, len) in &layout {
        check_partition(&a, p, count, records, len)?;
    }
    check_partition(&b, 1, 12, 40, 1_000)?;

    // A fetch parked on the empty partition 3 returns with the records an append
    // brings, well before its 20 s wait ends.
    let mut waiting = Conn::connect(&broker)?;
    let started = Instant::now();
    let parked = waiting.send(ApiKey::Fetch, FETCH_VERSION, &fetch_request(&[3], 1, 20_000))?;
    produce(&mut conn, 3, &batches(3, 1, 30, 1_000))?;
    let ResponseBody::Fetch(woken) = waiting.receive(ApiKey::Fetch, FETCH_VERSION, parked)? else {
        bail!("not fetch")
    };
    assert!(started.elapsed() < Duration::from_secs(15), "woken after {:?}", started.elapsed());
    check_partition(&woken, 3, 1, 30, 1_000)?;
    Ok(())
}
