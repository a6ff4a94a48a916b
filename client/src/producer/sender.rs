//! The sender: one loop that drains ready batches into per-broker Produce requests, and
//! one task per broker that seals (compresses) them, pipelines them on the broker's
//! connection and judges the answers ([`super::idempotence::judge`]). It also runs
//! the background work the answers call for: metadata refreshes, the idempotent epoch
//! bump (KIP-360) and AddPartitionsToTxn.

use super::accumulator::{DrainRules, ProducerBatch};
use super::config::Acks;
use super::idempotence::{judge, ProducerIdAndEpoch, Verdict};
use super::{Shared, State};
use crate::connection::Response;
use crate::error::{Error, Result};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use strata_protocol::messages::init_producer_id::InitProducerIdRequest;
use strata_protocol::messages::produce::{
    PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData,
};
use strata_protocol::{ApiKey, ErrorCode, RequestBody, ResponseBody};
use tokio::sync::mpsc;

type Reply = Pin<Box<dyn Future<Output = Result<Response>> + Send>>;

/// The sender loop; ends once the producer is closing and every batch is finished.
pub(crate) async fn run(shared: Arc<Shared>) {
    let mut nodes: HashMap<i32, mpsc::UnboundedSender<Vec<ProducerBatch>>> = HashMap::new();
    let mut known_cluster: Option<Arc<crate::metadata::Cluster>> = None;
    loop {
        let cluster = shared.client.cluster();
        let cluster_changed = !known_cluster.as_ref().is_some_and(|c| Arc::ptr_eq(c, &cluster));
        let now = Instant::now();
        let mut requests = Vec::new();
        let mut next_ready = None;
        let mut refresh = None;
        let mut bump = None;
        let mut add = None;
        let mut expired = Vec::new();
        {
            let mut guard = shared.lock();
            let st = &mut *guard;
            if st.closing && st.acc.is_empty() {
                break;
            }
            fail_unsendable(&shared, st);
            if cluster_changed {
                st.acc.refresh_meta(|t| {
                    cluster.topic(t).filter(|i| super::usable(i)).map(|i| super::topic_meta(i))
                });
                known_cluster = Some(cluster.clone());
            }
            if st.bump_needed && !st.bumping && st.total_in_flight == 0 {
                st.bumping = true;
                bump = Some(st.pid);
            }
            if let Some(txn) = st.txn.as_mut() {
                add = txn.take_pending();
            }
            if !st.bump_needed && !st.bumping {
                let State {
                    acc, txn, node_in_flight, total_in_flight, flush_up_to, closing, refresh, ..
                } = st;
                let max = shared.config.max_in_flight;
                let leader = |t: &str, p: i32| {
                    cluster
                        .partition(t, p)
                        .filter(|pi| pi.leader >= 0 && cluster.brokers.contains_key(&pi.leader))
                        .map(|pi| pi.leader)
                };
                loop {
                    let room = |n: i32| node_in_flight.get(&n).copied().unwrap_or(0) < max;
                    let txn_view = txn.as_ref();
                    let mut allowed =
                        |t: &Arc<str>, p: i32| txn_view.map_or(true, |x| x.partition_added(&(t.clone(), p)));
                    let mut rules = DrainRules {
                        now,
                        linger: shared.config.linger,
                        delivery_timeout: shared.config.delivery_timeout,
                        flush_up_to: *flush_up_to,
                        all_ready: *closing,
                        max_request_size: shared.config.max_request_size,
                        idempotent: shared.mode.idempotent,
                        leader: &leader,
                        node_has_room: &room,
                        partition_allowed: &mut allowed,
                    };
                    let drained = acc.drain(&mut rules);
                    next_ready = match (next_ready, drained.next_ready) {
                        (Some(a), Some(b)) => Some(std::cmp::min(a, b)),
                        (a, b) => a.or(b),
                    };
                    for b in drained.expired {
                        let e = Error::timeout(format!(
                            "{}-{} not delivered within delivery.timeout.ms",
                            b.topic, b.partition
                        ));
                        expired.push((b, e));
                    }
                    refresh.extend(drained.no_leader);
                    if drained.requests.is_empty() {
                        break;
                    }
                    for (node, batches) in drained.requests {
                        *node_in_flight.entry(node).or_default() += 1;
                        *total_in_flight += 1;
                        requests.push((node, batches));
                    }
                }
            }
            for (b, e) in expired {
                if let Some(txn) = st.txn.as_mut() {
                    // A transaction with a lost record cannot commit (as in Java).
                    txn.fail(e.clone());
                    txn.bump_epoch |= b.sequence >= 0;
                } else if b.sequence >= 0 {
                    // Its sequence may have reached the broker: the sequences start over.
                    st.bump_needed = true;
                }
                shared.metrics.batches_failed.fetch_add(1, Ordering::Relaxed);
                finish(&shared, st, b, Err(e));
            }
            if !st.refresh.is_empty() && !st.refreshing {
                st.refreshing = true;
                refresh = Some(std::mem::take(&mut st.refresh));
            }
        }
        shared.progress.notify_waiters();
        for (node, batches) in requests {
            let tx = nodes.entry(node).or_insert_with(|| spawn_node(&shared, node));
            if let Err(mpsc::error::SendError(batches)) = tx.send(batches) {
                let tx = spawn_node(&shared, node);
                let _ = tx.send(batches);
                nodes.insert(node, tx);
            }
        }
        if let Some(topics) = refresh {
            tokio::spawn(refresh_metadata(
                shared.clone(),
                topics.into_iter().map(|t| t.to_string()).collect(),
            ));
        }
        if let Some(pid) = bump {
            tokio::spawn(bump_epoch(shared.clone(), pid));
        }
        if let Some(partitions) = add {
            tokio::spawn(super::transactional::add_partitions(shared.clone(), partitions));
        }
        match next_ready {
            Some(at) => {
                let _ = tokio::time::timeout_at(at.into(), shared.wake.notified()).await;
            }
            None => shared.wake.notified().await,
        }
    }
}

