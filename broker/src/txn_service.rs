//! The async shell around the transaction coordinator's state machine ([`crate::txn`]),
//! built like [`crate::group_service`]: one task owns the coordinator, executes its
//! actions (responses, appends to `__transaction_state`, transaction markers through
//! [`crate::markers`]) and wakes it at its next deadline (transaction timeouts, id
//! expiry, marker retries).
//!
//! `__transaction_state` is created on first use with
//! `transaction.state.log.num.partitions` partitions (compacted); an existing one is
//! replayed at start-up, and transactions found prepared resume writing their markers.

use crate::broker::Broker;
use crate::handlers::now_ms;
use crate::internal_topics::{self, CONSUMER_OFFSETS};
use crate::markers::{write_marker, MarkerWrite};
use crate::txn::{
    Action, RequestMeta, RequestToken, Response, TopicPartition, TransactionCoordinator, TxnConfig,
};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Weak};
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
    EnsureTopic {
        reply: oneshot::Sender<Result<(), ErrorCode>>,
    },
    Verify {
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<TopicPartition>,
        reply: oneshot::Sender<Verification>,
    },
}

/// Handle to the transaction coordinator task.
#[derive(Debug, Clone)]
pub struct TxnService {
    tx: mpsc::Sender<Command>,
    /// `__consumer_offsets` partitions as the coordinator counts them, so TxnOffsetCommit
    /// verification names the partition AddOffsetsToTxn added.
    offsets_partitions: i32,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::Call { meta, .. } => write!(f, "Call({:?})", meta.token),
            Command::EnsureTopic { .. } => f.write_str("EnsureTopic"),
            Command::Verify { transactional_id, .. } => write!(f, "Verify({transactional_id})"),
        }
    }
}

fn txn_config(broker: &Broker) -> TxnConfig {
    let raw = &broker.config.raw;
    let get = |k: &str| raw.get(k).and_then(|v| v.parse::<i64>().ok());
    let d = TxnConfig::default();
    let topic_partitions = |name: &str, configured: Option<i64>, default: i32| {
        broker.topics.get(name).map_or(configured.map_or(default, |v| v as i32), |m| m.partitions)
    };
    TxnConfig {
        transaction_state_log_num_partitions: topic_partitions(
            TRANSACTION_STATE,
            get("transaction.state.log.num.partitions"),
            d.transaction_state_log_num_partitions,
        ),
        offsets_topic_num_partitions: topic_partitions(
            CONSUMER_OFFSETS,
            get("offsets.topic.num.partitions"),
            d.offsets_topic_num_partitions,
        ),
        transaction_max_timeout_ms: get("transaction.max.timeout.ms")
            .map_or(d.transaction_max_timeout_ms, |v| v as i32),
        transactional_id_expiration_ms: get("transactional.id.expiration.ms")
            .unwrap_or(d.transactional_id_expiration_ms),
        abort_timed_out_transaction_cleanup_interval_ms: get(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        )
        .unwrap_or(d.abort_timed_out_transaction_cleanup_interval_ms),
        remove_expired_transaction_cleanup_interval_ms: get(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
        )
        .unwrap_or(d.remove_expired_transaction_cleanup_interval_ms),
        ..d
    }
}

impl TxnService {
    /// Starts the coordinator task; an existing `__transaction_state` is loaded first.
    pub fn start(broker: &Arc<Broker>) -> TxnService {
        let (tx, rx) = mpsc::channel(1024);
        let ids = Arc::downgrade(broker);
        let source = move || -> Result<i64, ErrorCode> {
            let broker = ids.upgrade().ok_or(ErrorCode::CoordinatorNotAvailable)?;
            broker.producer_ids.next_id().map_err(|e| {
                tracing::error!(error = %e, "cannot persist the producer id block");
                ErrorCode::UnknownServerError
            })
        };
        let config = txn_config(broker);
        let offsets_partitions = config.offsets_topic_num_partitions;
        let task = Task {
            broker: Arc::downgrade(broker),
            coordinator: TransactionCoordinator::new(config, Box::new(source)),
            waiting: HashMap::new(),
            loaded: false,
        };
        tokio::spawn(task.run(rx));
        TxnService { tx, offsets_partitions }
    }

    /// Creates and loads `__transaction_state` if that has not happened yet.
    pub async fn ensure_topic(&self) -> Result<(), ErrorCode> {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Command::EnsureTopic { reply }).await.is_err() {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        rx.await.unwrap_or(Err(ErrorCode::CoordinatorNotAvailable))
    }

