//! The transaction coordinator as a [`Shard`] of the coordinator runtime, and the handle
//! the handlers use ([`TxnService`]).
//!
//! `__transaction_state` is created through the controller on first use with
//! `transaction.state.log.num.partitions` partitions,
//! `transaction.state.log.replication.factor` replicas and
//! `transaction.state.log.min.isr` (compacted). The coordinator owns the partitions this
//! broker leads, loading each when it becomes leader (its leader epoch is the coordinator
//! epoch) and resuming the markers of transactions found prepared; markers go to each
//! partition's leader, local or remote ([`super::remote`]), and count once replicated.

use super::markers::MarkerWrite;
use super::remote;
use super::{Action, AppendId, MarkerId, RequestMeta, RequestToken, Response, TopicPartition};
use super::{TransactionCoordinator, TxnConfig, TxnCoordinatorSnapshot};
use crate::coordinator::group::service::GroupService;
use crate::coordinator::internal_topics::{self, CONSUMER_OFFSETS, TRANSACTION_STATE};
use crate::coordinator::runtime::{self, Coordinator, Events, Handled, Output, Shard};
use crate::coordinator::writer::{BatchContext, LogWriter};
use crate::node::Node;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use strata_protocol::messages::{
    add_offsets_to_txn::AddOffsetsToTxnRequest, add_partitions_to_txn::AddPartitionsToTxnRequest,
    describe_transactions::DescribeTransactionsRequest, end_txn::EndTxnRequest,
    init_producer_id::InitProducerIdRequest, list_transactions::ListTransactionsRequest,
};
use strata_protocol::{ErrorCode, ResponseBody};
use tokio::sync::oneshot;

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

/// What reaches the transaction coordinator besides client requests.
#[derive(Debug)]
pub enum TxnEvent {
    /// KIP-890 verification of a transactional write.
    Verify {
        /// The producer's transactional id.
        transactional_id: String,
        /// Its producer id.
        producer_id: i64,
        /// Its epoch.
        producer_epoch: i16,
        /// The partitions it writes to.
        partitions: Vec<TopicPartition>,
        /// Where the verdict goes.
        reply: oneshot::Sender<Verification>,
    },
    /// The markers of an [`Action::WriteMarkers`] were written (or not), per partition.
    MarkersDone {
        /// Which write.
        id: MarkerId,
        /// Outcome per partition.
        results: Vec<(TopicPartition, ErrorCode)>,
    },
    /// A metrics scrape.
    Snapshot(oneshot::Sender<TxnCoordinatorSnapshot>),
}

/// A marker write for every partition of a transaction, started outside the task.
#[derive(Debug)]
pub struct MarkerEffect {
    id: MarkerId,
    marker: MarkerWrite,
    partitions: Vec<TopicPartition>,
}

/// The transaction coordinator's state machine as the runtime drives it.
pub struct TxnShard {
    node: Arc<Node>,
    /// Told of markers written to `__consumer_offsets`.
    groups: GroupService,
    coordinator: TransactionCoordinator,
}

impl std::fmt::Debug for TxnShard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxnShard").finish_non_exhaustive()
    }
}

