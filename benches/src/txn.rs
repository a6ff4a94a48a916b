//! Transactional producing (`--transactions`): the client side of Kafka's transaction
//! protocol, just enough to load a broker's transaction coordinator the way a
//! transactional producer does.
//!
//! Per producer: FindCoordinator for its transactional id, InitProducerId for a
//! producer id and epoch, then for each transaction AddPartitionsToTxn (every
//! partition of the topic, once, at the start), idempotent transactional batches with
//! per-partition sequence numbers, and EndTxn(commit) once every batch of the
//! transaction is acknowledged.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use strata_protocol::messages::add_partitions_to_txn::{AddPartitionsToTxnRequest, AddPartitionsToTxnTopic};
use strata_protocol::messages::end_txn::EndTxnRequest;
use strata_protocol::messages::find_coordinator::FindCoordinatorRequest;
use strata_protocol::messages::init_producer_id::InitProducerIdRequest;
use strata_protocol::{ApiKey, ErrorCode, RequestBody, ResponseBody};

use crate::cluster::{error_name, Versions};
use crate::wire::Connection;

/// transaction.timeout.ms asked for at InitProducerId.
const TRANSACTION_TIMEOUT_MS: i32 = 60_000;
/// How long a retriable coordinator error (a previous commit still completing, a
/// coordinator still loading) is retried before giving up.
const RETRY_FOR: Duration = Duration::from_secs(10);
/// FindCoordinator key type of transactional ids.
const TRANSACTION_KEY: i8 = 1;

/// The versions of the transaction APIs both sides speak.
#[derive(Debug, Clone, Copy)]
pub struct TxnVersions {
    find_coordinator: i16,
    init_producer_id: i16,
    add_partitions: i16,
    end_txn: i16,
}

impl TxnVersions {
    /// Picks the versions, or explains which API the broker lacks.
    pub fn negotiate(versions: &Versions) -> Result<TxnVersions> {
        let needed =
            [ApiKey::FindCoordinator, ApiKey::InitProducerId, ApiKey::AddPartitionsToTxn, ApiKey::EndTxn];
        let missing: Vec<&str> = needed.iter().filter(|a| !versions.has(**a)).map(|a| a.name()).collect();
        if !missing.is_empty() {
            bail!(
                "--transactions: not supported by this broker yet (it does not advertise {})",
                missing.join(", ")
            );
        }
        Ok(TxnVersions {
            // Single-key FindCoordinator (v1-3) and the per-request AddPartitionsToTxn
            // shape (v0-3) are what producers send; later versions batch.
            find_coordinator: versions.pick(ApiKey::FindCoordinator, 1, 3)?,
            init_producer_id: versions.pick(ApiKey::InitProducerId, 0, 4)?,
            add_partitions: versions.pick(ApiKey::AddPartitionsToTxn, 0, 3)?,
            end_txn: versions.pick(ApiKey::EndTxn, 0, 3)?,
        })
    }
}

/// Whether a coordinator error means "try again shortly".
fn retriable(code: i16) -> bool {
    code == ErrorCode::ConcurrentTransactions.code()
        || code == ErrorCode::CoordinatorLoadInProgress.code()
        || code == ErrorCode::CoordinatorNotAvailable.code()
}

/// One producer's transactional identity and state.
#[derive(Debug)]
pub struct Transactions {
    /// The transactional id.
    pub transactional_id: String,
    /// Producer id from InitProducerId.
    pub producer_id: i64,
    /// Producer epoch from InitProducerId.
    pub producer_epoch: i16,
    versions: TxnVersions,
    coordinator: Connection,
    /// Next sequence number per partition.
    sequences: Vec<i32>,
    /// Whether a transaction is open.
    pub open: bool,
    /// Records appended in the open transaction.
    pub records_in_txn: u64,
    /// Transactions committed.
    pub committed: u64,
}