    /// Sends a request to the coordinator and waits for its answer.
    pub async fn call(&self, meta: RequestMeta, request: TxnRequest) -> Option<ResponseBody> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(Command::Call { meta, request: Box::new(request), reply }).await.ok()?;
        rx.await.ok()
    }

    /// KIP-890 part 1: may `producer_id`/`producer_epoch` of `transactional_id` write
    /// transactional data to `partitions` now?
    pub async fn verify(
        &self,
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<TopicPartition>,
    ) -> Verification {
        let (reply, rx) = oneshot::channel();
        let fallback: Verification =
            partitions.iter().map(|tp| (tp.clone(), ErrorCode::CoordinatorNotAvailable)).collect();
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

struct Task {
    broker: Weak<Broker>,
    coordinator: TransactionCoordinator,
    waiting: HashMap<RequestToken, oneshot::Sender<ResponseBody>>,
    loaded: bool,
}

impl Task {
    async fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        if let Some(broker) = self.broker.upgrade() {
            if broker.topics.get(TRANSACTION_STATE).is_some() {
                let _ = self.load(&broker);
            }
        }
        loop {
            let sleep = internal_topics::until_deadline(self.coordinator.next_deadline(), now_ms());
            tokio::select! {
                command = rx.recv() => match command {
                    None => return,
                    Some(command) => self.handle(command),
                },
                _ = tokio::time::sleep(sleep) => {
                    let actions = self.coordinator.tick(now_ms());
                    self.execute(actions);
                }
            }
        }
    }

    fn handle(&mut self, command: Command) {
        let Some(broker) = self.broker.upgrade() else { return };
        match command {
            Command::EnsureTopic { reply } => {
                let _ = reply.send(self.load(&broker));
            }
            Command::Verify { transactional_id, producer_id, producer_epoch, partitions, reply } => {
                let _ = self.load(&broker);
                let result = self.coordinator.verify_partitions(
                    &transactional_id,
                    producer_id,
                    producer_epoch,
                    &partitions,
                );
                let _ = reply.send(result);
            }
            Command::Call { meta, request, reply } => {
                let _ = self.load(&broker);
                let now = now_ms();
                let request = *request;
                let immediate: Option<ResponseBody> = match &request {
                    TxnRequest::Describe(r) => Some(self.coordinator.describe_transactions(r).into()),
                    TxnRequest::List(r) => Some(self.coordinator.list_transactions(r, now).into()),
                    _ => None,
                };
                if let Some(response) = immediate {
                    let _ = reply.send(response);
                    return;
                }
                self.waiting.insert(meta.token, reply);
                let exists = |topic: &str, partition: i32| broker.replicas.get(topic, partition).is_some();
                let c = &mut self.coordinator;
                let actions = match request {
                    TxnRequest::InitProducerId(r) => c.init_producer_id(&meta, &r, now),
                    TxnRequest::AddPartitions(r) => c.add_partitions_to_txn(&meta, &r, &exists, now),
                    TxnRequest::AddOffsets(r) => c.add_offsets_to_txn(&meta, &r, now),
                    TxnRequest::EndTxn(r) => c.end_txn(&meta, &r, now),
                    TxnRequest::Describe(_) | TxnRequest::List(_) => Vec::new(),
                };
                self.execute(actions);
            }
        }
    }

    fn load(&mut self, broker: &Arc<Broker>) -> Result<(), ErrorCode> {
        if self.loaded {
            return Ok(());
        }
        let partitions = self.coordinator.config().transaction_state_log_num_partitions;
        internal_topics::ensure_coordinator_topic(
            broker,
            TRANSACTION_STATE,
            partitions,
            "transaction.state.log.segment.bytes",
            "uncompressed",
        )?;
        let mut actions = Vec::new();
        for partition in 0..partitions {
            let epoch = broker.replicas.get(TRANSACTION_STATE, partition).map_or(0, |p| p.leader_epoch());
            actions.extend(self.coordinator.begin_load(partition, epoch, now_ms()));
            let c = &mut self.coordinator;
            let mut bad = 0usize;
            internal_topics::replay(broker, TRANSACTION_STATE, partition, |batch, key, value| {
                if !batch.is_control && c.replay(partition, key, value).is_err() {
                    bad += 1;
                }
            })?;
            if bad > 0 {
                tracing::warn!(partition, records = bad, "skipped unreadable __transaction_state records");
            }
            actions.extend(self.coordinator.complete_load(partition, now_ms()));
        }
        self.loaded = true;
        tracing::info!(partitions, "transaction coordinator loaded __transaction_state");
        self.execute(actions);
        Ok(())
    }

    fn execute(&mut self, actions: Vec<Action>) {
        let Some(broker) = self.broker.upgrade() else { return };
        let mut queue: VecDeque<Action> = actions.into();
        while let Some(action) = queue.pop_front() {
            match action {
                Action::Respond { token, response } => {
                    if let Some(reply) = self.waiting.remove(&token) {
                        let _ = reply.send(response_body(response));
                    }
                }
                Action::Append { id, partition, records } => {
                    let encoded: Vec<_> = records.iter().map(|r| (r.key_bytes(), r.value_bytes())).collect();
                    let result = internal_topics::append(
                        &broker,
                        TRANSACTION_STATE,
                        partition,
                        &encoded,
                        None,
                        now_ms(),
                    );
                    queue.extend(self.coordinator.append_complete(id, result, now_ms()));
                }
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
                    let results: Vec<(TopicPartition, ErrorCode)> = partitions
                        .into_iter()
                        .map(|tp| {
                            let code = match write_marker(&broker, &tp.topic, tp.partition, &marker) {
                                // A partition whose topic is gone is done (Kafka drops it).
                                ErrorCode::UnknownTopicOrPartition => ErrorCode::None,
                                code => code,
                            };
                            (tp, code)
                        })
                        .collect();
                    queue.extend(self.coordinator.markers_complete(id, &results, now_ms()));
                }
            }
        }
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