/// Fails every batch not sent yet once the producer or its transaction failed.
fn fail_unsendable(shared: &Shared, st: &mut State) {
    let error = match (&st.fatal, st.txn.as_ref().map(|t| &t.phase)) {
        (Some(e), _) => e.clone(),
        (None, Some(super::TxnPhase::Abortable(e))) => super::transaction::abortable(e.clone()),
        (None, Some(super::TxnPhase::Fatal(e))) => e.clone(),
        _ => return,
    };
    for b in st.acc.take_unsent() {
        finish(shared, st, b, Err(error.clone()));
    }
}

/// Completes a batch's records and gives back its memory.
pub(crate) fn finish(
    shared: &Shared,
    st: &mut State,
    batch: ProducerBatch,
    result: super::record::BatchResult,
) {
    st.acc.completed(batch.id);
    shared.memory.add_permits(batch.memory);
    batch.slot.complete(result);
}

fn spawn_node(shared: &Arc<Shared>, node: i32) -> mpsc::UnboundedSender<Vec<ProducerBatch>> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(node_task(shared.clone(), node, rx));
    tx
}

/// One broker's requests: sealed and sent in drain order, answers taken in order.
async fn node_task(shared: Arc<Shared>, node: i32, mut jobs: mpsc::UnboundedReceiver<Vec<ProducerBatch>>) {
    let mut pending: VecDeque<(Reply, Vec<ProducerBatch>)> = VecDeque::new();
    let mut open = true;
    while open || !pending.is_empty() {
        tokio::select! {
            biased;
            reply = async {
                match pending.front_mut() {
                    Some(front) => (&mut front.0).await,
                    None => std::future::pending().await,
                }
            }, if !pending.is_empty() => {
                if let Some((_, batches)) = pending.pop_front() {
                    let answer = reply.and_then(|r| match r.body {
                        ResponseBody::Produce(p) => Ok(p),
                        _ => Err(Error::protocol(&format!("broker {node}"), "Produce answered with another API")),
                    });
                    on_answer(&shared, node, batches, answer);
                }
            }
            job = jobs.recv(), if open => match job {
                None => open = false,
                Some(mut batches) => match send(&shared, node, &mut batches).await {
                    Ok(Some(reply)) => pending.push_back((reply, batches)),
                    Ok(None) => on_acks0(&shared, node, batches),
                    Err(e) => on_answer(&shared, node, batches, Err(e)),
                },
            },
        }
    }
}