impl Transactions {
    /// Finds the coordinator of `transactional_id` and initialises the producer id.
    pub async fn init(
        bootstrap: &str,
        client_id: &str,
        versions: TxnVersions,
        transactional_id: String,
        partitions: usize,
    ) -> Result<Transactions> {
        let mut conn = Connection::connect(bootstrap, client_id).await?;
        let request = FindCoordinatorRequest {
            key: transactional_id.clone(),
            key_type: TRANSACTION_KEY,
            ..Default::default()
        };
        let ResponseBody::FindCoordinator(r) =
            conn.call(versions.find_coordinator, RequestBody::FindCoordinator(request)).await?
        else {
            bail!("unexpected response to FindCoordinator");
        };
        if r.error_code != 0 {
            bail!("FindCoordinator for {transactional_id} failed: {}", error_name(r.error_code));
        }
        let mut coordinator = Connection::connect(&format!("{}:{}", r.host, r.port), client_id)
            .await
            .context("connecting to the transaction coordinator")?;
        let deadline = Instant::now() + RETRY_FOR;
        let (producer_id, producer_epoch) = loop {
            let request = InitProducerIdRequest {
                transactional_id: Some(transactional_id.clone()),
                transaction_timeout_ms: TRANSACTION_TIMEOUT_MS,
                ..Default::default()
            };
            let ResponseBody::InitProducerId(r) =
                coordinator.call(versions.init_producer_id, RequestBody::InitProducerId(request)).await?
            else {
                bail!("unexpected response to InitProducerId");
            };
            match r.error_code {
                0 => break (r.producer_id, r.producer_epoch),
                code if retriable(code) && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await
                }
                code => bail!("InitProducerId for {transactional_id} failed: {}", error_name(code)),
            }
        };
        Ok(Transactions {
            transactional_id,
            producer_id,
            producer_epoch,
            versions,
            coordinator,
            sequences: vec![0; partitions],
            open: false,
            records_in_txn: 0,
            committed: 0,
        })
    }

    /// Takes the sequence numbers for `count` records of `partition` and returns the
    /// first.
    pub fn next_sequence(&mut self, partition: usize, count: i32) -> i32 {
        let first = self.sequences[partition];
        // Sequences wrap at i32::MAX, as Kafka's do.
        self.sequences[partition] = first.wrapping_add(count) & i32::MAX;
        first
    }

    /// Opens a transaction on every partition of `topic`.
    pub async fn begin(&mut self, topic: &str) -> Result<()> {
        let deadline = Instant::now() + RETRY_FOR;
        loop {
            let request = AddPartitionsToTxnRequest {
                v3_and_below_transactional_id: self.transactional_id.clone(),
                v3_and_below_producer_id: self.producer_id,
                v3_and_below_producer_epoch: self.producer_epoch,
                v3_and_below_topics: vec![AddPartitionsToTxnTopic {
                    name: topic.to_string(),
                    partitions: (0..self.sequences.len() as i32).collect(),
                }],
                ..Default::default()
            };
            let ResponseBody::AddPartitionsToTxn(r) = self
                .coordinator
                .call(self.versions.add_partitions, RequestBody::AddPartitionsToTxn(request))
                .await?
            else {
                bail!("unexpected response to AddPartitionsToTxn");
            };
            let error = r
                .results_by_topic_v3_and_below
                .iter()
                .flat_map(|t| t.results_by_partition.iter())
                .map(|p| p.partition_error_code)
                .find(|&c| c != 0);
            match error {
                None => break,
                Some(code) if retriable(code) && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(5)).await
                }
                Some(code) => bail!("AddPartitionsToTxn failed: {}", error_name(code)),
            }
        }
        self.open = true;
        self.records_in_txn = 0;
        Ok(())
    }

    /// Commits the open transaction (every batch of it must be acknowledged).
    pub async fn commit(&mut self) -> Result<()> {
        let deadline = Instant::now() + RETRY_FOR;
        loop {
            let request = EndTxnRequest {
                transactional_id: self.transactional_id.clone(),
                producer_id: self.producer_id,
                producer_epoch: self.producer_epoch,
                committed: true,
            };
            let ResponseBody::EndTxn(r) =
                self.coordinator.call(self.versions.end_txn, RequestBody::EndTxn(request)).await?
            else {
                bail!("unexpected response to EndTxn");
            };
            match r.error_code {
                0 => break,
                code if retriable(code) && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(5)).await
                }
                code => bail!("EndTxn(commit) failed: {}", error_name(code)),
            }
        }
        self.open = false;
        self.committed += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_brokers_without_the_transaction_apis() {
        let v = Versions::from_ranges([(0, 3, 10), (1, 4, 16), (10, 0, 4), (22, 0, 4)]);
        let err = TxnVersions::negotiate(&v).unwrap_err().to_string();
        assert!(err.contains("not supported by this broker yet"), "{err}");
        assert!(err.contains("AddPartitionsToTxn") && err.contains("EndTxn"), "{err}");
        let v = Versions::from_ranges([(10, 0, 6), (22, 0, 5), (24, 0, 5), (26, 0, 5)]);
        let t = TxnVersions::negotiate(&v).unwrap();
        assert_eq!((t.find_coordinator, t.init_producer_id, t.add_partitions, t.end_txn), (3, 4, 3, 3));
    }
}
