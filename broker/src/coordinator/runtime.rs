//! The one async shell every coordinator runs in (Kafka's `CoordinatorRuntime`): a task
//! owns a [`Shard`] (a pure state machine and its adapter) and drives it.
//!
//! - **Requests** arrive over a bounded channel and are answered at once or later, when
//!   the shard's [`Output::Respond`] names their token;
//! - **appends** to the shard's internal topic go through a [`PartitionWriter`] and count
//!   as done once replicated (`acks=all`), reported to the shard in issue order per
//!   partition, or failed after the append timeout;
//! - **leadership** from the metadata loads the partitions this broker now leads
//!   (replaying their log into the shard) and unloads the ones it lost;
//! - **time**: the task wakes at the shard's next deadline and ticks it;
//! - **effects** the shard cannot express as an append (transaction markers) are started
//!   by the shard itself and come back as [`Shard::Event`]s.
//!
//! No lock is held across an await; only the task touches the shard. The group and
//! transaction coordinators are shards of it (`coordinator::group`, `coordinator::txn`);
//! a new coordinator is a new `Shard`.

use super::writer::{BatchContext, PartitionWriter};
use crate::clock::now_ms;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use strata_protocol::{ErrorCode, ResponseBody};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// Client requests a coordinator queues before callers wait to send more.
const REQUEST_QUEUE: usize = 1024;

/// A coordinator's state machine as the runtime drives it: every method is called by the
/// runtime's task only, with the time it is now; what it returns is carried out in order.
pub trait Shard: Sized + Send + 'static {
    /// What a request carries besides its body (its token, API version, client).
    type Meta: Send + 'static;
    /// The requests it answers.
    type Request: Send + 'static;
    /// Notifications that are not client requests (a transaction's outcome, deleted
    /// topics, a metrics scrape, an effect's outcome).
    type Event: Send + 'static;
    /// Names an append in [`Shard::append_complete`].
    type AppendId: Copy + Send + 'static;
    /// Work started outside the task (it needs to wait on other brokers); its outcome
    /// comes back as an event.
    type Effect: Send + 'static;
    /// The internal topic the shard keeps its state in.
    const TOPIC: &'static str;
    /// For logs: which coordinator this is.
    const NAME: &'static str;

    /// The token a response to this request will name.
    fn token(meta: &Self::Meta) -> u64;
    /// A request: answered at once, or outputs (a later [`Output::Respond`] answers it).
    fn handle(&mut self, meta: Self::Meta, request: Self::Request, now_ms: i64) -> Handled<Self>;
    /// A notification.
    fn event(&mut self, event: Self::Event, now_ms: i64) -> Vec<Output<Self>>;
    /// Time passed: expire what is due.
    fn tick(&mut self, now_ms: i64) -> Vec<Output<Self>>;
    /// When [`Shard::tick`] is next due, if ever.
    fn next_deadline(&self) -> Option<i64>;
    /// An append was replicated (or failed).
    fn append_complete(
        &mut self,
        id: Self::AppendId,
        result: Result<(), ErrorCode>,
        now_ms: i64,
    ) -> Vec<Output<Self>>;
    /// The partitions this broker leads but has not loaded yet: their requests should be
    /// retried (COORDINATOR_LOAD_IN_PROGRESS), not sent elsewhere.
    fn set_awaiting_load(&mut self, partitions: BTreeSet<i32>);
    /// The topic has `partitions` partitions and nothing is loaded: hash over that count
    /// from now on if it is not the one the shard was built with.
    fn resize(&mut self, partitions: i32);
    /// A partition is about to be replayed (led in `leader_epoch`).
    fn begin_load(&mut self, partition: i32, leader_epoch: i32, now_ms: i64) -> Vec<Output<Self>>;
    /// One record of the partition being loaded, in offset order; an error counts it as
    /// unreadable (it is skipped).
    fn replay(
        &mut self,
        partition: i32,
        batch: BatchContext,
        key: Bytes,
        value: Option<Bytes>,
    ) -> Result<(), ()>;
    /// The partition's log was replayed to its end.
    fn complete_load(&mut self, partition: i32, now_ms: i64) -> Vec<Output<Self>>;
    /// The partition is no longer led here (or could not be replayed).
    fn unload(&mut self, partition: i32, now_ms: i64) -> Vec<Output<Self>>;
    /// Starts `effect` (on its own task); its outcome is sent through `events`.
    fn start_effect(&mut self, effect: Self::Effect, events: Events<Self>);
}

