//! The task that owns the transaction coordinator's state machine: executes its actions
//! (answers, replicated appends to `__transaction_state`, markers), loads and unloads
//! partitions as leadership moves, and ticks it at its deadlines.

use super::{markers, Command, TxnRequest, TRANSACTION_STATE};
use crate::broker::Broker;
use crate::clock::now_ms;
use crate::internal_topics::{self, PendingAppends};
use crate::txn::{Action, AppendId, RequestToken, Response, TransactionCoordinator};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Weak};
use strata_protocol::ResponseBody;
use tokio::sync::{mpsc, oneshot};

pub(super) struct Task {
    broker: Weak<Broker>,
    coordinator: TransactionCoordinator,
    waiting: HashMap<RequestToken, oneshot::Sender<ResponseBody>>,
    /// Partitions loaded, with the leader epoch (coordinator epoch) they were loaded in.
    owned: BTreeMap<i32, i32>,
    pending: PendingAppends<AppendId>,
    internal: mpsc::UnboundedSender<Command>,
}

impl Task {
    pub(super) fn new(
        broker: Weak<Broker>,
        coordinator: TransactionCoordinator,
        pending: PendingAppends<AppendId>,
        internal: mpsc::UnboundedSender<Command>,
    ) -> Task {
        Task { broker, coordinator, waiting: HashMap::new(), owned: BTreeMap::new(), pending, internal }
    }

    pub(super) async fn run(
        mut self,
        mut rx: mpsc::Receiver<Command>,
        mut internal: mpsc::UnboundedReceiver<Command>,
    ) {
        loop {
            let sleep = internal_topics::until_deadline(self.coordinator.next_deadline(), now_ms());
            tokio::select! {
                biased;
                Some(command) = internal.recv() => self.handle(command),
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
            Command::Leadership { led, partitions } => self.leadership(&broker, led, partitions),
            Command::AppendProgress(partition) => self.progress(&broker, partition),
            Command::Snapshot(reply) => {
                let _ = reply.send(self.coordinator.metrics_snapshot());
            }
            Command::MarkersDone { id, results } => {
                let actions = self.coordinator.markers_complete(id, &results, now_ms());
                self.execute(actions);
            }
            Command::Verify { transactional_id, producer_id, producer_epoch, partitions, reply } => {
                let result = self.coordinator.verify_partitions(
                    &transactional_id,
                    producer_id,
                    producer_epoch,
                    &partitions,
                );
                let _ = reply.send(result);
            }
            Command::Call { meta, request, reply } => {
                let now = now_ms();
                let awaiting = internal_topics::awaiting_load(&broker, TRANSACTION_STATE, &self.owned);
                self.coordinator.set_awaiting_load(awaiting);
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
                let image = broker.metadata.current();
                let exists = |topic: &str, partition: i32| image.partition(topic, partition).is_some();
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

    /// Loads the partitions newly led (or led in a new epoch) and unloads those lost.
    fn leadership(&mut self, broker: &Arc<Broker>, led: BTreeMap<i32, i32>, partitions: i32) {
        if partitions > 0
            && self.owned.is_empty()
            && partitions != self.coordinator.config().transaction_state_log_num_partitions
        {
            tracing::warn!(
                partitions,
                configured = self.coordinator.config().transaction_state_log_num_partitions,
                "__transaction_state has another partition count than configured; using the topic's"
            );
        }
        let lost: Vec<i32> =
            self.owned.iter().filter(|(p, e)| led.get(p) != Some(e)).map(|(p, _)| *p).collect();
        for partition in lost {
            self.owned.remove(&partition);
            let actions = self.coordinator.unload(partition, now_ms());
            self.execute(actions);
        }
        for (&partition, &epoch) in &led {
            if self.owned.contains_key(&partition) {
                continue;
            }
            let Some(p) = broker.replicas.get(TRANSACTION_STATE, partition).filter(|p| p.is_leader()) else {
                continue;
            };
            self.owned.insert(partition, epoch);
            let mut actions = self.coordinator.begin_load(partition, epoch, now_ms());
            let c = &mut self.coordinator;
            let mut bad = 0usize;
            let replayed = internal_topics::replay(&p, |batch, key, value| {
                if !batch.is_control && c.replay(partition, key, value).is_err() {
                    bad += 1;
                }
            });
            if let Err(code) = replayed {
                tracing::error!(
                    partition,
                    error = code.name(),
                    "cannot replay __transaction_state; not serving it"
                );
                self.owned.remove(&partition);
                actions.extend(self.coordinator.unload(partition, now_ms()));
                self.execute(actions);
                continue;
            }
            if bad > 0 {
                tracing::warn!(partition, records = bad, "skipped unreadable __transaction_state records");
            }
            actions.extend(self.coordinator.complete_load(partition, now_ms()));
            tracing::info!(
                partition,
                coordinator_epoch = epoch,
                "transaction coordinator loaded a partition"
            );
            self.execute(actions);
        }
    }

    /// Completes the replicated appends of `partition`, in order.
    fn progress(&mut self, broker: &Arc<Broker>, partition: i32) {
        let (done, head) = self.pending.progress(broker, partition);
        let mut actions = Vec::new();
        for (id, result) in done {
            actions.extend(self.coordinator.append_complete(id, result, now_ms()));
        }
        if let Some(head) = head {
            self.watch(partition, head);
        }
        self.execute(actions);
    }

    fn watch(&self, partition: i32, head: internal_topics::Appended) {
        let deadline = self.pending.head_deadline(partition).unwrap_or_else(tokio::time::Instant::now);
        let tx = self.internal.clone();
        tokio::spawn(async move {
            internal_topics::wait_replicated(head, deadline).await;
            let _ = tx.send(Command::AppendProgress(partition));
        });
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
                    match internal_topics::append(
                        &broker,
                        TRANSACTION_STATE,
                        partition,
                        &encoded,
                        None,
                        now_ms(),
                    ) {
                        Err(code) => queue.extend(self.coordinator.append_complete(id, Err(code), now_ms())),
                        Ok(appended) => {
                            if self.pending.push(partition, id, appended) {
                                let (done, head) = self.pending.progress(&broker, partition);
                                for (id, result) in done {
                                    queue.extend(self.coordinator.append_complete(id, result, now_ms()));
                                }
                                if let Some(head) = head {
                                    self.watch(partition, head);
                                }
                            }
                        }
                    }
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
                    let marker = crate::markers::MarkerWrite {
                        producer_id,
                        producer_epoch,
                        coordinator_epoch,
                        commit: result.is_commit(),
                    };
                    let tx = self.internal.clone();
                    let broker = broker.clone();
                    tokio::spawn(async move {
                        let results = markers::write_everywhere(&broker, &marker, partitions).await;
                        let _ = tx.send(Command::MarkersDone { id, results });
                    });
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