/// Seals `batches` and queues their Produce request; the reply to await, or `None`
/// with `acks=0`.
async fn send(shared: &Shared, node: i32, batches: &mut [ProducerBatch]) -> Result<Option<Reply>> {
    let conn = shared.client.broker(node).await?;
    let version = conn.version(ApiKey::Produce)?;
    if version < 3 {
        return Err(Error::UnsupportedVersion { api: ApiKey::Produce });
    }
    let pid = shared.lock().pid;
    let mut topics: Vec<TopicProduceData> = Vec::new();
    for b in batches.iter_mut() {
        let records = b.seal(pid)?;
        let data = PartitionProduceData { index: b.partition, records: Some(records) };
        match topics.iter_mut().find(|t| *t.name == *b.topic) {
            Some(t) => t.partition_data.push(data),
            None => topics.push(TopicProduceData { name: b.topic.to_string(), partition_data: vec![data] }),
        }
    }
    let body = RequestBody::Produce(ProduceRequest {
        transactional_id: shared.config.transactional_id.clone(),
        acks: shared.config.acks.as_i16(),
        timeout_ms: shared.config.client.request_timeout.as_millis().min(i32::MAX as u128) as i32,
        topic_data: topics,
    });
    if shared.config.acks == Acks::None {
        conn.send_without_response(version, &body).await?;
        return Ok(None);
    }
    shared.metrics.requests_sent.fetch_add(1, Ordering::Relaxed);
    let rx = conn.submit(version, &body).await?;
    Ok(Some(Box::pin(async move { conn.await_reply(rx).await })))
}

fn on_acks0(shared: &Shared, node: i32, batches: Vec<ProducerBatch>) {
    {
        let mut st = shared.lock();
        release_request(&mut st, node);
        for b in batches {
            if let Some(q) = st.acc.queue(&b.topic, b.partition) {
                q.seq.in_flight = q.seq.in_flight.saturating_sub(1);
            }
            finish(shared, &mut st, b, Ok((-1, -1)));
        }
    }
    shared.wake.notify_one();
    shared.progress.notify_waiters();
}

fn release_request(st: &mut State, node: i32) {
    if let Some(n) = st.node_in_flight.get_mut(&node) {
        *n = n.saturating_sub(1);
    }
    st.total_in_flight = st.total_in_flight.saturating_sub(1);
}

/// Judges each batch of a request by its partition's answer (or the request's failure).
fn on_answer(shared: &Shared, node: i32, batches: Vec<ProducerBatch>, answer: Result<ProduceResponse>) {
    let now = Instant::now();
    {
        let mut guard = shared.lock();
        let st = &mut *guard;
        release_request(st, node);
        for mut b in batches {
            let (verdict, offsets) = match &answer {
                Ok(r) => {
                    let part = r
                        .responses
                        .iter()
                        .filter(|t| *t.name == *b.topic)
                        .flat_map(|t| t.partition_responses.iter())
                        .find(|p| p.index == b.partition);
                    match part {
                        Some(p) => {
                            let code =
                                ErrorCode::from_code(p.error_code).unwrap_or(ErrorCode::UnknownServerError);
                            let seq = st
                                .acc
                                .queue(&b.topic, b.partition)
                                .map(|q| q.seq.clone())
                                .unwrap_or_default();
                            let verdict = match judge(code, b.sequence, &seq, shared.mode) {
                                Verdict::Fail(_) => Verdict::Fail(Error::Kafka {
                                    code,
                                    message: p.error_message.clone().filter(|m| !m.is_empty()),
                                }),
                                v => v,
                            };
                            if crate::error::refreshes_metadata(code) {
                                st.refresh.insert(b.topic.clone());
                            }
                            (verdict, (p.base_offset, p.log_append_time_ms))
                        }
                        None => (
                            Verdict::Fail(Error::protocol(
                                "?",
                                format!("no answer for {}-{}", b.topic, b.partition),
                            )),
                            (-1, -1),
                        ),
                    }
                }
                Err(e) => {
                    if e.refreshes_metadata() {
                        st.refresh.insert(b.topic.clone());
                    }
                    if e.is_retriable() {
                        (Verdict::Retry, (-1, -1))
                    } else {
                        (Verdict::Fail(e.clone()), (-1, -1))
                    }
                }
            };
            if let Some(q) = st.acc.queue(&b.topic, b.partition) {
                q.seq.in_flight = q.seq.in_flight.saturating_sub(1);
            }
            let verdict = match verdict {
                Verdict::Retry | Verdict::RetryAfterEpochBump
                    if b.attempts >= shared.config.retries
                        || now.duration_since(b.created) >= shared.config.delivery_timeout =>
                {
                    Verdict::Fail(Error::timeout(format!(
                        "{}-{} not delivered within delivery.timeout.ms or retries",
                        b.topic, b.partition
                    )))
                }
                v => v,
            };
            match verdict {
                Verdict::Success => {
                    if b.sequence >= 0 {
                        if let Some(q) = st.acc.queue(&b.topic, b.partition) {
                            q.seq.acked(b.sequence, b.records);
                        }
                    }
                    shared.metrics.records_acked.fetch_add(b.records as u64, Ordering::Relaxed);
                    finish(shared, st, b, Ok(offsets));
                }
                Verdict::Retry | Verdict::RetryAfterEpochBump => {
                    tracing::debug!(topic = %b.topic, partition = b.partition, sequence = b.sequence, attempts = b.attempts, "retrying a batch");
                    shared.metrics.batches_retried.fetch_add(1, Ordering::Relaxed);
                    if matches!(verdict, Verdict::RetryAfterEpochBump) {
                        st.bump_needed = true;
                    }
                    b.retry_at = Some(now + shared.config.client.backoff(b.attempts.min(10)));
                    b.attempts += 1;
                    st.acc.reenqueue(b);
                }
                Verdict::Fail(e) => {
                    if let Some(txn) = st.txn.as_mut() {
                        txn.fail(e.clone());
                        // The broker's sequence lags ours: the abort bumps the epoch.
                        txn.bump_epoch |= b.sequence >= 0;
                    } else if e.is_fatal() {
                        st.fatal.get_or_insert_with(|| e.clone());
                    } else if b.sequence >= 0 && shared.mode.idempotent {
                        // The broker's sequence for the partition now lags ours.
                        st.bump_needed = true;
                    }
                    let e = match &st.txn {
                        Some(_) if !e.is_fatal() => super::transaction::abortable(e),
                        Some(_) => super::transaction::fatal(e),
                        None => e,
                    };
                    shared.metrics.batches_failed.fetch_add(1, Ordering::Relaxed);
                    finish(shared, st, b, Err(e));
                }
            }
        }
    }
    shared.wake.notify_one();
    shared.progress.notify_waiters();
}