/// What a shard does with a request.
pub enum Handled<S: Shard> {
    /// The answer, at once.
    Now(ResponseBody),
    /// Outputs to carry out; one of them, now or later, answers the request.
    Later(Vec<Output<S>>),
}

/// What a shard asks of the runtime.
pub enum Output<S: Shard> {
    /// Answer the request with this token.
    Respond {
        /// [`Shard::token`] of the request.
        token: u64,
        /// The answer.
        response: ResponseBody,
    },
    /// Append `records` (key, value or tombstone) as one batch to `partition` of the
    /// shard's topic, after its earlier appends; then [`Shard::append_complete`].
    Append {
        /// Reported back on completion.
        id: S::AppendId,
        /// The partition.
        partition: i32,
        /// `Some((producer id, epoch))`: a transactional batch of that producer.
        producer: Option<(i64, i16)>,
        /// The records.
        records: Vec<(Bytes, Option<Bytes>)>,
    },
    /// Start this effect ([`Shard::start_effect`]).
    Effect(S::Effect),
}

enum Command<S: Shard> {
    Call {
        meta: S::Meta,
        request: Box<S::Request>,
        reply: oneshot::Sender<ResponseBody>,
    },
    Event(S::Event),
    /// The partitions this broker leads (partition → leader epoch) and the topic's count.
    Leadership {
        led: BTreeMap<i32, i32>,
        partitions: i32,
    },
    /// An append of this partition may be replicated now.
    AppendProgress(i32),
}

/// Sends events back to a coordinator's task (from an effect's task, say). Never drops
/// one: the queue is unbounded, yet bounded in practice by what is in flight (one per
/// append or effect, one per metadata image applied).
pub struct Events<S: Shard>(mpsc::UnboundedSender<Command<S>>);

impl<S: Shard> Events<S> {
    /// Queues `event`; false if the coordinator has stopped.
    pub fn send(&self, event: S::Event) -> bool {
        self.0.send(Command::Event(event)).is_ok()
    }
}

impl<S: Shard> Clone for Events<S> {
    fn clone(&self) -> Self {
        Events(self.0.clone())
    }
}

/// A handle to a running coordinator; its task stops once every handle is dropped.
pub struct Coordinator<S: Shard> {
    requests: mpsc::Sender<Command<S>>,
    internal: mpsc::UnboundedSender<Command<S>>,
}

impl<S: Shard> Clone for Coordinator<S> {
    fn clone(&self) -> Self {
        Coordinator { requests: self.requests.clone(), internal: self.internal.clone() }
    }
}

impl<S: Shard> std::fmt::Debug for Coordinator<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator").field("name", &S::NAME).finish()
    }
}

impl<S: Shard> Coordinator<S> {
    /// Starts the task (inside a Tokio runtime). It owns no partition until
    /// [`Coordinator::leadership`] says this broker leads some; appends not replicated
    /// within `append_timeout` fail with REQUEST_TIMED_OUT.
    pub fn start<W: PartitionWriter>(shard: S, writer: Arc<W>, append_timeout: Duration) -> Coordinator<S> {
        let (requests, rx) = mpsc::channel(REQUEST_QUEUE);
        let (internal, internal_rx) = mpsc::unbounded_channel();
        let runtime = Runtime {
            shard,
            writer,
            waiting: HashMap::new(),
            owned: BTreeMap::new(),
            pending: PendingAppends::new(append_timeout),
            internal: internal.clone(),
        };
        tokio::spawn(runtime.run(rx, internal_rx));
        Coordinator { requests, internal }
    }

    /// Sends a request and waits for its answer; `None` if the coordinator stopped.
    pub async fn call(&self, meta: S::Meta, request: S::Request) -> Option<ResponseBody> {
        let (reply, rx) = oneshot::channel();
        let command = Command::Call { meta, request: Box::new(request), reply };
        self.requests.send(command).await.ok()?;
        rx.await.ok()
    }

    /// Queues an event behind the client requests (bounded: a caller that sends many,
    /// a metrics scraper say, waits its turn); false if the coordinator stopped.
    pub async fn send(&self, event: S::Event) -> bool {
        self.requests.send(Command::Event(event)).await.is_ok()
    }

    /// Queues an event ahead of client requests, never dropped.
    pub fn notify(&self, event: S::Event) {
        let _ = self.internal.send(Command::Event(event));
    }

    /// The metadata says this broker leads `led` (partition → leader epoch) of the
    /// topic's `partitions`: partitions newly led are loaded, lost ones unloaded.
    pub fn leadership(&self, led: BTreeMap<i32, i32>, partitions: i32) {
        let _ = self.internal.send(Command::Leadership { led, partitions });
    }
}

