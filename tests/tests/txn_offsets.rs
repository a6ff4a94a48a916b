//! Offsets committed in transactions (TxnOffsetCommit), against the real `strata`
//! binary over raw frames encoded with `strata-protocol`:
//! - KIP-890 part 1: the broker accepts a transactional offset commit only while the
//!   producer's ongoing transaction includes the group (AddOffsetsToTxn), as Kafka's
//!   group coordinator verifies it; a refused commit leaves nothing pending.
//! - `__consumer_offsets` stays bounded when every commit is transactional (a stream
//!   engine's sink commits at every checkpoint): compaction removes aborted commits,
//!   superseded committed ones and, after them, their markers; after `kill -9` the group
//!   reads back its last committed offset, stable.

use anyhow::{bail, Result};
use bytes::Bytes;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use strata_protocol::header::{decode_response, encode_request};
use strata_protocol::messages::add_offsets_to_txn::AddOffsetsToTxnRequest;
use strata_protocol::messages::create_topics::{CreatableTopic, CreateTopicsRequest};
use strata_protocol::messages::end_txn::EndTxnRequest;
use strata_protocol::messages::init_producer_id::InitProducerIdRequest;
use strata_protocol::messages::offset_fetch::{OffsetFetchRequest, OffsetFetchRequestTopic};
use strata_protocol::messages::txn_offset_commit::{
    TxnOffsetCommitRequest, TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use strata_protocol::{ApiKey, ErrorCode, RequestBody, RequestHeader, ResponseBody};
use strata_tests::BrokerProcess;

const TXN_ID: &str = "verified-offsets";
const GROUP: &str = "verified-group";
const TOPIC: &str = "orders";

/// The error code as an [`ErrorCode`]; an unknown code fails the test.
fn code(raw: i16) -> Result<ErrorCode> {
    ErrorCode::from_code(raw).ok_or_else(|| anyhow::anyhow!("unknown error code {raw}"))
}

struct Conn {
    stream: TcpStream,
    correlation_id: i32,
}

impl Conn {
    fn connect(broker: &BrokerProcess) -> Result<Conn> {
        let stream = TcpStream::connect(broker.addr())?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Conn { stream, correlation_id: 0 })
    }

    fn call(&mut self, api: ApiKey, version: i16, body: RequestBody) -> Result<ResponseBody> {
        self.correlation_id += 1;
        let header = RequestHeader {
            api_key: api as i16,
            api_version: version,
            correlation_id: self.correlation_id,
            client_id: Some("txn-offset-commit-verified".into()),
        };
        self.stream.write_all(&encode_request(&header, &body))?;
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len)?;
        let mut frame = vec![0u8; i32::from_be_bytes(len) as usize];
        self.stream.read_exact(&mut frame)?;
        let (correlation_id, response) = decode_response(Bytes::from(frame), api, version)?;
        if correlation_id != self.correlation_id {
            bail!("correlation id {correlation_id}, expected {}", self.correlation_id);
        }
        Ok(response)
    }

    /// Creates [`TOPIC`] (offsets are committed only for topics that exist).
    fn create_topic(&mut self) -> Result<()> {
        let body = RequestBody::CreateTopics(CreateTopicsRequest {
            topics: vec![CreatableTopic {
                name: TOPIC.into(),
                num_partitions: 1,
                replication_factor: -1,
                ..Default::default()
            }],
            timeout_ms: 10_000,
            ..Default::default()
        });
        let ResponseBody::CreateTopics(r) = self.call(ApiKey::CreateTopics, 5, body)? else {
            bail!("not a CreateTopics response");
        };
        match code(r.topics[0].error_code)? {
            ErrorCode::None | ErrorCode::TopicAlreadyExists => Ok(()),
            other => bail!("CreateTopics answered {other:?}"),
        }
    }

    /// InitProducerId for [`TXN_ID`], retried while the transaction coordinator loads.
    fn init_producer(&mut self) -> Result<(i64, i16)> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let body = RequestBody::InitProducerId(InitProducerIdRequest {
                transactional_id: Some(TXN_ID.into()),
                transaction_timeout_ms: 60_000,
                ..Default::default()
            });
            let ResponseBody::InitProducerId(r) = self.call(ApiKey::InitProducerId, 1, body)? else {
                bail!("not an InitProducerId response");
            };
            match code(r.error_code)? {
                ErrorCode::None => return Ok((r.producer_id, r.producer_epoch)),
                ErrorCode::CoordinatorLoadInProgress | ErrorCode::CoordinatorNotAvailable
                    if Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(50))
                }
                other => bail!("InitProducerId answered {other:?}"),
            }
        }
    }

    /// AddOffsetsToTxn, retried while the previous transaction's markers are written.
    fn add_offsets_retrying(&mut self, producer_id: i64, producer_epoch: i16) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match self.add_offsets(producer_id, producer_epoch)? {
                ErrorCode::None => return Ok(()),
                ErrorCode::ConcurrentTransactions if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2))
                }
                other => bail!("AddOffsetsToTxn answered {other:?}"),
            }
        }
    }

    fn add_offsets(&mut self, producer_id: i64, producer_epoch: i16) -> Result<ErrorCode> {
        let body = RequestBody::AddOffsetsToTxn(AddOffsetsToTxnRequest {
            transactional_id: TXN_ID.into(),
            producer_id,
            producer_epoch,
            group_id: GROUP.into(),
        });
        let ResponseBody::AddOffsetsToTxn(r) = self.call(ApiKey::AddOffsetsToTxn, 1, body)? else {
            bail!("not an AddOffsetsToTxn response");
        };
        code(r.error_code)
    }

    /// TxnOffsetCommit v3 of `offset` for partition 0; the partition's error.
    fn txn_commit(&mut self, producer_id: i64, producer_epoch: i16, offset: i64) -> Result<ErrorCode> {
        let body = RequestBody::TxnOffsetCommit(TxnOffsetCommitRequest {
            transactional_id: TXN_ID.into(),
            group_id: GROUP.into(),
            producer_id,
            producer_epoch,
            generation_id: -1,
            topics: vec![TxnOffsetCommitRequestTopic {
                name: TOPIC.into(),
                partitions: vec![TxnOffsetCommitRequestPartition {
                    partition_index: 0,
                    committed_offset: offset,
                    ..Default::default()
                }],
            }],
            ..Default::default()
        });
        let ResponseBody::TxnOffsetCommit(r) = self.call(ApiKey::TxnOffsetCommit, 3, body)? else {
            bail!("not a TxnOffsetCommit response");
        };
        let codes: Vec<i16> =
            r.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect();
        match codes[..] {
            [raw] => code(raw),
            _ => bail!("expected one partition in the answer, got {codes:?}"),
        }
    }

    fn end_txn(&mut self, producer_id: i64, producer_epoch: i16, committed: bool) -> Result<ErrorCode> {
        let body = RequestBody::EndTxn(EndTxnRequest {
            transactional_id: TXN_ID.into(),
            producer_id,
            producer_epoch,
            committed,
        });
        let ResponseBody::EndTxn(r) = self.call(ApiKey::EndTxn, 1, body)? else {
            bail!("not an EndTxn response");
        };
        code(r.error_code)
    }

    /// A `require_stable` OffsetFetch (v7) of partition 0: its error and offset.
    fn fetch_stable(&mut self) -> Result<(ErrorCode, i64)> {
        let body = RequestBody::OffsetFetch(OffsetFetchRequest {
            group_id: GROUP.into(),
            topics: Some(vec![OffsetFetchRequestTopic { name: TOPIC.into(), partition_indexes: vec![0] }]),
            require_stable: true,
            ..Default::default()
        });
        let ResponseBody::OffsetFetch(r) = self.call(ApiKey::OffsetFetch, 7, body)? else {
            bail!("not an OffsetFetch response");
        };
        if r.error_code != 0 {
            bail!("OffsetFetch error {}", r.error_code);
        }
        let p = &r.topics[0].partitions[0];
        Ok((code(p.error_code)?, p.committed_offset))
    }
}