async fn refresh_metadata(shared: Arc<Shared>, topics: Vec<String>) {
    if let Err(e) = shared.client.refresh_metadata(&topics).await {
        tracing::debug!(error = %e, "producer metadata refresh failed");
    }
    shared.wake.notify_one();
    tokio::time::sleep(shared.config.client.backoff(0)).await;
    shared.lock().refreshing = false;
    shared.wake.notify_one();
}

/// InitProducerId for an idempotent producer without a transactional id: a new id, or
/// with v3+ (KIP-360) `current` with its epoch bumped. Retried up to `max.block.ms`.
pub(crate) async fn init_idempotent_pid(
    shared: &Shared,
    current: ProducerIdAndEpoch,
) -> Result<ProducerIdAndEpoch> {
    let deadline = Instant::now() + shared.config.max_block;
    let mut attempt = 0;
    loop {
        let result = async {
            let conn = shared.client.any_connection().await?;
            let version = conn.version(ApiKey::InitProducerId)?;
            let (id, epoch) = if version >= 3 { (current.id, current.epoch) } else { (-1, -1) };
            let request = InitProducerIdRequest {
                transactional_id: None,
                transaction_timeout_ms: i32::MAX,
                producer_id: id,
                producer_epoch: epoch,
                ..InitProducerIdRequest::default()
            };
            let ResponseBody::InitProducerId(r) =
                conn.call_at(version, RequestBody::InitProducerId(request)).await?.body
            else {
                return Err(Error::protocol(conn.addr(), "InitProducerId answered with another API"));
            };
            match Error::from_code(r.error_code, None) {
                Some(e) => Err(e),
                None => Ok(ProducerIdAndEpoch { id: r.producer_id, epoch: r.producer_epoch }),
            }
        }
        .await;
        match result {
            Err(e) if e.is_retriable() && Instant::now() < deadline => {
                tokio::time::sleep(shared.config.client.backoff(attempt)).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}

async fn bump_epoch(shared: Arc<Shared>, current: ProducerIdAndEpoch) {
    let result = init_idempotent_pid(&shared, current).await;
    {
        let mut st = shared.lock();
        match result {
            Ok(pid) => {
                tracing::info!(
                    producer_id = pid.id,
                    epoch = pid.epoch,
                    "producer epoch bumped; sequences reset"
                );
                st.pid = pid;
                st.acc.reset_sequences();
                st.bump_needed = false;
                shared.metrics.epoch_bumps.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                tracing::warn!(error = %e, "producer epoch bump failed");
                if !e.is_retriable() {
                    st.fatal.get_or_insert(e);
                }
            }
        }
        st.bumping = false;
    }
    shared.wake.notify_one();
}