struct Runtime<S: Shard, W: PartitionWriter> {
    shard: S,
    writer: Arc<W>,
    waiting: HashMap<u64, oneshot::Sender<ResponseBody>>,
    /// Partitions loaded, with the leader epoch they were loaded in.
    owned: BTreeMap<i32, i32>,
    pending: PendingAppends<S::AppendId, W::Appended>,
    internal: mpsc::UnboundedSender<Command<S>>,
}

impl<S: Shard, W: PartitionWriter> Runtime<S, W> {
    async fn run(
        mut self,
        mut rx: mpsc::Receiver<Command<S>>,
        mut internal: mpsc::UnboundedReceiver<Command<S>>,
    ) {
        loop {
            let sleep = until_deadline(self.shard.next_deadline(), now_ms());
            tokio::select! {
                biased;
                Some(command) = internal.recv() => self.handle(command),
                command = rx.recv() => match command {
                    None => return,
                    Some(command) => self.handle(command),
                },
                _ = tokio::time::sleep(sleep) => {
                    let outputs = self.shard.tick(now_ms());
                    self.execute(outputs);
                }
            }
        }
    }

    fn handle(&mut self, command: Command<S>) {
        match command {
            Command::Call { meta, request, reply } => {
                let awaiting = self.writer.awaiting_load(S::TOPIC, &self.owned);
                self.shard.set_awaiting_load(awaiting);
                let token = S::token(&meta);
                match self.shard.handle(meta, *request, now_ms()) {
                    Handled::Now(response) => {
                        let _ = reply.send(response);
                    }
                    Handled::Later(outputs) => {
                        self.waiting.insert(token, reply);
                        self.execute(outputs);
                    }
                }
            }
            Command::Event(event) => {
                let outputs = self.shard.event(event, now_ms());
                self.execute(outputs);
            }
            Command::Leadership { led, partitions } => self.leadership(led, partitions),
            Command::AppendProgress(partition) => self.progress(partition),
        }
    }

    /// Loads the partitions newly led (or led in a new epoch) and unloads those lost.
    fn leadership(&mut self, led: BTreeMap<i32, i32>, partitions: i32) {
        if partitions > 0 && self.owned.is_empty() {
            self.shard.resize(partitions);
        }
        let lost: Vec<i32> =
            self.owned.iter().filter(|(p, e)| led.get(p) != Some(e)).map(|(p, _)| *p).collect();
        for partition in lost {
            self.owned.remove(&partition);
            tracing::info!(
                coordinator = S::NAME,
                topic = S::TOPIC,
                partition,
                "coordinator unloading a partition"
            );
            let outputs = self.shard.unload(partition, now_ms());
            self.execute(outputs);
        }
        for (&partition, &epoch) in &led {
            if self.owned.contains_key(&partition) || !self.writer.leads(S::TOPIC, partition) {
                continue;
            }
            self.owned.insert(partition, epoch);
            self.load(partition, epoch);
        }
    }

    /// Replays one partition into the shard.
    fn load(&mut self, partition: i32, epoch: i32) {
        let mut outputs = self.shard.begin_load(partition, epoch, now_ms());
        let shard = &mut self.shard;
        let mut bad = 0usize;
        let replayed = self.writer.replay(S::TOPIC, partition, &mut |batch, key, value| {
            if shard.replay(partition, batch, key, value).is_err() {
                bad += 1;
            }
        });
        if let Err(code) = replayed {
            tracing::error!(
                coordinator = S::NAME,
                topic = S::TOPIC,
                partition,
                error = code.name(),
                "cannot replay a coordinator partition; not serving it"
            );
            self.owned.remove(&partition);
            outputs.extend(self.shard.unload(partition, now_ms()));
            self.execute(outputs);
            return;
        }
        if bad > 0 {
            tracing::warn!(
                topic = S::TOPIC,
                partition,
                records = bad,
                "skipped unreadable coordinator records"
            );
        }
        outputs.extend(self.shard.complete_load(partition, now_ms()));
        tracing::info!(
            coordinator = S::NAME,
            topic = S::TOPIC,
            partition,
            leader_epoch = epoch,
            "coordinator loaded a partition"
        );
        self.execute(outputs);
    }

