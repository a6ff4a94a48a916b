//! The job runtime: sources, one operator with one input per source, and a sink, each a
//! tokio task, joined by bounded FIFO channels of [`Event`]s, and the checkpoint
//! coordinator in the task that runs [`Job::run`].
//!
//! Checkpoint *n*: the coordinator tells every source to emit barrier *n*; a source
//! snapshots (the positions after the records it emitted), acknowledges and forwards the
//! barrier; the operator aligns its inputs ([`Alignment`]: an input that delivered the
//! barrier is not read until all have), snapshots and forwards; the sink prepares (flushes
//! and pre-commits its transaction), acknowledges, and writes nothing more until the
//! checkpoint is complete. Once every task acknowledged, the checkpoint is written
//! ([`CheckpointStore::write`]); then the sink commits and the sources are told (they
//! commit their offsets for monitoring). A failed task fails the job: [`Job::run`] returns
//! the error, and running the job again resumes from the latest complete checkpoint.
//!
//! Stopping (the `shutdown` future of [`Job::run`] resolving) takes a final checkpoint:
//! the sources emit its barrier and end, so everything read is committed exactly once
//! before `run` returns.

use std::future::{poll_fn, Future};
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::align::{Aligned, Alignment};
use super::checkpoint::{Checkpoint, CheckpointId, CheckpointStore};
use super::coordinator::CheckpointCoordinator;
use super::{Event, StreamError};

/// Where records come from (a Kafka consumer, a file, a test script).
///
/// ```no_run
/// use bytes::Bytes;
/// use strata_client::stream::{CheckpointId, Source, StreamError};
///
/// /// Counts up from where the last checkpoint left off.
/// struct Numbers(u64);
///
/// impl Source for Numbers {
///     type Out = u64;
///     async fn restore(&mut self, state: Option<Bytes>) -> Result<(), StreamError> {
///         self.0 = state.map_or(0, |b| u64::from_be_bytes(b[..8].try_into().unwrap()));
///         Ok(())
///     }
///     async fn poll_next(&mut self) -> Result<Vec<u64>, StreamError> {
///         self.0 += 1;
///         Ok(vec![self.0])
///     }
///     async fn snapshot(&mut self, _: CheckpointId) -> Result<Bytes, StreamError> {
///         Ok(Bytes::copy_from_slice(&self.0.to_be_bytes()))
///     }
///     async fn checkpoint_complete(&mut self, _: CheckpointId) -> Result<(), StreamError> {
///         Ok(())
///     }
/// }
/// ```
pub trait Source: Send + 'static {
    /// The records it emits.
    type Out: Send + 'static;
    /// Resumes from its snapshot in the latest complete checkpoint (None: a fresh job).
    fn restore(&mut self, state: Option<Bytes>) -> impl Future<Output = Result<(), StreamError>> + Send;
    /// The next records. When there are none it should wait a little (say up to 100 ms)
    /// and return an empty batch: barriers are injected between calls.
    fn poll_next(&mut self) -> impl Future<Output = Result<Vec<Self::Out>, StreamError>> + Send;
    /// Its position after every record returned so far, for checkpoint `id`.
    fn snapshot(&mut self, id: CheckpointId) -> impl Future<Output = Result<Bytes, StreamError>> + Send;
    /// Checkpoint `id` is complete (a Kafka source commits its offsets to the group here,
    /// for lag monitoring).
    fn checkpoint_complete(
        &mut self,
        id: CheckpointId,
    ) -> impl Future<Output = Result<(), StreamError>> + Send;
}

