//! The checkpoint coordinator's decisions: when a checkpoint may start (one at a time,
//! as Flink's default), and when it is complete (every task acknowledged it with its
//! snapshot). It does no I/O: the runtime writes the checkpoint it returns, and only then
//! tells the tasks that it is complete.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::checkpoint::{Checkpoint, CheckpointId};

/// Tracks the checkpoint in flight and the tasks that acknowledged it.
///
/// ```
/// use bytes::Bytes;
/// use strata_client::stream::CheckpointCoordinator;
///
/// let mut c = CheckpointCoordinator::new(vec!["source-0".into(), "sink".into()], 0);
/// let id = c.trigger().unwrap();
/// assert!(c.trigger().is_none(), "one checkpoint at a time");
/// assert!(c.acknowledge(id, "source-0", Bytes::from_static(b"offsets")).unwrap().is_none());
/// let done = c.acknowledge(id, "sink", Bytes::from_static(b"txn")).unwrap().unwrap();
/// assert_eq!((done.id, done.states.len()), (1, 2));
/// ```
#[derive(Debug, Clone)]
pub struct CheckpointCoordinator {
    tasks: Vec<String>,
    next: CheckpointId,
    pending: Option<Checkpoint>,
    last_completed: CheckpointId,
}

impl CheckpointCoordinator {
    /// A coordinator for `tasks`, resuming after checkpoint `restored_from` (0 for a
    /// fresh job): the next checkpoint is `restored_from + 1`.
    pub fn new(tasks: Vec<String>, restored_from: CheckpointId) -> CheckpointCoordinator {
        CheckpointCoordinator { tasks, next: restored_from + 1, pending: None, last_completed: restored_from }
    }

    /// Starts the next checkpoint and returns its id, unless one is in flight.
    pub fn trigger(&mut self) -> Option<CheckpointId> {
        if self.pending.is_some() {
            return None;
        }
        let id = self.next;
        self.next += 1;
        self.pending = Some(Checkpoint::new(id));
        Some(id)
    }

    /// The checkpoint in flight.
    pub fn pending(&self) -> Option<CheckpointId> {
        self.pending.as_ref().map(|c| c.id)
    }

    /// The last checkpoint completed (or restored from).
    pub fn last_completed(&self) -> CheckpointId {
        self.last_completed
    }

    /// `task` snapshotted checkpoint `id` as `state`. Returns the checkpoint once every
    /// task has acknowledged it (the caller writes it, then announces it complete). An
    /// acknowledgement for another checkpoint, from an unknown task, or twice, is an
    /// error: the runtime's ordering guarantees were broken.
    pub fn acknowledge(
        &mut self,
        id: CheckpointId,
        task: &str,
        state: Bytes,
    ) -> Result<Option<Checkpoint>, String> {
        let pending = match &mut self.pending {
            Some(p) if p.id == id => p,
            _ => return Err(format!("{task} acknowledged checkpoint {id}, which is not in flight")),
        };
        if !self.tasks.iter().any(|t| t == task) {
            return Err(format!("{task} is not a task of this job"));
        }
        if pending.states.insert(task.to_owned(), state).is_some() {
            return Err(format!("{task} acknowledged checkpoint {id} twice"));
        }
        if pending.states.len() < self.tasks.len() {
            return Ok(None);
        }
        self.last_completed = id;
        Ok(self.pending.take())
    }

    /// The checkpoint in flight failed (its write failed, or a task could not snapshot):
    /// it is dropped and the next trigger starts a new one.
    pub fn abort_pending(&mut self) -> Option<CheckpointId> {
        self.pending.take().map(|c| c.id)
    }

    /// Snapshots of the tasks that acknowledged the checkpoint in flight so far.
    pub fn acknowledged(&self) -> BTreeMap<String, Bytes> {
        self.pending.as_ref().map(|c| c.states.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tasks() -> Vec<String> {
        ["source-0", "source-1", "operator", "sink"].map(String::from).to_vec()
    }

    #[test]
    fn a_checkpoint_completes_only_when_every_task_acknowledged_it() {
        let mut c = CheckpointCoordinator::new(tasks(), 0);
        let id = c.trigger().unwrap();
        assert_eq!(id, 1);
        for t in ["source-1", "sink", "source-0"] {
            assert_eq!(c.acknowledge(id, t, Bytes::from(t)), Ok(None));
            assert_eq!(c.last_completed(), 0);
        }
        let done = c.acknowledge(id, "operator", Bytes::from_static(b"op")).unwrap().unwrap();
        assert_eq!(done.id, 1);
        assert_eq!(done.states.keys().cloned().collect::<Vec<_>>(), {
            let mut t = tasks();
            t.sort();
            t
        });
        assert_eq!(done.states["sink"], Bytes::from_static(b"sink"));
        assert_eq!((c.last_completed(), c.pending()), (1, None));
        assert_eq!(c.trigger(), Some(2));
    }

    #[test]
    fn only_one_checkpoint_is_in_flight() {
        let mut c = CheckpointCoordinator::new(tasks(), 0);
        assert_eq!(c.trigger(), Some(1));
        assert_eq!(c.trigger(), None);
        assert_eq!(c.abort_pending(), Some(1));
        // An aborted id is never reused.
        assert_eq!(c.trigger(), Some(2));
    }

    #[test]
    fn a_restored_job_continues_the_numbering() {
        let mut c = CheckpointCoordinator::new(tasks(), 41);
        assert_eq!(c.last_completed(), 41);
        assert_eq!(c.trigger(), Some(42));
    }

    #[test]
    fn out_of_order_acknowledgements_are_errors() {
        let mut c = CheckpointCoordinator::new(tasks(), 0);
        assert!(c.acknowledge(1, "sink", Bytes::new()).is_err(), "nothing in flight");
        let id = c.trigger().unwrap();
        assert!(c.acknowledge(id + 1, "sink", Bytes::new()).is_err(), "another checkpoint");
        assert!(c.acknowledge(id, "stranger", Bytes::new()).is_err(), "unknown task");
        c.acknowledge(id, "sink", Bytes::new()).unwrap();
        assert!(c.acknowledge(id, "sink", Bytes::new()).is_err(), "twice");
        assert_eq!(c.acknowledged().len(), 1);
    }
}
