//! The sender: Produce requests are drained from the accumulator and written to the
//! brokers' connections by whoever notices they are ready, with no task hand-off: the
//! caller whose append fills a batch, the connection's reader task that takes an answer
//! (and so frees a slot in flight), or the sender task, which is left the timed and
//! background work: lingering batches, retries after their backoff, connecting to
//! brokers, metadata refreshes, the idempotent epoch bump (KIP-360) and
//! AddPartitionsToTxn. Answers are judged ([`super::idempotence::judge`]) on the reader
//! task as they are read.
//!
//! A drain and the sending of what it took happen under `Shared::send_lock`, taken
//! before the state lock is let go, so requests reach each connection in drain order
//! (which per-partition sequence numbers need) while appenders go on.

use super::accumulator::{DrainRules, ProducerBatch};
use super::config::Acks;
use super::idempotence::{judge, ProducerIdAndEpoch, Verdict};
use super::{Shared, State};
use crate::connection::Response;
use crate::error::{Error, Result};
use crate::metadata::{broker_address, LeaderHint};
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::Instant;
use strata_protocol::messages::init_producer_id::InitProducerIdRequest;
use strata_protocol::messages::produce::{
    PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData,
};
use strata_protocol::{ApiKey, ErrorCode, RequestBody, ResponseBody};

/// The sender task; ends once the producer is closing and every batch is finished.
pub(crate) async fn run(shared: Arc<Shared>) {
    let mut known_cluster: Option<Arc<crate::metadata::Cluster>> = None;
    loop {
        let cluster = shared.client.cluster();
        let cluster_changed = !known_cluster.as_ref().is_some_and(|c| Arc::ptr_eq(c, &cluster));
        let mut refresh = None;
        let mut bump = None;
        let mut add = None;
        let mut connect = Vec::new();
        let next_ready;
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
            let pass = drain(&shared, st, &cluster);
            next_ready = pass.next_ready;
            for (node, topic) in pass.unready {
                if !st.connecting.contains(&node) {
                    connect.push((node, Vec::new()));
                    st.connecting.insert(node);
                }
                if let Some((_, topics)) = connect.iter_mut().find(|(n, _)| *n == node) {
                    topics.push(topic);
                }
            }
            if !st.refresh.is_empty() && !st.refreshing {
                st.refreshing = true;
                refresh = Some(std::mem::take(&mut st.refresh));
            }
            st.sender_wakes_at = next_ready;
            dispatch(&shared, guard, pass.requests);
        }
        shared.progress.notify_waiters();
        for (node, topics) in connect {
            tokio::spawn(connect_to(shared.clone(), node, topics));
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

/// What one drain took and found.
struct Pass {
    requests: Vec<(i32, Vec<ProducerBatch>)>,
    next_ready: Option<Instant>,
    unready: Vec<(i32, Arc<str>)>,
    /// Batches failed for their delivery timeout (flush and abort wait on such).
    expired: bool,
}

/// Takes every batch that may go now (unless an epoch bump is due), counting the
/// requests in flight; fails the batches past `delivery.timeout.ms`; notes topics
/// without a leader for a refresh.
fn drain(shared: &Shared, st: &mut State, cluster: &crate::metadata::Cluster) -> Pass {
    let now = Instant::now();
    let mut pass = Pass { requests: Vec::new(), next_ready: None, unready: Vec::new(), expired: false };
    if st.bump_needed || st.bumping {
        return pass;
    }
    let mut expired = Vec::new();
    {
        let State { acc, txn, node_in_flight, total_in_flight, flush_up_to, closing, refresh, .. } = st;
        let max = shared.config.max_in_flight;
        let leader = |t: &str, p: i32| {
            cluster
                .partition(t, p)
                .filter(|pi| pi.leader >= 0 && cluster.brokers.contains_key(&pi.leader))
                .map(|pi| pi.leader)
        };
        let ready = |n: i32| shared.client.connected(n).is_some();
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
                node_ready: &ready,
                partition_allowed: &mut allowed,
            };
            let drained = acc.drain(&mut rules);
            pass.next_ready = match (pass.next_ready, drained.next_ready) {
                (Some(a), Some(b)) => Some(std::cmp::min(a, b)),
                (a, b) => a.or(b),
            };
            expired.extend(drained.expired);
            refresh.extend(drained.no_leader);
            for u in drained.unready {
                if !pass.unready.contains(&u) {
                    pass.unready.push(u);
                }
            }
            if drained.requests.is_empty() {
                break;
            }
            for (node, batches) in drained.requests {
                *node_in_flight.entry(node).or_default() += 1;
                *total_in_flight += 1;
                pass.requests.push((node, batches));
            }
        }
    }
    for b in expired {
        let e =
            Error::timeout(format!("{}-{} not delivered within delivery.timeout.ms", b.topic, b.partition));
        if let Some(txn) = st.txn.as_mut() {
            // A transaction with a lost record cannot commit (as in Java).
            txn.fail(e.clone());
            txn.bump_epoch |= b.sequence >= 0;
        } else if b.sequence >= 0 {
            // Its sequence may have reached the broker: the sequences start over.
            st.bump_needed = true;
        }
        shared.metrics.batches_failed.fetch_add(1, Ordering::Relaxed);
        finish(shared, st, b, Err(e));
    }
    pass
}