/// The transformation between sources and sink, with state that checkpoints.
///
/// ```
/// use bytes::Bytes;
/// use strata_client::stream::{CheckpointId, KeyedState, Operator, StreamError};
///
/// /// Emits (word, running count) for every word.
/// #[derive(Default)]
/// struct Count(KeyedState<String, u64>);
///
/// impl Operator for Count {
///     type In = String;
///     type Out = (String, u64);
///     fn restore(&mut self, state: Option<Bytes>) -> Result<(), StreamError> {
///         if let Some(s) = state {
///             self.0 = KeyedState::restore(s)?;
///         }
///         Ok(())
///     }
///     fn process(&mut self, _input: usize, word: String, out: &mut Vec<(String, u64)>) -> Result<(), StreamError> {
///         let n = self.0.entry(word.clone());
///         *n += 1;
///         out.push((word, *n));
///         Ok(())
///     }
///     fn snapshot(&mut self, _: CheckpointId) -> Result<Bytes, StreamError> {
///         Ok(self.0.snapshot())
///     }
/// }
/// let mut c = Count::default();
/// let mut out = Vec::new();
/// c.process(0, "a".into(), &mut out).unwrap();
/// c.process(0, "a".into(), &mut out).unwrap();
/// assert_eq!(out, vec![("a".to_string(), 1), ("a".to_string(), 2)]);
/// ```
pub trait Operator: Send + 'static {
    /// Records from the sources.
    type In: Send + 'static;
    /// Records to the sink.
    type Out: Send + 'static;
    /// Restores its snapshot from the latest complete checkpoint (None: a fresh job).
    fn restore(&mut self, state: Option<Bytes>) -> Result<(), StreamError>;
    /// Processes one record from source `input`, appending what it emits to `out`.
    fn process(
        &mut self,
        input: usize,
        record: Self::In,
        out: &mut Vec<Self::Out>,
    ) -> Result<(), StreamError>;
    /// Its state for checkpoint `id` (taken once every input delivered the barrier).
    fn snapshot(&mut self, id: CheckpointId) -> Result<Bytes, StreamError>;
}

/// Where results go, transactionally: what is written between two barriers is one
/// transaction, prepared at the barrier and committed once the checkpoint is complete.
///
/// ```no_run
/// use bytes::Bytes;
/// use strata_client::stream::{CheckpointId, Sink, StreamError};
///
/// /// Prints at commit time (not exactly-once across crashes: an illustration).
/// #[derive(Default)]
/// struct Print(Vec<String>, Vec<String>);
///
/// impl Sink for Print {
///     type In = String;
///     async fn restore(&mut self, _last: Option<(CheckpointId, Bytes)>) -> Result<(), StreamError> {
///         Ok(())
///     }
///     async fn write(&mut self, records: Vec<String>) -> Result<(), StreamError> {
///         self.0.extend(records);
///         Ok(())
///     }
///     async fn prepare(&mut self, _: CheckpointId) -> Result<Bytes, StreamError> {
///         self.1 = std::mem::take(&mut self.0);
///         Ok(Bytes::new())
///     }
///     async fn commit(&mut self, _: CheckpointId) -> Result<(), StreamError> {
///         self.1.drain(..).for_each(|line| println!("{line}"));
///         Ok(())
///     }
///     async fn close(&mut self) -> Result<(), StreamError> {
///         Ok(())
///     }
/// }
/// ```
pub trait Sink: Send + 'static {
    /// Records from the operator.
    type In: Send + 'static;
    /// Called once before anything else with the latest complete checkpoint's id and
    /// this sink's snapshot in it (None: a fresh job): complete (commit) the transaction
    /// that checkpoint prepared and abort anything newer.
    fn restore(
        &mut self,
        last: Option<(CheckpointId, Bytes)>,
    ) -> impl Future<Output = Result<(), StreamError>> + Send;
    /// Writes records into the current transaction (starting one if needed).
    fn write(&mut self, records: Vec<Self::In>) -> impl Future<Output = Result<(), StreamError>> + Send;
    /// Barrier `id`: flush and pre-commit the current transaction; the returned bytes
    /// (what identifies the prepared transaction) go into checkpoint `id`.
    fn prepare(&mut self, id: CheckpointId) -> impl Future<Output = Result<Bytes, StreamError>> + Send;
    /// Checkpoint `id` is complete: commit what was prepared for it.
    fn commit(&mut self, id: CheckpointId) -> impl Future<Output = Result<(), StreamError>> + Send;
    /// The job ends: abort a transaction that was begun but not prepared.
    fn close(&mut self) -> impl Future<Output = Result<(), StreamError>> + Send;
}

/// Settings of a [`Job`].
///
/// ```
/// use std::time::Duration;
/// use strata_client::stream::JobConfig;
///
/// let config = JobConfig { checkpoint_interval: Duration::from_millis(500), ..JobConfig::default() };
/// assert_eq!(config.channel_capacity, 16);
/// ```
#[derive(Debug, Clone)]
pub struct JobConfig {
    /// How often a checkpoint starts (`checkpoint.interval`); one is in flight at a time.
    pub checkpoint_interval: Duration,
    /// Batches of records a channel holds before its sender waits (backpressure).
    pub channel_capacity: usize,
}

