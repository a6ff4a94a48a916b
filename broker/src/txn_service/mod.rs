//! The async shell around the transaction coordinator's state machine ([`crate::txn`]),
//! built like [`crate::group_service`]: one task owns the coordinator, executes its
//! actions (responses, appends to `__transaction_state`, transaction markers through
//! [`crate::markers`]) and wakes it at its next deadline (transaction timeouts, id
//! expiry, marker retries).
//!
//! `__transaction_state` is created through the controller on first use with
//! `transaction.state.log.num.partitions` partitions,
//! `transaction.state.log.replication.factor` replicas and
//! `transaction.state.log.min.isr` (compacted). The coordinator owns the partitions this
//! broker leads, loading each when it becomes leader (its leader epoch is the coordinator
//! epoch) and resuming the markers of transactions found prepared; markers go to each
//! partition's leader, local or remote (`markers`), and count once replicated.

mod markers;
mod task;

use crate::broker::Broker;
use crate::internal_topics::{self, PendingAppends, CONSUMER_OFFSETS};
use crate::txn::{RequestMeta, RequestToken, TopicPartition, TransactionCoordinator, TxnConfig};
use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;
use strata_protocol::messages::{
    add_offsets_to_txn::AddOffsetsToTxnRequest, add_partitions_to_txn::AddPartitionsToTxnRequest,
    describe_transactions::DescribeTransactionsRequest, end_txn::EndTxnRequest,
    init_producer_id::InitProducerIdRequest, list_transactions::ListTransactionsRequest,
};
use strata_protocol::{ErrorCode, ResponseBody};
use tokio::sync::{mpsc, oneshot};

/// Name of the transaction coordinator's topic.
pub const TRANSACTION_STATE: &str = "__transaction_state";

/// A transaction request.
#[derive(Debug)]
pub enum TxnRequest {
    /// InitProducerId with a transactional id.
    InitProducerId(InitProducerIdRequest),
    /// AddPartitionsToTxn.
    AddPartitions(AddPartitionsToTxnRequest),
    /// AddOffsetsToTxn.
    AddOffsets(AddOffsetsToTxnRequest),
    /// EndTxn.
    EndTxn(EndTxnRequest),
    /// DescribeTransactions (answered at once).
    Describe(DescribeTransactionsRequest),
    /// ListTransactions (answered at once).
    List(ListTransactionsRequest),
}

/// A transactional produce's check (KIP-890 part 1): per partition, the error to refuse
/// it with, or NONE.
type Verification = Vec<(TopicPartition, ErrorCode)>;

enum Command {
    Call {
        meta: RequestMeta,
        request: Box<TxnRequest>,
        reply: oneshot::Sender<ResponseBody>,
    },
    Verify {
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<TopicPartition>,
        reply: oneshot::Sender<Verification>,
    },
    /// The `__transaction_state` partitions this broker leads (partition → leader epoch)
    /// and the topic's partition count.
    Leadership {
        led: BTreeMap<i32, i32>,
        partitions: i32,
    },
    /// An append of this partition may be replicated now.
    AppendProgress(i32),
    /// A metrics scrape.
    Snapshot(oneshot::Sender<crate::txn::TxnCoordinatorSnapshot>),
    /// The markers of a [`Action::WriteMarkers`] were written (or not), per partition.
    MarkersDone {
        id: crate::txn::MarkerId,
        results: Vec<(TopicPartition, ErrorCode)>,
    },
}

/// Handle to the transaction coordinator task.
#[derive(Debug, Clone)]
pub struct TxnService {
    broker: Weak<Broker>,
    tx: mpsc::Sender<Command>,
    /// The task's own completions (appends, marker writes: one per operation in flight),
    /// leadership changes and snapshot requests, which must never be dropped: unbounded,
    /// bounded in practice by what is in flight.
    internal: mpsc::UnboundedSender<Command>,
    /// `__consumer_offsets` partitions as the coordinator counts them, so TxnOffsetCommit
    /// verification names the partition AddOffsetsToTxn added.
    offsets_partitions: i32,
    /// `__transaction_state` partitions, to find a transactional id's coordinator.
    state_partitions: i32,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::Call { meta, .. } => write!(f, "Call({:?})", meta.token),
            Command::Verify { transactional_id, .. } => write!(f, "Verify({transactional_id})"),
            Command::Leadership { led, .. } => write!(f, "Leadership({led:?})"),
            Command::AppendProgress(p) => write!(f, "AppendProgress({p})"),
            Command::Snapshot(_) => write!(f, "Snapshot"),
            Command::MarkersDone { id, .. } => write!(f, "MarkersDone({id:?})"),
        }
    }
}

/// The coordinator's settings: the configured ones, with the partition counts the internal
/// topics really have once they exist (the ids hash over those).
fn txn_config(broker: &Broker) -> TxnConfig {
    let image = broker.metadata.current();
    let partitions =
        |name: &str, configured: i32| image.topic(name).map_or(configured, |t| t.partitions.len() as i32);
    let c = &broker.config.coordinators.txn;
    TxnConfig {
        transaction_state_log_num_partitions: partitions(
            TRANSACTION_STATE,
            c.transaction_state_log_num_partitions,
        ),
        offsets_topic_num_partitions: partitions(CONSUMER_OFFSETS, c.offsets_topic_num_partitions),
        ..c.clone()
    }
}

