//! The stream-engine pieces: a small barrier-checkpoint runtime and the parts a stream
//! engine needs from Kafka to give end-to-end exactly-once.
//!
//! A [`Job`] runs sources, one operator and one sink as tokio tasks joined by bounded FIFO
//! channels. A coordinator injects barrier *n* into every source at the checkpoint
//! interval; each source snapshots its position and forwards the barrier after the records
//! it emitted before it; the operator, which has one input per source, blocks each input at
//! barrier *n* until every input has delivered it (alignment), snapshots its state and
//! forwards the barrier; the sink pre-commits (prepares) its transaction at the barrier.
//! Checkpoint *n* is complete once every task has acknowledged it, and only then is it
//! written, atomically, as the latest complete checkpoint ([`CheckpointStore`]); the
//! sink then commits and the sources commit their offsets for monitoring. A restarted job
//! resumes from the latest complete checkpoint: sources seek to its positions, the
//! operator restores its state, and the sink completes the transaction that checkpoint
//! prepared and aborts anything newer.
//!
//! The pure parts ([`Alignment`], [`CheckpointCoordinator`], [`KeyedState`]) hold the
//! protocol's decisions and are tested without tasks or time; [`runtime`] drives them.

pub mod align;
pub mod checkpoint;
pub mod coordinator;
pub mod kafka;
pub mod runtime;
pub mod state;

#[cfg(test)]
mod tests;

pub use align::{Aligned, Alignment};
pub use checkpoint::{Checkpoint, CheckpointId, CheckpointStore};
pub use coordinator::CheckpointCoordinator;
pub use runtime::{Job, JobConfig, JobReport, Operator, Sink, Source};
pub use state::{KeyedState, StateValue};

use std::sync::Arc;

/// What flows on a channel between two tasks, in order: batches of records and barriers.
/// A barrier splits the stream: everything before barrier *n* belongs to checkpoint *n*.
///
/// ```
/// use strata_client::stream::Event;
///
/// let stream = [Event::Records(vec!["a", "b"]), Event::Barrier(1), Event::Records(vec!["c"])];
/// let before_1: Vec<&str> = stream
///     .iter()
///     .take_while(|e| !matches!(e, Event::Barrier(1)))
///     .flat_map(|e| match e { Event::Records(r) => r.clone(), Event::Barrier(_) => vec![] })
///     .collect();
/// assert_eq!(before_1, ["a", "b"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event<T> {
    /// Records, in the order they were produced.
    Records(Vec<T>),
    /// Barrier of checkpoint `n`.
    Barrier(CheckpointId),
}

/// Why a job, a task or the checkpoint store failed.
///
/// ```
/// use strata_client::stream::StreamError;
///
/// let e = StreamError::task("operator", "bad input");
/// assert_eq!(e.to_string(), "task operator failed: bad input");
/// ```
#[derive(Debug, Clone, thiserror::Error)]
pub enum StreamError {
    /// The Kafka client failed.
    #[error(transparent)]
    Client(#[from] crate::Error),
    /// Reading or writing the checkpoint directory failed.
    #[error("checkpoint store {path}: {reason}")]
    Io {
        /// The file or directory.
        path: String,
        /// What the operating system said.
        reason: Arc<str>,
    },
    /// A checkpoint or a snapshot does not decode.
    #[error("corrupt state: {0}")]
    Corrupt(Arc<str>),
    /// A task's own logic failed (or the runtime's invariants were broken).
    #[error("task {task} failed: {reason}")]
    Task {
        /// The task's name (`source-0`, `operator`, `sink`).
        task: String,
        /// What went wrong.
        reason: Arc<str>,
    },
}

impl StreamError {
    /// A task failure with a reason.
    pub fn task(task: &str, reason: impl std::fmt::Display) -> StreamError {
        StreamError::Task { task: task.to_owned(), reason: reason.to_string().into() }
    }

    pub(crate) fn io(path: &std::path::Path, e: std::io::Error) -> StreamError {
        StreamError::Io { path: path.display().to_string(), reason: e.to_string().into() }
    }
}