impl Default for JobConfig {
    fn default() -> Self {
        JobConfig { checkpoint_interval: Duration::from_millis(500), channel_capacity: 16 }
    }
}

/// What a job did, returned when it stops cleanly.
///
/// ```
/// use strata_client::stream::JobReport;
///
/// let r = JobReport::default();
/// assert_eq!((r.restored_from, r.checkpoints_completed), (None, 0));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobReport {
    /// The checkpoint it resumed from.
    pub restored_from: Option<CheckpointId>,
    /// Checkpoints completed in this run (the final one included).
    pub checkpoints_completed: u64,
    /// The last complete checkpoint.
    pub last_completed: CheckpointId,
}

/// Sources, an operator and a sink, checkpointed into a directory.
///
/// ```no_run
/// # use strata_client::stream::*;
/// # async fn example<S: Source<Out = String>, O: Operator<In = String>, K: Sink<In = O::Out>>(
/// #     sources: Vec<S>, operator: O, sink: K) -> Result<(), StreamError> {
/// let store = CheckpointStore::open("/var/lib/app/checkpoints")?;
/// let job = Job::new(JobConfig::default(), store, sources, operator, sink);
/// let report = job.run(async { tokio::signal::ctrl_c().await.unwrap() }).await?;
/// println!("stopped after checkpoint {}", report.last_completed);
/// # Ok(()) }
/// ```
pub struct Job<S: Source, O: Operator<In = S::Out>, K: Sink<In = O::Out>> {
    config: JobConfig,
    store: CheckpointStore,
    sources: Vec<S>,
    operator: O,
    sink: K,
}

/// A source's instructions from the coordinator.
#[derive(Debug, Clone, Copy)]
enum SourceControl {
    Barrier(CheckpointId),
    /// The final checkpoint: emit its barrier, then end.
    Stop(CheckpointId),
    Complete(CheckpointId),
}

/// A task's snapshot for a checkpoint.
struct Ack {
    id: CheckpointId,
    task: String,
    state: Result<Bytes, StreamError>,
}

const OPERATOR: &str = "operator";
const SINK: &str = "sink";

fn source_name(i: usize) -> String {
    format!("source-{i}")
}

fn closed(task: &str) -> StreamError {
    StreamError::task(task, "the next task is gone")
}

impl<S: Source, O: Operator<In = S::Out>, K: Sink<In = O::Out>> Job<S, O, K> {
    /// A job reading from `sources` (at least one) into `operator` and `sink`.
    pub fn new(config: JobConfig, store: CheckpointStore, sources: Vec<S>, operator: O, sink: K) -> Self {
        assert!(!sources.is_empty(), "a job has at least one source");
        Job { config, store, sources, operator, sink }
    }