impl TxnService {
    /// Starts the coordinator task; it owns nothing until the metadata says this broker
    /// leads partitions of `__transaction_state` ([`TxnService::leadership`]).
    pub fn start(broker: &Arc<Broker>) -> TxnService {
        let (tx, rx) = mpsc::channel(1024);
        let (internal, internal_rx) = mpsc::unbounded_channel();
        let ids = Arc::downgrade(broker);
        let source = move || -> Result<i64, ErrorCode> {
            let broker = ids.upgrade().ok_or(ErrorCode::CoordinatorNotAvailable)?;
            broker.producer_ids.next_id()
        };
        let config = txn_config(broker);
        let offsets_partitions = config.offsets_topic_num_partitions;
        let state_partitions = config.transaction_state_log_num_partitions;
        let timeout =
            Duration::from_millis(broker.config.cluster.inter_broker_request_timeout_ms.min(30_000));
        let task = task::Task::new(
            Arc::downgrade(broker),
            TransactionCoordinator::new(config, Box::new(source)),
            PendingAppends::new(timeout),
            internal.clone(),
        );
        tokio::spawn(task.run(rx, internal_rx));
        TxnService { broker: Arc::downgrade(broker), tx, internal, offsets_partitions, state_partitions }
    }

    /// Creates `__transaction_state` through the controller if it does not exist yet.
    pub async fn ensure_topic(&self) -> Result<(), ErrorCode> {
        let broker = self.broker.upgrade().ok_or(ErrorCode::CoordinatorNotAvailable)?;
        if broker.metadata.current().topic(TRANSACTION_STATE).is_some() {
            return Ok(());
        }
        let c = &broker.config.cluster;
        internal_topics::ensure_coordinator_topic(
            &broker,
            TRANSACTION_STATE,
            self.state_partitions,
            c.transaction_state_log_replication_factor,
            broker.config.coordinators.transaction_state_log_segment_bytes,
            &[
                ("compression.type", "uncompressed".to_string()),
                ("min.insync.replicas", c.transaction_state_log_min_isr.to_string()),
            ],
        )
        .await
    }

    /// What a metrics scrape reports of the coordinator (`None` if its task is gone).
    pub async fn snapshot(&self) -> Option<crate::txn::TxnCoordinatorSnapshot> {
        let (reply, rx) = oneshot::channel();
        self.internal.send(Command::Snapshot(reply)).ok()?;
        rx.await.ok()
    }

    /// The `__transaction_state` partition that coordinates `transactional_id`.
    pub fn partition_for(&self, transactional_id: &str) -> i32 {
        crate::group::partition_for_group(transactional_id, self.state_partitions)
    }

    /// The metadata says this broker leads `led` (partition → leader epoch) of the
    /// topic's `partitions`: partitions newly led are loaded, lost ones unloaded.
    pub fn leadership(&self, led: BTreeMap<i32, i32>, partitions: i32) {
        let _ = self.internal.send(Command::Leadership { led, partitions });
    }

    /// Sends a request to the coordinator and waits for its answer.
    pub async fn call(&self, meta: RequestMeta, request: TxnRequest) -> Option<ResponseBody> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(Command::Call { meta, request: Box::new(request), reply }).await.ok()?;
        rx.await.ok()
    }

    /// KIP-890 part 1: may `producer_id`/`producer_epoch` of `transactional_id` write
    /// transactional data to `partitions` now? Asks this broker's coordinator when it
    /// leads the id's `__transaction_state` partition, else the broker that does
    /// (AddPartitionsToTxn v4 with `verify_only`).
    pub async fn verify(
        &self,
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<TopicPartition>,
    ) -> Verification {
        let fallback: Verification =
            partitions.iter().map(|tp| (tp.clone(), ErrorCode::CoordinatorNotAvailable)).collect();
        let Some(broker) = self.broker.upgrade() else { return fallback };
        let partition = self.partition_for(&transactional_id);
        let leader =
            broker.metadata.current().partition(TRANSACTION_STATE, partition).map_or(-1, |p| p.leader);
        if leader != broker.config.node_id {
            return markers::verify_remote(
                &broker,
                leader,
                transactional_id,
                producer_id,
                producer_epoch,
                partitions,
            )
            .await;
        }
        let (reply, rx) = oneshot::channel();
        let command = Command::Verify { transactional_id, producer_id, producer_epoch, partitions, reply };
        if self.tx.send(command).await.is_err() {
            return fallback;
        }
        rx.await.unwrap_or(fallback)
    }

    /// KIP-890 part 1 for TxnOffsetCommit: may `producer_id`/`producer_epoch` of
    /// `transactional_id` commit offsets of `group_id` now, that is, did AddOffsetsToTxn
    /// add the group's `__consumer_offsets` partition to its ongoing transaction? The
    /// coordinator's error as Kafka's verification gives it (see
    /// [`crate::txn::verification_error_for_client`] for what the client is told).
    pub async fn verify_offsets(
        &self,
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        group_id: &str,
    ) -> ErrorCode {
        let partition = crate::group::partition_for_group(group_id, self.offsets_partitions);
        let tp = TopicPartition::new(CONSUMER_OFFSETS, partition);
        let results = self.verify(transactional_id, producer_id, producer_epoch, vec![tp]).await;
        results.into_iter().map(|(_, code)| code).next().unwrap_or(ErrorCode::CoordinatorNotAvailable)
    }
}

/// A request token unique among requests in flight.
pub fn next_token() -> RequestToken {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    RequestToken(NEXT.fetch_add(1, Ordering::Relaxed))
}