#[test]
fn a_txn_offset_commit_needs_the_group_in_the_ongoing_transaction() -> Result<()> {
    let broker =
        BrokerProcess::start(&["offsets.topic.num.partitions=3", "transaction.state.log.num.partitions=3"])?;
    let mut c = Conn::connect(&broker)?;
    c.create_topic()?;
    let (pid, epoch) = c.init_producer()?;

    // No AddOffsetsToTxn: there is no ongoing transaction to commit the offsets in.
    assert_eq!(c.txn_commit(pid, epoch, 5)?, ErrorCode::InvalidTxnState);
    assert_eq!(c.fetch_stable()?, (ErrorCode::None, -1), "the refused commit left nothing pending");

    assert_eq!(c.add_offsets(pid, epoch)?, ErrorCode::None);
    // An older epoch of the same producer is fenced; the clients expect INVALID_PRODUCER_EPOCH.
    let other_epoch = if epoch > 0 { epoch - 1 } else { epoch + 1 };
    assert_eq!(c.txn_commit(pid, other_epoch, 6)?, ErrorCode::InvalidProducerEpoch);
    assert_eq!(c.txn_commit(pid + 1, epoch, 6)?, ErrorCode::InvalidProducerIdMapping);

    assert_eq!(c.txn_commit(pid, epoch, 7)?, ErrorCode::None);
    assert_eq!(c.fetch_stable()?.0, ErrorCode::UnstableOffsetCommit, "the verified commit is pending");
    assert_eq!(c.end_txn(pid, epoch, true)?, ErrorCode::None);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match c.fetch_stable()? {
            (ErrorCode::None, 7) => break,
            (ErrorCode::UnstableOffsetCommit, _) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            other => bail!("after the commit, OffsetFetch answered {other:?}"),
        }
    }

    // The transaction has ended: a late commit of it is refused again.
    assert_eq!(c.txn_commit(pid, epoch, 8)?, ErrorCode::InvalidTxnState);
    assert_eq!(c.fetch_stable()?, (ErrorCode::None, 7));
    Ok(())
}