    /// Restores every task from the latest complete checkpoint, runs until `shutdown`
    /// resolves (then takes a final checkpoint and stops) or a task fails (then returns
    /// its error; run the job again to resume).
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) -> Result<JobReport, StreamError> {
        let Job { config, store, mut sources, mut operator, mut sink } = self;
        let latest = {
            let store = store.clone();
            tokio::task::spawn_blocking(move || store.latest())
                .await
                .map_err(|e| StreamError::task("coordinator", e))??
        };
        let mut report = JobReport { restored_from: latest.as_ref().map(|c| c.id), ..JobReport::default() };
        let restored = latest.unwrap_or_default();
        tracing::info!(checkpoint = restored.id, "job starting");
        for (i, s) in sources.iter_mut().enumerate() {
            s.restore(restored.states.get(&source_name(i)).cloned()).await?;
        }
        operator.restore(restored.states.get(OPERATOR).cloned())?;
        let sink_state = restored.states.get(SINK).cloned().map(|s| (restored.id, s));
        sink.restore(sink_state).await?;
        report.last_completed = restored.id;

        let mut names: Vec<String> = (0..sources.len()).map(source_name).collect();
        names.extend([OPERATOR.to_owned(), SINK.to_owned()]);
        let mut coordinator = CheckpointCoordinator::new(names, restored.id);
        let (ack_tx, mut ack_rx) = mpsc::unbounded_channel::<Ack>();
        let mut tasks: JoinSet<(String, Result<(), StreamError>)> = JoinSet::new();
        let mut source_controls = Vec::new();
        let mut operator_inputs = Vec::new();
        for (i, source) in sources.into_iter().enumerate() {
            let (ctl_tx, ctl_rx) = mpsc::unbounded_channel();
            let (out_tx, out_rx) = mpsc::channel(config.channel_capacity);
            source_controls.push(ctl_tx);
            operator_inputs.push(out_rx);
            let (name, acks) = (source_name(i), ack_tx.clone());
            tasks.spawn(async move {
                let r = run_source(&name, source, ctl_rx, out_tx, acks).await;
                (name, r)
            });
        }
        let (op_tx, op_rx) = mpsc::channel(config.channel_capacity);
        let acks = ack_tx.clone();
        tasks.spawn(async move {
            (OPERATOR.to_owned(), run_operator(operator, operator_inputs, op_tx, acks).await)
        });
        let (sink_ctl_tx, sink_ctl_rx) = mpsc::unbounded_channel();
        let acks = ack_tx;
        tasks.spawn(async move { (SINK.to_owned(), run_sink(sink, op_rx, sink_ctl_rx, acks).await) });

        let mut ticker = tokio::time::interval(config.checkpoint_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        let mut shutdown = std::pin::pin!(shutdown);
        let (mut shutdown_requested, mut final_checkpoint) = (false, None::<CheckpointId>);
        let send_all = |controls: &[mpsc::UnboundedSender<SourceControl>], c: SourceControl| {
            for tx in controls {
                // A source that ended already reports through its task.
                let _ = tx.send(c);
            }
        };
        loop {
            if shutdown_requested && final_checkpoint.is_none() {
                if let Some(id) = coordinator.trigger() {
                    tracing::info!(checkpoint = id, "stopping: final checkpoint");
                    final_checkpoint = Some(id);
                    send_all(&source_controls, SourceControl::Stop(id));
                }
            }
            tokio::select! {
                _ = &mut shutdown, if !shutdown_requested => shutdown_requested = true,
                _ = ticker.tick(), if final_checkpoint.is_none() => {
                    if let Some(id) = coordinator.trigger() {
                        tracing::debug!(checkpoint = id, "checkpoint triggered");
                        send_all(&source_controls, SourceControl::Barrier(id));
                    }
                }
                Some(ack) = ack_rx.recv() => {
                    let state = ack.state?;
                    let done = coordinator
                        .acknowledge(ack.id, &ack.task, state)
                        .map_err(|e| StreamError::task("coordinator", e))?;
                    if let Some(checkpoint) = done {
                        let id = checkpoint.id;
                        write_checkpoint(&store, checkpoint).await?;
                        tracing::debug!(checkpoint = id, "checkpoint complete");
                        report.checkpoints_completed += 1;
                        report.last_completed = id;
                        // The sink first: its commit is what makes the checkpoint's output visible.
                        let _ = sink_ctl_tx.send(id);
                        send_all(&source_controls, SourceControl::Complete(id));
                        if final_checkpoint == Some(id) {
                            break;
                        }
                    }
                }
                Some(joined) = tasks.join_next() => {
                    let (name, result) = joined.map_err(|e| StreamError::task("runtime", e))?;
                    result?;
                    if final_checkpoint.is_none() {
                        return Err(StreamError::task(&name, "ended before the job was stopped"));
                    }
                }
            }
        }
        drop(sink_ctl_tx);
        drop(source_controls);
        while let Some(joined) = tasks.join_next().await {
            let (_, result) = joined.map_err(|e| StreamError::task("runtime", e))?;
            result?;
        }
        tracing::info!(checkpoint = report.last_completed, "job stopped");
        Ok(report)
    }
}

async fn write_checkpoint(store: &CheckpointStore, checkpoint: Checkpoint) -> Result<(), StreamError> {
    let store = store.clone();
    tokio::task::spawn_blocking(move || store.write(&checkpoint))
        .await
        .map_err(|e| StreamError::task("coordinator", e))?
}