/// The coordinator's settings: the configured ones, with the partition counts the internal
/// topics really have once they exist (the ids hash over those).
pub(super) fn txn_config(broker: &Node) -> TxnConfig {
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

/// A coordinator with the partition counts the metadata shows now, taking producer ids
/// from `node`'s blocks.
fn coordinator(node: &Arc<Node>) -> TransactionCoordinator {
    let ids = node.clone();
    let source = move || -> Result<i64, ErrorCode> { ids.producer_ids.next_id() };
    TransactionCoordinator::new(txn_config(node), Box::new(source))
}

/// The coordinator's actions as runtime outputs.
fn outputs(actions: Vec<Action>) -> Vec<Output<TxnShard>> {
    actions
        .into_iter()
        .map(|action| match action {
            Action::Respond { token, response } => {
                Output::Respond { token: token.0, response: response_body(response) }
            }
            Action::Append { id, partition, records } => Output::Append {
                id,
                partition,
                producer: None,
                records: records.iter().map(|r| (r.key_bytes(), r.value_bytes())).collect(),
            },
            Action::WriteMarkers {
                id,
                producer_id,
                producer_epoch,
                coordinator_epoch,
                result,
                partitions,
                ..
            } => {
                let marker = MarkerWrite {
                    producer_id,
                    producer_epoch,
                    coordinator_epoch,
                    commit: result.is_commit(),
                };
                Output::Effect(MarkerEffect { id, marker, partitions })
            }
        })
        .collect()
}

impl Shard for TxnShard {
    type Meta = RequestMeta;
    type Request = TxnRequest;
    type Event = TxnEvent;
    type AppendId = AppendId;
    type Effect = MarkerEffect;
    const TOPIC: &'static str = TRANSACTION_STATE;
    const NAME: &'static str = "transaction";

    fn token(meta: &RequestMeta) -> u64 {
        meta.token.0
    }

    fn handle(&mut self, meta: RequestMeta, request: TxnRequest, now: i64) -> Handled<Self> {
        let image = self.node.metadata.current();
        let exists = |topic: &str, partition: i32| image.partition(topic, partition).is_some();
        let c = &mut self.coordinator;
        let actions = match request {
            TxnRequest::Describe(r) => return Handled::Now(c.describe_transactions(&r).into()),
            TxnRequest::List(r) => return Handled::Now(c.list_transactions(&r, now).into()),
            TxnRequest::InitProducerId(r) => c.init_producer_id(&meta, &r, now),
            TxnRequest::AddPartitions(r) => c.add_partitions_to_txn(&meta, &r, &exists, now),
            TxnRequest::AddOffsets(r) => {
                if let Some(t) = image.topic(CONSUMER_OFFSETS) {
                    c.set_offsets_topic_num_partitions(t.partitions.len() as i32);
                }
                c.add_offsets_to_txn(&meta, &r, now)
            }
            TxnRequest::EndTxn(r) => c.end_txn(&meta, &r, now),
        };
        Handled::Later(outputs(actions))
    }

    fn event(&mut self, event: TxnEvent, now: i64) -> Vec<Output<Self>> {
        match event {
            TxnEvent::Verify { transactional_id, producer_id, producer_epoch, partitions, reply } => {
                let c = &self.coordinator;
                let _ = reply.send(c.verify_partitions(
                    &transactional_id,
                    producer_id,
                    producer_epoch,
                    &partitions,
                ));
                Vec::new()
            }
            TxnEvent::MarkersDone { id, results } => {
                outputs(self.coordinator.markers_complete(id, &results, now))
            }
            TxnEvent::Snapshot(reply) => {
                let _ = reply.send(self.coordinator.metrics_snapshot());
                Vec::new()
            }
        }
    }

    fn tick(&mut self, now: i64) -> Vec<Output<Self>> {
        outputs(self.coordinator.tick(now))
    }

    fn next_deadline(&self) -> Option<i64> {
        self.coordinator.next_deadline()
    }

    fn append_complete(
        &mut self,
        id: AppendId,
        result: Result<(), ErrorCode>,
        now: i64,
    ) -> Vec<Output<Self>> {
        outputs(self.coordinator.append_complete(id, result, now))
    }

    fn set_awaiting_load(&mut self, partitions: BTreeSet<i32>) {
        self.coordinator.set_awaiting_load(partitions);
    }

    /// The topics may have other partition counts than configured (or than when the
    /// coordinator was built): hash over theirs.
    fn resize(&mut self, _partitions: i32) {
        let (now, fresh) = (self.coordinator.config(), txn_config(&self.node));
        if (now.transaction_state_log_num_partitions, now.offsets_topic_num_partitions)
            != (fresh.transaction_state_log_num_partitions, fresh.offsets_topic_num_partitions)
        {
            tracing::info!(
                transaction_state = fresh.transaction_state_log_num_partitions,
                consumer_offsets = fresh.offsets_topic_num_partitions,
                "transaction coordinator uses the internal topics' partition counts"
            );
            self.coordinator = coordinator(&self.node);
        }
    }

    fn begin_load(&mut self, partition: i32, leader_epoch: i32, now: i64) -> Vec<Output<Self>> {
        outputs(self.coordinator.begin_load(partition, leader_epoch, now))
    }

    fn replay(
        &mut self,
        partition: i32,
        batch: BatchContext,
        key: Bytes,
        value: Option<Bytes>,
    ) -> Result<(), ()> {
        if batch.is_control {
            return Ok(());
        }
        self.coordinator.replay(partition, key, value).map_err(|_| ())
    }

    fn complete_load(&mut self, partition: i32, now: i64) -> Vec<Output<Self>> {
        outputs(self.coordinator.complete_load(partition, now))
    }

    fn unload(&mut self, partition: i32, now: i64) -> Vec<Output<Self>> {
        outputs(self.coordinator.unload(partition, now))
    }

    fn start_effect(&mut self, effect: MarkerEffect, events: Events<Self>) {
        let (node, groups) = (self.node.clone(), self.groups.clone());
        tokio::spawn(async move {
            let MarkerEffect { id, marker, partitions } = effect;
            let results = remote::write_everywhere(&node, &groups, &marker, partitions).await;
            events.send(TxnEvent::MarkersDone { id, results });
        });
    }
}

/// The transaction coordinator as handlers see it.
#[derive(Debug, Clone)]
pub struct TxnService {
    node: Arc<Node>,
    /// The configured partition count of `__transaction_state`, until the topic exists.
    state_partitions: i32,
    coordinator: Coordinator<TxnShard>,
}

impl TxnService {
    /// Starts the coordinator on `node`'s partitions; it owns nothing until the metadata
    /// says this broker leads partitions of `__transaction_state`
    /// ([`TxnService::leadership`]). Markers it writes to `__consumer_offsets` are passed
    /// on to `groups`.
    pub fn start(node: Arc<Node>, groups: GroupService) -> TxnService {
        let state_partitions = node.config.coordinators.txn.transaction_state_log_num_partitions;
        let timeout = Duration::from_millis(node.config.cluster.inter_broker_request_timeout_ms.min(30_000));
        let shard = TxnShard { coordinator: coordinator(&node), node: node.clone(), groups };
        let coordinator = Coordinator::start(shard, Arc::new(LogWriter::new(node.clone())), timeout);
        TxnService { node, state_partitions, coordinator }
    }

    /// Creates `__transaction_state` through the controller if it does not exist yet.
    pub async fn ensure_topic(&self) -> Result<(), ErrorCode> {
        let node = &self.node;
        if node.metadata.current().topic(TRANSACTION_STATE).is_some() {
            return Ok(());
        }
        let c = &node.config.cluster;
        internal_topics::ensure_coordinator_topic(
            node,
            TRANSACTION_STATE,
            self.state_partitions,
            c.transaction_state_log_replication_factor,
            node.config.coordinators.transaction_state_log_segment_bytes,
            &[
                ("compression.type", "uncompressed".to_string()),
                ("min.insync.replicas", c.transaction_state_log_min_isr.to_string()),
            ],
        )
        .await
    }

    /// What a metrics scrape reports of the coordinator (`None` if its task is gone).
    pub async fn snapshot(&self) -> Option<TxnCoordinatorSnapshot> {
        let (reply, rx) = oneshot::channel();
        self.coordinator.notify(TxnEvent::Snapshot(reply));
        rx.await.ok()
    }

    /// The `__transaction_state` partition that coordinates `transactional_id`.
    pub fn partition_for(&self, transactional_id: &str) -> i32 {
        let image = self.node.metadata.current();
        let count =
            image.topic(TRANSACTION_STATE).map_or(self.state_partitions, |t| t.partitions.len() as i32);
        crate::coordinator::group::partition_for_group(transactional_id, count)
    }

    /// The metadata says this broker leads `led` (partition → leader epoch) of the
    /// topic's `partitions`: partitions newly led are loaded, lost ones unloaded.
    pub fn leadership(&self, led: BTreeMap<i32, i32>, partitions: i32) {
        self.coordinator.leadership(led, partitions);
    }

    /// Sends a request to the coordinator and waits for its answer.
    pub async fn call(&self, meta: RequestMeta, request: TxnRequest) -> Option<ResponseBody> {
        self.coordinator.call(meta, request).await
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
        let broker = &self.node;
        let partition = self.partition_for(&transactional_id);
        let leader =
            broker.metadata.current().partition(TRANSACTION_STATE, partition).map_or(-1, |p| p.leader);
        if leader != broker.config.node_id {
            return remote::verify_remote(
                broker,
                leader,
                transactional_id,
                producer_id,
                producer_epoch,
                partitions,
            )
            .await;
        }
        let (reply, rx) = oneshot::channel();
        let event = TxnEvent::Verify { transactional_id, producer_id, producer_epoch, partitions, reply };
        if !self.coordinator.send(event).await {
            return fallback;
        }
        rx.await.unwrap_or(fallback)
    }

    /// KIP-890 part 1 for TxnOffsetCommit: may `producer_id`/`producer_epoch` of
    /// `transactional_id` commit offsets of `group_id` now, that is, did AddOffsetsToTxn
    /// add the group's `__consumer_offsets` partition to its ongoing transaction? The
    /// coordinator's error as Kafka's verification gives it (see
    /// [`crate::coordinator::txn::verification_error_for_client`] for what the client is told).
    pub async fn verify_offsets(
        &self,
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        group_id: &str,
    ) -> ErrorCode {
        // The group's partition as the group coordinator hashes it: over the topic's count.
        let image = self.node.metadata.current();
        let configured = self.node.config.coordinators.txn.offsets_topic_num_partitions;
        let offsets_partitions =
            image.topic(CONSUMER_OFFSETS).map_or(configured, |t| t.partitions.len() as i32);
        let partition = crate::coordinator::group::partition_for_group(group_id, offsets_partitions);
        let tp = TopicPartition::new(CONSUMER_OFFSETS, partition);
        let results = self.verify(transactional_id, producer_id, producer_epoch, vec![tp]).await;
        results.into_iter().map(|(_, code)| code).next().unwrap_or(ErrorCode::CoordinatorNotAvailable)
    }
}

fn response_body(response: Response) -> ResponseBody {
    match response {
        Response::InitProducerId(r) => r.into(),
        Response::AddPartitionsToTxn(r) => r.into(),
        Response::AddOffsetsToTxn(r) => r.into(),
        Response::EndTxn(r) => r.into(),
    }
}

/// A request token unique among requests in flight.
pub fn next_token() -> RequestToken {
    RequestToken(runtime::next_token())
}
