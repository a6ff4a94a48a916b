//! `__consumer_offsets` stays bounded: a million offset commits of one group shrink,
//! through log compaction, to about one record per key, and the last commit is what
//! the group reads back, also after a `kill -9` and restart.
//!
//! Drives the real `strata` binary over raw Kafka frames (OffsetCommit v8 and
//! OffsetFetch v7 encoded with `strata-protocol`), pipelined in windows so the run
//! takes seconds.

use anyhow::{bail, Result};
use bytes::Bytes;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use strata_protocol::header::{decode_response, encode_request};
use strata_protocol::messages::create_topics::{CreatableTopic, CreateTopicsRequest};
use strata_protocol::messages::offset_commit::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use strata_protocol::messages::offset_fetch::{OffsetFetchRequest, OffsetFetchRequestTopic};
use strata_protocol::{ApiKey, RequestBody, RequestHeader, ResponseBody};
use strata_tests::BrokerProcess;

const COMMITS: i64 = 1_000_000;
const WINDOW: i64 = 2_000;
const COMMIT_VERSION: i16 = 8;
const FETCH_VERSION: i16 = 7;

fn commit_request(offset: i64) -> RequestBody {
    RequestBody::OffsetCommit(OffsetCommitRequest {
        group_id: "bounded".into(),
        generation_id_or_member_epoch: -1,
        member_id: String::new(),
        group_instance_id: None,
        topics: vec![OffsetCommitRequestTopic {
            name: "orders".into(),
            partitions: vec![OffsetCommitRequestPartition {
                partition_index: (offset % 4) as i32,
                committed_offset: offset,
                committed_leader_epoch: -1,
                committed_metadata: Some(String::new()),
                ..Default::default()
            }],
        }],
        ..Default::default()
    })
}

fn frame(api: ApiKey, version: i16, correlation_id: i32, body: &RequestBody) -> Bytes {
    let header = RequestHeader {
        api_key: api as i16,
        api_version: version,
        correlation_id,
        client_id: Some("offsets-bounded".into()),
    };
    encode_request(&header, body)
}

fn read_frame(stream: &mut TcpStream) -> Result<Bytes> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let len = i32::from_be_bytes(len);
    if !(0..64 << 20).contains(&len) {
        bail!("bad response length {len}");
    }
    let mut buf = vec![0u8; len as usize];
    stream.read_exact(&mut buf)?;
    Ok(Bytes::from(buf))
}

fn committed(stream: &mut TcpStream) -> Result<Vec<(i32, i64)>> {
    let body = RequestBody::OffsetFetch(OffsetFetchRequest {
        group_id: "bounded".into(),
        topics: Some(vec![OffsetFetchRequestTopic {
            name: "orders".into(),
            partition_indexes: vec![0, 1, 2, 3],
        }]),
        require_stable: true,
        ..Default::default()
    });
    stream.write_all(&frame(ApiKey::OffsetFetch, FETCH_VERSION, 1, &body))?;
    let (_, response) = decode_response(read_frame(stream)?, ApiKey::OffsetFetch, FETCH_VERSION)?;
    let ResponseBody::OffsetFetch(r) = response else { bail!("not an OffsetFetch response") };
    if r.error_code != 0 {
        bail!("OffsetFetch error {}", r.error_code);
    }
    Ok(r.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (p.partition_index, p.committed_offset)))
        .collect())
}

fn connect(broker: &BrokerProcess) -> Result<TcpStream> {
    let s = TcpStream::connect(broker.addr())?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// Creates the topic the offsets are committed for (Kafka refuses commits for topics
/// that do not exist).
fn create_orders(stream: &mut TcpStream) -> Result<()> {
    let body = RequestBody::CreateTopics(CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: "orders".into(),
            num_partitions: 4,
            replication_factor: -1,
            ..Default::default()
        }],
        timeout_ms: 10_000,
        ..Default::default()
    });
    stream.write_all(&frame(ApiKey::CreateTopics, 5, 2, &body))?;
    let (_, response) = decode_response(read_frame(stream)?, ApiKey::CreateTopics, 5)?;
    let ResponseBody::CreateTopics(r) = response else { bail!("not a CreateTopics response") };
    if r.topics[0].error_code != 0 {
        bail!("CreateTopics failed with error {}", r.topics[0].error_code);
    }
    Ok(())
}

#[test]
fn a_million_commits_of_one_group_stay_bounded() -> Result<()> {
    let mut broker = BrokerProcess::start(&[
        "offsets.topic.num.partitions=1",
        "offsets.topic.segment.bytes=1048576",
        "log.cleaner.backoff.ms=100",
    ])?;
    let mut stream = connect(&broker)?;
    create_orders(&mut stream)?;
    let mut sent = 0i64;
    while sent < COMMITS {
        let end = (sent + WINDOW).min(COMMITS);
        let mut batch = Vec::new();
        for offset in sent..end {
            batch.extend_from_slice(&frame(
                ApiKey::OffsetCommit,
                COMMIT_VERSION,
                offset as i32,
                &commit_request(offset),
            ));
        }
        stream.write_all(&batch)?;
        for offset in sent..end {
            let (correlation_id, response) =
                decode_response(read_frame(&mut stream)?, ApiKey::OffsetCommit, COMMIT_VERSION)?;
            assert_eq!(correlation_id, offset as i32, "responses out of order");
            let ResponseBody::OffsetCommit(r) = response else { bail!("not an OffsetCommit response") };
            let code = r.topics[0].partitions[0].error_code;
            assert_eq!(code, 0, "commit {offset} failed with error {code}\n{}", broker.log_contents());
        }
        sent = end;
    }
    let expected: Vec<(i32, i64)> = (0..4).map(|p| (p, COMMITS - 4 + i64::from(p))).collect();
    assert_eq!(committed(&mut stream)?, expected);

    // Uncompacted, a million commits are tens of megabytes; compacted, a handful of
    // records per key remain (the active segment is never cleaned).
    broker.await_segment_bytes_at_most("__consumer_offsets", 0, 4 << 20, Duration::from_secs(120))?;

    broker.kill()?;
    broker.restart()?;
    let mut stream = connect(&broker)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match committed(&mut stream) {
            Ok(got) => {
                assert_eq!(got, expected, "offsets after kill -9 and restart");
                break;
            }
            Err(e) if Instant::now() < deadline => {
                eprintln!("waiting for the coordinator: {e}");
                std::thread::sleep(Duration::from_millis(100));
                stream = connect(&broker)?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