#[test]
fn offsets_committed_in_transactions_stay_bounded_and_survive_kill_9() -> Result<()> {
    const TRANSACTIONS: i64 = 3_000;
    let mut broker = BrokerProcess::start(&[
        "offsets.topic.num.partitions=1",
        "transaction.state.log.num.partitions=1",
        "offsets.topic.segment.bytes=16384",
        "log.cleaner.backoff.ms=100",
        "log.cleaner.delete.retention.ms=0",
    ])?;
    let mut c = Conn::connect(&broker)?;
    c.create_topic()?;
    let (pid, epoch) = c.init_producer()?;
    let mut last_committed = -1;
    for i in 0..TRANSACTIONS {
        c.add_offsets_retrying(pid, epoch)?;
        assert_eq!(c.txn_commit(pid, epoch, i)?, ErrorCode::None, "commit {i}");
        // Every fifth transaction is aborted.
        let commit = i % 5 != 4;
        assert_eq!(c.end_txn(pid, epoch, commit)?, ErrorCode::None, "end of transaction {i}");
        if commit {
            last_committed = i;
        }
    }

    // Uncompacted: a commit batch and a marker per transaction, 600 KB. Compacted: the
    // active segment (at most 16 KiB) and the latest commit. Markers go three cleanings
    // after their data, and once writes stop the passed delete horizons (0 here) bring
    // the cleaner back until they are gone. Before transactional data was compacted,
    // all of it stayed.
    let limit = 24_000;
    broker.await_segment_bytes_at_most("__consumer_offsets", 0, limit, Duration::from_secs(60))?;

    broker.kill()?;
    broker.restart()?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = Conn::connect(&broker).and_then(|mut c| c.fetch_stable());
        match got {
            Ok(got) => {
                assert_eq!(got, (ErrorCode::None, last_committed), "offsets after kill -9 and restart");
                return Ok(());
            }
            Err(e) if Instant::now() < deadline => {
                eprintln!("waiting for the coordinator: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(e),
        }
    }
}