/// Drains and sends what is ready now, from a caller or the reader task holding the
/// state lock (which this lets go), and wakes the sender task only if it has work:
/// a batch lingering past its planned wake, a broker to connect to, a refresh, an
/// epoch bump, partitions to add to the transaction, or the end.
pub(crate) fn pump(shared: &Arc<Shared>, mut guard: MutexGuard<'_, State>) {
    let cluster = shared.client.cluster();
    let st = &mut *guard;
    let pass = drain(shared, st, &cluster);
    let sooner = match (pass.next_ready, st.sender_wakes_at) {
        (Some(at), Some(planned)) => at < planned,
        (Some(_), None) => true,
        (None, _) => false,
    };
    let wake = sooner
        || pass.unready.iter().any(|(n, _)| !st.connecting.contains(n))
        || (!st.refresh.is_empty() && !st.refreshing)
        || (st.bump_needed && !st.bumping)
        || st.txn.as_ref().is_some_and(|t| t.has_pending())
        || (st.closing && st.acc.is_empty());
    dispatch(shared, guard, pass.requests);
    if wake {
        shared.wake.notify_one();
    }
    if pass.expired {
        shared.progress.notify_waiters();
    }
}

/// Sends drained requests in order; the state lock is let go once the send lock is
/// held. A request that cannot be sent is judged as failed (retriable for a lost
/// connection) once the send lock is let go.
fn dispatch(shared: &Arc<Shared>, guard: MutexGuard<'_, State>, requests: Vec<(i32, Vec<ProducerBatch>)>) {
    if requests.is_empty() {
        return;
    }
    let pid = guard.pid;
    let send_guard = shared.send_lock.lock().unwrap_or_else(|p| p.into_inner());
    drop(guard);
    let mut failed = Vec::new();
    let mut sent_acks0 = Vec::new();
    for (node, mut batches) in requests {
        match send(shared, node, pid, &mut batches) {
            Ok(Sent::Awaiting(conn, version, body)) => {
                shared.metrics.requests_sent.fetch_add(1, Ordering::Relaxed);
                let callback_shared = shared.clone();
                // The batches go with the answer, or come back if the request is refused.
                let slot = Arc::new(std::sync::Mutex::new(Some(batches)));
                let callback_slot = slot.clone();
                let on_reply = move |reply: Result<Response>| {
                    let batches = take_batches(&callback_slot);
                    let answer = reply.and_then(|r| match r.body {
                        ResponseBody::Produce(p) => Ok(p),
                        _ => Err(Error::protocol(
                            &format!("broker {node}"),
                            "Produce answered with another API",
                        )),
                    });
                    on_answer(&callback_shared, node, batches, answer);
                };
                if let Err(e) = conn.submit_with(version, &body, on_reply) {
                    failed.push((node, take_batches(&slot), e));
                }
            }
            Ok(Sent::Written) => sent_acks0.push((node, batches)),
            Err(e) => failed.push((node, batches, e)),
        }
    }
    drop(send_guard);
    for (node, batches) in sent_acks0 {
        on_acks0(shared, node, batches);
    }
    for (node, batches, e) in failed {
        on_answer(shared, node, batches, Err(e));
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
    let mut wakeups = Wakeups::default();
    finish_later(st, batch, result, &mut wakeups);
    wakeups.run(shared);
}

/// [`finish`] without its wake-ups, which go into `wakeups` to be run once the state
/// lock is let go: waking a task whose worker sleeps is a syscall, and a caller that
/// wants the lock meanwhile would sleep on it too (both showed as context switches in
/// the producer's profile).
fn finish_later(
    st: &mut State,
    batch: ProducerBatch,
    result: super::record::BatchResult,
    wakeups: &mut Wakeups,
) {
    st.acc.completed(batch.id);
    wakeups.memory += batch.memory;
    batch.slot.resolve(result, &mut wakeups.wakers);
    if let Some(sealed) = batch.into_sealed() {
        st.acc.recycle(sealed);
    }
}

/// What finished batches owe their waiters: `buffer.memory` to give back and the
/// delivery futures to wake.
#[derive(Default)]
struct Wakeups {
    memory: usize,
    wakers: Vec<std::task::Waker>,
}

impl Wakeups {
    fn run(self, shared: &Shared) {
        if self.memory > 0 {
            shared.memory.add_permits(self.memory);
        }
        for w in self.wakers {
            w.wake();
        }
    }
}

fn take_batches(slot: &std::sync::Mutex<Option<Vec<ProducerBatch>>>) -> Vec<ProducerBatch> {
    slot.lock().unwrap_or_else(|p| p.into_inner()).take().unwrap_or_default()
}

/// What [`send`] did with a request.
enum Sent {
    /// Ready to queue on `conn` at the version: a response is awaited.
    Awaiting(crate::connection::Connection, i16, RequestBody),
    /// Written or queued with `acks=0`: no response comes.
    Written,
}

/// Seals `batches` into one Produce request for `node` and, with `acks=0`, queues it.
fn send(shared: &Shared, node: i32, pid: ProducerIdAndEpoch, batches: &mut [ProducerBatch]) -> Result<Sent> {
    let conn = shared
        .client
        .connected(node)
        .ok_or_else(|| Error::connection(&format!("broker {node}"), "not connected"))?;
    let version = conn.version(ApiKey::Produce)?;
    if version < 3 {
        return Err(Error::UnsupportedVersion { api: ApiKey::Produce });
    }
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
        conn.send_now(version, &body)?;
        return Ok(Sent::Written);
    }
    Ok(Sent::Awaiting(conn, version, body))
}