    /// Completes the replicated appends of `partition`, in order.
    fn progress(&mut self, partition: i32) {
        let (done, head) = self.pending.progress(&*self.writer, partition);
        let mut outputs = Vec::new();
        for (id, result) in done {
            outputs.extend(self.shard.append_complete(id, result, now_ms()));
        }
        if let Some(head) = head {
            self.watch(partition, head);
        }
        self.execute(outputs);
    }

    /// Wakes the task when `head` may be replicated (or its deadline passed).
    fn watch(&self, partition: i32, head: W::Appended) {
        let deadline = self.pending.head_deadline(partition).unwrap_or_else(Instant::now);
        let tx = self.internal.clone();
        let replicated = self.writer.wait_replicated(head, deadline);
        tokio::spawn(async move {
            replicated.await;
            let _ = tx.send(Command::AppendProgress(partition));
        });
    }

    /// Carries out outputs, and the outputs they lead to, until none remain.
    fn execute(&mut self, outputs: Vec<Output<S>>) {
        let mut queue: VecDeque<Output<S>> = outputs.into();
        while let Some(output) = queue.pop_front() {
            match output {
                Output::Respond { token, response } => {
                    if let Some(reply) = self.waiting.remove(&token) {
                        let _ = reply.send(response);
                    }
                }
                Output::Append { id, partition, producer, records } => {
                    match self.writer.append(S::TOPIC, partition, &records, producer, now_ms()) {
                        Err(code) => queue.extend(self.shard.append_complete(id, Err(code), now_ms())),
                        Ok(appended) => {
                            if self.pending.push(partition, id, appended) {
                                let (done, head) = self.pending.progress(&*self.writer, partition);
                                for (id, result) in done {
                                    queue.extend(self.shard.append_complete(id, result, now_ms()));
                                }
                                if let Some(head) = head {
                                    self.watch(partition, head);
                                }
                            }
                        }
                    }
                }
                Output::Effect(effect) => self.shard.start_effect(effect, Events(self.internal.clone())),
            }
        }
    }
}

/// How long the task may sleep before the shard's next deadline (`None`: nothing
/// scheduled; wake hourly anyway).
fn until_deadline(deadline_ms: Option<i64>, now_ms: i64) -> Duration {
    match deadline_ms {
        Some(deadline) => Duration::from_millis((deadline - now_ms).clamp(0, 3_600_000) as u64),
        None => Duration::from_secs(3600),
    }
}

/// Appends that finished (with their outcomes, in order) and the head still pending.
type Progress<Id, A> = (Vec<(Id, Result<(), ErrorCode>)>, Option<A>);

/// Appends waiting to be replicated, in issue order per partition, so their completions
/// reach the shard in the order the appends were made.
struct PendingAppends<Id, A> {
    queues: HashMap<i32, VecDeque<(Id, A, Instant)>>,
    timeout: Duration,
}

impl<Id: Copy, A: Clone> PendingAppends<Id, A> {
    fn new(timeout: Duration) -> PendingAppends<Id, A> {
        PendingAppends { queues: HashMap::new(), timeout }
    }

    /// Queues an append of `partition`. True if its queue was empty: the caller then
    /// calls [`PendingAppends::progress`] (and watches the head if still pending).
    fn push(&mut self, partition: i32, id: Id, appended: A) -> bool {
        let deadline = Instant::now() + self.timeout;
        let queue = self.queues.entry(partition).or_default();
        queue.push_back((id, appended, deadline));
        queue.len() == 1
    }

    /// Pops the appends of `partition` that are done, in order, with their outcomes
    /// (REQUEST_TIMED_OUT past their deadline); returns the head still pending, if any.
    fn progress<W: PartitionWriter<Appended = A>>(&mut self, writer: &W, partition: i32) -> Progress<Id, A> {
        let mut done = Vec::new();
        let Some(queue) = self.queues.get_mut(&partition) else { return (done, None) };
        let now = Instant::now();
        while let Some((id, appended, deadline)) = queue.front() {
            match writer.replicated(appended) {
                Some(outcome) => done.push((*id, outcome)),
                None if *deadline <= now => done.push((*id, Err(ErrorCode::RequestTimedOut))),
                None => break,
            }
            queue.pop_front();
        }
        let head = queue.front().map(|(_, a, _)| a.clone());
        if queue.is_empty() {
            self.queues.remove(&partition);
        }
        (done, head)
    }

    /// The deadline of `partition`'s oldest pending append.
    fn head_deadline(&self, partition: i32) -> Option<Instant> {
        self.queues.get(&partition).and_then(|q| q.front()).map(|(_, _, d)| *d)
    }
}

/// A token unique among the requests in flight of every coordinator.
pub fn next_token() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