async fn run_source<S: Source>(
    name: &str,
    mut source: S,
    mut control: mpsc::UnboundedReceiver<SourceControl>,
    out: mpsc::Sender<Event<S::Out>>,
    acks: mpsc::UnboundedSender<Ack>,
) -> Result<(), StreamError> {
    let mut out = Some(out);
    loop {
        loop {
            let c = match control.try_recv() {
                Ok(c) => c,
                Err(mpsc::error::TryRecvError::Empty) if out.is_some() => break,
                // Stopped: only completions are awaited now.
                Err(mpsc::error::TryRecvError::Empty) => match control.recv().await {
                    Some(c) => c,
                    None => return Ok(()),
                },
                Err(mpsc::error::TryRecvError::Disconnected) => return Ok(()),
            };
            match c {
                SourceControl::Barrier(id) | SourceControl::Stop(id) => {
                    let Some(tx) = &out else { continue };
                    let state = source.snapshot(id).await;
                    let failed = state.as_ref().err().cloned();
                    let _ = acks.send(Ack { id, task: name.to_owned(), state });
                    if let Some(e) = failed {
                        return Err(e);
                    }
                    tx.send(Event::Barrier(id)).await.map_err(|_| closed(name))?;
                    if matches!(c, SourceControl::Stop(_)) {
                        out = None;
                    }
                }
                SourceControl::Complete(id) => source.checkpoint_complete(id).await?,
            }
        }
        let Some(tx) = &out else { continue };
        let batch = source.poll_next().await?;
        if !batch.is_empty() {
            tx.send(Event::Records(batch)).await.map_err(|_| closed(name))?;
        }
    }
}

async fn run_operator<O: Operator>(
    mut operator: O,
    mut inputs: Vec<mpsc::Receiver<Event<O::In>>>,
    out: mpsc::Sender<Event<O::Out>>,
    acks: mpsc::UnboundedSender<Ack>,
) -> Result<(), StreamError> {
    let n = inputs.len();
    let mut alignment = Alignment::new(n);
    let mut start = 0;
    while !alignment.all_closed() {
        // Reads the next event of an input that is not blocked, starting after the one
        // read last so that no input starves the others.
        let (input, event) = poll_fn(|cx| {
            for k in 0..n {
                let i = (start + k) % n;
                if alignment.is_blocked(i) {
                    continue;
                }
                if let Poll::Ready(event) = inputs[i].poll_recv(cx) {
                    return Poll::Ready((i, event));
                }
            }
            Poll::Pending
        })
        .await;
        start = (input + 1) % n;
        let aligned = match event {
            None => alignment.on_closed(input),
            Some(Event::Barrier(id)) => {
                alignment.on_barrier(input, id).map_err(|e| StreamError::task(OPERATOR, e))?
            }
            Some(Event::Records(records)) => {
                let mut emitted = Vec::with_capacity(records.len());
                for r in records {
                    operator.process(input, r, &mut emitted)?;
                }
                if !emitted.is_empty() {
                    out.send(Event::Records(emitted)).await.map_err(|_| closed(OPERATOR))?;
                }
                Aligned::Waiting
            }
        };
        if let Aligned::Complete(id) = aligned {
            let state = operator.snapshot(id);
            let failed = state.as_ref().err().cloned();
            let _ = acks.send(Ack { id, task: OPERATOR.to_owned(), state });
            if let Some(e) = failed {
                return Err(e);
            }
            out.send(Event::Barrier(id)).await.map_err(|_| closed(OPERATOR))?;
        }
    }
    Ok(())
}

async fn run_sink<K: Sink>(
    mut sink: K,
    mut input: mpsc::Receiver<Event<K::In>>,
    mut complete: mpsc::UnboundedReceiver<CheckpointId>,
    acks: mpsc::UnboundedSender<Ack>,
) -> Result<(), StreamError> {
    while let Some(event) = input.recv().await {
        match event {
            Event::Records(records) => sink.write(records).await?,
            Event::Barrier(id) => {
                let state = sink.prepare(id).await;
                let failed = state.as_ref().err().cloned();
                let _ = acks.send(Ack { id, task: SINK.to_owned(), state });
                if let Some(e) = failed {
                    return Err(e);
                }
                // One transaction at a time: the next begins once this one is committed.
                loop {
                    match complete.recv().await {
                        Some(c) if c == id => break,
                        Some(c) if c < id => continue,
                        Some(c) => {
                            return Err(StreamError::task(
                                SINK,
                                format!("checkpoint {c} completed while {id} was prepared"),
                            ))
                        }
                        // The job is ending without completing it: it stays prepared,
                        // for the next run to complete or abort.
                        None => return Ok(()),
                    }
                }
                sink.commit(id).await?;
            }
        }
    }
    sink.close().await
}