/// Connects to `node` in the background for batches waiting on it; after a failure,
/// refreshes their topics' metadata (the leader may have moved) and backs off.
async fn connect_to(shared: Arc<Shared>, node: i32, topics: Vec<Arc<str>>) {
    if let Err(e) = shared.client.broker(node).await {
        tracing::debug!(node, error = %e, "producer could not connect to a broker");
        shared.lock().refresh.extend(topics);
        shared.wake.notify_one();
        tokio::time::sleep(shared.config.client.backoff(0)).await;
    }
    shared.lock().connecting.remove(&node);
    shared.wake.notify_one();
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

/// Judges each batch of a request by its partition's answer (or the request's failure),
/// then sends what may go now that the request left its slot.
fn on_answer(shared: &Arc<Shared>, node: i32, batches: Vec<ProducerBatch>, answer: Result<ProduceResponse>) {
    let now = Instant::now();
    let mut wakeups = Wakeups::default();
    let mut guard = shared.lock();
    {
        let st = &mut *guard;
        release_request(st, node);
        // Leaders the answer named for refused partitions (KIP-951), with their topics.
        let mut hints: Vec<(Arc<str>, LeaderHint)> = Vec::new();
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
                                if p.current_leader.leader_id >= 0 {
                                    let hint = LeaderHint {
                                        topic: b.topic.to_string(),
                                        partition: b.partition,
                                        leader: p.current_leader.leader_id,
                                        leader_epoch: p.current_leader.leader_epoch,
                                    };
                                    hints.push((b.topic.clone(), hint));
                                } else {
                                    st.refresh.insert(b.topic.clone());
                                }
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
                    finish_later(st, b, Ok(offsets), &mut wakeups);
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
                    finish_later(st, b, Err(e), &mut wakeups);
                }
            }
        }
        if !hints.is_empty() {
            // Retried batches go to the named leaders; only topics whose hint does not
            // apply (stale, or a broker of unknown address) wait for a Metadata round.
            let endpoints = match &answer {
                Ok(r) => r
                    .node_endpoints
                    .iter()
                    .map(|e| broker_address(e.node_id, &e.host, e.port, &e.rack))
                    .collect(),
                Err(_) => Vec::new(),
            };
            let only: Vec<LeaderHint> = hints.iter().map(|(_, h)| h.clone()).collect();
            let applied = shared.client.update_leaders(&only, &endpoints);
            for (i, (topic, _)) in hints.into_iter().enumerate() {
                if !applied.contains(&i) {
                    st.refresh.insert(topic);
                }
            }
        }
    }
    // The next request goes out before anyone is woken.
    pump(shared, guard);
    wakeups.run(shared);
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
